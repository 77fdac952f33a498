"""Errors of the API machinery shared by the server and the client side (selectors)."""

from __future__ import annotations


class InvalidSelector(ValueError):
    """A label or field selector that does not parse or validate; ``message`` is upstream's text.

    The API server answers it with a 400 BadRequest Status carrying the message.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

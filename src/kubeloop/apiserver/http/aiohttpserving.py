"""How aiohttp's protocol serves the connections handed to it (watches, streams, large bodies):
the limits of what it reads of a request's head, and what it logs of a client's mistakes.

kube-apiserver's Go server reads up to 1 MiB of header fields whatever their number, answers a
longer head 431 and a malformed one 400, and logs neither: they are the client's mistakes. Every
connection's heads are first read by :mod:`~kubeloop.apiserver.http.http1`, which holds them to
that bound; aiohttp bounds each line and the number of fields instead (8,190 bytes and 128 by
default, which refused a 20 KB bearer token with 400 and logged a traceback at ERROR). Here each
line may be :data:`MAX_LINE_BYTES`, so that a head holding a large token or a long query
reads as it does upstream, while 128 fields of it stay within a few of the bodies the server
accepts; and a request aiohttp cannot parse is logged at DEBUG, without a traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

#: What aiohttp reads of a request line or a header field (its name and value).
MAX_LINE_BYTES = 64 * 1024
#: How many header fields aiohttp reads (its own default).
MAX_FIELDS = 128


class ClientMistakesAtDebug(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server log, with the requests it could not parse (its ``HttpProcessingError``s:
    a bad request line, an overlong field, a malformed chunk) at DEBUG and without a traceback;
    everything else as aiohttp logs it."""

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        exc_info = kwargs.get("exc_info")
        if isinstance(exc_info, HttpProcessingError):
            kwargs["exc_info"] = None
            msg = f"{msg}: {exc_info.code} {exc_info.message}"
            level = logging.DEBUG
        super().log(level, msg, *args, **kwargs)


def handler_options() -> dict[str, Any]:
    """Keyword arguments for aiohttp's ``AppRunner`` (passed on to each connection's protocol)."""
    return {
        "max_line_size": MAX_LINE_BYTES,
        "max_field_size": MAX_LINE_BYTES,
        "max_headers": MAX_FIELDS,
        "logger": ClientMistakesAtDebug(logging.getLogger("aiohttp.server")),
    }

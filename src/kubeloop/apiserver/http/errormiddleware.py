"""The error middleware: an ``APIError`` raised anywhere while serving becomes its Status answer;
a client that went away, a bad selector and aiohttp's own refusals are worded as upstream's;
anything else is a logged 500.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp
from aiohttp import web

from kubeloop import errors
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.http.negotiation import (
    status_response,
)
from kubeloop.errors import InvalidSelector

log = logging.getLogger("kubeloop.apiserver")
R = TypeVar("R", bound=HTTPRequest)


@web.middleware
async def error_middleware(
    request: R, handler: Callable[[R], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Render APIErrors as Status objects; an unexpected exception is a 500 Status, logged (an
    aiohttp middleware, also called directly for small requests)."""
    try:
        return await handler(request)
    except errors.APIError as error:
        return status_response(error)
    except InvalidSelector as invalid:
        return status_response(errors.BadRequest(invalid.message))
    except (ConnectionError, aiohttp.ClientPayloadError) as exc:
        # The client went away (mid-body, mid-response): its problem, not the server's.
        log.debug("client of %s %s disconnected: %s", request.method, request.path, exc)
        return status_response(errors.BadRequest(f"the client disconnected: {exc}"))
    except web.HTTPException as exc:
        if exc.status == 413:
            return status_response(errors.RequestEntityTooLarge("Request entity too large: limit is 3145728"))
        if exc.status == 404:
            return status_response(errors.NotFound("the server could not find the requested resource"))
        if exc.status == 405:
            return status_response(
                errors.MethodNotAllowed("the server does not allow this method on the requested resource")
            )
        raise
    except Exception as exc:
        log.exception("internal error serving %s %s", request.method, request.path)
        return status_response(errors.InternalError(f"Internal error occurred: {exc}"))

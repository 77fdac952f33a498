"""Aggregated discovery's answers (upstream's ``endpoints/discovery/aggregated``): whether an
``Accept`` header asks ``/api`` or ``/apis`` for an APIGroupDiscoveryList, and the answer —
encoded once per catalog generation and version, with an ``ETag`` a client's cache can send back
in ``If-None-Match`` to be told 304 Not Modified.
"""

from __future__ import annotations

import functools
import hashlib

import orjson
from aiohttp import web

from kubeloop.apiserver.catalog.resources import ResourceCatalog
from kubeloop.apiserver.http.http1 import HTTPRequest
from kubeloop.apiserver.openapi import discoverydocs

_GROUP = "apidiscovery.k8s.io"
_KIND = "APIGroupDiscoveryList"


@functools.lru_cache(maxsize=64)
def requested_version(accept: str) -> str | None:
    """The ``apidiscovery.k8s.io`` version ``accept`` asks for before any plain JSON ("v2",
    "v2beta1"), or None: the unaggregated document. Clauses are taken in the client's order, as
    upstream's negotiation takes them; one for a version not served is passed over, and
    parameters other than ``g``, ``v`` and ``as`` (``profile=nopeer``: no peer servers here)
    do not matter."""
    for clause in accept.split(","):
        fields = [field.strip() for field in clause.split(";")]
        if fields[0].lower() not in ("application/json", "application/*", "*/*"):
            continue
        params = dict(field.split("=", 1) for field in fields[1:] if "=" in field)
        if "as" not in params:
            return None  # plain JSON comes first
        if (
            params.get("g") == _GROUP
            and params["as"] == _KIND
            and params.get("v") in discoverydocs.AGGREGATED_VERSIONS
        ):
            return params["v"]
    return None


class AggregatedDiscovery:
    """Answers ``/api`` and ``/apis`` in aggregated form for one catalog."""

    def __init__(self, catalog: ResourceCatalog) -> None:
        self.catalog = catalog
        #: (core, version) → (catalog generation, body, quoted ETag)
        self._encoded: dict[tuple[bool, str], tuple[int, bytes, str]] = {}

    def answer(self, request: HTTPRequest, *, core: bool) -> web.Response | None:
        """The aggregated document ``request`` asks for, or None when it asks for the other."""
        version = requested_version(request.headers.get("Accept", ""))
        if version is None:
            return None
        generation, body, etag = self._encoded.get((core, version), (-1, b"", ""))
        if generation != self.catalog.generation:
            generation = self.catalog.generation
            document = discoverydocs.aggregated_discovery(self.catalog, core=core, version=version)
            body = orjson.dumps(document, option=orjson.OPT_APPEND_NEWLINE)
            etag = f'"{hashlib.sha512(body).hexdigest().upper()}"'
            self._encoded[(core, version)] = (generation, body, etag)
        headers = {"ETag": etag, "Vary": "Accept", "Cache-Control": "public"}
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, body=b"", headers=headers)
        headers["Content-Type"] = discoverydocs.aggregated_media_type(version)
        return web.Response(body=body, headers=headers)

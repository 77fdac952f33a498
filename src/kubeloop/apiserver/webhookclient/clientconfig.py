"""Where a webhook is called: a ``clientConfig`` (an admission webhook's or a CRD's conversion
webhook's) read into a :class:`ClientConfig`, a URL or a Service of the cluster, and the CA bundle
its serving certificate is verified with.
"""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from dataclasses import dataclass


@dataclass(frozen=True)
class ServiceReference:
    namespace: str
    name: str
    path: str
    port: int


@dataclass(frozen=True)
class ClientConfig:
    """Where a webhook is called: a URL, or a Service of the cluster; the CA that signs it."""

    url: str | None
    service: ServiceReference | None
    #: PEM certificates the webhook's serving certificate is verified with (None: the system's).
    ca_bundle: bytes | None


def client_config_of(config: object) -> ClientConfig:
    """A webhook's ``clientConfig`` (an admission webhook's, or a CRD's conversion webhook's)."""
    config = config if isinstance(config, dict) else {}
    ca_bundle: bytes | None = None
    raw = config.get("caBundle")
    if isinstance(raw, str) and raw:
        try:
            ca_bundle = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            ca_bundle = None  # validation refuses such a configuration when it is written
    service = config.get("service")
    reference = None
    if isinstance(service, dict):
        path = service.get("path")
        reference = ServiceReference(
            namespace=str(service.get("namespace") or ""),
            name=str(service.get("name") or ""),
            path=str(path) if isinstance(path, str) else "",
            port=int(service.get("port") or 443),
        )
    url = config.get("url")
    return ClientConfig(url=url if isinstance(url, str) else None, service=reference, ca_bundle=ca_bundle)


def url_parts(url: str) -> tuple[str, int, str]:
    """(host, port, path and query) of a webhook's https URL."""
    parsed = urllib.parse.urlsplit(url)
    path = parsed.path or "/"
    return parsed.hostname or "", parsed.port or 443, path

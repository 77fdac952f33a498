"""A serving certificate read from files and reloaded when they change (controller-runtime's
``certwatcher``), so that cert-manager's rotation reaches a running webhook server.

The files are read again every ``interval`` seconds; when their bytes differ from what is being
served, the new pair is loaded into the same TLS context, which every new connection then uses.
A pair that does not load — the certificate already written, its key not yet — is retried at the
next look, and the old pair goes on serving meanwhile (a pair is tried on a scratch context
before the served one gets it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pathlib
import ssl

from kubeloop import certs
from kubeloop.webhook.processcounts import process_counts

log = logging.getLogger("kubeloop.webhook.certwatcher")


class CertWatcher:
    """Serves ``cert_path``/``key_path`` through ``context`` and follows changes to them."""

    def __init__(self, cert_path: pathlib.Path, key_path: pathlib.Path, *, interval: float = 1.0) -> None:
        self.cert_path = cert_path
        self.key_path = key_path
        self.interval = interval
        self.context = certs.serving_context()
        #: How many times a changed pair was loaded (the first load included).
        self.loads = 0
        self._loaded: tuple[bytes, bytes] | None = None
        self._changed = asyncio.Condition()
        pair = self._read()
        if pair is None:
            raise FileNotFoundError(
                f"the webhook server's certificate {cert_path} or key {key_path} is missing"
            )
        certs.load_pair(self.context, *pair)  # a pair that does not load fails the start, loudly
        self._loaded = pair
        self.loads = 1

    @property
    def certificate_pem(self) -> bytes:
        """The certificate being served."""
        assert self._loaded is not None
        return self._loaded[0]

    def _read(self) -> tuple[bytes, bytes] | None:
        process_counts.certificate_reads += 1
        try:
            return self.cert_path.read_bytes(), self.key_path.read_bytes()
        except OSError:
            process_counts.certificate_read_errors += 1
            return None

    def reload_if_changed(self) -> bool:
        """Load the files' pair if it differs from the one served; whether it was loaded."""
        pair = self._read()
        if pair is None or pair == self._loaded:
            return False
        try:
            # Tried on a scratch context first: a pair that fails to load halfway would leave
            # the served context with a certificate and a key that do not match.
            certs.load_pair(certs.serving_context(), *pair)
            certs.load_pair(self.context, *pair)
        except (ssl.SSLError, ValueError, OSError) as error:
            process_counts.certificate_read_errors += 1
            log.warning(
                "the webhook certificate in %s does not load yet (%s); still serving the old one",
                self.cert_path,
                error,
            )
            return False
        self._loaded = pair
        self.loads += 1
        log.info("reloaded the webhook certificate from %s", self.cert_path)
        return True

    async def run(self, stop: asyncio.Event) -> None:
        """Look at the files every ``interval`` seconds until ``stop`` is set."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.interval)
            if not stop.is_set() and self.reload_if_changed():
                async with self._changed:
                    self._changed.notify_all()

    async def wait_for_load(self, count: int) -> None:
        """Return once ``count`` pairs have been loaded (the first at start-up counts)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.loads >= count)

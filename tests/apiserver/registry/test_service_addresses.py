"""Service addresses over HTTP on the durable server: two creates asking for one cluster IP while
the first is still being made durable cannot both get it, and an address a failed write had
asked for is free again."""

from __future__ import annotations

import pathlib
import threading
from typing import Any

import requests

from kubeloop.apiserver.storage.log import SQLiteLog
from tests.apiserver.storage.test_store import LockHolder
from tests.conftest import Client, start_server

SERVICES = "/api/v1/namespaces/default/services"


def service(name: str, ip: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"clusterIP": ip, "ports": [{"port": 80}]}}


def test_a_cluster_ip_asked_for_by_a_create_in_flight_is_refused_to_the_next(tmp_path: pathlib.Path) -> None:
    server = start_server(tmp_path / "data", controllers=False)
    try:
        api = Client(server)
        store = server.server.store
        log = server.server._log
        assert store is not None and isinstance(log, SQLiteLog)

        async def patient_writer() -> None:  # the held lock must not fail the first create
            await log.pragma("busy_timeout", 600_000)

        server.call(patient_writer())
        answers: dict[str, requests.Response] = {}
        with LockHolder(tmp_path / "data" / "state.db"):
            first = threading.Thread(
                target=lambda: answers.setdefault("first", api.post(SERVICES, service("first", "10.96.0.50")))
            )
            first.start()
            # The first create is on its way to the log, which waits for the lock.
            while "/registry/services/default/first" not in store._inflight:
                assert first.is_alive(), answers
                threading.Event().wait(0.01)
            second = api.post(SERVICES, service("second", "10.96.0.50"))
            assert second.status_code == 422, second.text
            status = second.json()
            assert "failed to allocate IP 10.96.0.50: provided IP is already allocated" in status["message"]
            assert status["details"]["causes"][0]["field"] == "spec.clusterIPs"
        first.join()
        assert answers["first"].status_code == 201, answers["first"].text
        assert api.get(f"{SERVICES}/first").json()["spec"]["clusterIP"] == "10.96.0.50"
        assert api.get(f"{SERVICES}/second").status_code == 404
    finally:
        server.stop()

"""One large request does not stop the server from serving everyone else.

A 2.9 MB YAML body (90,000 keys) used to be parsed on the event loop, stalling every client for
26 s — longer than a leader's lease. The heavy part of a large write (decoding, validation, managed
fields) runs on the server's worker loop instead. The proof is an order of events, not a time: the
large request's decoding is held until other clients have been answered — a read, a list, a small
write and a watch event — which can only happen if the serving loop is free while it decodes.
``bench/stall.py`` measures how long other clients wait in practice (~50 ms).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest
import requests

from kubeloop.apiserver import decoding
from tests.conftest import Client, ServerThread, start_server

LARGE = 256 * 1024  # well past what the server decodes on its serving loop (64 KiB)


def yaml_configmap(name: str, keys: int) -> bytes:
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata:", f"  name: {name}", "data:"]
    lines += [f"  key{i:06d}: value-{i:012d}" for i in range(keys)]
    return ("\n".join(lines) + "\n").encode()


class HeldDecoding:
    """Wraps a decoder so that decoding a large body waits, in whatever thread runs it, until
    the test lets it go."""

    def __init__(self, decode: Callable[..., Any]) -> None:
        self.decode = decode
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, raw: bytes, *args: Any, **kwargs: Any) -> Any:
        if len(raw) >= LARGE:
            self.started.set()
            # Released by the test once others were served; if this blocked the serving loop,
            # nobody is served and the test's own requests fail first.
            self.release.wait(timeout=40)
        return self.decode(raw, *args, **kwargs)


@pytest.fixture
def server() -> Iterator[ServerThread]:
    started = start_server()
    yield started
    started.stop()


@pytest.mark.parametrize(
    ("decoder", "content_type", "body", "status"),
    [
        ("decode_yaml", "application/yaml", yaml_configmap("big", 90_000), 422),  # data > 1 MiB
        (
            "decode_json",
            "application/json",
            orjson.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "fits"},
                    "data": {f"key{i:06d}": f"value-{i:012d}" for i in range(30_000)},
                }
            ),
            201,
        ),
    ],
)
def test_others_are_served_while_a_large_body_is_decoded(
    server: ServerThread,
    monkeypatch: pytest.MonkeyPatch,
    decoder: str,
    content_type: str,
    body: bytes,
    status: int,
) -> None:
    held = HeldDecoding(getattr(decoding, decoder))
    monkeypatch.setattr(decoding, decoder, held)
    api = Client(server)
    path = "/api/v1/namespaces/default/configmaps"
    assert api.post(path, {"metadata": {"name": "probe"}}).status_code == 201
    watch = api.get(
        path,
        params={"watch": "1", "resourceVersion": api.get(path).json()["metadata"]["resourceVersion"]},
        stream=True,
    )

    answers: list[requests.Response] = []
    heavy = threading.Thread(
        target=lambda: answers.append(
            Client(server).request(
                "POST", path, data=body, headers={"Content-Type": content_type}, timeout=60
            )
        )
    )
    heavy.start()
    try:
        assert held.started.wait(timeout=30), "the large body was never decoded"
        # The large request is being decoded right now, and stays so until these are answered.
        assert api.get(path + "/probe", timeout=20).status_code == 200
        assert [item["metadata"]["name"] for item in api.get(path, timeout=20).json()["items"]] == ["probe"]
        assert api.post(path, {"metadata": {"name": "small"}}, timeout=20).status_code == 201
        first_event = orjson.loads(next(watch.iter_lines()))
        assert (first_event["type"], first_event["object"]["metadata"]["name"]) == ("ADDED", "small")
        assert not answers, "the large request was answered before it was let go"
    finally:
        held.release.set()
        heavy.join(60)
        watch.close()
    [answer] = answers
    assert answer.status_code == status, answer.text[:300]
    if status == 422:
        assert "Too long" in answer.json()["message"]
    else:
        stored = api.get(path + "/fits").json()
        assert len(stored["data"]) == 30_000

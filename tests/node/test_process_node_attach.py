"""``pods/attach`` on the process node with kubectl 1.35: ``kubectl attach -i`` to a container
with ``stdin`` (its output from then on, its input, ``stdinOnce`` ending its stdin with the
client's), and ``kubectl run -it --rm`` (a container on a terminal of its own, typed into, then
deleted); upstream's 400s."""

# ruff: noqa: F811  (the process node's fixtures are imported, then requested by name)

from __future__ import annotations

import pathlib
import time

import pytest

from tests.apiserver.test_kubectl import KUBECTLS, Kubectl
from tests.conftest import ServerThread
from tests.node.test_process_node import api, ended, node, pod_json, pods_dir  # noqa: F401  (fixtures)
from tests.node.test_process_node_exec import in_terminal
from tests.node.test_process_node_volumes import apply, pod


@pytest.fixture
def kubectl(node: ServerThread, tmp_path: pathlib.Path) -> Kubectl:
    return Kubectl(KUBECTLS[-1], node.kubeconfig, tmp_path)


def test_kubectl_attach_feeds_stdin_and_streams_output(kubectl: Kubectl, namespace: str) -> None:
    script = 'echo before; while read line; do echo "got $line"; echo "err $line" >&2; done; echo after'
    apply(kubectl, pod("reader", namespace, script, container={"stdin": True, "stdinOnce": True}))
    while not kubectl("logs", "reader", "-n", namespace, check=False).stdout:  # 400 while it is created
        time.sleep(0.05)  # it has started (and said "before", which an attach from now on misses)
    attached = kubectl("attach", "-i", "reader", "-n", namespace, stdin="one\ntwo\n")
    assert attached.stdout == "got one\ngot two\nafter\n"
    assert "err one\nerr two\n" in attached.stderr
    assert ended(kubectl, "reader", namespace)["status"]["phase"] == "Succeeded"  # stdinOnce: its stdin ended
    assert kubectl("logs", "reader", "-n", namespace).stdout.startswith("before\ngot one\n")


def test_kubectl_run_it_rm_talks_to_a_terminal(kubectl: Kubectl, namespace: str) -> None:
    code, seen = in_terminal(
        [*kubectl.argv, "run", "talk", "-n", namespace, "-it", "--rm", "--restart=Never", "--image=busybox",
         "--", "sh", "-c", 'read name; echo "hi $name"'],
        kubectl.env, typed=b"bob\r",
    )  # fmt: skip
    assert code == 0, seen
    # What was typed comes back from the container's terminal (kubectl's own is raw), then the
    # answer (what the shell said before kubectl attached is missed, as on a cluster).
    assert b"bob\r\nhi bob\r\n" in seen
    assert kubectl("get", "pod", "talk", "-n", namespace, check=False).returncode == 1  # --rm deleted it


def test_bad_attach_requests_are_400s(api: object, kubectl: Kubectl, namespace: str) -> None:
    apply(kubectl, pod("idle", namespace, "exec sleep 600", restartPolicy="Always"))
    kubectl("wait", "-n", namespace, "--for=condition=Ready", "pod/idle", "--timeout=30s")
    base = f"/api/v1/namespaces/{namespace}/pods/idle/attach"
    for query, message in {
        "": "you must specify at least 1 of stdin, stdout, stderr",
        "?stdout=true&container=other": "container other is not valid for pod idle",
        "?stdout=true": "Upgrade request required",
    }.items():
        answer = api.post(base + query, None)  # type: ignore[attr-defined]
        assert (answer.status_code, answer.json()["message"]) == (400, message), query


async def test_a_client_that_falls_behind_is_cut_off_not_buffered() -> None:
    """An attached client's output waits in a bounded queue: past LISTENER_CHUNKS it holds only
    the word that the client fell behind, and the session tells the client so and ends."""
    import asyncio

    from kubeloop.apiserver.http import podattach
    from kubeloop.node.execsessions import LISTENER_CHUNKS, Attachment, tell
    from kubeloop.node.podruns import ContainerRun
    from kubeloop.node.sessions import TOO_SLOW

    state = ContainerRun("main")
    listening = Attachment(state, tty=False, stdin_once=False, ended=asyncio.create_task(asyncio.sleep(0))).listen()
    for _ in range(LISTENER_CHUNKS * 3):
        tell(listening, ("stdout", b"x" * 1000))
    assert listening.qsize() == 1 and listening.get_nowait() == (TOO_SLOW, b"")
    tell(listening, (TOO_SLOW, b""))

    class Said:
        closes_stdin = False
        sent: list[tuple[int, bytes]] = []

        async def send(self, channel: int, data: bytes) -> None:
            self.sent.append((channel, data))

        async def receive(self) -> bytes | None:
            return None

    said = Said()
    with pytest.raises(podattach._TooSlow):
        await podattach._send_output(said, listening, stdout=True, stderr=True)
    ((channel, status),) = said.sent
    assert channel == 3 and b'"reason":"TooSlow"' in status

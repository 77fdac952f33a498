"""Local pods' addresses across servers: two servers on one machine never give out the same
address (each holds its blocks through a lock file), a block is free again once its server has
stopped however it stopped (SIGKILL too), and a server keeps the addresses of pods kept from an
earlier run."""

from __future__ import annotations

import pathlib
import signal
import socket
import subprocess
import sys

from kubeloop.node.podaddresses import PER_BLOCK, PodAddresses, bound_addresses


def nothing_bound() -> set[str]:
    """These tests' machine has other tests' pods on it: their sockets are not these tests'."""
    return set()


def test_two_servers_take_different_blocks_and_give_one_back_when_done(tmp_path: pathlib.Path) -> None:
    first, second = PodAddresses(tmp_path, nothing_bound), PodAddresses(tmp_path, nothing_bound)
    mine = {first.take() for _ in range(PER_BLOCK + 3)}  # past one block: a second one
    theirs = {second.take() for _ in range(10)}
    assert len(mine) == PER_BLOCK + 3 and not mine & theirs
    assert {address.rsplit(".", 1)[0] for address in mine} == {"127.244.0", "127.244.1"}
    assert {address.rsplit(".", 1)[0] for address in theirs} == {"127.244.2"}
    first.close()
    third = PodAddresses(tmp_path, nothing_bound)
    assert third.take() == "127.244.0.1"  # the first server's block, free again
    second.close()
    third.close()


def test_a_killed_servers_blocks_are_free_and_kept_pods_keep_their_addresses(tmp_path: pathlib.Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from kubeloop.node.podaddresses import PodAddresses; "
         f"a = PodAddresses(__import__('pathlib').Path({str(tmp_path)!r}), set); print(a.take(), flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "127.244.0.1"
    other = PodAddresses(tmp_path, nothing_bound)
    assert other.take() == "127.244.1.1"  # block 0 is the running holder's
    holder.send_signal(signal.SIGKILL)
    holder.wait(10)
    restarted = PodAddresses(tmp_path, nothing_bound)
    restarted.keep("127.244.0.1")  # its pod, kept from before the SIGKILL
    assert restarted.take() == "127.244.0.2"
    other.close()
    restarted.close()


def test_an_address_a_socket_holds_is_never_given(tmp_path: pathlib.Path) -> None:
    """A process that outlived its server (or a server whose locks are elsewhere) still holds its
    address: the machine's sockets are read, and that address is passed over."""
    with socket.socket() as listener:
        listener.bind(("127.244.255.77", 0))
        listener.listen()
        assert "127.244.255.77" in bound_addresses()
    held = PodAddresses(tmp_path, lambda: {"127.244.0.1", "127.244.0.3"})
    assert [held.take() for _ in range(3)] == ["127.244.0.2", "127.244.0.4", "127.244.0.5"]
    held.close()

"""kubeloop.uuids: version 4 UUIDs, none shared with a forked child."""

from __future__ import annotations

import os
import uuid

from kubeloop.uuids import random_uuid


def test_uuids_are_version_4_in_canonical_form_and_distinct() -> None:
    drawn = [random_uuid() for _ in range(2000)]  # several draws of 256
    assert len(set(drawn)) == len(drawn)
    for text in drawn[:300]:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122


def test_a_forked_child_draws_none_of_its_parents_uuids() -> None:
    """The parent holds drawn UUIDs it has not handed out yet; a child forked then would hand out
    the same ones (and two objects would share a uid) unless it drops them."""
    random_uuid()  # the parent now holds up to 256 drawn and not handed out
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next 256 UUIDs, to the parent
        os.close(read)
        os.write(write, "\n".join(random_uuid() for _ in range(256)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        childs = set(pipe.read().split("\n"))
    os.waitpid(pid, 0)
    parents = {random_uuid() for _ in range(256)}
    assert len(childs) == 256 and not childs & parents

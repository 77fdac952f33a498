"""Large garbage freed a member at a time: Python code runs between any two frees (so the GIL
can be handed over), and nothing that anyone else still holds is touched."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import pytest

from kubeloop import freeing
from kubeloop.freeing import free_in_steps, take_traceback


class Steps:
    """Counts the lines ``free_in_steps`` runs; each :class:`Witness` records the count as it is
    freed. Two witnesses freed at one count were freed by one cascade of deallocations in C."""

    def __init__(self) -> None:
        self.lines = 0
        self.seen: list[int] = []

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code is not freeing.free_in_steps.__code__:
            return None

        def count(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "line":
                self.lines += 1
            return count

        return count

    def one_at_a_time(self, count: int) -> bool:
        return len(self.seen) == count and len(set(self.seen)) == count


class Witness:
    def __init__(self, steps: Steps) -> None:
        self.steps = steps

    def __del__(self) -> None:
        self.steps.seen.append(self.steps.lines)


@dataclass
class Entry:
    paths: set[Any] = field(default_factory=set)
    values: list[Any] = field(default_factory=list)


@pytest.fixture
def steps() -> Iterator[Steps]:
    counting = Steps()
    sys.settrace(counting.trace)
    try:
        yield counting
    finally:
        sys.settrace(None)


def test_containers_nothing_else_holds_are_emptied_a_member_at_a_time(steps: Steps) -> None:
    body = {
        "data": {f"k{i}": Witness(steps) for i in range(300)},
        "items": [[Witness(steps)] for _ in range(50)],
        "entry": Entry(paths={("f:data", f"f:k{i}") for i in range(100)}, values=[Witness(steps) for _ in range(20)]),
    }
    held: list[Any] = [body, Entry(values=[Witness(steps) for _ in range(30)])]
    del body
    free_in_steps(held)
    assert held == []
    assert steps.one_at_a_time(400)


def test_what_others_hold_is_left_whole(steps: Steps) -> None:
    shared = {"keep": [Witness(steps) for _ in range(10)]}
    entry = Entry(values=[Witness(steps)])
    free_in_steps([{"shared": shared, "own": [Witness(steps) for _ in range(5)]}, [shared["keep"]], entry])
    assert len(shared["keep"]) == 10 and len(entry.values) == 1
    assert steps.one_at_a_time(5)


def fail_with(count: int, steps: Steps) -> None:
    big = {f"k{i}": Witness(steps) for i in range(count)}
    entry = Entry(values=[Witness(steps) for _ in range(count)])
    assert big and entry
    raise ValueError("refused")


def test_a_traceback_s_frames_are_freed_in_steps(steps: Steps) -> None:
    try:
        fail_with(200, steps)
    except ValueError as error:
        garbage = take_traceback(error)
        assert error.__traceback__ is None
    assert steps.seen == []  # held until freed
    free_in_steps(garbage)
    assert steps.one_at_a_time(400)


def test_a_suspended_coroutine_whose_frame_is_in_the_traceback_runs_on() -> None:
    """An exception raised again (a store's shared "lost" error) carries the frames that caught
    it before, and one may belong to a coroutine still suspended: clearing that frame would close
    the coroutine (on 3.11, ``frame.clear()`` throws GeneratorExit into it)."""
    shared: list[BaseException] = []

    async def long_lived(caught: asyncio.Future[None], go_on: asyncio.Event) -> str:
        try:
            raise ValueError("the store is lost")
        except ValueError as error:
            shared.append(error)  # this frame is now in the error's traceback
        caught.set_result(None)
        await go_on.wait()
        return "ran on"

    def raise_again() -> None:
        raise shared[0]

    async def main() -> str:
        caught: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        go_on = asyncio.Event()
        task = asyncio.create_task(long_lived(caught, go_on))
        await caught
        try:
            raise_again()
        except ValueError as error:
            free_in_steps(take_traceback(error))
        go_on.set()
        return await task

    assert asyncio.run(main()) == "ran on"


def test_the_frames_of_coroutines_that_ended_are_freed_in_steps_too(steps: Steps) -> None:
    async def refuse(count: int) -> None:
        big = {f"k{i}": Witness(steps) for i in range(count)}
        await asyncio.sleep(0)
        assert big
        raise ValueError("refused")

    async def handle() -> list[Any]:
        try:
            await refuse(100)
        except ValueError as error:
            return take_traceback(error)
        raise AssertionError("not refused")

    garbage = asyncio.run(handle())
    assert steps.seen == []
    free_in_steps(garbage)
    assert steps.one_at_a_time(100)
    assert take_traceback(ValueError("never raised")) == []

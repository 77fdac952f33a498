"""A check that fails where pytest does not look still fails its test: in a thread the test
started, in a task on the embedded server's loop, in a task on the test's own loop. Each case is
a small test file run by pytest in a subprocess with this project's configuration, which must
report it failed, with the failed check's words."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

CASES = {
    "a thread": """
        import threading

        def test_it():
            def check():
                assert 1 + 1 == 3, "checked in a thread"
            thread = threading.Thread(target=check)
            thread.start()
            thread.join()
    """,
    "a task on the embedded server's loop": """
        import asyncio

        async def fails():
            raise RuntimeError("checked in a task on the server's loop")

        def test_it(kube_apiserver):
            async def start_and_forget():
                task = asyncio.get_running_loop().create_task(fails())
                await asyncio.sleep(0)
                del task  # never awaited: only the loop's exception handler hears of it
            kube_apiserver.call(start_and_forget())
            import gc; gc.collect()
            kube_apiserver.call(asyncio.sleep(0))
    """,
    "a task on the test's loop": """
        import asyncio, gc

        async def fails():
            raise RuntimeError("checked in a task on the test's loop")

        async def test_it(kube_client):
            task = asyncio.get_running_loop().create_task(fails())
            await asyncio.sleep(0)
            del task
            gc.collect()
    """,
}


@pytest.mark.parametrize("where", list(CASES))
def test_a_check_that_fails_out_of_sight_fails_its_test(where: str, tmp_path: pathlib.Path) -> None:
    test_file = tmp_path / "test_case.py"
    test_file.write_text(textwrap.dedent(CASES[where]))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(tmp_path),
            str(test_file),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stdout[-3000:]
    assert "checked in" in run.stdout, run.stdout[-3000:]
    assert "1 passed" not in run.stdout

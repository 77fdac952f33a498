"""A skill's tool is a command run in the pod: the model's arguments on its stdin, its stdout the
result; a failure, a missing command and a command that outlives its time are the tool's error,
and a flood of output is cut, not held."""

from __future__ import annotations

import json
import pathlib

import pytest
from agentruntime.runinput import InputError, RunInput
from agentruntime.skilltools import RESULT_BYTES, CommandTool, run_command
from agentruntime.tools import ToolError


async def test_a_command_reads_the_arguments_and_prints_the_result() -> None:
    arguments = {"text": "three little words", "n": 3}
    assert json.loads(await run_command(("sh", "-c", "cat"), arguments, 10)) == arguments
    assert await run_command(("sh", "-c", "printf 'ok\\n\\n'"), {}, 10) == "ok"


async def test_failures_are_the_tools_error_in_the_commands_words() -> None:
    with pytest.raises(ToolError, match=r"^sh exited with 3: disk full$"):
        await run_command(("sh", "-c", "echo 'disk full' >&2; exit 3"), {}, 10)
    with pytest.raises(ToolError, match="the command no-such-tool-here cannot be started"):
        await run_command(("no-such-tool-here",), {}, 10)
    # It need not read its input; a long stderr is quoted by its end.
    with pytest.raises(ToolError, match=r"exited with 1: x+ the end$"):
        await run_command(("sh", "-c", "head -c 5000 /dev/zero | tr '\\0' x >&2; echo ' the end' >&2; exit 1"), {}, 10)


async def test_a_command_that_outlives_its_time_is_killed() -> None:
    with pytest.raises(ToolError, match=r"^sleep did not finish within 0.2 s: killed$"):
        await run_command(("sleep", "600"), {}, 0.2)


async def test_a_flood_of_output_is_cut_at_the_limit() -> None:
    flood = await run_command(("sh", "-c", f"head -c {RESULT_BYTES * 4} /dev/zero | tr '\\0' y"), {}, 30)
    assert flood == "y" * RESULT_BYTES


def test_a_packs_tools_are_read_with_its_skills(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the pack's ConfigMap lays them out: ``.tools.json`` beside the skills, not one of them."""
    pack = tmp_path / "etc/agent/skills/ops"
    pack.mkdir(parents=True)
    (pack / "disk").write_text("Check the disks first.")
    declared = [{"skill": "disk", "name": "disk_usage", "description": "How full the disks are.",
                 "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                 "command": ["sh", "-c", "cat"], "timeoutSeconds": 5}]  # fmt: skip
    (pack / ".tools.json").write_text(json.dumps(declared))
    (tmp_path / "etc/agent/task").write_text("look")
    monkeypatch.setenv("KUBELOOP_CONTAINER_ROOT", str(tmp_path))
    given = RunInput.load({"MODEL_NAME": "m", "MODEL_PROVIDER": "ollama"})
    assert [(s.pack, s.name) for s in given.skills] == [("ops", "disk")]
    assert given.skill_tools == (
        CommandTool("ops", "disk", "disk_usage", "How full the disks are.", declared[0]["parameters"],  # type: ignore[arg-type]
                    ("sh", "-c", "cat"), 5.0),
    )  # fmt: skip
    (pack / ".tools.json").write_text("[{}]")
    with pytest.raises(InputError, match="the tools of skill pack ops cannot be read"):
        RunInput.load({"MODEL_NAME": "m", "MODEL_PROVIDER": "ollama"})

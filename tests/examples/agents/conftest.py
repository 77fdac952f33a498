"""The agent platform's end-to-end tests that need kubeloop's own test tools (kubectl of several
versions, a durable server process): they share the fixtures and objects of the operator's own
tests in examples/agents/tests/."""

from __future__ import annotations

import pathlib
import sys

AGENTS = pathlib.Path(__file__).parents[3] / "examples" / "agents"
sys.path[:0] = [str(AGENTS), str(AGENTS / "tests")]

from agentobjects import client, cluster, namespace, platform  # noqa: E402, F401  (fixtures)

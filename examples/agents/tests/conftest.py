"""The agent platform's tests: `pytest examples/agents/tests` (make test runs them).

They run against kubeloop's embedded API server with workload simulation, as an operator's
own tests would: nothing here reaches into kubeloop beyond ``kubeloop`` and ``kubeloop.testing``.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))  # the operator's folder: agentplatform

from agentobjects import client, cluster, namespace, platform  # noqa: F401  (fixtures)

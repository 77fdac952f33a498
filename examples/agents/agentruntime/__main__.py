"""``python -m agentruntime``: the agent image's entry point. In a run's pod (``AGENT_RUN`` set)
the runner answers the run's task and ends; in an Agent's Deployment the agent's server serves
conversations until the pod ends."""

import os
import sys

from agentruntime import agentserver, runner

sys.exit(runner.main() if os.environ.get("AGENT_RUN") else agentserver.main())

"""``python -m agentruntime``: the agent image's entry point. In a run's pod (``AGENT_RUN`` set)
the runner answers the run's task and ends; in an Agent's Deployment the agent's server serves
conversations until the pod ends. (Each imports only what it uses: a run's start is its cost.)"""

import os
import sys

if os.environ.get("AGENT_RUN"):
    from agentruntime.runner import main
else:
    from agentruntime.agentserver import main

sys.exit(main())

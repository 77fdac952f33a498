"""``python -m agentruntime``: the agent image's entry point. In a run's pod (``AGENT_RUN`` set)
the runner answers the run's task and ends; in an Agent's Deployment the agent's server serves
conversations until the pod ends. (Each imports only what it uses: a run's start is its cost.)"""

import os
import sys


def main() -> int:
    """The agent image's entry point (also the ``kubeloop.images`` entry point of its image)."""
    if os.environ.get("AGENT_RUN"):
        from agentruntime.runner import main as run

        return run()
    from agentruntime.agentserver import main as serve

    return serve()


if __name__ == "__main__":
    sys.exit(main())

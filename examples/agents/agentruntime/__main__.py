"""``python -m agentruntime``: the agent runner (the entry point of the runner's image)."""

import sys

from agentruntime.runner import main

sys.exit(main())

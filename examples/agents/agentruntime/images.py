"""The images this package's programs are built into, by repository, and the module each one's
entry point runs (``python -m MODULE``): what ``images/<name>/Dockerfile`` builds, what the
operator's defaults and the samples name, and what kubeloop's process node runs for them
(:func:`local_images`, for ``kubeloop apiserver --local-image``)."""

from __future__ import annotations

import sys

IMAGES = {
    # A run's pod (AGENT_RUN set) and an Agent's Deployment (its endpoint).
    "ghcr.io/kubeloop/agent-python": "agentruntime",
    "ghcr.io/kubeloop-dev/agent-memory-server": "agentruntime.memoryserver",
    "ghcr.io/kubeloop/mcp-kubernetes": "agentruntime.mcpkubernetes",
    # The stand-in for a model provider the samples and the demo use when no real one is named.
    "ghcr.io/kubeloop/scripted-model": "agentruntime.scriptedmodel",
    # An agent's channels, one image per chat type (the operator's DEFAULT_IMAGES).
    "ghcr.io/kubeloop-dev/agent-channel-webhook": "agentruntime.channels.webhook",
    "ghcr.io/kubeloop-dev/agent-channel-telegram": "agentruntime.channels.telegram",
    "ghcr.io/kubeloop-dev/agent-channel-slack": "agentruntime.channels.slack",
    "ghcr.io/kubeloop-dev/agent-channel-whatsapp": "agentruntime.channels.whatsapp",
    "ghcr.io/kubeloop-dev/agent-channel-discord": "agentruntime.channels.discord",
}


def local_images(python: str = sys.executable) -> tuple[str, ...]:
    """``--local-image IMAGE=COMMAND`` for each image: its module, run by ``python``."""
    return tuple(f"{image}={python} -m {module}" for image, module in IMAGES.items())

"""The operator's webhooks registered with the test's server (envtest's ``WebhookInstallOptions``)::

    manager = kubeloop.Manager(kube_client, webhook_server=kubeloop.WebhookServer(port=0))
    setup(manager)
    async with manager, webhooks_installed(kube_client, manager):
        ...  # every write of the webhooks' kinds now passes through them

The manager serves the webhooks (a development certificate); this writes the Validating- and
MutatingWebhookConfigurations that call them by URL with that CA, and deletes them at the end,
so the session's server calls no webhook that has stopped.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from kubeloop.client.rest import APIClient
from kubeloop.manager.manager import Manager
from kubeloop.manager.webhookconfigurations import (
    install_webhook_configurations,
    uninstall_webhook_configurations,
)


@contextlib.asynccontextmanager
async def webhooks_installed(client: APIClient, manager: Manager) -> AsyncIterator[list[dict[str, Any]]]:
    """Install the started ``manager``'s webhook configurations for the block; yields them."""
    if not manager.webhook_server.webhooks:
        raise ValueError("the manager has no webhooks: register them (WebhookBuilder) before starting it")
    installed = await install_webhook_configurations(client, manager.webhook_server)
    try:
        yield installed
    finally:
        await uninstall_webhook_configurations(client, installed)

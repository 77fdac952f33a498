"""What the manager's tests share: an API client of the shared embedded server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kubeloop.client.config import load_kubeconfig
from kubeloop.client.rest import APIClient
from tests.conftest import ServerThread


@pytest.fixture
async def client(shared_server: ServerThread) -> AsyncIterator[APIClient]:
    async with APIClient(load_kubeconfig(shared_server.kubeconfig)) as c:
        yield c

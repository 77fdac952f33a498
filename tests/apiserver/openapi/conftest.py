"""The catalog the discovery and OpenAPI tests build documents from."""

from __future__ import annotations

import pytest

from kubeloop.apiserver.catalog.resources import ResourceCatalog
from kubeloop.apiserver.groups import builtin_resources


@pytest.fixture
def catalog() -> ResourceCatalog:
    """A fresh catalog of the built-in resources (a test may add CRDs' kinds to it)."""
    return ResourceCatalog(builtin_resources())

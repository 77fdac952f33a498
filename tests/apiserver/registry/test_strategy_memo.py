"""The registry remembers a resource's strategy (asked eight times a write), and forgets it when a
strategy is set or dropped, even when the change lands while another thread is looking one up
(large writes run the registry on the worker loop's thread; CRD changes land on the serving loop)."""

from __future__ import annotations

from typing import Any

from kubeloop.apiserver import groups
from kubeloop.apiserver.catalog.resources import ResourceCatalog
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.storage.log import MemoryLog
from kubeloop.apiserver.storage.objectstore import ObjectStore


def registry_and_configmaps() -> tuple[Registry, Any]:
    store = ObjectStore(MemoryLog())
    store.load()
    catalog = ResourceCatalog(groups.builtin_resources())
    configmaps = catalog.lookup("", "v1", "configmaps")
    assert configmaps is not None
    return Registry(store, catalog, groups.builtin_strategy), configmaps


def test_a_set_or_dropped_strategy_is_answered_from_the_next_call() -> None:
    registry, configmaps = registry_and_configmaps()
    builtin = registry.strategy(configmaps)
    assert registry.strategy(configmaps) is builtin  # remembered
    replacement = groups.builtin_strategy(configmaps, None)
    registry.set_strategy(replacement)
    assert registry.strategy(configmaps) is replacement
    registry.drop_strategy(configmaps)
    made_again = registry.strategy(configmaps)
    assert made_again is not replacement and made_again is not builtin


def test_a_strategy_set_during_another_threads_lookup_is_not_hidden_by_it() -> None:
    registry, configmaps = registry_and_configmaps()
    first = groups.builtin_strategy(configmaps, None)
    second = groups.builtin_strategy(configmaps, None)
    registry.set_strategy(first)

    class ChangedMidLookup(dict[Any, Any]):
        """The set strategies, with the serving loop setting another right after the worker
        loop's thread has read the current one (between its lookup and what it remembers)."""

        def get(self, key: Any, default: Any = None) -> Any:
            found = super().get(key, default)
            if found is first:
                registry.set_strategy(second)
            return found

    registry._set_strategies = ChangedMidLookup(registry._set_strategies)
    assert registry.strategy(configmaps) is first  # the lookup the change raced with
    assert registry.strategy(configmaps) is second  # and no later one keeps the stale answer
    assert registry.strategy(configmaps) is second

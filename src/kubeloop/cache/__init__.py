"""The informer cache (controller-runtime's ``pkg/cache``): a reflector keeps a local store of
one kind in step with the server (paginated list, then a watch from the list's resourceVersion;
relist on 410), the store keeps objects as compact JSON and indexes them (namespace, custom and
field indexes), the informer tells handlers about adds, updates and deletes, and the ``Cache``
holds one informer per kind — scoped by namespaces, selectors and transforms, full or
metadata-only — and answers reads: the level-triggered view controllers read instead of the API
server.

Operators reach it through the manager (``manager.cache``, ``manager.informer_for``,
``manager.client``) and ``kubeloop.CacheOptions``; the modules are internal.
"""

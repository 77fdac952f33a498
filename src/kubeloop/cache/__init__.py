"""The informer cache: a reflector keeps a local store of one kind in step with the server
(paginated list, then a watch from the list's resourceVersion; relist on 410), the store indexes
objects (namespace, custom indexes, field indexes) and the informer tells handlers about adds,
updates and deletes — the level-triggered view controllers read instead of the API server.
"""

"""Where objects live: the durable log and the watch cache over it.

``log`` is the append-only SQLite table in kine's style (``kine``: its SQL; ``writer``: the
process that group-commits it, one fsync per batch), or its in-memory twin;
``watchcache.ObjectStore`` keeps the committed objects, the key index, the history of recent
changes and the watchers' buffers, and shows only writes the log made durable. The registry
above decides what a write means; storage only orders and keeps it.
"""

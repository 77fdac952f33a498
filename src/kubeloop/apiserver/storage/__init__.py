"""Where objects live: the durable log and the watch cache over it.

``log`` is the append-only SQLite table in kine's style (``kine``: its SQL; ``writer``: the
process that group-commits it, one fsync per batch), or its in-memory twin;
``watchcache.WatchCache`` keeps the committed objects, the key index, the history of recent
changes and the watchers' buffers; ``objectstore.ObjectStore`` is the watch cache of the process
that orders writes, and shows only writes the log made durable; ``feed`` carries its committed
changes to the watch caches of other processes, and ``remotestore`` is such a process's store
(its writes sent to the ordering process). ``claims`` keeps values unique across keys. The
registry above decides what a write means; storage only orders and keeps it.
"""

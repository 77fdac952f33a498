"""Work queues for controllers, as client-go's ``util/workqueue``: a deduplicating queue in which
a key is never handed to two workers at once (``queue``), a delaying queue that keeps one entry
per key at its earliest time (``delaying``), rate limiters (``ratelimiter``) and the
rate-limiting queue a controller uses (``ratelimiting``). Keys are any hashable values; asyncio
throughout.

Internal: controllers create their queues (``Builder.with_options`` chooses one).
"""

"""The REST surface over HTTP: resource paths, verbs, query parameters, content negotiation
(JSON, YAML, protobuf, Table, PartialObjectMetadata), watch streams, authentication, connection
hygiene (slow and stalled clients) and the worker loop that keeps large writes off the serving
loop. It parses requests into registry calls and renders every error as a ``Status``.
"""

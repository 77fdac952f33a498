"""The REST surface over HTTP: resource paths, verbs, query parameters, content negotiation
(JSON, YAML, protobuf, Table, PartialObjectMetadata), watch streams, authentication, connection
hygiene (slow and stalled clients) and the worker loop that keeps large writes off the serving
loop. It parses requests into registry calls and renders every error as a ``Status``.

``handlers`` routes a request and authorizes it; ``reads``, ``watches``, ``writes``, ``deletes``
and ``subresources`` serve the verbs, from the state in ``scope``; ``requestoptions`` and
``requestbodies`` parse what a request carries and ``negotiation`` encodes the answer;
``errormiddleware`` turns errors into Status; ``watchstream`` writes a watch's events;
``authentication``, ``connections``, ``http1`` (the small-request path) and ``workerloop`` are
the connection-level machinery.
"""

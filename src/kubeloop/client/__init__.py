"""The client every other layer talks to the API server through (a real cluster or the embedded
one): configuration and credentials (``config``), the protocol both clients implement
(``interface``), the async REST client (``rest.APIClient``), blocking views of it (``sync``),
watch streams that reconnect by themselves (``watch``), kinds mapped to resources by discovery
(``restmapper``), and what requests travel over: a lean HTTP/1.1 pool (``http1``), or aiohttp
through a proxy (``proxied``). Non-2xx answers are raised as ``kubeloop.errors`` classes.

Operators use it through ``import kubeloop`` (``kubeloop.APIClient``, ``kubeloop.Client``,
``kubeloop.load_config``, ...); the modules themselves are internal. This package root imports
nothing, so that ``import kubeloop.client`` stays cheap.
"""

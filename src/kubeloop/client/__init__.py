"""The client every other layer talks to the API server through (a real cluster or the embedded
one): configuration and credentials (``config``), the async REST client (``rest.Client``), watch
streams that reconnect by themselves (``watch``), kinds mapped to resources by discovery
(``restmapper``) and the errors, one class per Status reason (``errors``).

Objects are plain dicts on the fast path. Import the submodules directly
(``from kubeloop.client.rest import APIClient``; this package root imports nothing, so that
``import kubeloop.client`` stays cheap.
"""

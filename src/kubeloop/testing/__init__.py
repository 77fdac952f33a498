"""Testing kit: the embedded API server run for tests (``server``) and a pytest plugin
(``plugin``, registered as ``kubeloop``) giving tests a server for the session, an async client
and a fresh namespace per test — envtest without binaries. It grows into the public kit (fake
client, eventually/consistently helpers) later.
"""

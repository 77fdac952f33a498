"""The server's client for the webhooks it calls (upstream's ``apiserver/pkg/util/webhook``): a
webhook's ``clientConfig`` (``clientconfig``) and the TLS call with its connection pools
(``caller``), shared by admission webhooks and CRD conversion webhooks.
"""

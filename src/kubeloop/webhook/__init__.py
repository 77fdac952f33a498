"""Webhooks an operator serves to kube-apiserver (controller-runtime's ``pkg/webhook``).

- ``server``: the HTTPS server (``WebhookServer``), with its certificate from a directory
  or made for development; ``webhookmetrics`` counts its requests;
- ``certwatcher``: ``CertWatcher`` reloads a certificate from its files, for any HTTPS server
  of an operator; ``certrotator``: ``CertRotator`` keeps one in a Secret on a cluster without
  cert-manager, and injects its CA where webhooks are called;
- ``admission``: the AdmissionReview request and response, the answers (``allowed``, ``denied``,
  ``errored``, ``patched``, ``from_error``), the endpoint that serves a handler, and
  ``current_request()``: the request a defaulter or validator is answering (who asks);
- ``defaulting`` and ``validating``: handlers built from a defaulter or validator of typed
  objects (``typedobjects``), the patch computed for a defaulter (``jsonpatchdiff``);
- ``hubconversion``: CRD conversion through a hub version (``Hub``, ``Convertible``), served
  at ``/convert``;
- ``kubeloop.WebhookBuilder`` (in ``manager``) registers them for a kind, and
  ``kubeloop webhook TARGET`` prints the configurations that make kube-apiserver call them.
"""

from kubeloop.webhook.admission import (
    CONNECT,
    CREATE,
    DELETE,
    UPDATE,
    AdmissionRequest,
    AdmissionResponse,
    AdmissionWebhook,
    allowed,
    current_request,
    denied,
    errored,
    from_error,
    patched,
)
from kubeloop.webhook.certrotator import CertRotator
from kubeloop.webhook.certwatcher import CertWatcher
from kubeloop.webhook.defaulting import CustomDefaulter
from kubeloop.webhook.hubconversion import ConversionWebhook, Convertible, Hub
from kubeloop.webhook.server import WebhookServer
from kubeloop.webhook.validating import invalid

__all__ = [
    "CONNECT",
    "CREATE",
    "DELETE",
    "UPDATE",
    "AdmissionRequest",
    "AdmissionResponse",
    "AdmissionWebhook",
    "CertRotator",
    "CertWatcher",
    "ConversionWebhook",
    "Convertible",
    "CustomDefaulter",
    "Hub",
    "WebhookServer",
    "allowed",
    "current_request",
    "denied",
    "errored",
    "from_error",
    "invalid",
    "patched",
]

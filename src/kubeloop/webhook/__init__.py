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

# The manager imports ``server`` and ``certwatcher``; an operator serving no webhook loads nothing more.
from kubeloop.lazyexports import lazy_exports

TYPE_CHECKING = False

#: Public name → its module.
_EXPORTS: dict[str, str] = {
    "CONNECT": "kubeloop.webhook.admission",
    "CREATE": "kubeloop.webhook.admission",
    "DELETE": "kubeloop.webhook.admission",
    "UPDATE": "kubeloop.webhook.admission",
    "AdmissionRequest": "kubeloop.webhook.admission",
    "AdmissionResponse": "kubeloop.webhook.admission",
    "AdmissionWebhook": "kubeloop.webhook.admission",
    "allowed": "kubeloop.webhook.admission",
    "current_request": "kubeloop.webhook.admission",
    "denied": "kubeloop.webhook.admission",
    "errored": "kubeloop.webhook.admission",
    "from_error": "kubeloop.webhook.admission",
    "patched": "kubeloop.webhook.admission",
    "CertRotator": "kubeloop.webhook.certrotator",
    "CertWatcher": "kubeloop.webhook.certwatcher",
    "CustomDefaulter": "kubeloop.webhook.defaulting",
    "ConversionWebhook": "kubeloop.webhook.hubconversion",
    "Convertible": "kubeloop.webhook.hubconversion",
    "Hub": "kubeloop.webhook.hubconversion",
    "WebhookServer": "kubeloop.webhook.server",
    "invalid": "kubeloop.webhook.validating",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # what type checkers and IDEs see; at run time the names load lazily
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

"""The webhook builder: a kind's defaulting and validating webhooks in one expression
(controller-runtime's ``builder.WebhookBuilder``)::

    kubeloop.WebhookBuilder(manager).for_(Website).with_defaulter(defaulter).with_validator(validator).complete()

The defaulter is served at ``/mutate-<group>-<version>-<kind>`` and the validator at
``/validate-<group>-<version>-<kind>`` (the group's dots as dashes, the kind lower-cased:
controller-runtime's paths, so kubebuilder's manifests fit); a kind whose versions convert
through a hub is converted at ``/convert``. Each webhook also records what its
configuration needs — kubebuilder's ``mwebsite-v1.kb.io`` name, the kind and the operations — so
that ``kubeloop webhook`` and the test kit can make kube-apiserver call it.
"""

from __future__ import annotations

from typing import Self

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.client.interface import KindRef, gvk_of, model_class
from kubeloop.manager.manager import Manager
from kubeloop.webhook.admission import CREATE, UPDATE, AdmissionWebhook
from kubeloop.webhook.defaulting import DefaulterLike, defaulting_handler
from kubeloop.webhook.hubconversion import CONVERT_PATH, ConversionWebhook, convertible, versions_of
from kubeloop.webhook.validating import operations_of, validating_handler


class WebhookBuilder:
    """A kind's admission webhooks, registered with the manager's webhook server."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self._kind: KindRef | None = None
        self._defaulter: DefaulterLike | None = None
        self._keep_removals = False
        self._validator: object | None = None
        self._failure_policy = "Fail"
        self._timeout_seconds = 10

    def for_(self, kind: KindRef) -> Self:
        """The kind the webhooks admit. As with the client, a model class (``Website``,
        ``models.apps_v1.Deployment``) hands the defaulter and validator models; a kind constant
        (``kinds.Deployment``) or a GroupVersionKind hands them dicts."""
        if self._kind is not None:
            raise ValueError("for_ may be called only once")
        if isinstance(kind, str):
            raise TypeError(
                f"for_ takes a kind (a model class, kinds.<Kind> or a GroupVersionKind), not the string {kind!r}"
            )
        self._kind = kind
        return self

    def with_defaulter(self, defaulter: DefaulterLike, *, keep_removals: bool = False) -> Self:
        """Set defaults with ``defaulter`` (an object with ``default(obj)``, or that function):
        it changes the object it is handed on CREATE and UPDATE; the JSON patch is computed.
        ``keep_removals`` lets the patch remove fields too (off: a model's dump may omit what
        the client sent, as controller-runtime's ``DefaulterRemoveUnknownOrOmitableFields``)."""
        self._defaulter = defaulter
        self._keep_removals = keep_removals
        return self

    def with_validator(self, validator: object) -> Self:
        """Validate with ``validator``: any of ``validate_create(obj)``, ``validate_update(old,
        new)`` and ``validate_delete(obj)``; the operations its configuration lists are those it
        has a method for. Each returns warnings (or nothing) or raises an API error to deny."""
        if not operations_of(validator):
            raise TypeError(
                f"{type(validator).__name__} has none of validate_create, validate_update, validate_delete"
            )
        self._validator = validator
        return self

    def with_options(self, *, failure_policy: str | None = None, timeout_seconds: int | None = None) -> Self:
        """What the generated configurations say: ``failure_policy`` ("Fail", the default, or
        "Ignore") and ``timeout_seconds`` (default 10)."""
        if failure_policy is not None:
            if failure_policy not in ("Fail", "Ignore"):
                raise ValueError(f'failure_policy must be "Fail" or "Ignore", not {failure_policy!r}')
            self._failure_policy = failure_policy
        if timeout_seconds is not None:
            if not 1 <= timeout_seconds <= 30:
                raise ValueError(f"timeout_seconds must be between 1 and 30, not {timeout_seconds}")
            self._timeout_seconds = timeout_seconds
        return self

    def complete(self) -> list[AdmissionWebhook | ConversionWebhook]:
        """Register the webhooks with ``manager.webhook_server``; they are served once the
        manager starts. A model whose kind has a hub version and convertible others (see
        ``kubeloop.webhook.Hub``) also gets the conversion webhook at ``/convert``."""
        if self._kind is None:
            raise ValueError("WebhookBuilder needs for_(kind): the kind its webhooks admit")
        gvk = gvk_of(self._kind)
        model = model_class(self._kind)
        self.manager.uses(self._kind)
        converts = model is not None and convertible(model)
        if self._defaulter is None and self._validator is None and not converts:
            raise ValueError(
                "WebhookBuilder needs with_defaulter or with_validator before complete() "
                "(or for_ a model whose versions convert through a hub)"
            )
        server = self.manager.webhook_server
        registered: list[AdmissionWebhook | ConversionWebhook] = []
        if converts:
            assert model is not None
            conversion = server.webhooks.get(CONVERT_PATH)
            if not isinstance(conversion, ConversionWebhook):
                conversion = ConversionWebhook()
                server.register(CONVERT_PATH, conversion)
            conversion.add(model)
            registered.append(conversion)
            for version in versions_of(model).values():  # the CRD serves every version it converts
                self.manager.uses(version)
        if self._defaulter is not None:
            webhook = AdmissionWebhook(
                defaulting_handler(model, self._defaulter, keep_removals=self._keep_removals),
                mutating=True,
                name=webhook_name("m", gvk),
                kind=gvk,
                operations=(CREATE, UPDATE),
                failure_policy=self._failure_policy,
                timeout_seconds=self._timeout_seconds,
            )
            server.register(mutate_path(gvk), webhook)
            registered.append(webhook)
        if self._validator is not None:
            webhook = AdmissionWebhook(
                validating_handler(model, self._validator),
                mutating=False,
                name=webhook_name("v", gvk),
                kind=gvk,
                operations=operations_of(self._validator),
                failure_policy=self._failure_policy,
                timeout_seconds=self._timeout_seconds,
            )
            server.register(validate_path(gvk), webhook)
            registered.append(webhook)
        return registered


def _path_part(gvk: GroupVersionKind) -> str:
    return f"{gvk.group.replace('.', '-')}-{gvk.version}-{gvk.kind.lower()}"


def mutate_path(gvk: GroupVersionKind) -> str:
    """controller-runtime's ``generateMutatePath``: ``/mutate-apps-v1-deployment``."""
    return f"/mutate-{_path_part(gvk)}"


def validate_path(gvk: GroupVersionKind) -> str:
    """controller-runtime's ``generateValidatePath``: ``/validate-apps-v1-deployment``."""
    return f"/validate-{_path_part(gvk)}"


def webhook_name(prefix: str, gvk: GroupVersionKind) -> str:
    """kubebuilder's webhook names: ``mwebsite-v1.kb.io``, ``vwebsite-v1.kb.io``."""
    return f"{prefix}{gvk.kind.lower()}-{gvk.version}.kb.io"

"""The webhook admission chain: mutating webhooks one after another, validating ones at once.

``WebhookAdmission`` is the registry's :class:`~kubeloop.apiserver.registry.admissionhooks.
Admission`, as kube-apiserver's MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins:

- **Mutating** webhooks are called in order, each with the object as the ones before left it;
  a JSON patch in the answer is applied. When a webhook changes the object, the webhooks with
  ``reinvocationPolicy: IfNeeded`` called before it are called once more, after the others.
- **Validating** webhooks are called in parallel with the object about to be stored; the first
  refusal, in webhook order, is the answer.
- A **refusal** is the webhook's Status, worded ``admission webhook "<name>" denied the
  request: <message>`` with its code (at least 400) and reason. **Warnings** go back to the
  client as ``Warning`` headers.
- A webhook that cannot be called, times out or answers what the server does not take fails the
  request with 500 ``failed calling webhook "<name>": ...`` under ``failurePolicy: Fail`` and
  is passed over under ``Ignore``. A dry run calls only webhooks declaring ``sideEffects: None``
  or ``NoneOnDryRun`` and is refused by the others.
- ``matchConditions`` (CEL over ``object``, ``oldObject`` and ``request``) must all be true for
  a webhook to be called; one that fails to evaluate refuses the request (403) under Fail.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from dataclasses import dataclass
from typing import NoReturn

import orjson

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.admission.webhooks.configurations import (
    GROUP,
    MUTATING,
    VALIDATING,
    Configurations,
    Webhook,
)
from kubeloop.apiserver.admission.webhooks.matching import Matcher, exempt, in_version
from kubeloop.apiserver.admission.webhooks.review import (
    SUPPORTED_VERSIONS,
    Answer,
    InvalidResponse,
    read_answer,
    review_request,
    review_version,
)
from kubeloop.apiserver.auth import celauthorizer
from kubeloop.apiserver.auth.rbacauthorizer import RBACAuthorizer
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.cel import rules as celrules
from kubeloop.apiserver.patch.jsonpatch import apply_json_patch
from kubeloop.apiserver.registry.admissionhooks import AdmissionAttributes
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.webhookclient.caller import Caller, CallError

log = logging.getLogger("kubeloop.apiserver.webhooks")


class _Passed(Exception):
    """A call failed under ``failurePolicy: Ignore``: the webhook is passed over."""


@dataclass
class _Outcome:
    """What one mutating call did: the object after it, whether it changed, the warnings."""

    obj: Obj | None
    changed: bool
    warnings: list[str]


class WebhookAdmission:
    """Calls the Validating- and MutatingWebhookConfigurations stored in ``registry``."""

    def __init__(
        self, registry: Registry, catalog: ResourceCatalog, rbac: RBACAuthorizer | None = None
    ) -> None:
        self.registry = registry
        self.catalog = catalog
        #: The ``authorizer`` library of matchConditions (RBAC of the embedded server).
        self.authorizer_functions = celauthorizer.functions(rbac or RBACAuthorizer(registry.store, catalog))
        self.configurations = Configurations(registry, catalog)
        self.matcher = Matcher(registry, catalog)
        self.caller = Caller(registry, catalog)
        self._conditions: dict[str, celrules.Expression | ValueError] = {}

    # ------------------------------------------------------------ the two phases

    #: Its coverage follows the webhook configurations: with none, no webhook is called.
    coverage_sources: tuple[tuple[str, str], ...] = (
        (GROUP, VALIDATING),
        (GROUP, MUTATING),
    )

    def covers(self, resource: ResourceType) -> bool:
        if exempt(resource):
            return False
        return bool(
            self.configurations.webhooks(mutating=True) or self.configurations.webhooks(mutating=False)
        )

    async def mutate(
        self, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> tuple[Obj | None, list[str]]:
        if exempt(attributes.resource):
            return obj, []
        hooks = self.configurations.webhooks(mutating=True)
        if not hooks:
            return obj, []
        warnings: list[str] = []
        current = obj
        reinvocable_called: list[str] = []
        reinvoke: set[str] = set()
        # Every webhook once; then, once more, each IfNeeded webhook that a later
        # webhook's change came after (upstream reinvokes at most once).
        for first_round in (True, False):
            for hook in hooks:
                if not first_round and hook.uid not in reinvoke:
                    continue
                resource = self._invocation(hook, attributes, current, old)
                if resource is None:
                    continue
                outcome = await self._mutating_call(hook, resource, attributes, current, old)
                warnings.extend(outcome.warnings)
                current = outcome.obj
                if first_round and outcome.changed:
                    reinvoke.update(reinvocable_called)
                if first_round and hook.reinvocation_policy == "IfNeeded":
                    reinvocable_called.append(hook.uid)
            if not reinvoke:
                break
        return current, warnings

    async def validate(self, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None) -> list[str]:
        if exempt(attributes.resource):
            return []
        hooks = self.configurations.webhooks(mutating=False)
        invocations = [
            (hook, resource)
            for hook in hooks
            if (resource := self._invocation(hook, attributes, obj, old)) is not None
        ]
        if not invocations:
            return []
        results = await asyncio.gather(
            *(self._validating_call(hook, resource, attributes, obj, old) for hook, resource in invocations),
            return_exceptions=True,
        )
        warnings: list[str] = []
        for result in results:
            if isinstance(result, BaseException):
                raise result  # the first failure in webhook order
            warnings.extend(result)
        return warnings

    # ------------------------------------------------------------ one webhook

    def _invocation(
        self, hook: Webhook, attributes: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> ResourceType | None:
        """The resource ``hook`` is called with, or None when it is not called."""
        if not self.matcher.selects(hook, attributes, obj, old):
            return None
        resource = self.matcher.resource_for(hook, attributes)
        if resource is None or not hook.match_conditions:
            return resource
        return resource if self._conditions_hold(hook, resource, attributes, obj, old) else None

    def _conditions_hold(
        self,
        hook: Webhook,
        resource: ResourceType,
        attributes: AdmissionAttributes,
        obj: Obj | None,
        old: Obj | None,
    ) -> bool:
        _, request = review_request("v1", attributes, resource, obj, old)
        variables = {
            "object": obj,
            "oldObject": old,
            "request": request["request"],
            "authorizer": celauthorizer.authorizer_variable(attributes.user),
        }
        failures: list[str] = []
        budget = celrules.Budget()
        for _name, expression in hook.match_conditions:
            compiled = self._condition(expression)
            if isinstance(compiled, ValueError):
                failures.append(f"compilation failed: {compiled}")
                continue
            try:
                result = celrules.evaluate_expression(
                    compiled, variables, self.authorizer_functions, budget=budget
                )
            except celrules.BudgetExhausted as exhausted:
                failures = [str(exhausted)]
                break
            except Exception as error:  # the interpreter's errors are plain Python ones
                failures.append(f"expression '{expression}' resulted in error: {error}")
                continue
            if result is False:
                return False
            if result is not True:
                failures.append(f"expression '{expression}' resulted in a non-bool value")
        if not failures:
            return True
        if hook.failure_policy == "Ignore":
            return False
        detail = failures[0] if len(failures) == 1 else "[" + ", ".join(failures) + "]"
        raise errors.Forbidden(
            f"{errors.resource_label(attributes.resource.group, attributes.resource.plural)} "
            f'"{attributes.name}" is forbidden: {detail}',
            name=attributes.name,
            group=attributes.resource.group,
            kind=attributes.resource.plural,
        )

    def _condition(self, expression: str) -> celrules.Expression | ValueError:
        compiled = self._conditions.get(expression)
        if compiled is None:
            try:
                compiled = celrules.compile_expression(expression, extra=celauthorizer.NAMES)
            except ValueError as error:
                compiled = error
            self._conditions[expression] = compiled
        return compiled

    async def _mutating_call(
        self,
        hook: Webhook,
        resource: ResourceType,
        attributes: AdmissionAttributes,
        obj: Obj | None,
        old: Obj | None,
    ) -> _Outcome:
        versioned = await in_version(self.registry, attributes.resource, resource, obj)
        try:
            answer = await self._call(
                hook,
                resource,
                attributes,
                versioned,
                await in_version(self.registry, attributes.resource, resource, old),
            )
        except _Passed:
            return _Outcome(obj, False, [])
        if answer.patch is None or not answer.patch:
            return _Outcome(obj, False, answer.warnings)
        if versioned is None:
            raise errors.internal_error(
                f'admission webhook "{hook.name}" attempted to modify the object, which is not supported for this operation'
            )
        try:
            patched = apply_json_patch(copy.deepcopy(versioned), answer.patch)
        except errors.APIError as error:
            raise errors.internal_error(error.message) from None
        if not isinstance(patched, dict):
            raise errors.internal_error(
                f'admission webhook "{hook.name}" patched the object into a non-object'
            )
        changed = patched != versioned
        back = await in_version(self.registry, resource, attributes.resource, patched)
        return _Outcome(back if changed else obj, changed, answer.warnings)

    async def _validating_call(
        self,
        hook: Webhook,
        resource: ResourceType,
        attributes: AdmissionAttributes,
        obj: Obj | None,
        old: Obj | None,
    ) -> list[str]:
        try:
            answer = await self._call(
                hook,
                resource,
                attributes,
                await in_version(self.registry, attributes.resource, resource, obj),
                await in_version(self.registry, attributes.resource, resource, old),
            )
        except _Passed:
            return []
        return answer.warnings

    async def _call(
        self,
        hook: Webhook,
        resource: ResourceType,
        attributes: AdmissionAttributes,
        obj: Obj | None,
        old: Obj | None,
    ) -> Answer:
        """Send the AdmissionReview and read the decision; a refusal raises the webhook's Status,
        a failed call the 500 of ``failurePolicy: Fail`` (or :class:`_Passed` under Ignore)."""
        if attributes.dry_run:
            if hook.side_effects is None:
                self._failed(hook, "Webhook SideEffects is nil")
            if hook.side_effects not in ("None", "NoneOnDryRun"):
                raise errors.BadRequest(f'admission webhook "{hook.name}" does not support dry run')
        version = review_version(hook.review_versions)
        if version is None:
            self._failed(
                hook,
                "could not create admission objects: webhook does not accept known AdmissionReview versions "
                f"({', '.join(SUPPORTED_VERSIONS)})",
            )
        uid, review = review_request(version, attributes, resource, obj, old)
        try:
            answered = await self.caller.post(hook.client, orjson.dumps(review), hook.timeout_seconds)
        except CallError as error:
            self._failed(hook, f"failed to call webhook: {error.reason}")
        try:
            answer = read_answer(version, uid, answered, mutating=hook.mutating)
        except InvalidResponse as error:
            self._failed(hook, error.reason)
        if not answer.allowed:
            raise denial(hook.name, answer.result)
        return answer

    def _failed(self, hook: Webhook, reason: str) -> NoReturn:
        """A failed call: passed over under Ignore, the request's 500 under Fail."""
        message = f'failed calling webhook "{hook.name}": {reason}'
        if hook.failure_policy == "Ignore":
            log.warning("Failed calling webhook, failing open %s: %s", hook.name, message)
            raise _Passed
        log.warning("Failed calling webhook, failing closed %s: %s", hook.name, message)
        raise errors.internal_error(message)


def denial(name: str, result: Obj) -> errors.APIError:
    """A webhook's refusal as the client gets it (upstream's ``ToStatusErr``)."""
    denied = f'admission webhook "{name}" denied the request'
    message = str(result.get("message") or "")
    reason = str(result.get("reason") or "")
    if message:
        text = f"{denied}: {message}"
    elif reason:
        text = f"{denied}: {reason}"
    else:
        text = f"{denied} without explanation"
    code = result.get("code")
    code = code if isinstance(code, int) and code >= 400 else 400
    status = {**result, "kind": "Status", "message": text, "code": code}
    error = errors.error_from_status(code, status)
    error.reason = reason
    error.code = code
    return error

"""The policy controller's type checking: each expression of a ValidatingAdmissionPolicy checked
against the schema of every kind its ``matchConstraints`` name, the findings written to
``status.typeChecking.expressionWarnings`` with ``observedGeneration`` (upstream's
``TypeChecker`` and policy status controller).

The kinds are those the resource rules spell out (wildcards name none, as upstream), each in
every version the rules list; ``object`` and ``oldObject`` get the kind's OpenAPI schema,
``params`` the param kind's, and the other variables are ``dyn``. A warning reads as upstream's:
``apps/v1, Kind=Deployment: ERROR: <input>:1:14: undefined field 'replicass'`` followed by the
line and a caret. Type checking only warns: a policy with warnings is still enforced.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from kubeloop import errors
from kubeloop.api.object import Obj
from kubeloop.apiserver.catalog import schemas
from kubeloop.apiserver.catalog.resources import ResourceCatalog, ResourceType
from kubeloop.apiserver.cel import typecheck as celtypes
from kubeloop.apiserver.registry.generic import Registry
from kubeloop.apiserver.registry.verboptions import WriteOptions
from kubeloop.apiserver.retryloop import RetryLoop

log = logging.getLogger("kubeloop.apiserver.admission.admissionpolicy")

#: How deep references are followed: past it a field is ``dyn`` (nothing is refused there).
_DEPTH = 12


def expression_warnings(policy: Obj, catalog: ResourceCatalog) -> list[dict[str, str]]:
    """``status.typeChecking.expressionWarnings`` of a policy."""
    spec = policy.get("spec") or {}
    kinds = _matched_kinds(spec.get("matchConstraints"), catalog)
    if not kinds:
        return []
    params = _params_type(spec.get("paramKind"), catalog)
    expressions: list[tuple[str, str]] = []
    for index, validation in enumerate(spec.get("validations") or ()):
        if isinstance(validation, dict):
            expressions.append(
                (f"spec.validations[{index}].expression", str(validation.get("expression") or ""))
            )
            if validation.get("messageExpression"):
                expressions.append(
                    (f"spec.validations[{index}].messageExpression", str(validation["messageExpression"]))
                )
    warnings = []
    for field_ref, source in expressions:
        found = []
        for label, object_type in kinds:
            variables = {
                "object": object_type,
                "oldObject": object_type,
                "params": params,
                "request": celtypes.DYN,
                "namespaceObject": celtypes.DYN,
                "variables": celtypes.DYN,
                "authorizer": celtypes.DYN,
            }
            _, problems = celtypes.check_expression(source, variables)
            if problems is not None:
                found.append(f"{label}: {problems}")
        if found:
            warnings.append({"fieldRef": field_ref, "warning": "\n".join(found)})
    return warnings


def _matched_kinds(constraints: Any, catalog: ResourceCatalog) -> list[tuple[str, celtypes.CELType]]:
    """(``group/version, Kind=Kind``, its CEL type) for each kind the rules name explicitly."""
    if not isinstance(constraints, dict):
        return []
    found: dict[str, celtypes.CELType] = {}
    for rule in constraints.get("resourceRules") or ():
        if not isinstance(rule, dict):
            continue
        for group in rule.get("apiGroups") or ():
            for version in rule.get("apiVersions") or ():
                for plural in rule.get("resources") or ():
                    if "*" in (group, version) or "*" in str(plural) or "/" in str(plural):
                        continue
                    resource = catalog.lookup(str(group), str(version), str(plural))
                    if resource is not None:
                        found.setdefault(
                            _label(resource), _kind_type(resource.group, resource.version, resource.kind)
                        )
    return list(found.items())


def _label(resource: ResourceType) -> str:
    """Go's ``schema.GroupVersionKind.String()``."""
    return f"{resource.group_version}, Kind={resource.kind}"


def _params_type(param_kind: Any, catalog: ResourceCatalog) -> celtypes.CELType:
    if not isinstance(param_kind, dict):
        return celtypes.DYN
    group, _, version = str(param_kind.get("apiVersion") or "").rpartition("/")
    resource = catalog.by_kind(group, version, str(param_kind.get("kind") or ""))
    return _kind_type(group, version, resource.kind) if resource is not None else celtypes.DYN


@lru_cache(maxsize=256)
def _kind_type(group: str, version: str, kind: str) -> celtypes.CELType:
    schema = schemas.kind_schema(group, version, kind)
    return celtypes.schema_type(_inlined(schema, _DEPTH)) if schema is not None else celtypes.DYN


def _inlined(node: Any, depth: int) -> Any:
    """``node`` with its references followed (``allOf`` of one reference included) and its type
    a single name, to ``depth`` levels; deeper, an empty schema (``dyn``)."""
    if not isinstance(node, Mapping) or depth <= 0:
        return {}
    node = schemas.resolve(node)
    parts = node.get("allOf")
    if isinstance(parts, list) and len(parts) == 1 and isinstance(parts[0], Mapping):
        node = {**schemas.resolve(parts[0]), **{k: v for k, v in node.items() if k != "allOf"}}
    out = {
        key: value
        for key, value in node.items()
        if key not in ("properties", "items", "additionalProperties")
    }
    kinds = schemas.node_types(node)
    if kinds:
        out["type"] = kinds[0]
    properties = node.get("properties")
    if isinstance(properties, Mapping):
        out["properties"] = {name: _inlined(value, depth - 1) for name, value in properties.items()}
    if isinstance(node.get("items"), Mapping):
        out["items"] = _inlined(node["items"], depth - 1)
    if isinstance(node.get("additionalProperties"), Mapping):
        out["additionalProperties"] = _inlined(node["additionalProperties"], depth - 1)
    return out


class TypeCheckingController:
    """Writes each policy's ``status`` (type checking, ``observedGeneration``) after it changes,
    as upstream's policy status controller does; one owned task (``start``/``stop``)."""

    def __init__(self, registry: Registry, catalog: ResourceCatalog) -> None:
        self.registry = registry
        self.catalog = catalog
        self._loop = RetryLoop(self._check, what="admission-policy-status", log=log)
        registry.add_commit_listener(
            "admissionregistration.k8s.io", "validatingadmissionpolicies", lambda new, old: self._written(new)
        )

    def _resource(self) -> ResourceType:
        resource = self.catalog.lookup("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies")
        assert resource is not None
        return resource

    def _written(self, policy: Obj | None) -> None:
        """Queue ``policy`` (just written; None: deleted) if its status has not seen its
        generation: one policy's write does not scan the others."""
        if policy is None:
            return
        metadata = policy.get("metadata") or {}
        if (policy.get("status") or {}).get("observedGeneration") != metadata.get("generation"):
            self._loop.queue(str(metadata.get("name") or ""))

    def start(self) -> None:
        """Start, with every policy stored whose status has not seen its generation queued."""
        self._loop.start()
        for _key, policy in self.registry.store.items(self._resource().key_prefix(None)):
            self._written(policy)

    async def stop(self) -> None:
        await self._loop.stop()

    async def _check(self, name: str) -> bool:
        resource = self._resource()
        try:
            policy = self.registry.get(resource, None, name)
        except errors.NotFound:
            return True
        generation = (policy.get("metadata") or {}).get("generation")
        status = dict(policy.get("status") or {})
        if status.get("observedGeneration") == generation:
            return True
        status["observedGeneration"] = generation
        status["typeChecking"] = {"expressionWarnings": expression_warnings(policy, self.catalog)}
        status.setdefault("conditions", [])
        updated = {**policy, "status": status}
        try:
            await self.registry.update(resource, None, name, updated, WriteOptions(), subresource="status")
        except errors.Conflict:
            return False  # changed meanwhile: look again
        return True

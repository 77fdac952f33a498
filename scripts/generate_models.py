"""Generate the typed models of the built-in kinds operators use from the upstream OpenAPI schemas.

Reads the definitions kubernetes-validate ships (the release ``kubeloop.apiserver.catalog.schemas`` serves)
and writes one module per group-version under ``src/kubeloop/api/models/``: meta/v1 and every GA
group-version the embedded server serves (``apiserver.groups``). It writes from the same list
the facades that name them: ``kubeloop/models.py`` (the modules, loaded on first use) and
``kubeloop/kinds.py`` (a GroupVersionKind constant per kind). Run
``python scripts/generate_models.py`` after changing this script, the API groups or the
kubernetes-validate version; ``tests/api/test_models.py`` checks the output is up to date.
"""

from __future__ import annotations

import keyword
import pathlib
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODELS = pathlib.Path("src/kubeloop/api/models")
META_PREFIX = "io.k8s.apimachinery.pkg.apis.meta.v1."
GA_VERSION = re.compile(r"^v\d+$")

#: Where two group-versions serve a kind of the same name, the one ``kubeloop.kinds`` names: the
#: core group's Event (what ``kubectl get events`` lists) and the preferred autoscaling version.
PREFERRED = {"Event": ("", "v1"), "HorizontalPodAutoscaler": ("autoscaling", "v2")}


def module_name(group: str, version: str) -> str:
    """client-go's package alias, as a module name: ``rbac.authorization.k8s.io``/v1 → ``rbac_v1``."""
    return f"{group.split('.')[0] or 'core'}_{version}"


def served_kinds() -> dict[tuple[str, str], list[str]]:
    """Every GA group-version the embedded server serves → its kinds (subresources left out)."""
    from kubeloop.apiserver.groups import builtin_resources

    served: dict[tuple[str, str], list[str]] = {}
    for resource in builtin_resources():
        if "/" in resource.plural or not GA_VERSION.match(resource.version):
            continue
        kinds = served.setdefault((resource.group, resource.version), [])
        if resource.kind not in kinds:
            kinds.append(resource.kind)
    return {gv: sorted(kinds) for gv, kinds in sorted(served.items())}


def packages(
    definitions: Mapping[str, Any], served: Mapping[tuple[str, str], list[str]]
) -> dict[str, tuple[str, str, str]]:
    """definition prefix → (module name, group, version): meta/v1, then each served group-version
    (found through the ``x-kubernetes-group-version-kind`` of its kinds' definitions)."""
    found: dict[str, tuple[str, str, str]] = {META_PREFIX: ("meta_v1", "meta.k8s.io", "v1")}
    for name, definition in definitions.items():
        for gvk in definition.get("x-kubernetes-group-version-kind") or ():
            group, version, kind = gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", "")
            if kind in served.get((group, version), ()) and name.endswith("." + kind):
                found.setdefault(name[: -len(kind)], (module_name(group, version), group, version))
    missing = {gv for gv in served} - {(g, v) for _, g, v in found.values()}
    if missing:
        raise ValueError(f"no upstream definitions for the served group-versions {sorted(missing)}")
    return dict(sorted(found.items(), key=lambda item: item[1][0]))


#: Definitions that are JSON scalars or free-form, as Python types (and the imports they need).
SPECIAL = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "Quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "IntOrString",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": "Time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": "MicroTime",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Duration": "str",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1": "dict[str, Any]",
    "io.k8s.apimachinery.pkg.runtime.RawExtension": "Any",
}

#: Fields the schemas require that servers answer with null: Go writes a zero time as null, and
#: an events.k8s.io/v1 Event made from a core/v1 one recorded without an eventTime (the kubelet's,
#: client-go's old recorder) is listed with ``"eventTime": null``. Optional in the models, so that
#: such a list can be read (the official client's models refuse it); the server still requires it
#: of a write.
NULL_IN_ANSWERS = {("io.k8s.api.events.v1.Event", "eventTime")}

#: Names pydantic's BaseModel already uses; such fields get a trailing underscore.
RESERVED = {
    "copy", "dict", "json", "schema", "construct", "validate", "fields", "model_config", "model_fields",
    "parse_obj", "parse_raw", "from_orm", "update_forward_refs", "to_dict", "from_dict",
}  # fmt: skip
#: Names the annotations use (a field ``bool`` would hide the type in its own class's scope).
SHADOWING = {"bool", "int", "float", "str", "list", "dict", "datetime", "Any", "Field", "Time", "MicroTime"}


def snake(name: str) -> str:
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text).lower().replace("-", "_").replace("$", "")
    if keyword.iskeyword(text) or text in RESERVED or text in SHADOWING:
        text += "_"
    return text


#: A kind's members that come first, as in every manifest (the others follow in name order).
KIND_MEMBERS = ("apiVersion", "kind", "metadata")


def member_order(properties: Mapping[str, Any], *, first_the_kinds: bool) -> list[str]:
    """The order of a class's fields, which is the order a model writes its members in: a kind
    starts with apiVersion, kind and metadata, as a manifest does (in name order a ConfigMap went
    out as apiVersion, data, kind, metadata); the rest in name order, as upstream's schemas list them."""
    names = sorted(properties)
    if not first_the_kinds:
        return names
    return [*KIND_MEMBERS, *(name for name in names if name not in KIND_MEMBERS)]


def ref_name(node: Mapping[str, Any]) -> str | None:
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return None
    return ref.rsplit("/", 1)[-1]


class Generator:
    def __init__(self, definitions: Mapping[str, Any], served: Mapping[tuple[str, str], list[str]]) -> None:
        self.definitions = definitions
        self.served = served
        self.packages = packages(definitions, served)

    def module_of(self, definition: str) -> tuple[str, str] | None:
        for prefix, (module, _, _) in self.packages.items():
            if definition.startswith(prefix):
                return module, definition[len(prefix) :]
        return None

    def type_of(
        self, node: Mapping[str, Any], here: str, imports: set[str], local: set[str] | None = None
    ) -> str:
        """The annotation of a schema node in module ``here``; the modules it names go in
        ``imports``, the classes of ``here`` it names in ``local``."""
        name = ref_name(node)
        if name is not None:
            if name in SPECIAL:
                return SPECIAL[name]
            target = self.module_of(name)
            if target is None:
                return "dict[str, Any]"
            if "properties" not in self.definitions.get(name, {}):
                return "Any"  # free-form JSON (apiextensions' JSON, JSONSchemaPropsOrBool, ...)
            module, cls = target
            if module == here:
                if local is not None:
                    local.add(cls)
                return cls
            imports.add(module)
            return f"{module}.{cls}"
        if "oneOf" in node:
            options = [self.type_of(option, here, imports, local) for option in node["oneOf"]]
            return " | ".join(dict.fromkeys(options))
        types = node.get("type")
        kinds = [t for t in (types if isinstance(types, list) else [types]) if t and t != "null"]
        kind = kinds[0] if kinds else None
        if kind == "string":
            return "datetime" if node.get("format") == "date-time" else "str"
        if kind == "integer":
            return "int"
        if kind == "number":
            return "float"
        if kind == "boolean":
            return "bool"
        if kind == "array":
            return f"list[{self.type_of(node.get('items') or {}, here, imports, local)}]"
        if kind == "object" or kind is None:
            extra = node.get("additionalProperties")
            if isinstance(extra, Mapping):
                return f"dict[str, {self.type_of(extra, here, imports, local)}]"
            return "dict[str, Any]"
        raise ValueError(f"unknown schema node {node}")

    def module(self, module: str, group: str, version: str, prefix: str) -> str:
        imports: set[str] = set()
        classes: list[str] = []
        #: class → the classes of this module its fields name (made with it: ``lazyclasses``).
        needs: dict[str, set[str]] = {}
        api_version = f"{group}/{version}" if group else version
        for name in sorted(d for d in self.definitions if d.startswith(prefix) and d not in SPECIAL):
            definition = self.definitions[name]
            cls = name[len(prefix) :]
            if "properties" not in definition:
                continue
            local = needs.setdefault(cls, set())
            properties: Mapping[str, Any] = definition["properties"]
            required = set(definition.get("required") or ())
            top_level = {"apiVersion", "kind", "metadata"} <= set(properties) and not cls.endswith("List")
            kind_enum = (properties.get("kind") or {}).get("enum")
            base = "KubeObject" if top_level and kind_enum else "KubeModel"
            lines = [f"class {cls}({base}):"]
            doc = (
                str(definition.get("description") or cls).strip().replace("\\", "\\\\").replace('"""', "'''")
            )
            lines.append(f'    """{doc.splitlines()[0] if doc else cls}"""')
            lines.append("")
            if base == "KubeObject":
                lines.append(f"    __gvk__ = GroupVersionKind({group!r}, {version!r}, {cls!r})")
            seen: set[str] = set()
            for json_name in member_order(properties, first_the_kinds=base == "KubeObject"):
                node = properties[json_name]
                attr = snake(json_name)
                if attr in seen:
                    raise ValueError(f"{name}: two fields map to {attr}")
                seen.add(attr)
                annotation = self.type_of(node, module, imports, local)
                if base == "KubeObject" and json_name == "apiVersion":
                    lines.append(f'    api_version: str = Field(default={api_version!r}, alias="apiVersion")')
                    continue
                if base == "KubeObject" and json_name == "kind":
                    lines.append(f"    kind: str = {cls!r}")
                    continue
                if base == "KubeObject" and json_name == "metadata":
                    lines.append("    metadata: meta_v1.ObjectMeta = Field(default_factory=lambda: meta_v1.ObjectMeta())"
                                 if module != "meta_v1" else
                                 "    metadata: ObjectMeta = Field(default_factory=lambda: ObjectMeta())")  # fmt: skip
                    if module != "meta_v1":
                        imports.add("meta_v1")
                    else:
                        local.add("ObjectMeta")
                    continue
                alias = f', alias="{json_name}"' if attr != json_name else ""
                # The strict schemas require a kind's spec; the API does not (Go: omitempty), and a
                # model built to be filled in by a mutate function starts without one.
                if (
                    json_name in required
                    and not (base == "KubeObject" and json_name == "spec")
                    and (name, json_name) not in NULL_IN_ANSWERS
                ):
                    field = f" = Field({alias[2:]})" if alias else ""
                    lines.append(f"    {attr}: {annotation}{field}")
                else:
                    field = f" = Field(default=None{alias})" if alias else " = None"
                    lines.append(f"    {attr}: {annotation} | None{field}")
            local.discard(cls)
            classes.append(f"if _lazy.wanted({cls!r}):\n" + "\n".join(f"    {line}" if line else "" for line in lines))
        header = [
            f'"""Typed models of {api_version} (generated by scripts/generate_models.py from the upstream',
            "OpenAPI schemas; do not edit). Each class is made when first used (``kubeloop.api.lazyclasses``).",
            '"""',
            "",
            "from __future__ import annotations",
            "",
            "from datetime import datetime",
            "from typing import TYPE_CHECKING, Any",
            "",
            "from pydantic import Field",
            "",
            "from kubeloop.api.gvk import GroupVersionKind",
            "from kubeloop.api.lazyclasses import LazyClasses",
            "from kubeloop.api.model import IntOrString, KubeModel, KubeObject, MicroTime, Quantity, Time",
        ]
        for other in sorted(imports - {module}):
            header.append(f"from kubeloop.api.models import {other}")
        body = "\n\n\n".join(classes)
        return "\n".join(header) + "\n\n" + "\n\n".join(self.lazy_header(needs)) + "\n\n\n" + body + "\n"

    @staticmethod
    def lazy_header(needs: Mapping[str, set[str]], functions: Sequence[str] = ()) -> list[str]:
        """A generated module's ``__all__`` (its classes, then the ``functions`` named) and the
        ``LazyClasses`` that makes its classes when first asked for, with what each needs."""
        listed = "".join(f"    {cls!r}: ({''.join(f'{n!r}, ' for n in sorted(used))}),\n" for cls, used in needs.items())
        names = "".join(f"    {name!r},\n" for name in [*needs, *functions])
        return [
            f"__all__ = [\n{names}]",
            f"_lazy = LazyClasses.of(\n    __name__,\n    {{\n{listed}    }},\n)",
            "if not TYPE_CHECKING:\n    __getattr__ = _lazy.getattr\n    __dir__ = _lazy.dir",
        ]

    def apply_module(self, module: str, group: str, version: str, prefix: str) -> str:
        """The apply configurations of a group-version: a class per model, every field optional
        (nested types are configurations too), and an ``extract_<kind>`` per kind."""
        imports: set[str] = set()
        classes: list[str] = []
        extractors: list[str] = []
        extractor_names: list[str] = []
        #: class → the configurations of this module its fields name (made with it: ``lazyclasses``).
        needs: dict[str, set[str]] = {}
        api_version = f"{group}/{version}" if group else version
        for name in sorted(d for d in self.definitions if d.startswith(prefix) and d not in SPECIAL):
            definition = self.definitions[name]
            cls = name[len(prefix) :]
            if "properties" not in definition or (cls.endswith("List") and "items" in definition["properties"]):
                continue
            local = needs.setdefault(cls, set())
            properties: Mapping[str, Any] = definition["properties"]
            top_level = {"apiVersion", "kind", "metadata"} <= set(properties)
            kind_enum = (properties.get("kind") or {}).get("enum")
            kind = bool(top_level and kind_enum)
            base = f"ac.ObjectApplyConfiguration[models.{cls}]" if kind else "ac.ApplyConfiguration"
            doc = str(definition.get("description") or cls).strip().replace("\\", "\\\\").replace('"""', "'''")
            lines = [f"class {cls}({base}):", f'    """{doc.splitlines()[0] if doc else cls}"""', ""]
            if kind:
                lines.append(f"    __gvk__ = GroupVersionKind({group!r}, {version!r}, {cls!r})")
                lines.append(f"    __model__ = models.{cls}")
                extractor_names.append(f"extract_{snake(cls).rstrip('_')}")
                extractors.append(
                    f"def {extractor_names[-1]}(\n"
                    f"    obj: models.{cls} | Mapping[str, Any], field_manager: str, subresource: str = \"\"\n"
                    f") -> {cls}:\n"
                    f'    """The fields of ``obj`` that ``field_manager`` owns through apply, as a {cls}\n'
                    f'    configuration (client-go\'s ``Extract{cls}``)."""\n'
                    f"    configuration: type[{cls}] = _lazy.getattr({cls!r})\n"
                    f"    return ac.extract(configuration, obj, field_manager, subresource)"
                )
            for json_name in member_order(properties, first_the_kinds=kind):
                attr = snake(json_name)
                annotation = self.type_of(properties[json_name], module, imports, local)
                if kind and json_name in ("apiVersion", "kind"):
                    annotation = "str"
                alias = f', alias="{json_name}"' if attr != json_name else ""
                field = f" = Field(default=None{alias})" if alias else " = None"
                lines.append(f"    {attr}: {annotation} | None{field}")
            local.discard(cls)
            classes.append(f"if _lazy.wanted({cls!r}):\n" + "\n".join(f"    {line}" if line else "" for line in lines))
        header = [
            f'"""Apply configurations of {api_version} (generated by scripts/generate_models.py from the',
            "upstream OpenAPI schemas; do not edit). Each class is made when first used",
            '(``kubeloop.api.lazyclasses``)."""',
            "",
            "from __future__ import annotations",
            "",
            "from collections.abc import Mapping",
            "from datetime import datetime",
            "from typing import TYPE_CHECKING, Any",
            "",
            "from pydantic import Field",
            "",
            "from kubeloop.api import applyconfiguration as ac",
            "from kubeloop.api.gvk import GroupVersionKind",
            "from kubeloop.api.lazyclasses import LazyClasses",
            "from kubeloop.api.model import IntOrString, MicroTime, Quantity, Time",
            f"from kubeloop.api.models import {module} as models",
        ]
        for other in sorted(imports - {module}):
            header.append(f"from kubeloop.api.applyconfigurations import {other}")
        body = "\n\n\n".join(classes + extractors)
        return "\n".join(header) + "\n\n" + "\n\n".join(self.lazy_header(needs, extractor_names)) + "\n\n\n" + body + "\n"

    def facade(self, package: str, what: str, example: str) -> str:
        names = [module for module, _, _ in self.packages.values()]
        listed = ", ".join(names)
        quoted = ", ".join(repr(name) for name in names)
        return f'''"""{what}, one module per group-version, loaded on first use::

{example}

A module per GA group-version the server serves, named as client-go's package aliases
(``rbac.authorization.k8s.io/v1`` is ``rbac_v1``). They live in ``kubeloop.api.{package}``; this
module lets an operator reach them as ``kubeloop.{package}`` without importing any it does not use.

Generated by scripts/generate_models.py; do not edit.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType

    from kubeloop.api.{package} import {listed}

__all__ = [{quoted}]


def __getattr__(name: str) -> "ModuleType":
    if name not in __all__:
        raise AttributeError(f"module 'kubeloop.{package}' has no attribute {{name!r}}")
    module: ModuleType = __import__(f"kubeloop.api.{package}.{{name}}", fromlist=["__name__"])
    globals()[name] = module
    return module
'''

    def models_init(self) -> str:
        modules = "".join(
            f"    ({group!r}, {version!r}): {module!r},\n"
            for module, group, version in self.packages.values()
        )
        return (
            '"""Generated typed models of the built-in kinds, one module per group-version (import the\n'
            "module you need; nothing is imported here so that ``import kubeloop`` stays cheap).\n"
            '\nGenerated by scripts/generate_models.py; do not edit."""\n\n'
            "#: (group, version) → the module of its models, in this package.\n"
            f"MODULES: dict[tuple[str, str], str] = {{\n{modules}}}\n"
        )

    def kinds_module(self) -> str:
        lines = [
            '"""Kind constants: the ``GroupVersionKind`` of every built-in kind, by its name::',
            "",
            "    from kubeloop import kinds",
            "    Builder(manager).for_(kinds.ConfigMap).owns(kinds.Deployment).complete(reconcile)",
            "",
            "A constant is usable wherever a kind is (reads answer dicts); the model classes of",
            "``kubeloop.models`` are usable there too (reads answer models) and carry the same GVK in",
            "``__gvk__``. Every kind of every GA group-version the server serves has one. Where two",
            "group-versions serve a kind of the same name, the constant names the core group's Event and",
            "autoscaling/v2's HorizontalPodAutoscaler; ``models.events_v1.Event`` and",
            "``models.autoscaling_v1.HorizontalPodAutoscaler`` name the others. Custom resources declare",
            "their own.",
            "",
            "Generated by scripts/generate_models.py; do not edit.",
            '"""',
            "",
            "from __future__ import annotations",
            "",
            "from kubeloop.api.gvk import GroupVersionKind",
        ]
        for (group, version), kinds in self.served.items():
            chosen = [k for k in kinds if PREFERRED.get(k, (group, version)) == (group, version)]
            if not chosen:
                continue
            lines += ["", f"# {group + '/' if group else 'core/'}{version}"]
            lines += [f"{kind} = GroupVersionKind({group!r}, {version!r}, {kind!r})" for kind in chosen]
        return "\n".join(lines) + "\n"

    def write(self, root: pathlib.Path = ROOT) -> list[pathlib.Path]:
        """Write every generated file under ``root``; the paths are relative to it."""
        out = root / MODELS
        out.mkdir(parents=True, exist_ok=True)
        files = {MODELS / "__init__.py": self.models_init()}
        for prefix, (module, group, version) in self.packages.items():
            files[MODELS / f"{module}.py"] = self.module(module, group, version, prefix)
        applied = pathlib.Path("src/kubeloop/api/applyconfigurations")
        files[applied / "__init__.py"] = (
            '"""Generated apply configurations of the built-in kinds, one module per group-version, beside\n'
            "``kubeloop.api.models`` (see ``kubeloop.api.applyconfiguration``).\n"
            '\nGenerated by scripts/generate_models.py; do not edit."""\n'
        )
        for prefix, (module, group, version) in self.packages.items():
            files[applied / f"{module}.py"] = self.apply_module(module, group, version, prefix)
        files[pathlib.Path("src/kubeloop/models.py")] = self.facade(
            "models",
            "Typed models of the built-in kinds",
            "    from kubeloop.models import apps_v1, core_v1\n"
            '    deployment = await manager.client.get(apps_v1.Deployment, "web", namespace="default")',
        )
        files[pathlib.Path("src/kubeloop/applyconfigurations.py")] = self.facade(
            "applyconfigurations",
            "Apply configurations of the built-in kinds (client-go's ``applyconfigurations``): every\n"
            "field optional, only the fields set are sent",
            "    from kubeloop.applyconfigurations import apps_v1, meta_v1\n"
            "    scale = apps_v1.Deployment(\n"
            '        metadata=meta_v1.ObjectMeta(name="web", namespace="default"),\n'
            "        spec=apps_v1.DeploymentSpec(replicas=5),\n"
            "    )\n"
            '    await client.apply(scale, field_manager="autoscaler")',
        )
        files[pathlib.Path("src/kubeloop/kinds.py")] = self.kinds_module()
        for relative, text in files.items():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            (root / relative).write_text(text)
        # Unused imports out, imports sorted, formatted: the output passes the project's lint as is.
        paths = [str(root / relative) for relative in files]
        ruff = [sys.executable, "-m", "ruff"]
        config = ["--config", str(ROOT / "pyproject.toml")]
        subprocess.run(
            [*ruff, "check", *config, "--fix", "--select", "I,F401,RUF022", "--quiet", *paths], check=True
        )
        subprocess.run([*ruff, "format", *config, "--quiet", *paths], check=True)
        return list(files)


def main() -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from kubeloop.apiserver.catalog import schemas

    for path in Generator(schemas.definitions(), served_kinds()).write():
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

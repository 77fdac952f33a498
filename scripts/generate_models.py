"""Generate the typed models of the built-in kinds operators use from the upstream OpenAPI schemas.

Reads the definitions kubernetes-validate ships (the release ``kubeloop.apiserver.catalog.schemas`` serves)
and writes one module per group-version under ``src/kubeloop/api/models/``: meta/v1, core/v1,
apps/v1, batch/v1, coordination/v1. Run ``python scripts/generate_models.py`` after changing
this script or the kubernetes-validate version; ``tests/api/test_models.py`` checks the output is
up to date.
"""

from __future__ import annotations

import keyword
import pathlib
import re
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "kubeloop" / "api" / "models"

#: definition prefix → (module name, group, version)
PACKAGES = {
    "io.k8s.apimachinery.pkg.apis.meta.v1.": ("meta_v1", "meta.k8s.io", "v1"),
    "io.k8s.api.core.v1.": ("core_v1", "", "v1"),
    "io.k8s.api.apps.v1.": ("apps_v1", "apps", "v1"),
    "io.k8s.api.batch.v1.": ("batch_v1", "batch", "v1"),
    "io.k8s.api.coordination.v1.": ("coordination_v1", "coordination.k8s.io", "v1"),
}

#: Definitions that are JSON scalars or free-form, as Python types (and the imports they need).
SPECIAL = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "Quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "IntOrString",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": "datetime",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": "datetime",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Duration": "str",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1": "dict[str, Any]",
    "io.k8s.apimachinery.pkg.runtime.RawExtension": "Any",
}

#: Names pydantic's BaseModel already uses; such fields get a trailing underscore.
RESERVED = {
    "copy", "dict", "json", "schema", "construct", "validate", "fields", "model_config", "model_fields",
    "parse_obj", "parse_raw", "from_orm", "update_forward_refs", "to_dict", "from_dict",
}  # fmt: skip


def snake(name: str) -> str:
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text).lower().replace("-", "_").replace("$", "")
    if keyword.iskeyword(text) or text in RESERVED:
        text += "_"
    return text


def ref_name(node: Mapping[str, Any]) -> str | None:
    ref = node.get("$ref")
    if not isinstance(ref, str):
        return None
    return ref.rsplit("/", 1)[-1]


class Generator:
    def __init__(self, definitions: Mapping[str, Any]) -> None:
        self.definitions = definitions

    def module_of(self, definition: str) -> tuple[str, str] | None:
        for prefix, (module, _, _) in PACKAGES.items():
            if definition.startswith(prefix):
                return module, definition[len(prefix) :]
        return None

    def type_of(self, node: Mapping[str, Any], here: str, imports: set[str]) -> str:
        name = ref_name(node)
        if name is not None:
            if name in SPECIAL:
                return SPECIAL[name]
            target = self.module_of(name)
            if target is None:
                return "dict[str, Any]"
            module, cls = target
            if module == here:
                return cls
            imports.add(module)
            return f"{module}.{cls}"
        if "oneOf" in node:
            options = [self.type_of(option, here, imports) for option in node["oneOf"]]
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
            return f"list[{self.type_of(node.get('items') or {}, here, imports)}]"
        if kind == "object" or kind is None:
            extra = node.get("additionalProperties")
            if isinstance(extra, Mapping):
                return f"dict[str, {self.type_of(extra, here, imports)}]"
            return "dict[str, Any]"
        raise ValueError(f"unknown schema node {node}")

    def module(self, module: str, group: str, version: str, prefix: str) -> str:
        imports: set[str] = set()
        classes: list[str] = []
        api_version = f"{group}/{version}" if group else version
        for name in sorted(d for d in self.definitions if d.startswith(prefix) and d not in SPECIAL):
            definition = self.definitions[name]
            cls = name[len(prefix) :]
            if "properties" not in definition:
                continue
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
            for json_name in sorted(properties):
                node = properties[json_name]
                attr = snake(json_name)
                if attr in seen:
                    raise ValueError(f"{name}: two fields map to {attr}")
                seen.add(attr)
                annotation = self.type_of(node, module, imports)
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
                    continue
                alias = f', alias="{json_name}"' if attr != json_name else ""
                # The strict schemas require a kind's spec; the API does not (Go: omitempty), and a
                # model built to be filled in by a mutate function starts without one.
                if json_name in required and not (base == "KubeObject" and json_name == "spec"):
                    field = f" = Field({alias[2:]})" if alias else ""
                    lines.append(f"    {attr}: {annotation}{field}")
                else:
                    field = f" = Field(default=None{alias})" if alias else " = None"
                    lines.append(f"    {attr}: {annotation} | None{field}")
            classes.append("\n".join(lines))
        header = [
            f'"""Typed models of {api_version} (generated by scripts/generate_models.py from the upstream',
            'OpenAPI schemas; do not edit)."""',
            "",
            "from __future__ import annotations",
            "",
            "from datetime import datetime",
            "from typing import Any",
            "",
            "from pydantic import Field",
            "",
            "from kubeloop.api.gvk import GroupVersionKind",
            "from kubeloop.api.model import IntOrString, KubeModel, KubeObject, Quantity",
        ]
        for other in sorted(imports - {module}):
            header.append(f"from kubeloop.api.models import {other}")
        body = "\n\n\n".join(classes)
        return "\n".join(header) + "\n\n\n" + body + "\n"

    def write(self, out: pathlib.Path = OUT) -> list[pathlib.Path]:
        out.mkdir(parents=True, exist_ok=True)
        written = []
        init = out / "__init__.py"
        init.write_text(
            '"""Generated typed models of the built-in kinds operators use, one module per group-version\n'
            '(import the module you need; nothing is imported here so that ``import kubeloop`` stays cheap)."""\n'
        )
        written.append(init)
        for prefix, (module, group, version) in PACKAGES.items():
            path = out / f"{module}.py"
            path.write_text(self.module(module, group, version, prefix))
            written.append(path)
        # Unused imports out, imports sorted, formatted: the output passes the project's lint as is.
        paths = [str(p) for p in written]
        ruff = [sys.executable, "-m", "ruff"]
        config = ["--config", str(ROOT / "pyproject.toml")]
        subprocess.run(
            [*ruff, "check", *config, "--fix", "--select", "I,F401", "--quiet", *paths], check=True
        )
        subprocess.run([*ruff, "format", *config, "--quiet", *paths], check=True)
        return written


def main() -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from kubeloop.apiserver.catalog import schemas

    for path in Generator(schemas.definitions()).write():
        print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``kubeloop init``, ``kubeloop create api`` and ``kubeloop create webhook``: a new operator
project, then its kinds and their webhooks, in the layout of a kubebuilder project (and of
``examples/agents``).

``init NAME`` writes the project: ``pyproject.toml`` (with the test kit's configuration),
``main.py`` (what ``kubeloop run .`` loads), the package (``api/``, ``controllers/``,
``webhooks/``), ``config/`` (crd, rbac, manager, samples, default: ``kubectl apply -k
config/default``), ``tests/``, a ``Dockerfile`` and a ``Makefile`` (``run``, ``test``,
``manifests``, ``deploy``). ``create api --group G --version V --kind K``, run in the project,
adds the kind's model, a controller that owns a Deployment and writes status with an Available
condition, its test and a sample. ``create webhook`` adds a defaulting and/or validating webhook
of a kind (``WebhookBuilder``) and its test. Both write the manifests again
(``manifests.write_manifests``). Imports go into the first-party block, sorted; calls go above
the ``# kubeloop:scaffold:setup`` line, as kubebuilder's markers. What is written passes ruff
(lint and format).
"""

from __future__ import annotations

import importlib.metadata
import json
import pathlib
import re
import shlex
import string
import tomllib
import urllib.parse

from kubeloop.cli.scaffoldtemplates import (
    API_INIT,
    CONTROLLER,
    CONTROLLER_TEST,
    CONTROLLERS_INIT,
    CRD_KUSTOMIZATION,
    DEFAULT_KUSTOMIZATION,
    DEFAULTER,
    DEFAULTER_TEST,
    DOCKERFILE,
    GITIGNORE,
    MAIN,
    MAKEFILE,
    MANAGER,
    MANAGER_KUSTOMIZATION,
    METRICS_AUTH_ROLE,
    METRICS_READER_ROLE,
    MODEL,
    PACKAGE_INIT,
    PYPROJECT,
    RBAC_KUSTOMIZATION,
    README,
    ROLE_BINDING,
    SAMPLE,
    SAMPLES_KUSTOMIZATION,
    SERVICE_ACCOUNT,
    TESTS_CONFTEST,
    VALIDATOR,
    VALIDATOR_TEST,
    VERSION_INIT,
    WEBHOOK,
    WEBHOOK_TEST,
    WEBHOOKS_INIT,
)
from kubeloop.cli.usage import UsageError
from kubeloop.version import __version__

SETUP_MARKER = "# kubeloop:scaffold:setup"

_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

_KIND = re.compile(r"^[A-Z][A-Za-z0-9]*$")

_VERSION = re.compile(r"^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$")


def _render(template: str, **values: str) -> str:
    return string.Template(template).substitute(values)


def package_name(name: str) -> str:
    return name.replace("-", "_")


#: The domain of a project's API groups when ``init`` is not given one (kubebuilder's is
#: ``my.domain``).
DEFAULT_DOMAIN = "example.com"

_GROUP = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def kubeloop_requirement() -> str:
    """What ``pip install`` takes to install this kubeloop: its checkout (``-e DIR`` when it is
    installed editable, as ``make demo`` installs it), else its release."""
    try:
        distribution = importlib.metadata.distribution("kubeloop")
        direct = json.loads(distribution.read_text("direct_url.json") or "{}")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return f"kubeloop=={__version__}"
    url = direct.get("url", "")
    if not url.startswith("file://"):
        return f"kubeloop=={distribution.version}"
    folder = shlex.quote(urllib.parse.unquote(url.removeprefix("file://")))
    return f"-e {folder}" if direct.get("dir_info", {}).get("editable") else folder


def init_project(name: str, parent: pathlib.Path, domain: str = DEFAULT_DOMAIN) -> pathlib.Path:
    """Write the project ``name`` into ``parent/name``, its API groups under ``domain``;
    UsageError for a bad name or domain, or a folder that is there and not empty."""
    if not _NAME.match(name) or len(name) > 40:
        raise UsageError(
            f"{name!r} is not a project name",
            "lower-case letters, digits and '-', starting with a letter, at most 40 characters",
        )
    if not _GROUP.match(domain) or "." not in domain:
        raise UsageError(f"{domain!r} is not a domain", "a domain you own, with a dot: example.com")
    root = parent / name
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"{root} exists and is not empty")
    package = package_name(name)
    values = {
        "name": name,
        "package": package,
        "kubeloop": kubeloop_requirement(),
        "domain": domain,
        "setup_marker": SETUP_MARKER,
    }
    files = {
        "pyproject.toml": PYPROJECT,
        "main.py": MAIN,
        f"{package}/__init__.py": PACKAGE_INIT,
        f"{package}/api/__init__.py": API_INIT,
        f"{package}/controllers/__init__.py": CONTROLLERS_INIT,
        f"{package}/webhooks/__init__.py": WEBHOOKS_INIT,
        "tests/conftest.py": TESTS_CONFTEST,
        "Dockerfile": DOCKERFILE,
        "Makefile": MAKEFILE,
        ".gitignore": GITIGNORE,
        "README.md": README,
        "config/crd/kustomization.yaml": CRD_KUSTOMIZATION,
        "config/rbac/kustomization.yaml": RBAC_KUSTOMIZATION,
        "config/rbac/service_account.yaml": SERVICE_ACCOUNT,
        "config/rbac/role_binding.yaml": ROLE_BINDING,
        "config/rbac/metrics_auth_role.yaml": METRICS_AUTH_ROLE,
        "config/rbac/metrics_reader_role.yaml": METRICS_READER_ROLE,
        "config/manager/kustomization.yaml": MANAGER_KUSTOMIZATION,
        "config/manager/manager.yaml": MANAGER,
        "config/samples/kustomization.yaml": SAMPLES_KUSTOMIZATION,
        "config/default/kustomization.yaml": DEFAULT_KUSTOMIZATION,
    }
    for relative, template in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_render(template, **values))
    return root


def _project(root: pathlib.Path) -> str:
    """The package of the project at ``root``; UsageError outside a project."""
    controllers = [p.parent.parent for p in root.glob("*/controllers/__init__.py")]
    if not (root / "main.py").exists() or len(controllers) != 1:
        raise UsageError(f"{root} is not a kubeloop project", "run kubeloop init NAME first, then cd NAME")
    return controllers[0].name


def _class_name(model: pathlib.Path) -> str:
    """The kind a model module of the scaffold defines (its CustomResource class)."""
    found = re.search(r"^class (\w+)\(\n?\s*kubeloop\.CustomResource", model.read_text(), re.M)
    if found is None:
        raise UsageError(f"{model} defines no CustomResource class")
    return found.group(1)


def add_import(path: pathlib.Path, line: str) -> None:
    """Add ``from <package>... import ...`` to the file's first-party imports, kept sorted (a
    block of its own after the others)."""
    package = line.split()[1].split(".")[0]
    lines = path.read_text().split("\n")
    ours = [i for i, text in enumerate(lines) if text.startswith((f"from {package} ", f"from {package}."))]
    if ours:
        block = sorted({*(lines[i] for i in ours), line})
        lines[ours[0] : ours[-1] + 1] = block
    else:
        last = max(i for i, text in enumerate(lines) if text.startswith(("import ", "from ")))
        lines[last + 1 : last + 1] = ["", line]
    path.write_text("\n".join(lines))


def _insert_before(path: pathlib.Path, marker: str, line: str) -> None:
    text = path.read_text()
    index = text.find(marker)
    if index < 0:
        raise UsageError(f"{path} lost its {marker!r} line", "put it back where new lines go")
    start = text.rfind("\n", 0, index) + 1
    indent = text[start:index]
    path.write_text(text[:start] + indent + line + "\n" + text[start:])


def project_domain(root: pathlib.Path) -> str | None:
    """The domain ``init`` recorded in the project's ``pyproject.toml`` (``[tool.kubeloop]``)."""
    try:
        config = tomllib.loads((root / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    domain = config.get("tool", {}).get("kubeloop", {}).get("domain")
    return domain if isinstance(domain, str) and domain else None


def api_group(root: pathlib.Path, group: str) -> str:
    """The API group ``--group`` names: as given when it has a dot (``web.example.com``), else
    under the project's domain (``web`` → ``web.example.com``), as kubebuilder's ``--group``."""
    domain = project_domain(root)
    full = group if "." in group or not domain else f"{group}.{domain}"
    if not _GROUP.match(full) or "." not in full:
        raise UsageError(
            f"{group!r} is not an API group",
            "a domain you own, with a dot (web.example.com), or a name under the project's "
            "domain (set domain = ... in [tool.kubeloop] of pyproject.toml)",
        )
    return full


def create_api(root: pathlib.Path, group: str, version: str, kind: str) -> list[pathlib.Path]:
    """Add the kind to the project at ``root``; the files written, in order."""
    package = _project(root)
    if not _KIND.match(kind):
        raise UsageError(f"{kind!r} is not a kind", "CamelCase, starting with an upper-case letter: Website")
    if not _VERSION.match(version):
        raise UsageError(f"{version!r} is not an API version", "v1, v1beta1, v2alpha1 ...")
    group = api_group(root, group)
    lower = kind.lower()
    values = {"package": package, "group": group, "version": version, "kind": kind, "lower": lower}
    model = root / package / "api" / version / f"{lower}.py"
    if model.exists():
        raise UsageError(f"{model} exists: {kind} is already in {group}/{version}")
    written = []
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_text(_render(MODEL, **values))
    written.append(model)
    version_init = model.parent / "__init__.py"
    kinds = sorted(
        (path.stem, _class_name(path)) for path in model.parent.glob("*.py") if path.name != "__init__.py"
    )
    imports = "\n".join(
        f"from {package}.api.{version}.{module} import {name}, {name}Spec, {name}Status"
        for module, name in kinds
    )
    names = ", ".join(f'"{n}"' for _, name in kinds for n in (name, f"{name}Spec", f"{name}Status"))
    version_init.write_text(_render(VERSION_INIT, group=group, version=version, imports=imports, names=names))
    written.append(version_init)
    controller = root / package / "controllers" / f"{lower}.py"
    controller.write_text(_render(CONTROLLER, **values))
    written.append(controller)
    controllers_init = root / package / "controllers" / "__init__.py"
    add_import(controllers_init, f"from {package}.controllers.{lower} import setup as setup_{lower}")
    _insert_before(controllers_init, SETUP_MARKER, f"setup_{lower}(manager)")
    written.append(controllers_init)
    main = root / "main.py"
    add_import(main, f"from {package}.api.{version} import {kind} as {kind}")
    written.append(main)
    test = root / "tests" / f"test_{lower}.py"
    test.write_text(_render(CONTROLLER_TEST, **values))
    written.append(test)
    sample = root / "config" / "samples" / f"{group.split('.')[0]}_{version}_{lower}.yaml"
    sample.write_text(_render(SAMPLE, **values))
    add_resource(root / "config" / "samples" / "kustomization.yaml", sample.name)
    written.append(sample)
    return written


def create_webhook(
    root: pathlib.Path, group: str, version: str, kind: str, *, defaulting: bool, validation: bool
) -> list[pathlib.Path]:
    """Add a defaulting and/or validating webhook of an existing kind; the files written."""
    package = _project(root)
    if not (defaulting or validation):
        raise UsageError("a webhook needs --defaulting, --validation or both")
    group = api_group(root, group)
    lower = kind.lower()
    model = root / package / "api" / version / f"{lower}.py"
    if not model.exists() or f'group="{group}"' not in model.read_text():
        raise UsageError(
            f"{group}/{version} {kind} is not a kind of this project",
            f"kubeloop create api --group {group} --version {version} --kind {kind} first",
        )
    webhooks_init = root / package / "webhooks" / "__init__.py"
    if not webhooks_init.exists():
        raise UsageError(f"{webhooks_init} is missing", "a project made by kubeloop init has it")
    module = root / package / "webhooks" / f"{lower}.py"
    if module.exists():
        raise UsageError(f"{module} exists: {kind} has its webhooks")
    values = {"package": package, "group": group, "version": version, "kind": kind, "lower": lower}
    classes = ""
    calls = ""
    tests = ""
    if defaulting:
        classes += _render(DEFAULTER, **values).rstrip() + "\n\n\n"
        calls += f".with_defaulter({kind}Defaulter())"
        tests += _render(DEFAULTER_TEST, **values).rstrip() + "\n\n\n"
    if validation:
        classes += _render(VALIDATOR, **values).rstrip() + "\n\n\n"
        calls += f".with_validator({kind}Validator())"
        tests += _render(VALIDATOR_TEST, **values).rstrip() + "\n\n\n"
    summary = " and ".join(
        part for part, wanted in (("defaults", defaulting), ("validation", validation)) if wanted
    )
    module.write_text(
        _render(WEBHOOK, **values, summary=summary, classes=classes.rstrip() + "\n\n", with_calls=calls)
    )
    add_import(webhooks_init, f"from {package}.webhooks.{lower} import setup as setup_{lower}")
    _insert_before(webhooks_init, SETUP_MARKER, f"setup_{lower}(manager)")
    test = root / "tests" / f"test_{lower}_webhooks.py"
    imports = "import pytest\n" if validation else ""
    test.write_text(_render(WEBHOOK_TEST, **values, imports=imports, tests=tests.rstrip()))
    return [module, webhooks_init, test]


def add_resource(kustomization: pathlib.Path, name: str) -> None:
    """List ``name`` in a kustomization's resources (kept sorted, once)."""
    lines = [line for line in kustomization.read_text().splitlines() if not line.startswith("resources:")]
    comments = [line for line in lines if line.startswith("#")]
    listed = {line[2:].strip() for line in lines if line.startswith("- ")}
    listed.add(name)
    body = ["resources:", *(f"- {item}" for item in sorted(listed))]
    kustomization.write_text("\n".join([*comments, *body]) + "\n")

"""What ``kubeloop run TARGET`` (and the test kit's ``kube_operator``) runs: the operator a
TARGET names, its ``setup(manager)`` function and the CRDs of its models.

TARGET is ``module:function`` (looked up from the current folder first, as ``python -m`` does),
a Python file (loaded as ``python FILE`` runs it: its folder goes on ``sys.path``), or a folder
holding ``main.py``; the function defaults to ``setup``. What names nothing is a
:class:`TargetError` saying what is wrong and how to put it right; a kind the setup gives that
names none (a string) is one too, at the operator's own line.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pathlib
import sys
import traceback
from collections.abc import Callable
from types import ModuleType, TracebackType
from typing import Any

from kubeloop.api.crdgen import custom_resources_in, definitions
from kubeloop.api.structuralschema import SchemaConversionError
from kubeloop.client.interface import KindError
from kubeloop.manager.manager import Manager
from kubeloop.manager.targeterror import TargetError as TargetError

Setup = Callable[[Manager], Any]
#: The file a folder TARGET is loaded from.
ENTRY_FILE = "main.py"


def load_target(target: str) -> tuple[ModuleType, str]:
    """The module TARGET names and the attribute after its colon (default ``setup``). A file is
    loaded as ``python FILE`` runs it: its folder is on ``sys.path``, so it imports its siblings.
    A module is looked up from the current folder first, as ``python -m`` does. What names
    nothing is a :class:`TargetError`."""
    path = pathlib.Path(target)
    if path.is_dir():
        if not (path / ENTRY_FILE).exists():
            raise TargetError(
                f"{target} has no {ENTRY_FILE}", "give the file, or module:function from the folder above it"
            )
        path = path / ENTRY_FILE
    if path.suffix == ".py":
        if not path.exists():
            raise TargetError(f"{target}: no such file")
        spec = importlib.util.spec_from_file_location(f"kubeloop_operator_{path.parent.name}", path)
        if spec is None or spec.loader is None:
            raise TargetError(f"cannot load {path}")
        folder = str(path.parent.resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module, "setup"
    module_name, _, attribute = target.partition(":")
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise TargetError(
            f"{target!r} is not a module:function, a Python file or a folder",
            "e.g. kubeloop run operator_pkg.main:setup, kubeloop run ./main.py, kubeloop run .",
        )
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(module_name), attribute or "setup"
    except ModuleNotFoundError as error:
        missing = error.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            raise TargetError(
                f"no module named {missing!r} in {here} or on the Python path",
                "run from the folder that holds it, or give its file, e.g. ./main.py",
            ) from None
        raise


def load_setup(target: str) -> Setup:
    """The ``setup(manager)`` callable TARGET names."""
    return setup_of(target, *load_target(target))


def setup_of(target: str, module: ModuleType, attribute: str) -> Setup:
    """The setup function ``attribute`` of ``module`` (a TargetError, naming ``target``, when it is
    missing or not a function)."""
    setup = getattr(module, attribute, None)
    if setup is None:
        where = getattr(module, "__file__", None) or target
        raise TargetError(
            f"{where} has no {attribute}(manager) function",
            "define it to add the operator's controllers, or name yours: module:function",
        )
    if not callable(setup):
        raise TargetError(f"{target}: {attribute} is not a function but {type(setup).__name__} {setup!r:.40}")
    return setup  # type: ignore[no-any-return]


def run_setup(setup: Setup, manager: Manager) -> None:
    """``setup(manager)``; a kind that names nothing is a :class:`TargetError` at the line of
    the operator's that gave it."""
    try:
        setup(manager)
    except KindError as error:
        raise TargetError(f"{_operator_line(error.__traceback__)}{error}") from None


def _operator_line(trace: TracebackType | None) -> str:
    """``file:line: `` of the innermost frame outside kubeloop (the operator's own code)."""
    package = str(pathlib.Path(__file__).resolve().parent.parent)
    found = ""
    for frame, line in traceback.walk_tb(trace):
        filename = frame.f_code.co_filename
        if not str(pathlib.Path(filename).resolve()).startswith(package):
            found = f"{filename}:{line}: "
    return found


def module_crds(module: ModuleType | None, manager: Manager | None = None) -> list[dict[str, Any]]:
    """The CRDs of the custom resource models ``module`` defines or imports and, given the
    ``manager`` its setup ran on, of those the setup uses (``manager.custom_resources``: watched,
    owned or admitted, wherever they are defined); a model that has no structural schema is a
    :class:`TargetError`."""
    models = custom_resources_in(vars(module).values()) if module is not None else []
    if manager is not None:
        # By kind and version: a module loaded twice (a file a test loads again) has two classes.
        known = {model.__gvk__ for model in models}
        for model in manager.custom_resources:
            if model.__gvk__ not in known:
                models.append(model)
                known.add(model.__gvk__)
    try:
        return definitions(*models)
    except SchemaConversionError as error:
        raise TargetError(str(error)) from None

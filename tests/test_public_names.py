"""The facade's public names come from one list: ``kubeloop._EXPORTS``. ``__all__`` and the
imports type checkers read (under ``TYPE_CHECKING``) must name the same things, and each name
must load as what those imports say (a name missing from them is ``Any`` to a type checker)."""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

import kubeloop

SOURCE = pathlib.Path(kubeloop.__file__)


def type_checking_imports(source: pathlib.Path = SOURCE) -> dict[str, tuple[str, str | None]]:
    """Name → (module, attribute) of the ``if TYPE_CHECKING:`` block's imports."""
    names: dict[str, tuple[str, str | None]] = {}
    for node in ast.parse(source.read_text()).body:
        if not (
            isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        ):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module and statement.module != "typing":
                for alias in statement.names:
                    names[alias.asname or alias.name] = (statement.module, alias.name)
            elif isinstance(statement, ast.Import):
                for alias in statement.names:
                    names[alias.asname or alias.name] = (alias.name, None)
    return names


def test_all_the_exports_and_the_type_checking_imports_name_the_same_things() -> None:
    exports = kubeloop._EXPORTS
    assert set(kubeloop.__all__) == set(exports) | {"__version__"}
    imported = type_checking_imports()
    assert set(imported) == set(exports), (set(exports) - set(imported), set(imported) - set(exports))
    for name, (module, attribute) in imported.items():
        if attribute is None:
            expected = importlib.import_module(module)
        else:
            owner = importlib.import_module(module)
            expected = getattr(owner, attribute, None)
            if expected is None:  # ``from package import submodule``
                expected = importlib.import_module(f"{module}.{attribute}")
        assert getattr(kubeloop, name) is expected, name


@pytest.mark.parametrize("package", ["kubeloop.webhook", "kubeloop.testing"])
def test_a_lazy_packages_exports_all_and_type_checking_imports_name_the_same_things(package: str) -> None:
    """The packages that export lazily (``kubeloop.lazyexports``) hold to the facade's rule."""
    module = importlib.import_module(package)
    exports: dict[str, str] = module._EXPORTS
    assert set(module.__all__) == set(exports) and dir(module) == sorted(exports)
    imported = type_checking_imports(pathlib.Path(str(module.__file__)))
    assert imported == {name: (where, name) for name, where in exports.items()}
    for name, where in exports.items():
        assert getattr(module, name) is getattr(importlib.import_module(where), name), name
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'missing'"):
        module.missing  # noqa: B018


def undocumented(package: str) -> list[str]:
    """Public classes, functions and methods of ``package`` without a docstring."""
    missing: list[str] = []

    def visit(file: str, nodes: list[ast.stmt], prefix: str) -> None:
        for node in nodes:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            if node.name.startswith("_"):
                continue
            if any(ast.unparse(decorator) in ("overload", "typing.overload") for decorator in node.decorator_list):
                continue  # a typed overload: its implementation says what it does
            if ast.get_docstring(node) is None:
                missing.append(f"{file}:{node.lineno} {prefix}{node.name}")
            if isinstance(node, ast.ClassDef):
                visit(file, node.body, f"{prefix}{node.name}.")

    for path in sorted((SOURCE.parent / package).glob("*.py")):
        visit(path.name, ast.parse(path.read_text()).body, "")
    return missing


@pytest.mark.parametrize("package", ["workqueue", "cache", "controller", "client", "manager"])
def test_every_public_definition_of_the_packages_operator_authors_read_says_what_it_is(package: str) -> None:
    # The packages operator authors read most (issue 50); an overload's implementation speaks for it.
    assert undocumented(package) == []

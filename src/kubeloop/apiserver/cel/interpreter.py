"""The CEL interpreter (the ``common-expression-language`` package), loaded without its command line.

The package's ``__init__`` imports its REPL (``cel.cli``: typer and prompt_toolkit), which a server
never runs: 0.25 s of CPU and 18 MiB of memory at the first rule a server compiles. What a server
uses is the Rust extension ``cel.cel`` (compile, evaluate, ``Context``, ``OptionalValue``) and the
pure-Python ``cel.stdlib`` (cel-go's extension libraries). They are loaded here as submodules of a
``cel`` package whose ``__init__`` does not run, its names those the extension exports, as the
package's own ``__init__`` gives them. A process that has imported ``cel`` itself keeps it as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from collections.abc import Mapping
from functools import lru_cache
from types import ModuleType
from typing import Any


@lru_cache(maxsize=1)
def cel_interpreter() -> Any:
    """The interpreter's module, loaded on first use (servers without rules never load it).

    It logs a warning for every exception a library function raises (a malformed quantity, an
    absent optional field of the wrong type): the rule's cause reports it already, and a client
    could fill the server's log with them at will, so its logger is kept to errors."""
    package = sys.modules.get("cel") or _package_without_its_init()
    logging.getLogger("cel").setLevel(logging.ERROR)
    return package


def cel_standard_library() -> Mapping[str, Mapping[str, Any]]:
    """cel-go's extension libraries (strings, math, lists, sets, encoders) by library name."""
    cel_interpreter()
    from cel.stdlib import EXTENSIONS

    libraries: Mapping[str, Mapping[str, Any]] = EXTENSIONS
    return libraries


def _package_without_its_init() -> ModuleType:
    spec = importlib.util.find_spec("cel")  # a top-level name: found, not imported
    if spec is None or spec.submodule_search_locations is None:
        raise ModuleNotFoundError("the CEL interpreter (common-expression-language) is not installed", name="cel")
    package = importlib.util.module_from_spec(spec)  # a package (its __path__ set), __init__ not run
    sys.modules["cel"] = package
    try:
        extension = importlib.import_module("cel.cel")
    except BaseException:
        del sys.modules["cel"]
        raise
    exported = getattr(extension, "__all__", None) or [name for name in dir(extension) if not name.startswith("_")]
    for name in exported:
        setattr(package, name, getattr(extension, name))
    return package

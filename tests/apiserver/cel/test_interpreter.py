"""The CEL interpreter loads without the package's command line (typer, prompt_toolkit), and a
process that imported ``cel`` itself keeps that package. Each in a new interpreter: what is
loaded is the process's."""

from __future__ import annotations

import subprocess
import sys

RULE_AND_LIBRARY = """
import sys
from kubeloop.apiserver.cel.library import library_functions
from kubeloop.apiserver.cel.rules import compile_expression
from kubeloop.apiserver.cel.interpreter import cel_interpreter
expression = compile_expression("self.name.lowerAscii() == 'web' && [3, 1].sort() == [1, 3]")
assert "lowerAscii" in library_functions() and "sort" in library_functions()
context = cel_interpreter().Context()
context.add_variable("self", {"name": "WEB"})
for name, function in library_functions().items():
    context.add_function(name, function)
assert cel_interpreter().compile(expression.source).execute(context) is True
"""


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_rules_compile_and_run_without_the_packages_command_line() -> None:
    loaded = run(RULE_AND_LIBRARY + "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cel', 'typer', 'prompt_toolkit')))")
    assert loaded.strip() == "['cel', 'cel.cel', 'cel.stdlib']"


def test_a_process_that_imported_cel_keeps_its_package() -> None:
    assert run("import cel\n" + RULE_AND_LIBRARY + "print(sys.modules['cel'] is cel, 'cel.cli' in sys.modules)").strip() == "True True"

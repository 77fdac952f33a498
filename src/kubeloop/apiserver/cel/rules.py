"""CEL validation rules of custom resource schemas (``x-kubernetes-validations``).

Rules are compiled when the CRD is written (a rule that does not parse makes the CRD invalid,
as upstream) with the ``common-expression-language`` interpreter (compiled Rust),
and evaluated on every write of a custom resource against the node's value as ``self``:

- a rule that reads ``oldSelf`` is a *transition rule*: it runs on updates only, where the
  value has a correlated old one (object properties, map values, items of ``map`` lists);
  with ``optionalOldSelf`` it also runs without one, ``oldSelf`` then being an empty optional;
- a failed rule gives one cause at its field (or ``fieldPath``) with its ``message``, its
  ``messageExpression``'s result, or ``failed rule: <rule>``, and its ``reason``;
- evaluation errors (no such key, no such overload, division by zero) are causes as upstream
  words them.

Kubernetes adds libraries to CEL; besides the interpreter's strings, lists, sets and math
extensions, these are here: ``isSorted``, list ``indexOf``/``lastIndexOf``, regex ``find`` /
``findAll`` (RE2, linear in time as upstream's), ``url`` with its getters and ``isURL``,
``quantity`` with its comparisons and arithmetic and ``isQuantity``. A rule is evaluated with
its own variables and only the library functions it calls, so nothing of one rule's or object's
evaluation is seen by the next. Upstream's cost limits are approximated: a rule's cost is the
size of the values it reads, raised to the depth of its nested comprehensions; one call may
cost 1,000,000 and all the rules of one write 10,000,000, as upstream's per-call limit and
runtime budget. Root rules see the object's ``metadata.name`` and ``generateName`` only; a rule
selecting another metadata field does not compile, as upstream's type check refuses it. Rules
that do not read oldSelf are ratcheted with the rest of validation (an error at a value an
update leaves unchanged is dropped: ``CustomResourceStrategy.ratchet``). When the CRD is
written its rules are type-checked against the schema (``celtypes``): an undefined field,
operands no overload takes, or a result that is not a bool refuse it, as upstream's checker
does (a stored CRD is served as it was accepted). The interpreter does not parse CEL's optional
syntax (``a.?b``, ``m[?k]``); ``celsyntax`` rewrites it into library calls before compiling.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeloop.api.naming import go_quote
from kubeloop.apiserver.cel import syntax as celsyntax
from kubeloop.apiserver.cel import typecheck as celtypes
from kubeloop.apiserver.cel.interpreter import cel_interpreter

#: Upstream's per-call cost limit and per-object runtime budget (celconfig).
from kubeloop.apiserver.cel.library import library_functions
from kubeloop.errors import StatusCause

#: Upstream's per-call cost limit and per-object runtime budget (celconfig).
PER_CALL_LIMIT = 1_000_000

RUNTIME_BUDGET = 10_000_000

REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired")

_COMPREHENSION = re.compile(r"\.\s*(all|exists|exists_one|map|filter)\s*\(")

#: How the interpreter reports an exception raised by a library function.
_LIBRARY_FAILURE = re.compile(r"Python function call failed: \w+: (.*?)(?:\. Check function arguments|$)")

#: What a root rule may read of the object's metadata (upstream's CEL type of the root's
#: ObjectMeta has these two fields only).
ROOT_METADATA_FIELDS = ("name", "generateName")

_METADATA_SELECT = re.compile(r"\b(?:self|oldSelf)\s*\.\??\s*metadata\s*(\.)\??\s*([A-Za-z_]\w*)\b(?!\s*\()")


_SELF = re.compile(r"\bself\b")
#: A field selected of ``self`` (``self.spec``), not a method called on it (``self.size()``).
_SELECTED_FIELD = re.compile(r"\s*\.\s*([A-Za-z_]\w*)\b(?!\s*\()")


def _self_fields(*sources: str) -> frozenset[str] | None:
    """The fields of ``self`` that ``sources`` (a rule, its messageExpression) select, when every
    mention of ``self`` selects one: the interpreter turns the whole value it is given into its
    own, so a root rule that reads ``self.metadata.name`` of an object with a large spec cost
    ~120 µs against ~20 given only the metadata. None when any mention is something else
    (``self`` alone or as an argument, ``self[...]``, ``self.?x``, a method on it such as
    ``self.size()``, a macro's variable named self): the rule gets the whole value. A mention
    in a string literal only widens the set or gives None."""
    fields: set[str] = set()
    for source in sources:
        for mention in _SELF.finditer(source):
            selected = _SELECTED_FIELD.match(source, mention.end())
            if selected is None:
                return None
            fields.add(selected.group(1))
    return frozenset(fields)


def _hidden_metadata_field(rule: str) -> str | None:
    """``<input>:line:column: undefined field 'x'`` for the first metadata field other than
    name and generateName that a root rule selects, as upstream's type check reports it."""
    for match in _METADATA_SELECT.finditer(celsyntax.without_strings(rule)):
        field_name = match.group(2)
        if field_name in ROOT_METADATA_FIELDS:
            continue
        offset = match.start(1)
        line = rule.count("\n", 0, offset) + 1
        column = offset - (rule.rfind("\n", 0, offset) + 1) + 1
        return f"<input>:{line}:{column}: undefined field '{field_name}'"
    return None


class RuleOverBudget(Exception):
    """No further rules run for this object: the budget is spent."""


@dataclass(frozen=True)
class CompiledRule:
    rule: str
    program: Any
    message: str
    message_program: Any | None
    reason: str
    field_path: str
    uses_old_self: bool
    optional_old_self: bool
    #: The nesting depth of comprehensions (all, exists, map, ...): the cost's exponent.
    depth: int
    #: The library functions the rule and its messageExpression call (bound per evaluation).
    functions: tuple[str, ...] = ()
    #: The fields of ``self`` the rule and its messageExpression select, when that is all they
    #: read of it (:func:`_self_fields`); None: the whole value.
    self_fields: frozenset[str] | None = None

    def error_text(self) -> str:
        """upstream's ruleErrorString: the message, else the rule."""
        return self.message or self.rule.strip()

    def default_detail(self) -> str:
        return self.message or f"failed rule: {self.rule.strip()}"


def compile_rules(
    schema: Mapping[str, Any],
    path: str,
    causes: list[StatusCause],
    *,
    properties: Mapping[str, Any],
    correlatable: bool,
    root: bool = False,
    check_types: bool = True,
) -> tuple[CompiledRule, ...]:
    """The node's rules, compiled; every problem a cause at ``<path>.x-kubernetes-validations[i]``.
    ``root``: the object's own rules, which see only the name and generateName of its metadata;
    ``check_types``: type-check the rules against ``schema`` (``celtypes``), as a CRD's write does."""
    entries = schema.get("x-kubernetes-validations")
    if entries is None:
        return ()
    base = f"{path}.x-kubernetes-validations"
    if not isinstance(entries, list):
        causes.append(StatusCause("FieldValueInvalid", "Invalid value: must be a list of rules", base))
        return ()
    cel = cel_interpreter()
    compiled: list[CompiledRule] = []
    for index, entry in enumerate(entries):
        where = f"{base}[{index}]"
        if not isinstance(entry, Mapping):
            causes.append(StatusCause("FieldValueInvalid", "Invalid value: must be an object", where))
            continue
        rule = entry.get("rule")
        if not isinstance(rule, str) or not rule.strip():
            causes.append(
                StatusCause("FieldValueRequired", "Required value: rule is not specified", f"{where}.rule")
            )
            continue
        message = entry.get("message") or ""
        message_expression = entry.get("messageExpression") or ""
        reason = entry.get("reason") or "FieldValueInvalid"
        field_path = entry.get("fieldPath") or ""
        optional_old_self = bool(entry.get("optionalOldSelf"))
        problems = len(causes)
        try:
            program = _compile(cel, rule)
        except ValueError as error:
            causes.append(
                StatusCause(
                    "FieldValueInvalid",
                    f"Invalid value: {go_quote(rule)}: compilation failed: {_first_line(error)}",
                    f"{where}.rule",
                )
            )
            continue
        hidden = _hidden_metadata_field(rule) if root else None
        if hidden is not None:
            causes.append(
                StatusCause(
                    "FieldValueInvalid",
                    f"Invalid value: {go_quote(rule)}: compilation failed: ERROR: {hidden}",
                    f"{where}.rule",
                )
            )
            continue
        verdict = (
            celtypes.check_rule(rule, schema, root=root, optional_old_self=optional_old_self)
            if check_types
            else None
        )
        if verdict is not None:
            kind, text = verdict
            detail = f"compilation failed: {text}" if kind == "compile" else text
            causes.append(
                StatusCause(
                    "FieldValueInvalid", f"Invalid value: {go_quote(rule)}: {detail}", f"{where}.rule"
                )
            )
            continue
        message_program = None
        if message_expression:
            try:
                message_program = _compile(cel, message_expression)
            except ValueError as error:
                causes.append(
                    StatusCause(
                        "FieldValueInvalid",
                        f"Invalid value: {go_quote(message_expression)}: messageExpression compilation failed: "
                        f"{_first_line(error)}",
                        f"{where}.messageExpression",
                    )
                )
            message_verdict = (
                celtypes.check_message_expression(
                    message_expression, schema, root=root, optional_old_self=optional_old_self
                )
                if check_types
                else None
            )
            if message_program is not None and message_verdict is not None:
                kind, text = message_verdict
                detail = f"messageExpression compilation failed: {text}" if kind == "compile" else text
                causes.append(
                    StatusCause(
                        "FieldValueInvalid",
                        f"Invalid value: {go_quote(message_expression)}: {detail}",
                        f"{where}.messageExpression",
                    )
                )
                message_program = None
        if "\n" in message.strip():
            causes.append(
                StatusCause(
                    "FieldValueInvalid",
                    f"Invalid value: {go_quote(message)}: message must not contain line breaks",
                    f"{where}.message",
                )
            )
        elif not message and not message_expression and "\n" in rule.strip():
            causes.append(
                StatusCause(
                    "FieldValueRequired",
                    "Required value: message must be specified if rule contains line breaks",
                    f"{where}.message",
                )
            )
        if reason not in REASONS:
            supported = ", ".join(go_quote(r) for r in REASONS)
            causes.append(
                StatusCause(
                    "FieldValueNotSupported",
                    f"Unsupported value: {go_quote(str(reason))}: supported values: {supported}",
                    f"{where}.reason",
                )
            )
        if field_path and not _valid_field_path(field_path, properties):
            causes.append(
                StatusCause(
                    "FieldValueInvalid",
                    f"Invalid value: {go_quote(field_path)}: fieldPath must be a valid path",
                    f"{where}.fieldPath",
                )
            )
        uses_old_self = "oldSelf" in program.references()["variables"]
        if (
            message_program is not None
            and "oldSelf" in message_program.references()["variables"]
            and not uses_old_self
        ):
            causes.append(
                StatusCause(
                    "FieldValueInvalid",
                    f"Invalid value: {go_quote(message_expression)}: messageExpression may only reference "
                    "oldSelf if the rule does",
                    f"{where}.messageExpression",
                )
            )
        if uses_old_self and not correlatable:
            causes.append(
                StatusCause(
                    "FieldValueForbidden",
                    "Forbidden: oldSelf cannot be used on the uncorrelatable portion of the schema within "
                    f"{path}",
                    f"{where}.rule",
                )
            )
        if optional_old_self and not uses_old_self:
            causes.append(
                StatusCause(
                    "FieldValueInvalid",
                    "Invalid value: true: may not be set if rule does not use oldSelf",
                    f"{where}.optionalOldSelf",
                )
            )
        if len(causes) > problems:
            continue
        compiled.append(
            CompiledRule(
                rule=rule,
                program=program,
                message=message.strip(),
                message_program=message_program,
                reason=reason,
                field_path=field_path,
                uses_old_self=uses_old_self,
                optional_old_self=optional_old_self,
                depth=_comprehension_depth(rule),
                functions=_library_calls(program, message_program),
                self_fields=_self_fields(rule, message_expression),
            )
        )
    return tuple(compiled)


@dataclass(frozen=True)
class Expression:
    """A CEL expression compiled on its own (a webhook's matchCondition, an admission policy's
    validation), with the library functions it calls and the names of ``extra`` ones."""

    source: str
    program: Any
    functions: tuple[str, ...]
    #: Functions outside the library the expression calls (an admission policy's authorizer).
    extra: tuple[str, ...] = ()
    #: The nesting depth of its comprehensions: the exponent of its cost.
    depth: int = 0
    #: The variables it reads (``object``, ``params``...): what its cost is the size of.
    reads: tuple[str, ...] = ()


def compile_expression(source: str, extra: Iterable[str] = ()) -> Expression:
    """``source`` compiled with Kubernetes' CEL library (and the functions named ``extra``, given
    at evaluation); ValueError with the parser's words when it does not compile."""
    cel = cel_interpreter()
    try:
        program = _compile(cel, source)
    except Exception as error:  # the interpreter's errors are plain Python ones
        raise ValueError(_first_line(error)) from None
    references = program.references()
    called = set(references["functions"])
    return Expression(
        source,
        program,
        _library_calls(program),
        tuple(sorted(set(extra) & called)),
        depth=_comprehension_depth(source),
        reads=tuple(references["variables"]),
    )


class CostLimitExceeded(Exception):
    """One evaluation would cost more than :data:`PER_CALL_LIMIT` (cel-go's words)."""

    def __str__(self) -> str:
        return "operation cancelled: actual cost limit exceeded"


class BudgetExhausted(Exception):
    """The evaluations sharing a :class:`Budget` have spent it (upstream's words)."""

    def __str__(self) -> str:
        return "validation failed due to running out of cost budget, no further validation rules will be run"


def expression_cost(expression: Expression, variables: Mapping[str, Any]) -> int:
    """The approximated cost of evaluating ``expression`` (as for schema rules): 1 without
    comprehensions, else the size of the variables it reads raised to their nesting depth."""
    if not expression.depth:
        return 1
    size = sum(size_of(variables[name]) for name in expression.reads if name in variables)
    return int(max(size, 1) ** expression.depth)


def evaluate_expression(
    expression: Expression,
    variables: dict[str, Any],
    extra: Mapping[str, Callable[..., Any]] | None = None,
    *,
    budget: Budget | None = None,
) -> Any:
    """The value of a compiled expression with ``variables`` (and the ``extra`` functions it was
    compiled to call); the interpreter's error when it fails. With ``budget``, its cost is
    charged first: :class:`CostLimitExceeded` past the per-call limit, :class:`BudgetExhausted`
    past what is left."""
    if budget is not None:
        cost = expression_cost(expression, variables)
        if cost > PER_CALL_LIMIT:
            raise CostLimitExceeded
        if cost > budget.remaining:
            budget.remaining = -1
            raise BudgetExhausted
        budget.remaining -= cost
    if not expression.extra:
        return expression.program.execute(_activation(expression.functions, variables))
    functions = extra or {}
    context = _activation(expression.functions, variables, force=True)
    for name in expression.extra:
        if name in functions:
            context.add_function(name, functions[name])
    return expression.program.execute(context)


def _compile(cel: Any, source: str) -> Any:
    """``source`` compiled, its optional syntax (``a.?b``, ``m[?k]``) rewritten first
    (``celsyntax``); ValueError with the interpreter's message when it does not compile."""
    try:
        rewritten = celsyntax.rewrite(source)
    except (celsyntax.CELSyntaxError, RecursionError):
        rewritten = source  # the interpreter says what is wrong with it
    return cel.compile(rewritten)


def _library_calls(*programs: Any) -> tuple[str, ...]:
    library = library_functions()
    called = {
        name for program in programs if program is not None for name in program.references()["functions"]
    }
    # A namespaced function (sets.contains) is reported as the function "contains" of "sets".
    return tuple(sorted(name for name in library if name.rpartition(".")[2] in called))


def _first_line(error: Exception) -> str:
    """The parser's ``ERROR: <input>:1:9: Syntax error: ...`` line, as cel-go words it."""
    text = str(error)
    start = text.find("ERROR:")
    return (text[start:] if start >= 0 else text).splitlines()[0] if text else type(error).__name__


def _valid_field_path(field_path: str, properties: Mapping[str, Any]) -> bool:
    """fieldPath: ``.a.b`` or ``['a']`` steps through properties (and map keys)."""
    steps = re.findall(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\['((?:[^'\\]|\\.)*)'\]", field_path)
    rebuilt = "".join(f".{a}" if a else f"['{b}']" for a, b in steps)
    if not steps or rebuilt != field_path:
        return False
    schema: Mapping[str, Any] = {"properties": properties}
    for name, quoted in steps:
        key = name or quoted
        props = schema.get("properties")
        if isinstance(props, Mapping) and props:
            found = props.get(key)
            if not isinstance(found, Mapping):
                return False
            schema = found
        elif isinstance(schema.get("additionalProperties"), Mapping):
            schema = schema["additionalProperties"]
        else:
            return False
    return True


def _comprehension_depth(rule: str) -> int:
    """How deeply comprehension macros nest in ``rule`` (0 without any), by bracket depth."""
    starts = [m.end() - 1 for m in _COMPREHENSION.finditer(rule)]
    if not starts:
        return 0
    depth_at: list[int] = []
    level = 0
    for char in rule:
        level += char == "("
        level -= char == ")"
        depth_at.append(level)
    deepest = 0
    for start in starts:
        inside = sum(1 for other in starts if other < start and _encloses(depth_at, other, start))
        deepest = max(deepest, inside + 1)
    return deepest


def _encloses(depth_at: list[int], outer: int, inner: int) -> bool:
    opened = depth_at[outer]
    return all(depth_at[i] >= opened for i in range(outer, inner + 1))


def size_of(value: Any) -> int:
    """The number of JSON nodes (and string lengths / 100) in ``value``: what a rule reads."""
    if isinstance(value, dict):
        return 1 + sum(size_of(item) for item in value.values())
    if isinstance(value, list):
        return 1 + sum(size_of(item) for item in value)
    if isinstance(value, str):
        return 1 + len(value) // 100
    return 1


class Budget:
    """What is left of one object's runtime budget."""

    def __init__(self, remaining: int = RUNTIME_BUDGET) -> None:
        self.remaining = remaining


def evaluate(
    rules: tuple[CompiledRule, ...],
    value: Any,
    old: Any,
    *,
    has_old: bool,
    transition_only: bool,
    node_type: str,
    path: str,
    budget: Budget,
    causes: list[StatusCause],
    ratcheted: list[StatusCause] | None = None,
) -> None:
    """Add to ``causes`` what ``value`` (at ``path``) gets from ``rules``. ``transition_only``: run
    only the rules that read oldSelf (the others ran when the new object alone was validated).
    ``ratcheted``: where a rule that does not read oldSelf evaluates to false there instead (an
    update left the value unchanged: upstream reports it as a warning); errors evaluating it
    and the cost limits stay causes. Raises :class:`RuleOverBudget`, its cause added, when the
    cost limits stop evaluation."""
    sizes: dict[bool, int] = {}  # the size read, without and with oldSelf
    for compiled in rules:
        if compiled.uses_old_self != transition_only:
            continue
        if compiled.uses_old_self and not has_old and not compiled.optional_old_self:
            continue
        activation: dict[str, Any] = {"self": value}
        if compiled.uses_old_self:
            optional = cel_interpreter().OptionalValue
            if compiled.optional_old_self:
                activation["oldSelf"] = optional.of(old) if has_old else optional.none()
            else:
                activation["oldSelf"] = old
        if compiled.depth:
            reads_old = compiled.uses_old_self and has_old
            if reads_old not in sizes:
                sizes[reads_old] = size_of(value) + (size_of(old) if reads_old else 0)
            cost = sizes[reads_old] ** compiled.depth
        else:
            cost = 1
        if cost > PER_CALL_LIMIT:
            causes.append(
                _invalid(
                    path,
                    node_type,
                    "'operation cancelled: actual cost limit exceeded': no further validation rules will be run "
                    f"due to call cost exceeds limit for rule: {compiled.error_text()}",
                )
            )
            raise RuleOverBudget
        if cost > budget.remaining:
            causes.append(
                _invalid(
                    path,
                    node_type,
                    "validation failed due to running out of cost budget, no further validation rules will be run",
                )
            )
            raise RuleOverBudget
        budget.remaining -= cost
        fields = compiled.self_fields
        if fields is not None and type(value) is dict and len(value) > len(fields):
            activation["self"] = {key: value[key] for key in fields if key in value}
        context = _activation(compiled.functions, activation)
        try:
            result = compiled.program.execute(context)
        except Exception as error:  # the interpreter's errors are plain Python ones
            causes.append(_invalid(path, node_type, _evaluation_error(error, compiled)))
            continue
        if result is True:
            continue
        if compiled.field_path:
            target = path + _normalized(compiled.field_path) if path else _normalized(compiled.field_path)[1:]
        else:
            target = path
        detail = _message(compiled, context) or compiled.default_detail()
        failed = _for_reason(compiled.reason, target, node_type, detail)
        (ratcheted if ratcheted is not None and not compiled.uses_old_self else causes).append(failed)


def _activation(functions: tuple[str, ...], variables: dict[str, Any], *, force: bool = False) -> Any:
    """What one expression is evaluated with: its variables only (nothing left from an earlier
    rule or object) and, when it calls any (or ``force``), the library ``functions`` it calls."""
    if not functions and not force:
        return variables
    context = cel_interpreter().Context()
    library = library_functions()
    for name in functions:
        context.add_function(name, library[name])
    for name, value in variables.items():
        context.add_variable(name, value)
    return context


def _message(compiled: CompiledRule, context: Any) -> str | None:
    if compiled.message_program is None:
        return None
    try:
        text = compiled.message_program.execute(context)
    except Exception:
        return None  # upstream logs it and falls back to the message
    if not isinstance(text, str):
        return None
    text = text.strip()
    if not text or "\n" in text or len(text) > 5000:
        return None
    return text


def _evaluation_error(error: Exception, compiled: CompiledRule) -> str:
    library_failure = _LIBRARY_FAILURE.search(str(error))
    if library_failure is not None and library_failure.group(1) != "no such overload":
        return f"{library_failure.group(1)} evaluating rule: {compiled.error_text()}"
    if isinstance(error, KeyError):
        return f"no such key: {error.args[0] if error.args else ''} evaluating rule: {compiled.error_text()}"
    text = str(error)
    if (
        library_failure is not None
        or isinstance(error, TypeError)
        or text.lower().startswith("no such overload")
    ):
        return (
            "'no such overload': call arguments did not match a supported operator, function or macro "
            f"signature for rule: {compiled.error_text()}"
        )
    if isinstance(error, ZeroDivisionError):
        text = "division by zero"
    elif isinstance(error, OverflowError):
        text = "integer overflow"
    return (
        f"{text.splitlines()[0] if text else type(error).__name__} evaluating rule: {compiled.error_text()}"
    )


def _normalized(field_path: str) -> str:
    return re.sub(r"\['((?:[^'\\]|\\.)*)'\]", lambda m: f"[{m.group(1)}]", field_path)


def _invalid(path: str, node_type: str, detail: str) -> StatusCause:
    return StatusCause(
        "FieldValueInvalid", f"Invalid value: {go_quote(node_type)}: {detail}", path or "<root>"
    )


def _for_reason(reason: str, path: str, node_type: str, detail: str) -> StatusCause:
    """upstream's fieldErrorForReason."""
    if reason == "FieldValueForbidden":
        return StatusCause(reason, f"Forbidden: {detail}", path or "<root>")
    if reason == "FieldValueRequired":
        return StatusCause(reason, f"Required value: {detail}", path or "<root>")
    if reason == "FieldValueDuplicate":
        return StatusCause(reason, f"Duplicate value: {go_quote(node_type)}", path or "<root>")
    return _invalid(path, node_type, detail)

"""One Status error hierarchy for server and client: what the server raises comes back, through
its Status, as the same class with the same details; the public import paths work."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from kubeloop import errors
from kubeloop.errors import StatusCause

REASON_CLASSES = [
    errors.BadRequest,
    errors.Unauthorized,
    errors.Forbidden,
    errors.NotFound,
    errors.MethodNotAllowed,
    errors.NotAcceptable,
    errors.AlreadyExists,
    errors.Conflict,
    errors.ResourceExpired,
    errors.RequestEntityTooLarge,
    errors.UnsupportedMediaType,
    errors.Invalid,
    errors.TooManyRequests,
    errors.InternalError,
    errors.ServiceUnavailable,
    errors.Timeout,
    errors.ServerTimeout,
]

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
causes = st.lists(st.builds(StatusCause, text.filter(bool), text, text), max_size=3)


@given(
    cls=st.sampled_from(REASON_CLASSES),
    message=text.filter(lambda m: m.strip() != ""),
    name=text,
    group=text,
    kind=text,
    found_causes=causes,
    retry=st.none() | st.integers(0, 3600),
)
def test_a_raised_error_survives_the_wire(
    cls: type[errors.APIError],
    message: str,
    name: str,
    group: str,
    kind: str,
    found_causes: list[StatusCause],
    retry: int | None,
) -> None:
    raised = cls(message, name=name, group=group, kind=kind, causes=found_causes, retry_after_seconds=retry)
    wire: Any = orjson.loads(orjson.dumps(raised.to_status()))
    received = errors.error_from_status(raised.code, wire)

    assert type(received) is cls
    assert (received.code, received.reason, received.message) == (raised.code, raised.reason, message)
    assert (received.name, received.group, received.kind) == (name, group, kind)
    assert received.causes == found_causes
    assert received.retry_after_seconds == retry
    assert received.to_status() == raised.to_status()


def test_the_upstream_constructors_carry_upstream_messages_and_details() -> None:
    missing = errors.not_found("apps", "deployments", "web")
    assert missing.to_status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'deployments.apps "web" not found',
        "reason": "NotFound",
        "details": {"name": "web", "group": "apps", "kind": "deployments"},
        "code": 404,
    }
    stale = errors.conflict("", "configmaps", "c")
    assert stale.code == 409 and stale.message.startswith('Operation cannot be fulfilled on configmaps "c"')
    bad = errors.invalid(
        "", "ConfigMap", "c", [StatusCause("FieldValueRequired", "Required value", "metadata.name")]
    )
    assert bad.message == 'ConfigMap "c" is invalid: metadata.name: Required value'
    assert errors.expired(3, 9).code == 410 and errors.is_not_found(missing)


def test_gone_and_expired_are_one_class_and_codes_decide_without_a_reason() -> None:
    assert type(errors.error_from_status(410, {"kind": "Status", "reason": "Gone"})) is errors.ResourceExpired
    assert type(errors.error_from_status(409, {"kind": "Status"})) is errors.Conflict
    assert type(errors.error_from_status(404, "404 page not found\n")) is errors.NotFound
    assert errors.error_from_status(404, "404 page not found\n").message == "404 page not found"
    plain = errors.error_from_status(418, b"")
    assert type(plain) is errors.APIError and plain.message == "the server answered 418"
    # an unknown reason keeps the server's word and still maps by code
    odd = errors.error_from_status(403, {"kind": "Status", "reason": "SomethingNew", "code": 403})
    assert type(odd) is errors.Forbidden and odd.reason == "SomethingNew"


def test_the_public_module_imports_alone_and_through_the_facade() -> None:
    script = (
        "import sys\n"
        "from kubeloop.errors import NotFound, InvalidSelector\n"
        "import kubeloop\n"
        "assert kubeloop.errors.NotFound is NotFound\n"
        "assert 'kubeloop.apiserver' not in sys.modules and 'aiohttp' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_a_status_is_written_in_gos_field_order_ending_in_a_newline() -> None:
    error = errors.NotFound('configmaps "x" not found', name="x", kind="configmaps")
    body = error.to_json()
    assert body.endswith(b"}\n")
    assert list(orjson.loads(body)) == ["kind", "apiVersion", "metadata", "status", "message", "reason", "details", "code"]
    assert list(errors.BadRequest("plain").to_status()) == [
        "kind", "apiVersion", "metadata", "status", "message", "reason", "code"
    ]  # fmt: skip

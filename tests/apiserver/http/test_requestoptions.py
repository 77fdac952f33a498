"""A write's options read from its query and User-Agent, remembered for the next write that sends
the same (``requestoptions.write_options``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubeloop import errors
from kubeloop.apiserver.http import http1, requestoptions
from kubeloop.apiserver.userinfo import UserInfo


def request(query: str = "", agent: str = "kubectl/v1.33.0 (linux/amd64)") -> http1.BufferedRequest:
    line = f"POST /api/v1/namespaces/a/configmaps{'?' + query if query else ''} HTTP/1.1"
    head = http1.read_head(f"{line}\r\nUser-Agent: {agent}\r\nContent-Length: 2\r\n\r\n".encode())
    assert head is not None
    return http1.BufferedRequest(head, b"{}", None)


ALICE = UserInfo("alice", ("system:authenticated",))
BOB = UserInfo("bob", ("system:authenticated",))


def test_the_options_of_a_query_are_read_and_remembered() -> None:
    requestoptions._WRITE_OPTIONS.clear()
    query = "fieldManager=me&fieldValidation=strict&dryRun=All&force=true"
    first = requestoptions.write_options(request(query), ALICE)
    assert (first.field_manager, first.field_validation, first.dry_run, first.force) == ("me", "Strict", True, True)
    assert (first.default_manager, first.user) == ("kubectl", ALICE)
    assert requestoptions.write_options(request(query), ALICE) is first
    # Who asks is part of the options: another user sending the same query gets their own.
    assert requestoptions.write_options(request(query), BOB).user == BOB
    assert requestoptions.write_options(request(query, agent="other/1.0"), ALICE).default_manager == "other"


def test_a_refused_query_is_refused_every_time() -> None:
    requestoptions._WRITE_OPTIONS.clear()
    for _ in range(2):
        with pytest.raises(errors.BadRequest, match="fieldValidation: Unsupported value"):
            requestoptions.write_options(request("fieldValidation=loud"), ALICE)
    assert not requestoptions._WRITE_OPTIONS


def test_the_options_remembered_stay_bounded() -> None:
    requestoptions._WRITE_OPTIONS.clear()
    for index in range(2 * requestoptions._WRITE_OPTIONS_MAX + 1):
        requestoptions.write_options(request(agent=f"client-{index}/1"), ALICE)
    assert 0 < len(requestoptions._WRITE_OPTIONS) <= requestoptions._WRITE_OPTIONS_MAX
    requestoptions._WRITE_OPTIONS.clear()
    manager = "m" * requestoptions._WRITE_OPTIONS_MAX_TEXT
    requestoptions.write_options(request(f"fieldValidation=Ignore&x={manager}"), ALICE)
    assert not requestoptions._WRITE_OPTIONS


_parameter = st.sampled_from(
    ["fieldManager=me", "fieldManager=", "fieldValidation=Strict", "fieldValidation=ignore", "fieldValidation=x",
     "dryRun=All", "dryRun=Some", "force=true", "force=false", "force=", "other=1"]
)


@given(st.lists(_parameter, max_size=5), st.sampled_from([None, ALICE, BOB]))
def test_remembered_options_are_those_read_afresh(parameters: list[str], user: UserInfo | None) -> None:
    query = "&".join(parameters)

    def outcome() -> object:
        try:
            return requestoptions.write_options(request(query), user)
        except errors.APIError as error:
            return str(error)

    requestoptions._WRITE_OPTIONS.clear()
    fresh = outcome()
    assert outcome() == fresh

"""Aggregated discovery over HTTP: ``/api`` and ``/apis`` answer with an APIGroupDiscoveryList
when ``Accept`` asks for one first, with the Content-Type client-go checks, and an ETag that
holds until the served API changes."""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop.apiserver.http.aggregateddiscovery import requested_version
from tests.apiserver.apiextensions.test_custom_resources import create_crd
from tests.conftest import Client, ServerThread

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"


@pytest.mark.parametrize(
    ("accept", "version"),
    [
        (f"{V2BETA1},application/json", "v2beta1"),  # kubectl 1.27
        (f"{V2},{V2BETA1},application/json", "v2"),  # kubectl 1.30 and later
        (f"{V2};profile=nopeer,{V2},application/json", "v2"),  # client-go without peers
        ("application/json; as=APIGroupDiscoveryList; v=v2; g=apidiscovery.k8s.io", "v2"),  # any order
        (f"application/json,{V2}", None),  # plain JSON first
        ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList,application/json", None),
        ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList," + V2BETA1, "v2beta1"),
        ("application/json;as=Table;v=v1;g=meta.k8s.io", None),
        ("", None),
    ],
)
def test_the_accept_header_picks_the_document(accept: str, version: str | None) -> None:
    assert requested_version(accept) == version


def _aggregated(api: Client, path: str, accept: str = V2, **headers: str) -> Any:
    return api.get(path, headers={"Accept": accept, **headers})


def test_api_and_apis_answer_in_aggregated_form_when_asked(api: Client) -> None:
    for accept, version in ((V2, "v2"), (V2BETA1, "v2beta1")):
        core = _aggregated(api, "/api", f"{accept},application/json")
        assert core.status_code == 200
        assert core.headers["Content-Type"] == accept
        assert core.headers["Vary"] == "Accept"
        document = core.json()
        assert (document["kind"], document["apiVersion"]) == ("APIGroupDiscoveryList", f"apidiscovery.k8s.io/{version}")
        (group,) = document["items"]
        assert "name" not in group["metadata"]
        resources = {r["resource"] for r in group["versions"][0]["resources"]}
        assert {"pods", "configmaps", "namespaces"} <= resources
        named = _aggregated(api, "/apis", accept).json()
        assert "apps" in [item["metadata"]["name"] for item in named["items"]]
    # Without the media type: the unaggregated documents, as before.
    assert api.get("/api", headers={"Accept": "application/json"}).json()["kind"] == "APIVersions"
    plain = api.get("/apis")
    assert plain.json()["kind"] == "APIGroupList"
    assert plain.headers["Content-Type"].startswith("application/json") and "g=" not in plain.headers["Content-Type"]


def test_the_etag_holds_until_the_served_api_changes(module_server: ServerThread) -> None:
    # A server of its own: a CRD another test deletes would change the API between two requests.
    api = Client(module_server)
    first = _aggregated(api, "/apis")
    etag = first.headers["ETag"]
    assert etag.startswith('"') and etag.endswith('"') and len(etag) > 2
    unchanged = _aggregated(api, "/apis", **{"If-None-Match": etag})
    assert unchanged.status_code == 304 and unchanged.content == b""
    assert unchanged.headers["ETag"] == etag
    # Each version's document has its own tag; so does /api.
    assert _aggregated(api, "/apis", V2BETA1, **{"If-None-Match": etag}).status_code == 200
    assert _aggregated(api, "/api").headers["ETag"] != etag

    create_crd(api, "etag.example.com")
    changed = _aggregated(api, "/apis", **{"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["ETag"] != etag
    group = next(item for item in changed.json()["items"] if item["metadata"]["name"] == "etag.example.com")
    (widgets,) = group["versions"][0]["resources"]
    assert widgets["responseKind"] == {"group": "etag.example.com", "version": "v1", "kind": "Widget"}
    assert [sub["subresource"] for sub in widgets["subresources"]] == ["status"]

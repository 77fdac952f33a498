"""Secure metrics (kubebuilder v4's default), scraped over real HTTPS from a manager on the
embedded server: a ServiceAccount bound to a metrics-reader ClusterRole (``nonResourceURLs:
/metrics``) scrapes; one without it gets 403, no token or a token the server does not take 401;
plain HTTP gets no answer; a certificate of the operator's is served and followed when it
changes; the operator's role names the reviews it asks."""

from __future__ import annotations

import pathlib
import ssl
from dataclasses import replace
from typing import Any

import aiohttp
import pytest

from kubeloop import kinds
from kubeloop.client.rest import APIClient
from kubeloop.manager.manager import Manager
from kubeloop.manager.metricsserver import MetricsServerOptions, with_authentication_and_authorization
from kubeloop.testing import intercepted, unavailable, write_serving_certificate
from tests.accounts import account_token
from tests.conftest import eventually

RBAC = "rbac.authorization.k8s.io/v1"
SECURE = MetricsServerOptions(
    bind_address="127.0.0.1:0", secure_serving=True, filter_provider=with_authentication_and_authorization
)


async def reader_token(client: APIClient, name: str, namespace: str) -> str:
    """A token of an account bound to a ClusterRole that may get /metrics, as a scraper's."""
    token = await account_token(client, name, namespace, [])
    role = f"{namespace}-{name}-metrics-reader"
    await client.create(
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": role},
         "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}
    )  # fmt: skip
    await client.create(
        {"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": role},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]}
    )  # fmt: skip
    return token


async def scrape(url: str, token: str | None = None, *, ca: bytes | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    tls: ssl.SSLContext | bool = ssl.create_default_context(cadata=ca.decode()) if ca is not None else False
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers, ssl=tls) as answer:
        return answer.status, await answer.text()


async def test_only_callers_the_api_server_allows_scrape_and_only_over_https(
    client: APIClient, namespace: str
) -> None:
    reader = await reader_token(client, "prometheus", namespace)
    stranger = await account_token(client, "stranger", namespace, [])
    manager = Manager(client, metrics=SECURE)
    async with manager:
        url = f"https://{manager.metrics_address}/metrics"
        status, text = await scrape(url, reader)
        assert status == 200 and "# TYPE rest_client_requests_total counter" in text, text
        status, text = await scrape(url, stranger)
        assert (status, text) == (
            403,
            f"Authorization denied for user system:serviceaccount:{namespace}:stranger\n",
        )
        assert (await scrape(url))[0] == 401
        assert (await scrape(url, "not-a-token"))[0] == 401
        # A token for another audience is no credential here either.
        other = await client.create(
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"audiences": ["vault"]}},
            of=kinds.ServiceAccount, name="prometheus", subresource="token", namespace=namespace,
        )  # fmt: skip
        assert (await scrape(url, other["status"]["token"]))[0] == 401
        with pytest.raises(aiohttp.ClientError):
            await scrape(url.replace("https://", "http://"), reader)  # plain HTTP: no answer


async def test_the_operators_certificate_is_served_and_followed(
    client: APIClient, namespace: str, tmp_path: pathlib.Path
) -> None:
    reader = await reader_token(client, "scraper", namespace)
    ca = write_serving_certificate(tmp_path)
    options = MetricsServerOptions(
        bind_address="127.0.0.1:0",
        secure_serving=True,
        cert_dir=str(tmp_path),
        filter_provider=with_authentication_and_authorization,
    )
    manager = Manager(client, metrics=options)
    async with manager:
        url = f"https://{manager.metrics_address}/metrics"
        assert (await scrape(url, reader, ca=ca))[0] == 200
        rotated = write_serving_certificate(tmp_path)

        async def follows() -> None:
            assert (await scrape(url, reader, ca=rotated))[0] == 200

        await eventually(follows)


async def test_a_review_the_api_server_fails_is_a_500_not_a_pass(client: APIClient, namespace: str) -> None:
    reader = await reader_token(client, "watcher", namespace)

    async def reviews_fail(through: Any, obj: Any, **options: Any) -> Any:
        raise unavailable()

    def failing(api: APIClient) -> Any:
        return with_authentication_and_authorization(intercepted(api, create=reviews_fail))

    manager = Manager(client, metrics=replace(SECURE, filter_provider=failing))
    async with manager:
        assert await scrape(f"https://{manager.metrics_address}/metrics", reader) == (
            500,
            "Authentication failed\n",
        )


async def test_the_operator_is_granted_the_reviews_it_asks(client: APIClient) -> None:
    rules = await Manager(client, metrics=SECURE).permissions.rules(lambda gvk: _never(gvk))
    granted = {
        (group, resource) for rule in rules for group in rule["apiGroups"] for resource in rule["resources"]
    }
    assert {
        ("authentication.k8s.io", "tokenreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
    } <= granted
    with pytest.raises(ValueError, match="not both"):
        Manager(client, metrics=SECURE, metrics_bind_address=":0")


async def _never(gvk: object) -> object:
    raise AssertionError(f"no kind is resolved: {gvk}")


async def test_the_debugging_endpoints_answer_behind_the_same_checks(client: APIClient, namespace: str) -> None:
    """``debug_handlers()`` beside /metrics (Python's answer to controller-runtime's pprof): the
    loop's tasks with their stacks, the threads, tracemalloc started, read, diffed and stopped;
    only for a caller allowed ``get`` on ``/debug/*``, not one allowed /metrics alone."""
    import kubeloop
    from tests.accounts import account_token as token_of

    debugger = await token_of(client, "debugger", namespace, [])
    role = f"{namespace}-debugger"
    await client.create({"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": role},
                         "rules": [{"nonResourceURLs": ["/debug/*"], "verbs": ["get"]}]})  # fmt: skip
    await client.create({"apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": role},
                         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                         "subjects": [{"kind": "ServiceAccount", "name": "debugger", "namespace": namespace}]})  # fmt: skip
    reader = await reader_token(client, "scraper-only", namespace)
    options = replace(SECURE, extra_handlers=kubeloop.debug_handlers())
    manager = Manager(client, metrics=options)
    async with manager:
        base = f"https://{manager.metrics_address}"
        status, tasks = await scrape(f"{base}/debug/tasks", debugger)
        assert status == 200 and "tasks" in tasks.splitlines()[0] and "--- task " in tasks, tasks
        status, threads = await scrape(f"{base}/debug/threads", debugger)
        assert status == 200 and "--- thread MainThread" in threads
        assert (await scrape(f"{base}/debug/tracemalloc", debugger))[1].startswith("tracemalloc is not tracing")
        assert (await scrape(f"{base}/debug/tracemalloc?start=2", debugger))[1] == "tracemalloc started (2 frames)\n"
        status, top = await scrape(f"{base}/debug/tracemalloc", debugger)
        assert status == 200 and "the 25 biggest places" in top
        assert "since the previous snapshot" in (await scrape(f"{base}/debug/tracemalloc?diff", debugger))[1]
        assert (await scrape(f"{base}/debug/tracemalloc?stop", debugger))[1] == "tracemalloc stopped\n"
        assert (await scrape(f"{base}/debug/tasks", reader))[0] == 403  # /metrics only
        assert (await scrape(f"{base}/debug/tasks"))[0] == 401
        assert (await scrape(f"{base}/metrics", debugger))[0] == 403  # and the other way round


async def test_kubeloop_run_serves_the_debugging_endpoints_when_asked(client: APIClient) -> None:
    """``kubeloop run --debug-endpoints``: the flag parses, and the manager it makes serves
    /debug/tasks beside /metrics (plain HTTP here: no --metrics-secure); without it, 404."""
    from kubeloop.cli.main import _build_parser
    from kubeloop.cli.run import ManagerFlags

    args = _build_parser().parse_args(["run", "operator.py", "--debug-endpoints"])
    assert args.debug_endpoints is True
    for asked, expected in ((True, 200), (False, 404)):
        flags = ManagerFlags(metrics_bind_address="127.0.0.1:0", debug_endpoints=asked)
        manager = flags.manager(client, "default", embedded=True)
        async with manager:
            status, text = await scrape(f"http://{manager.metrics_address}/debug/tasks")
        assert status == expected, text
        if asked:
            assert "--- task " in text

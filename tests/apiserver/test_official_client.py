"""The official `kubernetes` Python client (a test peer) against the embedded server."""

from __future__ import annotations

import pathlib
import threading
from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client, config, utils, watch
from kubernetes.client.rest import ApiException

from tests.conftest import ONE_PROCESS_AND_FRONT_END, ServerThread, served_by, start_server


@pytest.fixture(scope="module", params=ONE_PROCESS_AND_FRONT_END)
def shared_server(request: pytest.FixtureRequest, kube_apiserver: ServerThread) -> Iterator[ServerThread]:
    """Every test here runs against one process and against a front-end over its store."""
    yield from served_by(request.param, kube_apiserver)


@pytest.fixture
def api_client(shared_server: ServerThread) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(config_file=str(shared_server.kubeconfig)) as api:
        yield api


def test_crud_through_the_official_client(api_client: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    apps = client.AppsV1Api(api_client)
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="oc", labels={"a": "b"}), data={"k": "v"})
    created = core.create_namespaced_config_map(namespace, body)
    assert created.metadata.uid
    fetched = core.read_namespaced_config_map("oc", namespace)
    assert fetched.data == {"k": "v"}
    fetched.data["k"] = "w"
    replaced = core.replace_namespaced_config_map("oc", namespace, fetched)
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)
    patched = core.patch_namespaced_config_map("oc", namespace, {"data": {"x": "y"}})
    assert patched.data == {"k": "w", "x": "y"}
    listed = core.list_namespaced_config_map(namespace, label_selector="a=b")
    assert [c.metadata.name for c in listed.items] == ["oc"]
    with pytest.raises(ApiException) as conflict:
        fetched.metadata.resource_version = created.metadata.resource_version
        core.replace_namespaced_config_map("oc", namespace, fetched)
    assert conflict.value.status == 409
    core.delete_namespaced_config_map("oc", namespace)
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("oc", namespace)
    assert missing.value.status == 404

    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="d"),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels={"app": "d"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "d"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]),
            ),
        ),
    )
    made = apps.create_namespaced_deployment(namespace, deployment)
    assert made.metadata.generation == 1
    status = apps.patch_namespaced_deployment_status("d", namespace, {"status": {"replicas": 1}})
    assert status.status.replicas == 1
    scaled = apps.patch_namespaced_deployment("d", namespace, {"spec": {"replicas": 3}})
    assert scaled.spec.replicas == 3 and scaled.metadata.generation == 2


def test_watch_events_through_the_official_client(api_client: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(api_client)
    rv = core.list_namespaced_config_map(namespace).metadata.resource_version

    def make() -> None:  # before or after the watch begins: it watches from rv either way
        core.create_namespaced_config_map(
            namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="ev"))
        )
        core.delete_namespaced_config_map("ev", namespace)

    maker = threading.Thread(target=make)
    maker.start()
    seen = []
    for event in watch.Watch().stream(
        core.list_namespaced_config_map, namespace, resource_version=rv, timeout_seconds=5
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if len(seen) == 2:
            break
    maker.join()
    assert seen == [("ADDED", "ev"), ("DELETED", "ev")]


@pytest.mark.parametrize("served", ONE_PROCESS_AND_FRONT_END)
def test_watch_survives_410_by_relisting(served: str) -> None:
    owner = start_server(history_window=3)
    try:
        server = next(serving := served_by(served, owner))
        with config.new_client_from_config(config_file=str(server.kubeconfig)) as api:
            core = client.CoreV1Api(api)
            old_rv = core.list_namespaced_config_map("default").metadata.resource_version
            for i in range(6):
                core.create_namespaced_config_map(
                    "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"c{i}"))
                )
            with pytest.raises(ApiException) as expired:
                for _event in watch.Watch().stream(
                    core.list_namespaced_config_map, "default", resource_version=old_rv, timeout_seconds=5
                ):
                    pass
            assert expired.value.status == 410
            # What an informer does: relist, then watch from the list's resourceVersion.
            listed = core.list_namespaced_config_map("default")
            assert len(listed.items) == 6

            def later() -> None:  # the watch starts from the list's resourceVersion either way
                core.create_namespaced_config_map(
                    "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="after"))
                )

            maker = threading.Thread(target=later)
            maker.start()
            for event in watch.Watch().stream(
                core.list_namespaced_config_map,
                "default",
                resource_version=listed.metadata.resource_version,
                timeout_seconds=5,
            ):
                assert (event["type"], event["object"].metadata.name) == ("ADDED", "after")
                break
            maker.join()
        serving.close()
    finally:
        owner.stop()


def test_a_conflict_reads_as_kube_apiserver_words_it(
    api_client: client.ApiClient, namespace: str, tmp_path: pathlib.Path
) -> None:
    """The official client's own e2e test (test_create_from_multi_resource_yaml_with_conflict)
    compares the whole error text: the Status in Go's field order, ending in a newline."""
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "mock-2", "labels": {"app": "mock-2"}},
        "spec": {"selector": {"app": "mock-2"}, "ports": [{"port": 99, "targetPort": 9949}]},
    }
    controller = {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "mock-2"},
        "spec": {
            "replicas": 0,
            "selector": {"app": "mock-2"},
            "template": {
                "metadata": {"labels": {"app": "mock-2"}},
                "spec": {"containers": [{"name": "mock", "image": "nginx"}]},
            },
        },
    }
    first = tmp_path / "first.yaml"
    first.write_text(yaml.safe_dump(service))
    both = tmp_path / "both.yaml"
    both.write_text(yaml.safe_dump_all([service, controller]))
    utils.create_from_yaml(api_client, str(first), namespace=namespace)
    with pytest.raises(utils.FailToCreateError) as failed:
        utils.create_from_yaml(api_client, str(both), namespace=namespace)
    assert str(failed.value) == (
        'Error from server (Conflict): {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        '"message":"services \\"mock-2\\" already exists","reason":"AlreadyExists",'
        '"details":{"name":"mock-2","kind":"services"},"code":409}\n'
    )
    # The rest of the file was created all the same.
    core = client.CoreV1Api(api_client)
    assert core.read_namespaced_replication_controller("mock-2", namespace).spec.replicas == 0

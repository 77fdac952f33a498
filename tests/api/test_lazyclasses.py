"""The generated models make each class when it is first asked for (``kubeloop.api.lazyclasses``):
what a module holds after its import and after one class is asked for, in a fresh interpreter
each, and that a class made so is an ordinary one of its module."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap

import pytest

from kubeloop.api.gvk import GroupVersionKind
from kubeloop.api.models import apps_v1, core_v1


def fresh(code: str) -> object:
    """What ``code`` prints (one JSON value), run in a new interpreter."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout)


def test_a_module_makes_no_class_on_import_and_only_what_a_class_needs_when_asked() -> None:
    made = fresh(
        """
        import json
        from kubeloop.api.models import apps_v1
        def made(module):
            return sorted(n for n, v in vars(module).items() if isinstance(v, type) and v.__module__ == module.__name__)
        before = made(apps_v1)
        apps_v1.Deployment
        print(json.dumps([before, made(apps_v1)]))
        """
    )
    assert made == [
        [],
        [
            "Deployment",
            "DeploymentCondition",
            "DeploymentSpec",
            "DeploymentStatus",
            "DeploymentStrategy",
            "RollingUpdateDeployment",
        ],
    ]


def test_a_class_another_module_defines_is_made_when_a_field_needs_it() -> None:
    made = fresh(
        """
        import json
        from kubeloop.api.models import apps_v1, core_v1
        deployment = apps_v1.Deployment.model_validate(
            {"metadata": {"name": "web"}, "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "c"}]}}}}
        )
        print(json.dumps([deployment.spec.template.spec.containers[0].name, "Container" in vars(core_v1), "Service" in vars(core_v1)]))
        """
    )
    assert made == ["c", True, False]


def test_the_scheme_finds_a_built_in_kind_not_made_yet() -> None:
    found = fresh(
        """
        import json
        from kubeloop.api.gvk import GroupVersionKind
        from kubeloop.api.model import scheme
        cls = scheme.class_for(GroupVersionKind("batch", "v1", "CronJob"))
        print(json.dumps([cls.__module__, cls.__qualname__, scheme.class_for(GroupVersionKind("batch", "v1", "Nope"))]))
        """
    )
    assert found == ["kubeloop.api.models.batch_v1", "CronJob", None]


def test_threads_asking_at_once_get_one_class() -> None:
    same = fresh(
        """
        import json, threading
        from kubeloop.api.models import core_v1
        start, seen = threading.Barrier(8), []
        def ask():
            start.wait()
            seen.append(core_v1.Pod)
        threads = [threading.Thread(target=ask) for _ in range(8)]
        for thread in threads: thread.start()
        for thread in threads: thread.join()
        print(json.dumps([len(seen), len({id(cls) for cls in seen}), core_v1.PodSpec.__module__]))
        """
    )
    assert same == [8, 1, "kubeloop.api.models.core_v1"]


def test_a_made_class_is_an_ordinary_class_of_its_module() -> None:
    from kubeloop.api.models.core_v1 import Pod  # made through the module's __getattr__

    assert (Pod.__module__, Pod.__qualname__) == ("kubeloop.api.models.core_v1", "Pod")
    assert core_v1.Pod is Pod and vars(core_v1)["Pod"] is Pod
    pod = Pod.model_validate(
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}}
    )
    assert pickle.loads(pickle.dumps(pod)) == pod
    assert pod.spec is not None and pod.spec.containers[0].ports is not None
    assert pod.spec.containers[0].ports[0].container_port == 80
    assert Pod.__gvk__ == GroupVersionKind("", "v1", "Pod")
    assert {"Pod", "StatefulSet"} <= set(dir(core_v1)) | set(dir(apps_v1))
    assert set(apps_v1.__all__) <= set(dir(apps_v1))
    with pytest.raises(AttributeError, match="Podd"):
        core_v1.Podd  # noqa: B018


def test_an_extractor_makes_its_configuration_class_when_called_first() -> None:
    extracted = fresh(
        """
        import json
        from kubeloop.applyconfigurations import apps_v1
        before = "Deployment" in vars(apps_v1)
        deployment = {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "managedFields": [{
                "manager": "deployer", "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:replicas": {}}},
            }]},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}},
        }
        configuration = apps_v1.extract_deployment(deployment, "deployer")
        print(json.dumps([before, type(configuration).__qualname__, configuration.to_dict()["spec"]]))
        """
    )
    assert extracted == [False, "Deployment", {"replicas": 3}]

"""batch: what a Job may change."""

from __future__ import annotations

from typing import Any

from tests.apiserver.registry.validation.objects import update_causes


def job(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": "a"},
        "spec": {
            "template": {
                "metadata": {"labels": {"run": "j"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
            },
            **spec,
        },
    }


def test_a_jobs_template_and_policies_are_fixed() -> None:
    def new_image(obj: dict[str, Any]) -> None:
        obj["spec"]["template"]["spec"]["containers"][0]["image"] = "alpine"

    causes = update_causes("batch", "Job", job(), new_image)
    assert [field for field, _ in causes] == ["spec.template"]
    assert causes[0][1].endswith(": field is immutable") and '"image":"alpine"' in causes[0][1]
    assert update_causes("batch", "Job", job(), lambda j: j["spec"].update(completions=3)) == [
        ("spec.completions", "Invalid value: 3: field is immutable")
    ]
    assert update_causes("batch", "Job", job(), lambda j: j["spec"].update(completionMode="Indexed")) == [
        ("spec.completionMode", 'Invalid value: "Indexed": field is immutable')
    ]
    # Parallelism, suspension and the backoff limit may change.
    assert update_causes("batch", "Job", job(), lambda j: j["spec"].update(parallelism=3, suspend=True)) == []


def test_a_suspended_job_that_never_started_may_move_its_pods() -> None:
    def reschedule(obj: dict[str, Any]) -> None:
        pod = obj["spec"]["template"]["spec"]
        pod["nodeSelector"] = {"zone": "b"}
        pod["tolerations"] = [{"key": "spot", "operator": "Exists"}]
        obj["spec"]["template"]["metadata"]["annotations"] = {"queue": "high"}

    assert update_causes("batch", "Job", job(suspend=True), reschedule) == []
    started = job(suspend=True)
    started["status"] = {"startTime": "2026-01-01T00:00:00Z"}
    assert [field for field, _ in update_causes("batch", "Job", started, reschedule)] == ["spec.template"]
    assert [field for field, _ in update_causes("batch", "Job", job(), reschedule)] == ["spec.template"]


def test_an_indexed_jobs_completions_change_with_its_parallelism() -> None:
    indexed = job(completionMode="Indexed", completions=2, parallelism=2)
    assert (
        update_causes("batch", "Job", indexed, lambda j: j["spec"].update(completions=4, parallelism=4)) == []
    )
    assert update_causes("batch", "Job", indexed, lambda j: j["spec"].update(completions=4)) == [
        ("spec.completions", "Invalid value: 4: can only be modified in tandem with spec.parallelism")
    ]

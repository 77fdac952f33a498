"""batch: what a Job may change."""

from __future__ import annotations

from typing import Any

from tests.apiserver.registry.validation.objects import strategy, update_causes, validate_object

UID = "0b6f5c1e-6d43-4b59-9d2c-3c1f0f7f2a11"


def job(**spec: Any) -> dict[str, Any]:
    """A Job as a create leaves it: its selector generated from its uid."""
    obj: dict[str, Any] = {
        "metadata": {"name": "j", "namespace": "a", "uid": UID},
        "spec": {
            "template": {
                "metadata": {"labels": {"run": "j"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
            },
            **spec,
        },
    }
    strategy("batch", "Job").prepare_for_create(obj)
    return obj


def test_a_create_selects_the_jobs_own_uid() -> None:
    created = job()
    assert created["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}}
    assert created["spec"]["template"]["metadata"]["labels"] == {
        "run": "j",
        "batch.kubernetes.io/job-name": "j",
        "job-name": "j",
        "batch.kubernetes.io/controller-uid": UID,
        "controller-uid": UID,
    }
    assert validate_object("batch", "Job", created) == []


def test_a_generated_selector_must_rest_on_the_uid() -> None:
    wrong = job()
    wrong["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"] = "other"
    wrong["spec"]["template"]["metadata"]["labels"].pop("job-name")
    causes = [(c.field, c.message) for c in validate_object("batch", "Job", wrong)]
    assert ("spec.template.metadata.labels[job-name]", "Required value: must be 'j'") in causes
    assert (
        "spec.selector.matchLabels[batch.kubernetes.io/controller-uid]",
        f"Invalid value: \"other\": must be '{UID}'",
    ) in causes
    # The selector asks for another uid than the template's labels carry.
    assert any(
        field == "spec.template.metadata.labels" and message.endswith("`selector` does not match template `labels`")
        for field, message in causes
    )


def test_a_manual_selector_is_the_users_own() -> None:
    manual = job(manualSelector=True, selector={"matchLabels": {"run": "j"}})
    assert manual["spec"]["selector"] == {"matchLabels": {"run": "j"}}
    assert "controller-uid" not in manual["spec"]["template"]["metadata"]["labels"]
    assert validate_object("batch", "Job", manual) == []
    unmatched = job(manualSelector=True, selector={"matchLabels": {"run": "other"}})
    assert [c.field for c in validate_object("batch", "Job", unmatched)] == ["spec.template.metadata.labels"]
    missing = job(manualSelector=True)
    assert [c.field for c in validate_object("batch", "Job", missing)] == ["spec.selector"]


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

"""CronJobs: what the controller decides at a given time (:func:`plan`, from objects alone), a
simulated CronJob whose Job runs and completes (kubectl 1.27 and 1.33), and the schedule's
validation as upstream words it."""

# ruff: noqa: F811  (the simulated server's fixtures are imported, then requested by name)

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from kubeloop.controllermanager.cronjobs import SCHEDULED_ANNOTATION, job_name, plan
from tests.apiserver.test_kubectl import Kubectl
from tests.conftest import Client
from tests.controllermanager.test_workload_simulation import api, kubectl, simulated  # noqa: F401  (fixtures)

NOW = datetime(2025, 6, 2, 10, 30, 20, tzinfo=UTC)


def cronjob(
    schedule: str = "*/10 * * * *", last: str | None = "2025-06-02T10:10:00Z", **spec: Any
) -> dict[str, Any]:
    status = {"lastScheduleTime": last} if last else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": "report",
            "namespace": "ns",
            "uid": "cj-uid",
            "creationTimestamp": "2025-06-01T00:00:00Z",
        },
        "spec": {
            "schedule": schedule,
            "concurrencyPolicy": "Allow",
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
            },
            **spec,
        },
        "status": status,
    }


def job(name: str, outcome: str | None, started: str) -> dict[str, Any]:
    conditions = [{"type": outcome, "status": "True"}] if outcome else []
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"{name}-uid", "resourceVersion": "5"},
        "status": {
            "startTime": started,
            "completionTime": started if outcome else None,
            "conditions": conditions,
        },
    }


def test_the_latest_missed_time_runs_once() -> None:
    decided = plan(cronjob(), [], NOW)
    assert decided.create is not None
    # 10:20 and 10:30 were missed since 10:10: only 10:30 runs.
    due = datetime(2025, 6, 2, 10, 30, tzinfo=UTC)
    assert (
        decided.create["metadata"]["name"]
        == job_name("report", due)
        == f"report-{int(due.timestamp()) // 60}"
    )
    assert decided.create["metadata"]["annotations"] == {SCHEDULED_ANNOTATION: "2025-06-02T10:30:00Z"}
    assert decided.create["metadata"]["labels"] == {"team": "a"}
    [owner] = decided.create["metadata"]["ownerReferences"]
    assert owner["kind"] == "CronJob" and owner["uid"] == "cj-uid" and owner["controller"]
    assert decided.create["spec"]["template"]["spec"]["containers"][0]["image"] == "x"
    assert decided.status["lastScheduleTime"] == "2025-06-02T10:30:00Z"
    assert decided.requeue_after == pytest.approx(9 * 60 + 40 + 0.05)


def test_nothing_is_due_until_the_next_time() -> None:
    decided = plan(cronjob(last="2025-06-02T10:30:00Z"), [], NOW)
    assert decided.create is None and decided.delete == []
    assert decided.requeue_after == pytest.approx(580.05)


def test_a_new_cronjob_counts_from_its_creation() -> None:
    decided = plan(cronjob(last=None), [], datetime(2025, 6, 1, 0, 5, tzinfo=UTC))
    assert decided.create is None
    decided = plan(cronjob(last=None), [], datetime(2025, 6, 1, 0, 10, 1, tzinfo=UTC))
    assert decided.create is not None


def test_suspended_and_late_cronjobs_make_no_job() -> None:
    assert plan(cronjob(suspend=True), [], NOW).create is None
    # 20 s late with a 10 s starting deadline: missed.
    assert plan(cronjob(startingDeadlineSeconds=10), [], NOW).create is None
    assert plan(cronjob(startingDeadlineSeconds=30), [], NOW).create is not None


def test_concurrency_policies() -> None:
    running = job("report-1", None, "2025-06-02T10:10:00Z")
    allowed = plan(cronjob(), [running], NOW)
    assert allowed.create is not None and allowed.delete == []
    assert [ref["name"] for ref in allowed.status["active"]] == ["report-1"]
    forbidden = plan(cronjob(concurrencyPolicy="Forbid"), [running], NOW)
    assert forbidden.create is None and forbidden.status["active"][0]["uid"] == "report-1-uid"
    assert forbidden.status["lastScheduleTime"] == "2025-06-02T10:10:00Z"
    replaced = plan(cronjob(concurrencyPolicy="Replace"), [running], NOW)
    assert replaced.create is not None and replaced.delete == [running]
    assert "active" not in replaced.status


def test_history_beyond_the_limits_goes_oldest_first() -> None:
    done = [job(f"ok-{i}", "Complete", f"2025-06-02T0{i}:00:00Z") for i in range(5)]
    failed = [job(f"bad-{i}", "Failed", f"2025-06-02T0{i}:30:00Z") for i in range(3)]
    decided = plan(cronjob(last="2025-06-02T10:30:00Z"), [*done, *failed], NOW)
    assert [j["metadata"]["name"] for j in decided.delete] == ["ok-0", "ok-1", "bad-0", "bad-1"]
    assert decided.status["lastSuccessfulTime"] == "2025-06-02T04:00:00Z"
    assert "active" not in decided.status


def test_the_schedule_runs_in_the_time_zone() -> None:
    # 09:00 in Paris (summer) is 07:00 UTC.
    decided = plan(
        cronjob("0 9 * * *", last="2025-06-01T07:00:00Z", timeZone="Europe/Paris"),
        [],
        datetime(2025, 6, 2, 7, 0, 5, tzinfo=UTC),
    )
    assert decided.create is not None
    assert decided.create["metadata"]["annotations"][SCHEDULED_ANNOTATION] == "2025-06-02T09:00:00+02:00"
    assert decided.status["lastScheduleTime"] == "2025-06-02T07:00:00Z"


# ------------------------------------------------------------------------------ on a live server


def test_a_cronjob_makes_a_job_that_completes(kubectl: Kubectl, api: Client, namespace: str) -> None:
    ns = ["-n", namespace]
    kubectl("create", "cronjob", "tick", *ns, "--image=busybox", "--schedule=@every 1s")

    def jobs() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs").json()["items"]
        return items

    deadline = time.monotonic() + 20
    while not jobs():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    [made] = jobs()
    kubectl("wait", *ns, "--for=condition=complete", f"job/{made['metadata']['name']}", "--timeout=20s")
    cron = api.get(f"/apis/batch/v1/namespaces/{namespace}/cronjobs/tick").json()
    assert made["metadata"]["ownerReferences"][0]["uid"] == cron["metadata"]["uid"]
    assert made["metadata"]["annotations"][SCHEDULED_ANNOTATION].endswith("Z")
    assert made["metadata"]["name"].startswith("tick-")
    deadline = time.monotonic() + 20
    while (
        not api.get(f"/apis/batch/v1/namespaces/{namespace}/cronjobs/tick")
        .json()["status"]
        .get("lastSuccessfulTime")
    ):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    table = kubectl("get", *ns, "cronjob", "tick").stdout.splitlines()
    assert table[1].split()[:3] == ["tick", "@every", "1s"]
    assert table[0].split()[:7] == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE"]
    row = table[1].split()
    assert row[3:5] == ["<none>", "False"] and row[6] != "<none>"  # LAST SCHEDULE is shown
    # Suspended: no more Jobs; deleting the CronJob takes its Jobs.
    kubectl("patch", *ns, "cronjob", "tick", "-p", '{"spec":{"suspend":true}}')
    kubectl("delete", *ns, "cronjob", "tick")
    deadline = time.monotonic() + 20
    while jobs():
        assert time.monotonic() < deadline
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (
            {"schedule": "61 * * * *"},
            "spec.schedule",
            'Invalid value: "61 * * * *": end of range (61) above maximum (59): 61',
        ),
        ({"schedule": ""}, "spec.schedule", "Required value"),
        (
            {"schedule": "TZ=UTC 0 * * * *"},
            "spec.schedule",
            'Invalid value: "TZ=UTC 0 * * * *": cannot use TZ or CRON_TZ in schedule, use timeZone field instead',
        ),
        (
            {"schedule": "0 * * * *", "timeZone": "Mars/Olympus"},
            "spec.timeZone",
            'Invalid value: "Mars/Olympus": unknown time zone Mars/Olympus',
        ),
        # A directory of the zone database, a path, a name too long for a file: not zones, not 500s.
        (
            {"schedule": "0 * * * *", "timeZone": "Europe"},
            "spec.timeZone",
            'Invalid value: "Europe": unknown',
        ),
        (
            {"schedule": "0 * * * *", "timeZone": "../../etc/passwd"},
            "spec.timeZone",
            'Invalid value: "../../etc/passwd": unknown time zone ../../etc/passwd',
        ),
        (
            {"schedule": "0 * * * *", "timeZone": "Zone/" + "x" * 5000},
            "spec.timeZone",
            'Invalid value: "Zone/xxx',
        ),
        (
            {"schedule": "@every 99999999999999999h"},
            "spec.schedule",
            'Invalid value: "@every 99999999999999999h": failed to parse duration',
        ),
        (
            {"schedule": "0 * * * *", "concurrencyPolicy": "Sometimes"},
            "spec.concurrencyPolicy",
            'Unsupported value: "Sometimes"',
        ),
        (
            {"schedule": "0 * * * *", "startingDeadlineSeconds": -1},
            "spec.startingDeadlineSeconds",
            "Invalid value: -1: must be greater than or equal to 0",
        ),
    ],
)
def test_bad_schedules_are_refused_naming_the_field(
    api: Client, namespace: str, spec: dict[str, Any], field: str, message: str
) -> None:
    body = cronjob(**spec)
    body["metadata"] = {"name": "bad"}
    body.pop("status")
    refused = api.post(f"/apis/batch/v1/namespaces/{namespace}/cronjobs", body)
    assert refused.status_code == 422, refused.text
    causes = {c["field"]: c["message"] for c in refused.json()["details"]["causes"]}
    assert causes[field].startswith(message), causes
    assert api.get(f"/apis/batch/v1/namespaces/{namespace}/cronjobs/bad").status_code == 404

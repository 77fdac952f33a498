"""``.ci/run`` refuses commit subjects over 72 characters: ``scripts/check_commit_subjects.py``
against throwaway repositories (and this one, which must pass)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check_commit_subjects.py"


def commit(repository: pathlib.Path, subject: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    subprocess.run(
        ["git", "-C", str(repository), "commit", "-q", "--allow-empty", "-m", subject], check=True, env=env
    )
    return subprocess.run(
        ["git", "-C", str(repository), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def check(repository: pathlib.Path, baseline: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(repository), baseline], capture_output=True, text=True
    )


def test_a_subject_over_72_characters_after_the_baseline_is_refused(tmp_path: pathlib.Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    old = commit(
        tmp_path, "an old subject, from before the rule, that is far longer than seventy-two characters"
    )
    commit(tmp_path, "area: " + "x" * 66)  # 72: allowed
    assert check(tmp_path, old).returncode == 0
    long = commit(tmp_path, "area: " + "y" * 67)  # 73
    refused = check(tmp_path, old)
    assert refused.returncode == 1
    assert f"{long[:7]}: the subject is 73 characters (at most 72)" in refused.stderr
    assert "old subject" not in refused.stderr  # the baseline and what came before it are not checked
    # Without the baseline in the checkout (a shallow clone), every commit it has is checked.
    assert "old subject" in check(tmp_path, "0" * 40).stderr


def test_this_repository_passes_and_ci_runs_the_check() -> None:
    assert check(ROOT, "6a96896030edbf6a05151c2fb501c909a84463de").returncode == 0
    assert "scripts/check_commit_subjects.py" in (ROOT / ".ci" / "run").read_text()

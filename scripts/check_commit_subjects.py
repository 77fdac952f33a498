"""Refuse commit subjects over 72 characters (``git log --oneline`` must read well).

Checks the commits after ``BASELINE``, the last commit whose subject broke the rule before it
was enforced; in a shallow checkout that lacks it, every commit the checkout has. ``.ci/run``
runs this before ``make test``. Exit status 1 lists the offending commits.
"""

from __future__ import annotations

import subprocess
import sys

BASELINE = "6a96896030edbf6a05151c2fb501c909a84463de"
LIMIT = 72


def subjects(repository: str = ".", baseline: str = BASELINE) -> list[tuple[str, str]]:
    """(short hash, subject) of every commit to check."""
    known = (
        subprocess.run(
            ["git", "-C", repository, "cat-file", "-e", f"{baseline}^{{commit}}"], capture_output=True
        ).returncode
        == 0
    )
    revisions = [f"{baseline}..HEAD"] if known else ["HEAD"]
    out = subprocess.run(
        ["git", "-C", repository, "log", "--format=%h%x00%s", *revisions],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [tuple(line.split("\0", 1)) for line in out.splitlines() if line]  # type: ignore[misc]


def main(argv: list[str]) -> int:
    repository = argv[1] if len(argv) > 1 else "."
    baseline = argv[2] if len(argv) > 2 else BASELINE
    long = [(commit, subject) for commit, subject in subjects(repository, baseline) if len(subject) > LIMIT]
    for commit, subject in long:
        print(
            f"{commit}: the subject is {len(subject)} characters (at most {LIMIT}): {subject}",
            file=sys.stderr,
        )
    return 1 if long else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))

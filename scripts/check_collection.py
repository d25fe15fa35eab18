"""Checks that the README's test command and CI collect the same tests, less those marked slow.

CI runs ``bash scripts/test.sh --all``; the README's command is ``bash scripts/test.sh``, which
selects with the marker expression in scripts/test.sh's ``select=(-m "...")`` line. One
collection of the whole suite is made here; the check fails when

- the default selection leaves out a test that is not marked ``slow`` (the two would then differ
  by more than the documented time budget), or
- a test module is skipped at collection because a package could not be imported: the quick
  start installs what CI installs, so such a skip means setup and CI disagree.

Run from the repository root with the project's .venv: ``.venv/bin/python scripts/check_collection.py``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

REPO = Path(__file__).resolve().parents[1]


def default_marker_expression() -> str:
    """The marker expression scripts/test.sh selects with when not given ``--all``."""
    text = (REPO / "scripts" / "test.sh").read_text()
    found = re.search(r'select=\(-m "([^"]+)"\)', text)
    if found is None:
        raise SystemExit("scripts/test.sh has no default `select=(-m \"...\")` line; update check_collection.py")
    return found.group(1)


class Recorder:
    """A pytest plugin that keeps each collected test's markers and every collection-time skip."""

    def __init__(self) -> None:
        self.items: dict[str, set[str]] = {}
        self.import_skips: list[str] = []

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            self.items[item.nodeid] = {mark.name for mark in item.iter_markers()}

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped and "could not import" in str(report.longrepr):
            self.import_skips.append(f"{report.nodeid}: {report.longrepr}")


def main() -> int:
    expression = Expression.compile(default_marker_expression())
    recorder = Recorder()
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", str(REPO / "tests")], plugins=[recorder])
    if code not in (pytest.ExitCode.OK,):
        print(f"check_collection: collecting the suite failed (pytest exit {int(code)})", file=sys.stderr)
        return 1
    default = {node for node, marks in recorder.items.items()
               if expression.evaluate(lambda name, **_kw: name in marks)}  # noqa: B023
    left_out = sorted(set(recorder.items) - default)
    not_slow = [node for node in left_out if "slow" not in recorder.items[node]]
    problems = []
    if not_slow:
        problems.append(f"{len(not_slow)} test(s) CI runs are left out of the README's command without a "
                        f"`slow` marker, first: {not_slow[0]}")
    if recorder.import_skips:
        problems.append(f"{len(recorder.import_skips)} module(s) skip for a missing package that scripts/setup.sh "
                        f"should install, first: {recorder.import_skips[0][:300]}")
    print(f"check_collection: CI collects {len(recorder.items)} tests; `bash scripts/test.sh` runs {len(default)} "
          f"of them and leaves out the {len(left_out)} marked slow")
    for problem in problems:
        print(f"check_collection: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

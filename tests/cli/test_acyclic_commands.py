"""The analysis commands run with the cyclic collector paused; the commands that run a workload never do."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from profiler_core import api
from profiler_core.cli import ACYCLIC, COMMANDS, load_commands, main

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "tests" / "data" / "h200_joinable" / "expected" / "profile.json"
RUNS_A_WORKLOAD = {"capture", "optimize", "apply-pass", "demo", "yardstick"}


def test_only_commands_that_read_files_pause_the_collector() -> None:
    load_commands()
    assert ACYCLIC <= set(COMMANDS)
    assert {"summary", "attribute", "diagnose", "compare", "report", "export"} <= ACYCLIC
    assert not ACYCLIC & RUNS_A_WORKLOAD  # torch's objects form cycles: a workload needs the collector


def test_summary_runs_with_the_collector_paused_and_restores_it(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[bool] = []
    real = api.load_profile

    def load(path: Path):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return real(path)

    monkeypatch.setattr(api, "load_profile", load)
    assert gc.isenabled()
    with pytest.raises(SystemExit) as done:
        main(["summary", str(PROFILE), "--json"])
    assert done.value.code in (0, None)
    assert seen == [False]
    assert gc.isenabled()
    assert '"kernels"' in capsys.readouterr().out


def test_a_failing_command_restores_the_collector(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["summary", str(REPO / "no-such-profile.json")])
    assert done.value.code == 2
    assert gc.isenabled()
    assert "no-such-profile.json" in capsys.readouterr().err

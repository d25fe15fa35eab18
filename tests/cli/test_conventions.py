"""One convention for every command (docs/cli.md): flag names, streams, colour, completion, outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from profiler_core.cli import load_commands

REPO = Path(__file__).resolve().parents[2]
JOINABLE_PROFILE = REPO / "tests" / "data" / "h200_joinable" / "expected" / "profile.json"
SHIPPED = REPO / "examples" / "captures" / "h200" / "sdpa_attention" / "baseline"
runner = CliRunner()
app = load_commands()
COMMANDS = get_command(app).commands  # type: ignore[attr-defined]


def _visible_options(name: str) -> dict[str, object]:
    return {opt: p for p in COMMANDS[name].params if not getattr(p, "hidden", False)
            for opt in (*p.opts, *getattr(p, "secondary_opts", ()))}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_one_spelling_per_flag(name: str) -> None:
    options = _visible_options(name)
    assert "--output" not in options and "--top-k" not in options  # --out and --top everywhere
    if "-o" in options:
        assert "--out" in options
    for opt, param in options.items():
        if opt == "--json":
            assert param.is_flag  # a plain flag: "--json", never "--json true"
        # an off-by-default switch is a plain flag; only on-by-default ones have a --no- form
        if getattr(param, "is_flag", False) and getattr(param, "secondary_opts", None):
            assert param.default is True, f"{name} {opt}: a --no- form only for a switch that defaults on"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_shows_flags_without_a_value(name: str) -> None:
    result = runner.invoke(app, [name, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "<bool>" not in result.stdout
    assert "--json" not in _visible_options(name) or "--json " in result.stdout


@pytest.mark.parametrize(("argv", "old"), [
    (["report", str(JOINABLE_PROFILE), "--top-k", "1"], "--top-k"),
    (["attribute", str(SHIPPED), "--output", "{tmp}/p.json", "--json"], "--output"),
], ids=["report-top-k", "attribute-output"])
def test_old_spellings_still_work(tmp_path: Path, argv: list[str], old: str) -> None:
    result = runner.invoke(app, [a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert result.exit_code == 0, result.output
    if old == "--output":
        assert (tmp_path / "p.json").is_file()


def test_capture_takes_nsys_and_no_nsys() -> None:
    [nsys] = [p for p in COMMANDS["capture"].params if p.name == "nsys"]
    assert nsys.opts == ["--nsys"] and nsys.secondary_opts == ["--no-nsys"] and nsys.default is True
    [same] = [p for p in COMMANDS["optimize"].params if p.name == "nsys"]
    assert same.opts == nsys.opts and same.secondary_opts == nsys.secondary_opts


def test_results_on_stdout_progress_and_notes_on_stderr() -> None:
    result = runner.invoke(app, ["summary", str(JOINABLE_PROFILE)])
    assert result.exit_code == 0
    assert "aten::" in result.stdout and result.stderr == ""
    result = runner.invoke(app, ["summary", str(JOINABLE_PROFILE), "--json"])
    assert json.loads(result.stdout)["kernels"] == 44  # nothing but JSON on stdout


def _oprof(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return subprocess.run([sys.executable, "-m", "profiler_core", *args], env={**clean, **env},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_no_color_turns_off_every_escape_sequence() -> None:
    coloured = _oprof(["summary", str(JOINABLE_PROFILE)], FORCE_COLOR="1")
    assert "\x1b[" in coloured.stdout  # the terminal path does colour
    plain = _oprof(["summary", str(JOINABLE_PROFILE)], FORCE_COLOR="1", NO_COLOR="1")
    assert plain.returncode == 0 and "\x1b[" not in plain.stdout + plain.stderr
    error = _oprof(["summary", "/nonexistent/profile.json"], FORCE_COLOR="1", NO_COLOR="1")
    assert error.returncode == 2 and error.stderr.startswith("error:") and "\x1b[" not in error.stderr


@pytest.mark.slow
def test_shell_completion_is_offered() -> None:
    shown = _oprof(["--show-completion", "bash"])
    assert shown.returncode == 0 and "_OPROF_COMPLETE" in shown.stdout


def test_attribute_of_a_shipped_capture_writes_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in SHIPPED.iterdir())
    result = runner.invoke(app, ["attribute", str(SHIPPED)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in SHIPPED.iterdir()) == before  # nothing written into the shipped folder
    written = tmp_path / "oprof-runs" / "attribute" / "sdpa_attention-baseline" / "profile.json"
    assert written.is_file()
    assert "shipped or read-only capture" in result.stderr and str(Path("oprof-runs")) in result.stdout


def test_attribute_of_a_users_run_writes_into_it(tmp_path: Path) -> None:
    import shutil

    run = tmp_path / "run"
    shutil.copytree(SHIPPED, run)
    result = runner.invoke(app, ["attribute", str(run)])
    assert result.exit_code == 0, result.output
    assert (run / "profile.json").is_file() and result.stderr == ""


def test_html_into_a_missing_folder_says_it_created_it(tmp_path: Path) -> None:
    target = tmp_path / "new" / "deeper" / "report.html"
    result = runner.invoke(app, ["report", str(JOINABLE_PROFILE), "--html", str(target)])
    assert result.exit_code == 0, result.output
    assert target.is_file()
    assert f"created the folder {tmp_path / 'new'}" in result.stderr
    again = runner.invoke(app, ["report", str(JOINABLE_PROFILE), "--html", str(target)])
    assert "created the folder" not in again.stderr

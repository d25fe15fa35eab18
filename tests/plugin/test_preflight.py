"""The plugin's SessionStart preflight: silent when oprof-mcp answers, one message naming the fix when not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "plugin"
PREFLIGHT = PLUGIN / "hooks" / "preflight.py"


def _preflight(tmp_path: Path, command: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "CLAUDE_PROJECT_DIR": str(tmp_path),
           "CLAUDE_PLUGIN_ROOT": str(PLUGIN), "PYTHONPATH": str(REPO), "OPROF_PREFLIGHT_TIMEOUT_S": "120"}
    if command is not None:
        env["OPROF_MCP_COMMAND"] = command
    return subprocess.run([sys.executable, str(PREFLIGHT)], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=180)


def test_hooks_json_runs_the_preflight_at_session_start() -> None:
    hooks = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    [entry] = hooks["SessionStart"]
    [hook] = entry["hooks"]
    assert hook["type"] == "command" and "${CLAUDE_PLUGIN_ROOT}/hooks/preflight.py" in hook["command"]
    assert hook["timeout"] > float(os.environ.get("OPROF_PREFLIGHT_TIMEOUT_S", "45"))


@pytest.mark.parametrize(("server", "needle"), [
    (None, "pip install operator-profiler"),
    ("broken", "ModuleNotFoundError: No module named 'mcp'"),
], ids=["missing", "fails-to-start"])
def test_a_server_that_does_not_start_is_reported_in_the_session(tmp_path: Path, server: str | None,
                                                                 needle: str) -> None:
    command = None
    if server == "broken":
        fake = tmp_path / "oprof-mcp-broken"
        fake.write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'mcp'\" >&2\nexit 1\n")
        fake.chmod(0o755)
        command = str(fake)
    run = _preflight(tmp_path, command)
    assert run.returncode == 0, run.stderr  # never blocks the session
    out = json.loads(run.stdout)
    assert needle in out["systemMessage"] and out["systemMessage"].count("pip install") == 1
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert needle in out["hookSpecificOutput"]["additionalContext"]


@pytest.mark.slow
def test_a_server_that_answers_initialize_is_silent(tmp_path: Path) -> None:
    run = _preflight(tmp_path, f"{sys.executable} -m mcp_server")
    assert run.returncode == 0 and run.stdout == "", (run.stdout, run.stderr)

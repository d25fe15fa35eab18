#!/usr/bin/env python3
"""SessionStart preflight of the operator-profiler plugin: does the oprof MCP server start?

Claude Code shows a server that fails to start only as "Failed to connect" in /mcp. This hook
starts the server the way the plugin does (bin/oprof-mcp-launcher), sends ``initialize`` and
waits for the reply. When the server answers it prints nothing. When it is missing, exits, or
does not answer in time, it prints one JSON object: ``systemMessage`` (shown to the user) and
``additionalContext`` (read by Claude), each naming the fix. Standard library only; it never
fails the session (exit status 0 in every case).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

DEADLINE_S = float(os.environ.get("OPROF_PREFLIGHT_TIMEOUT_S", "45"))  # below the hook's 60 s
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "oprof-preflight", "version": "1"}}}


def _launcher() -> Path:
    root = os.environ.get("CLAUDE_PLUGIN_ROOT") or str(Path(__file__).resolve().parent.parent)
    return Path(root) / "bin" / "oprof-mcp-launcher"


def check() -> tuple[bool, str, float]:
    """(started, what happened, seconds to the first reply or to the failure)."""
    project = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    start_s = time.monotonic()
    try:
        proc = subprocess.Popen([str(_launcher()), "--root", project], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=project)
    except OSError as err:
        return False, f"cannot run {_launcher()} ({err})", 0.0
    try:
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
            proc.stdin.flush()
        except BrokenPipeError:  # it exited before reading: its stderr says why
            pass
        while time.monotonic() - start_s < DEADLINE_S:
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                line = proc.stdout.readline()
                if not line:
                    break
                try:
                    reply = json.loads(line)
                except ValueError:
                    return False, f"it wrote something that is not MCP on stdout: {line[:120]!r}", 0.0
                if reply.get("id") == 1 and "result" in reply:
                    return True, "ok", time.monotonic() - start_s
                return False, f"it refused initialize: {json.dumps(reply)[:200]}", time.monotonic() - start_s
            if proc.poll() is not None:
                break
        elapsed = time.monotonic() - start_s
        timed_out = elapsed >= DEADLINE_S
        if not timed_out:  # stdout closed: the process is exiting; let it, to read its status
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if timed_out:
            return False, f"it did not answer initialize within {DEADLINE_S:.0f} s (Claude Code gives up after " \
                          "about 30 s); a busy machine, or an import that hangs", elapsed
    finally:
        if proc.poll() is None:
            proc.kill()
        try:
            _, err_bytes = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            err_bytes = b""
    tail = [ln for ln in err_bytes.decode(errors="replace").strip().splitlines() if ln.strip()]
    why = tail[-1] if tail else f"it exited with status {proc.returncode} and no message"
    return False, why, elapsed


def main() -> None:
    started, why, seconds = check()
    if started:
        return
    fix = ("Install it where torch is (pip install operator-profiler), or set OPROF_MCP_COMMAND to the "
           "oprof-mcp to run, then restart Claude Code.")
    why = why.rstrip(".")
    message = f"operator-profiler: the oprof MCP server did not start: {why}." + (
        "" if "pip install" in why else f" {fix}")
    print(json.dumps({
        "systemMessage": message,
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": message + " Until then the oprof tools and /optimize cannot run; tell the "
                                           "user this before attempting them.",
        },
    }))


if __name__ == "__main__":
    try:
        main()
    except Exception as err:  # a preflight never blocks the session
        print(f"operator-profiler preflight could not run: {err}", file=sys.stderr)
    sys.exit(0)

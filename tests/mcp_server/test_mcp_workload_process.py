"""``apply_pass`` runs the workload in a child process: hostile workloads cannot take the server down."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.workload_process import ChildLimits
from tests.mcp_server.mcp_helpers import call_err, call_ok, connect

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HOSTILE = {
    "os_exit": ("import os\n\ndef get_model_and_inputs(device='cpu'):\n    os._exit(7)\n",
                "ended the process with exit code 7"),
    "sys_exit_at_import": ("import sys\nsys.exit(3)\n", "called sys.exit(3)"),
    "infinite_loop": ("while True:\n    pass\n", "ran past the 45 s limit and was killed"),
    "huge_print": ("import os\nfor _ in range(300):\n    print('x' * 100_000)\nos._exit(1)\n",
                   "ended the process with exit code 1"),
}


@pytest.mark.parametrize("case", list(HOSTILE), ids=list(HOSTILE))
async def test_hostile_workload_is_a_named_error_and_the_server_lives(workspace: Path, case: str) -> None:
    body, needle = HOSTILE[case]
    (workspace / f"{case}.py").write_text(body)
    limits = ChildLimits(timeout_s=45, output_bytes=8192)
    async with connect(roots=(workspace,), workload_limits=limits) as client:
        text = await call_err(client, "apply_pass", {
            "workload": f"{case}.py", "passes": ["sdpa"], "device": "cpu", "compiler": "eager", "out_dir": "opt"})
        assert needle in text and f"{case}.py" in text
        assert len(text) < 2000  # never the workload's whole output
        listed = await call_ok(client, "list_passes")  # the same server still answers
    assert listed["passes"]
    assert not (workspace / "opt" / "plan.json").exists()

"""The ``/optimize`` protocol as an MCP prompt, so any MCP client's agent can follow it.

The text is the plugin's own command (commands/optimize.md, carried in the wheel as
mcp_server/optimize_prompt.md) without its Claude Code front matter, with the workload and
the user's goal in place of ``$ARGUMENTS`` and the tools named as the server names them.
"""

from __future__ import annotations

import re
from pathlib import Path

from mcp.server import MCPServer

PLUGIN_TOOL_PREFIX = "mcp__plugin_operator-profiler_oprof__"
_SOURCES = (Path(__file__).with_name("optimize_prompt.md"),  # the wheel
            Path(__file__).resolve().parent.parent / "commands" / "optimize.md")  # a source checkout


def protocol_text(workload: str, goal: str = "") -> str:
    """The /optimize protocol for ``workload`` (and the user's ``goal``), ready to send to a model."""
    source = next((p for p in _SOURCES if p.is_file()), None)
    if source is None:
        raise FileNotFoundError("the /optimize protocol (optimize_prompt.md) is missing from this install; "
                                "reinstall operator-profiler")
    text = source.read_text(encoding="utf-8")
    body = re.sub(r"\A---\n.*?\n---\n", "", text, count=1, flags=re.S).lstrip()
    arguments = f"{workload} {goal}".strip()
    return body.replace("$ARGUMENTS", arguments).replace(PLUGIN_TOOL_PREFIX, "")


def register(mcp: MCPServer) -> None:
    @mcp.prompt(name="optimize", title="Optimize a PyTorch workload on an NVIDIA GPU")
    def optimize(workload: str, goal: str = "") -> str:
        """The /optimize protocol: measure, diagnose, transform, validate, re-measure, and claim a speedup
        only end to end. workload: the .py file; goal: constraints such as "keep fp32"."""
        return protocol_text(workload, goal)

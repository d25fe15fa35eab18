"""The Claude Code plugin: manifests, frontmatter, tool names against the live server, and the real CLI."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from mcp_server.server import SERVER_NAME, ServerConfig, create_server

REPO = Path(__file__).resolve().parents[2]
CLAUDE = REPO / "node_modules" / ".bin" / "claude"
TOOL_PREFIX = "mcp__plugin_"
# Claude Code's name for a plugin's MCP tool; characters outside [A-Za-z0-9_-] become "_".
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _plugin() -> dict:
    return json.loads((REPO / ".claude-plugin" / "plugin.json").read_text())


def full_tool_name(tool: str) -> str:
    """The name Claude Code gives a tool of this plugin's MCP server."""
    return _UNSAFE.sub("_", f"mcp__plugin_{_plugin()['name']}_{SERVER_NAME}__{tool}")


def frontmatter(path: Path) -> dict[str, str]:
    """The ``key: value`` lines between the leading ``---`` fences (the subset these files use)."""
    text = path.read_text()
    match = re.match(r"\A---\n(.*?)\n---\n", text, re.DOTALL)
    assert match, f"{path.name}: no frontmatter"
    fields: dict[str, str] = {}
    for line in match.group(1).splitlines():
        key, sep, value = line.partition(": ")
        assert sep and re.fullmatch(r"[a-z-]+", key), f"{path.name}: unexpected frontmatter line {line!r}"
        # A plain YAML scalar cannot hold ": " or start with a flow/indicator character.
        assert ": " not in value and value[:1] not in "[{&*!|>'\"%@`#", f"{path.name}: quote {key}"
        fields[key] = value
    return fields


def listed_tools(fields: dict[str, str], key: str) -> list[str]:
    return [t.strip() for t in fields.get(key, "").split(",") if t.strip()]


COMMANDS = sorted((REPO / "commands").glob("*.md"))
AGENTS = sorted((REPO / "agents").glob("*.md"))


def test_manifests() -> None:
    plugin = _plugin()
    assert plugin["name"] == "operator-profiler"
    assert re.fullmatch(r"\d+\.\d+\.\d+", plugin["version"])
    assert isinstance(plugin["keywords"], list)  # a string here fails to load
    market = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())
    [entry] = market["plugins"]
    assert entry["name"] == plugin["name"] and entry["version"] == plugin["version"]
    assert entry["source"].startswith("./") and ".." not in entry["source"]
    assert (REPO / entry["source"] / ".claude-plugin" / "plugin.json").is_file()
    assert market["owner"]["name"]


def test_mcp_json_launches_the_users_oprof_mcp() -> None:
    servers = json.loads((REPO / ".mcp.json").read_text())["mcpServers"]
    assert list(servers) == [SERVER_NAME]
    server = servers[SERVER_NAME]
    assert server["command"].endswith("oprof-mcp}") or server["command"] == "oprof-mcp"
    assert server["args"] == ["--root", "${CLAUDE_PROJECT_DIR}"]


@pytest.mark.parametrize("path", COMMANDS + AGENTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_frontmatter(path: Path) -> None:
    fields = frontmatter(path)
    assert fields.get("description"), "description is how Claude decides to use it"
    if path.parent.name == "agents":
        assert fields["name"] == path.stem
        assert listed_tools(fields, "tools"), "an agent lists the tools it may call"
    body = path.read_text().split("\n---\n", 1)[1]
    assert len(body.split()) > 80, "the body is the agent's instructions; it says how and by which rules"


def test_optimize_takes_the_workload_argument() -> None:
    text = (REPO / "commands" / "optimize.md").read_text()
    assert "$ARGUMENTS" in text
    for step in ("capture", "attribute", "diagnose", "apply_pass", "validation", "compare", "report"):
        assert step in text


@pytest.mark.anyio
async def test_every_listed_mcp_tool_exists_on_the_server(tmp_path: Path) -> None:
    async with Client(create_server(ServerConfig(roots=(tmp_path,))), raise_exceptions=True) as client:
        served = {full_tool_name(t.name) for t in (await client.list_tools()).tools}
    for path in COMMANDS + AGENTS:
        fields = frontmatter(path)
        mcp_tools = [t for t in listed_tools(fields, "tools") + listed_tools(fields, "allowed-tools")
                     if t.startswith(TOOL_PREFIX)]
        assert mcp_tools, f"{path.name} lists no oprof tools"
        unknown = sorted(set(mcp_tools) - served)
        assert not unknown, f"{path.name} lists tools the server lacks: {unknown}"
    command_tools = set(listed_tools(frontmatter(REPO / "commands" / "optimize.md"), "allowed-tools"))
    assert served <= command_tools, "/optimize pre-approves every oprof tool"


def test_agent_instructions_name_only_their_tools() -> None:
    all_names = {full_tool_name(n).rsplit("__", 1)[1] for n in (
        "capture", "capture_status", "capture_result", "cancel_capture", "list_runs", "attribute",
        "get_operator", "diagnose", "compare", "report", "list_passes", "apply_pass")}
    for path in AGENTS:
        fields = frontmatter(path)
        allowed = {t.rsplit("__", 1)[1] for t in listed_tools(fields, "tools") if t.startswith(TOOL_PREFIX)}
        body = path.read_text().split("\n---\n", 1)[1]
        called = set(re.findall(r"`(\w+)\(", body)) & all_names
        assert called <= allowed, f"{path.name} tells the agent to call {sorted(called - allowed)} it may not"


needs_cli = pytest.mark.skipif(
    not CLAUDE.exists(),
    reason="Claude Code CLI not installed (npm install @anthropic-ai/claude-code in the repository root)")


def _claude(args: list[str], home: Path, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ANTHROPIC"))}
    env["HOME"] = str(home)
    if extra_path is not None:
        env["PATH"] = f"{extra_path}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([str(CLAUDE), *args], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)


@needs_cli
@pytest.mark.slow
@pytest.mark.parametrize("target", [".", ".claude-plugin/plugin.json"], ids=["marketplace", "plugin"])
def test_claude_plugin_validate_strict(tmp_path: Path, target: str) -> None:
    # "." checks the marketplace; the plugin manifest path also checks commands/ and agents/.
    run = _claude(["plugin", "validate", target, "--strict"], tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Validation passed" in run.stdout


@needs_cli
@pytest.mark.slow
def test_claude_mcp_list_connects_the_bundled_server(tmp_path: Path) -> None:
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir()
    shim = shim_dir / "oprof-mcp"
    # The package is not installed here: a shim runs it from this checkout, as pip's script would.
    shim.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m mcp_server \"$@\"\n")
    shim.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    run = _claude(["--plugin-dir", ".", "mcp", "list"], home, extra_path=shim_dir)
    prefix = f"plugin:operator-profiler:{SERVER_NAME}:"
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith(prefix)), None)
    assert line is not None, run.stdout + run.stderr
    assert "Connected" in line, line
    assert f"--root {REPO}" in line  # ${CLAUDE_PROJECT_DIR} became the project directory

"""The Claude Code plugin: manifests, frontmatter, the launcher, tool names on the live server, the real CLI."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from mcp_server.server import SERVER_NAME, ServerConfig, create_server

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "plugin"
LAUNCHER = PLUGIN / "bin" / "oprof-mcp-launcher"
CLAUDE = REPO / "node_modules" / ".bin" / "claude"
TOOL_PREFIX = "mcp__plugin_"
# Claude Code's name for a plugin's MCP tool; characters outside [A-Za-z0-9_-] become "_".
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _plugin() -> dict:
    return json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())


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


COMMANDS = sorted((PLUGIN / "commands").glob("*.md"))
AGENTS = sorted((PLUGIN / "agents").glob("*.md"))


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


def test_marketplace_entry_is_the_plugin_folder_only() -> None:
    # A source of "./" would copy the whole checkout, its .venv included, into the plugin cache.
    [entry] = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())["plugins"]
    assert (REPO / entry["source"]).resolve() == PLUGIN
    assert not (PLUGIN / "pyproject.toml").exists() and not (PLUGIN / ".venv").exists()


def test_plugin_mcp_json_starts_the_launcher() -> None:
    servers = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]
    assert list(servers) == [SERVER_NAME]
    assert servers[SERVER_NAME]["command"] == "${CLAUDE_PLUGIN_ROOT}/bin/oprof-mcp-launcher"
    assert servers[SERVER_NAME]["args"] == ["--root", "${CLAUDE_PROJECT_DIR}"]
    assert os.access(LAUNCHER, os.X_OK)


def test_developer_mcp_json_needs_no_claude_variables() -> None:
    # Claude Code does not define CLAUDE_PROJECT_DIR for a project's own .mcp.json: an unexpanded
    # ${CLAUDE_PROJECT_DIR} there is a "Missing environment variables" error and no server.
    text = (REPO / ".mcp.json").read_text()
    assert "${" not in text
    server = json.loads(text)["mcpServers"][SERVER_NAME]
    assert (REPO / server["command"]).resolve() == LAUNCHER  # relative to the project directory
    assert server["args"] == []  # the root defaults to the working directory, the project


def _launch(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run([str(LAUNCHER), *args], env={**base, **env}, cwd=cwd, capture_output=True,
                          text=True, timeout=30)


def _fake_server(path: Path) -> Path:
    """An executable that prints its own path and arguments, standing in for oprof-mcp."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\necho "$0 $*"\n')
    path.chmod(0o755)
    return path


def test_launcher_without_oprof_mcp_names_the_fix_in_one_line(tmp_path: Path) -> None:
    run = _launch({"CLAUDE_PROJECT_DIR": str(tmp_path)}, "--root", str(tmp_path), cwd=tmp_path)
    assert run.returncode == 127 and run.stdout == ""
    [line] = run.stderr.splitlines()
    assert "pip install operator-profiler" in line and "OPROF_MCP_COMMAND" in line
    assert str(tmp_path / ".venv") in line  # says where it looked


@pytest.mark.parametrize("where", ["path", "virtual_env", "project_venv", "cwd_venv", "command"])
def test_launcher_finds_oprof_mcp(tmp_path: Path, where: str) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    env = {"CLAUDE_PROJECT_DIR": str(project)}
    cwd = elsewhere
    if where == "path":
        server = _fake_server(tmp_path / "bin" / "oprof-mcp")
        env["PATH"] = f"{server.parent}:/usr/bin:/bin"
    elif where == "virtual_env":
        server = _fake_server(tmp_path / "env" / "bin" / "oprof-mcp")
        env["VIRTUAL_ENV"] = str(tmp_path / "env")
    elif where == "project_venv":
        server = _fake_server(project / ".venv" / "bin" / "oprof-mcp")
    elif where == "cwd_venv":  # the developer .mcp.json: no CLAUDE_PROJECT_DIR, cwd is the project
        server = _fake_server(project / ".venv" / "bin" / "oprof-mcp")
        env, cwd = {}, project
    else:
        server = _fake_server(tmp_path / "other" / "serve")
        env["OPROF_MCP_COMMAND"] = f"{server} --log-level INFO"
    cwd.mkdir(exist_ok=True)
    run = _launch(env, "--root", "/x y", cwd=cwd)
    assert run.returncode == 0, run.stderr
    extra = " --log-level INFO" if where == "command" else ""
    assert run.stdout.strip() == f"{server}{extra} --root /x y"


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
    text = (PLUGIN / "commands" / "optimize.md").read_text()
    assert "$ARGUMENTS" in text
    for step in ("capture", "attribute", "diagnose", "apply_pass", "validation", "compare", "report"):
        assert step in text
    allowed = listed_tools(frontmatter(PLUGIN / "commands" / "optimize.md"), "allowed-tools")
    assert "Agent" in allowed and "Task" not in allowed  # Task is only an alias of Agent now


def test_speedups_are_claimed_end_to_end_only() -> None:
    command = " ".join((PLUGIN / "commands" / "optimize.md").read_text().split())
    assert "A speedup is claimed **only end to end**" in command
    assert "host-bound or launch-bound" in command and "`end_to_end.agree` is false" in command
    for name in ("validation-agent", "report-agent"):
        agent = " ".join((PLUGIN / "agents" / f"{name}.md").read_text().split())
        assert "end to end" in agent and "host-bound or launch-bound" in agent, name


def test_rounds_say_what_they_reapply_and_compare_against() -> None:
    text = " ".join((PLUGIN / "commands" / "optimize.md").read_text().split())
    rounds = text[text.index("## Rounds after the first"):text.index("## 10.")]
    assert "apply_pass(workload=<the user's original workload file>, passes=[<kept passes>..., <new pass>]" in rounds
    assert ("compare(baseline=<best run's profile.json>, optimized=<this round's profile.json>, "
            "walltime=<this round's walltime.json>)") in rounds
    assert "compare(baseline=<baseline profile.json>, optimized=<best run's profile.json>, walltime=" in rounds
    assert "on `end_to_end`" in rounds  # a round is kept on wall time per step, not kernel time
    engineer = " ".join((PLUGIN / "agents" / "backend-engineer.md").read_text().split())
    assert "still the user's original workload file" in engineer and "the passes kept in earlier rounds" in engineer
    gate = " ".join((PLUGIN / "agents" / "validation-agent.md").read_text().split())
    assert "`baseline` is the best run so far" in gate


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
    command_tools = set(listed_tools(frontmatter(PLUGIN / "commands" / "optimize.md"), "allowed-tools"))
    assert served <= command_tools, "/optimize pre-approves every oprof tool"


def test_agent_instructions_name_only_their_tools() -> None:
    all_names = {full_tool_name(n).rsplit("__", 1)[1] for n in (
        "capture", "capture_status", "capture_result", "cancel_capture", "list_runs", "attribute",
        "get_operator", "diagnose", "compare", "report", "list_passes", "apply_pass", "walltime",
        "walltime_status", "optimize", "optimize_status", "optimize_result", "cancel_optimize")}
    for path in AGENTS:
        fields = frontmatter(path)
        allowed = {t.rsplit("__", 1)[1] for t in listed_tools(fields, "tools") if t.startswith(TOOL_PREFIX)}
        body = path.read_text().split("\n---\n", 1)[1]
        called = set(re.findall(r"`(\w+)\(", body)) & all_names
        assert called <= allowed, f"{path.name} tells the agent to call {sorted(called - allowed)} it may not"


needs_cli = pytest.mark.skipif(
    not CLAUDE.exists(),
    reason="Claude Code CLI not installed (npm install @anthropic-ai/claude-code in the repository root)")


def _claude(args: list[str], home: Path, extra_path: Path | None = None,
            cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CLAUDE", "ANTHROPIC", "OPROF_")) and k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env["HOME"] = str(home)
    # no oprof-mcp but the shim's: the launcher must not find this checkout's own environment
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not (Path(p) / "oprof-mcp").exists())
    if extra_path is not None:
        env["PATH"] = f"{extra_path}{os.pathsep}{env['PATH']}"
    return subprocess.run([str(CLAUDE), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)


def _shim(tmp_path: Path) -> Path:
    """A folder holding an ``oprof-mcp`` that runs this checkout's server, as pip's script would."""
    shim_dir = tmp_path / "bin"
    shim_dir.mkdir()
    shim = shim_dir / "oprof-mcp"
    shim.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m mcp_server \"$@\"\n")
    shim.chmod(0o755)
    return shim_dir


def _server_line(run: subprocess.CompletedProcess[str], prefix: str) -> str:
    line = next((ln for ln in run.stdout.splitlines() if ln.startswith(prefix)), None)
    assert line is not None, run.stdout + run.stderr
    return line


@needs_cli
@pytest.mark.slow
@pytest.mark.parametrize("target", [".", "plugin"], ids=["marketplace", "plugin"])
def test_claude_plugin_validate_strict(tmp_path: Path, target: str) -> None:
    # "." checks the marketplace; the plugin folder also checks commands/ and agents/.
    run = _claude(["plugin", "validate", target, "--strict"], tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Validation passed" in run.stdout


@needs_cli
@pytest.mark.slow
def test_claude_mcp_list_connects_the_bundled_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    run = _claude(["--plugin-dir", "plugin", "mcp", "list"], home, extra_path=_shim(tmp_path))
    line = _server_line(run, f"plugin:operator-profiler:{SERVER_NAME}:")
    assert "Connected" in line, line
    assert f"--root {REPO}" in line  # ${CLAUDE_PROJECT_DIR} became the project directory


def _checkout(dest: Path, with_venv: bool) -> Path:
    """This checkout's tracked files (working-tree state) in ``dest``, optionally with a fake .venv."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        src = REPO / name
        if src.is_symlink():  # plugin/agents and plugin/commands point at the top-level folders
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / name).symlink_to(os.readlink(src))
        elif src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    if with_venv:
        (dest / ".venv" / "lib").mkdir(parents=True)
        (dest / ".venv" / "lib" / "torch_stand_in.so").write_bytes(b"\0" * 1024)
    return dest


@needs_cli
@pytest.mark.slow
@pytest.mark.parametrize("with_venv", [False, True], ids=["clean", "with-venv"])
def test_marketplace_install_copies_only_the_plugin_and_connects(tmp_path: Path, with_venv: bool) -> None:
    checkout = _checkout(tmp_path / "checkout", with_venv)
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    for args in (["plugin", "marketplace", "add", str(checkout)],
                 ["plugin", "install", "operator-profiler@operator-profiler"]):
        run = _claude(args, home, cwd=project)
        assert run.returncode == 0, run.stdout + run.stderr
    [install] = json.loads((home / ".claude" / "plugins" / "installed_plugins.json").read_text())[
        "plugins"]["operator-profiler@operator-profiler"]
    cache = Path(install["installPath"])
    copied = sorted(p.relative_to(cache).as_posix() for p in cache.rglob("*") if p.is_file())
    plugin_dir = checkout / "plugin"
    shipped = sorted(p.relative_to(plugin_dir).as_posix() for p in plugin_dir.rglob("*") if p.is_file())
    # The plugin's agents/ and commands/ are the top-level folders, reached through links.
    shipped += sorted(f"{link}/{p.name}" for link in ("agents", "commands") for p in (plugin_dir / link).glob("*.md"))
    assert "commands/optimize.md" in copied and any(name.startswith("agents/") for name in copied), copied
    assert copied == sorted(shipped)  # the plugin folder and nothing else: no .venv, no sources, no tests
    prefix = f"plugin:operator-profiler:{SERVER_NAME}:"
    line = _server_line(_claude(["mcp", "list"], home, extra_path=_shim(tmp_path), cwd=project), prefix)
    assert "Connected" in line and f"--root {project}" in line, line
    # Without oprof-mcp anywhere: failed, and the launcher's one line says why (Claude Code's MCP log).
    line = _server_line(_claude(["mcp", "list"], home, cwd=project), prefix)
    assert "Failed" in line, line
    logs = "".join(p.read_text() for p in (home / ".cache").rglob("*.jsonl"))
    assert "pip install operator-profiler" in logs


@needs_cli
@pytest.mark.slow
def test_developer_mcp_json_connects_without_claude_project_dir(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    # the approval a developer gives once in the session's dialog
    (home / ".claude" / "settings.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))
    run = _claude(["mcp", "list"], home, extra_path=_shim(tmp_path))
    line = _server_line(run, f"{SERVER_NAME}: ")
    assert "Connected" in line, line
    assert "Missing environment variables" not in run.stdout + run.stderr


FIRST_REPLY_LIMIT_S = 10.0  # Claude Code gives up after about 30 s; the server answers in ~1-2 s


@needs_cli
@pytest.mark.slow
def test_claude_mcp_list_connects_from_an_empty_project_and_replies_fast(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()  # an empty project: no .venv, no .mcp.json; oprof-mcp only on PATH
    run = _claude(["--plugin-dir", str(PLUGIN), "mcp", "list"], home, extra_path=_shim(tmp_path), cwd=project)
    line = _server_line(run, f"plugin:operator-profiler:{SERVER_NAME}:")
    assert "Connected" in line and f"--root {project}" in line, line
    bench = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_mcp_start.py"), "--repeat", "1",
                            "--json"], capture_output=True, text=True, timeout=120, cwd=project)
    assert bench.returncode == 0, bench.stderr
    first_reply_s = json.loads(bench.stdout)["initialize_s"]
    assert first_reply_s < FIRST_REPLY_LIMIT_S, f"initialize answered after {first_reply_s:.2f} s"

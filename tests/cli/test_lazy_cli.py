"""``oprof`` imports a command's module only when it runs: --help and the analysis commands never load torch."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.main import get_command

from profiler_core.cli import COMMANDS, load_commands

REPO = Path(__file__).resolve().parents[2]
GPT2 = REPO / "examples" / "captures" / "h200" / "gpt2"
HEAVY = ("torch", "sympy", "pandas", "matplotlib")

# Run the CLI in a fresh interpreter, then say which heavy libraries it had imported by the end.
_PROBE = f"""
import json, sys
HEAVY = {HEAVY!r}
from profiler_core.cli import main
try:
    main(sys.argv[1:])
except SystemExit as done:
    code = done.code or 0
else:
    code = 0
print(json.dumps({{"code": code, "loaded": [m for m in HEAVY if m in sys.modules],
                  "layers": sorted({{m.split(".")[1] for m in sys.modules if m.startswith("profiler_core.")}})}}),
      file=sys.stderr)
"""


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    return subprocess.run([sys.executable, "-c", _PROBE, *args], cwd=REPO, env={**clean, **env},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [
    ["--help"],
    ["--version"],
    ["diagnose", str(GPT2 / "baseline"), "--json"],
    ["attribute", str(GPT2 / "baseline"), "--out", "{tmp}/profile.json", "--json"],
    ["report", str(GPT2 / "baseline"), "--html", "{tmp}/report.html"],
    ["compare", str(GPT2 / "baseline"), str(GPT2 / "optimized"), "--json"],
], ids=["help", "version", "diagnose", "attribute", "report", "compare"])
@pytest.mark.slow
def test_light_commands_never_import_torch(tmp_path: Path, args: list[str]) -> None:
    result = _run([a.replace("{tmp}", str(tmp_path)) for a in args])
    verdict = json.loads(result.stderr.strip().splitlines()[-1])
    assert verdict["code"] == 0, result.stderr
    # only a command that draws an HTML report loads the plotting library, and then only it
    drawn = ["matplotlib"] if "--html" in args else []
    assert verdict["loaded"] == drawn, f"oprof {args[0]} imported {verdict['loaded']}"
    assert result.stdout.strip()


@pytest.mark.slow
def test_attribute_of_one_rank_loads_neither_the_analysis_nor_the_multi_rank_layer(tmp_path: Path) -> None:
    # `oprof attribute` should cost what its library calls cost: the rules, roofline and the
    # multi-rank package (which imports them) load only for a command that diagnoses
    layers = {}
    for args in (["attribute", str(GPT2 / "baseline"), "--out", str(tmp_path / "profile.json")],
                 ["diagnose", str(tmp_path / "profile.json"), "--json"]):
        verdict = json.loads(_run(args).stderr.strip().splitlines()[-1])
        assert verdict["code"] == 0, args
        layers[args[0]] = set(verdict["layers"])
    assert "attribution" in layers["attribute"]
    assert not layers["attribute"] & {"analysis", "distributed"}, layers["attribute"]
    assert "analysis" in layers["diagnose"]  # the probe sees the layer when it loads


@pytest.mark.slow
def test_the_probe_sees_a_heavy_import() -> None:
    # the check above can fail: a command that needs torch (the pass registry) is seen loading it
    verdict = json.loads(_run(["passes", "--json"]).stderr.strip().splitlines()[-1])
    assert verdict["code"] == 0 and "torch" in verdict["loaded"]


def test_registry_matches_the_commands() -> None:
    commands = get_command(load_commands()).commands  # type: ignore[attr-defined]
    assert list(commands) == list(COMMANDS)  # every command, in the order of oprof --help
    for name, command in commands.items():
        module, short_help = COMMANDS[name]
        assert command.callback.__module__ == module, name
        assert inspect.cleandoc(command.help).split("\n\n")[0] == short_help, name


@pytest.mark.slow
def test_lazy_help_is_the_eager_help() -> None:
    lazy = _run(["--help"], COLUMNS="200")
    eager = subprocess.run([sys.executable, "-c", "import sys; from profiler_core.cli import load_commands, main; "
                            "load_commands(); main(sys.argv[1:])", "--help"], cwd=REPO, capture_output=True,
                           text=True, env={**os.environ, "COLUMNS": "200"}, timeout=120)
    assert eager.returncode == 0 and "apply-pass" in eager.stdout
    assert lazy.stdout == eager.stdout


def test_unknown_command_suggests_one_not_yet_loaded() -> None:
    result = _run(["diagnos"])
    assert "Did you mean 'diagnose'?" in result.stderr and '"code": 2' in result.stderr

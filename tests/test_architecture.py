"""Imports follow the layers of docs/architecture.md: none points up, none reaches into another package's privates."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
PACKAGES = ("profiler_core", "mcp_server")
# Known, named exceptions (docs/architecture.md says why); each must still occur, so none outlives its fix.
KNOWN = {
    # the package facade re-exports read_profile / write_profile for users, loaded on first use;
    # the project's own modules import the package only for its location
    ("profiler_core", "profiler_core.profile_io"),
    # read_profile holds DRAM counters to the chip's bandwidth, from the peaks table in metrics/peaks.py:
    # to move with that table to the ground layer
    ("profiler_core.profile_checks", "profiler_core.physical_checks"),
}


def read_layers(text: str) -> dict[str, int]:
    """Unit (a subpackage or a top-level module of profiler_core, or mcp_server) -> its layer, lowest 0."""
    block = re.search(r"<!-- layers: lowest first -->\s*```text\n(.*?)```", text, re.S)
    if block is None:
        raise AssertionError(f"{DOC}: no '<!-- layers: lowest first -->' block")
    layers: dict[str, int] = {}
    for level, line in enumerate(ln for ln in block.group(1).splitlines() if ln.strip()):
        _, _, units = line.partition(":")
        for unit in units.split():
            layers[unit] = level
    return layers


def unit_of(module: str) -> str:
    """``profiler_core.capture.pipeline`` -> ``capture``; ``profiler_core`` -> ``__init__``; mcp_server as one."""
    parts = module.split(".")
    if parts[0] == "mcp_server":
        return "mcp_server"
    return parts[1] if len(parts) > 1 else "__init__"


@dataclass(frozen=True)
class Violation:
    where: str
    what: str


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def check_source(name: str, source: str, layers: dict[str, int], *, is_package: bool = False) -> list[Violation]:
    """Every import in ``source`` (module ``name``) that points up a layer or takes another package's private."""
    here = unit_of(name)
    if here not in layers:
        return [Violation(name, f"{here} is in no layer of docs/architecture.md")]
    found: list[Violation] = []
    for node in ast.walk(ast.parse(source)):
        targets: list[tuple[str, list[str]]] = []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                pkg = name.split(".") if is_package else name.split(".")[:-1]
                base = ".".join(pkg[: len(pkg) - node.level + 1] + ([base] if base else []))
            targets.append((base, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            targets.extend((a.name, []) for a in node.names)
        for module, names in targets:
            if module.split(".")[0] not in PACKAGES:
                continue
            there = unit_of(module)
            if there not in layers:
                found.append(Violation(name, f"imports {module}, which is in no layer"))
                continue
            if layers[there] > layers[here]:
                found.append(Violation(name, f"imports {module} from a higher layer ({there} above {here})"))
            if there != here:
                private = [m for m in module.split(".")[1:] if m.startswith("_") and not m.startswith("__")]
                private += [n for n in names if n.startswith("_") and not n.startswith("__")]
                if private:
                    found.append(Violation(name, f"imports {module}:{private[0]}, private to {there}"))
    return found


def all_violations(layers: dict[str, int]) -> list[Violation]:
    out: list[Violation] = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            out += check_source(module_name(path), path.read_text(), layers, is_package=path.name == "__init__.py")
    return out


@pytest.fixture(scope="module")
def layers() -> dict[str, int]:
    return read_layers(DOC.read_text())


def test_every_package_is_in_a_layer(layers: dict[str, int]) -> None:
    units = {unit_of(module_name(p)) for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}
    assert units - set(layers) == set()
    assert {"ingest", "rundir", "attribution", "analysis", "capture", "api", "cli"} <= set(layers)


def _known(v: Violation) -> bool:
    return any(v.where == where and f"imports {module} " in f"{v.what} " for where, module in KNOWN)


def test_no_import_points_up_or_reaches_a_private(layers: dict[str, int]) -> None:
    found = all_violations(layers)
    problems = [v for v in found if not _known(v)]
    assert problems == [], "\n".join(f"{v.where}: {v.what}" for v in problems)
    stale = [k for k in KNOWN if not any(v.where == k[0] and f"imports {k[1]} " in f"{v.what} " for v in found)]
    assert stale == [], f"fixed: remove {stale} from KNOWN"


def test_the_check_catches_an_upward_and_a_private_import(layers: dict[str, int]) -> None:
    source = ("from profiler_core.analysis.diagnose import diagnose\n"
              "from profiler_core.capture.pipeline import _find_tools\n"
              "def f():\n    import profiler_core.api\n")
    found = [v.what for v in check_source("profiler_core.attribution.engine", source, layers)]
    assert any("higher layer (analysis above attribution)" in w for w in found)
    assert any("private to capture" in w for w in found)
    assert any("profiler_core.api" in w for w in found)  # an import inside a function counts too
    same_package = "from profiler_core.capture.pipeline import _find_tools\n"
    assert check_source("profiler_core.capture.phases", same_package, layers) == []
    relative = "from ..analysis import diagnose\n"
    assert check_source("profiler_core.ingest.kineto", relative, layers)


# ------------------------------------------------------------------ the optimize run's layout

LAYOUT_MODULE = "profiler_core.rundir.layout"


def _optimize_names() -> frozenset[str]:
    from profiler_core.rundir import layout

    return frozenset({layout.OPTIMIZE_NAME, layout.WALLTIME_NAME, layout.COMPARISON_NAME,
                      layout.OPTIMIZED_WORKLOAD_NAME})


def spelled_names(source: str, names: frozenset[str]) -> list[str]:
    """String literals in ``source`` that spell one of the optimize layout's names, or a trial directory."""
    found = []
    tree = ast.parse(source)
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in parts:
            if node.value in names or node.value.startswith("trial-"):
                found.append(node.value)
        elif isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant) and str(first.value).startswith("trial-"):
                found.append(f"f'{first.value}...'")
    return found


def test_only_rundir_spells_the_optimize_layout() -> None:
    names = _optimize_names()
    problems = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if module_name(path) == LAYOUT_MODULE:
                continue
            problems += [f"{module_name(path)}: {n}" for n in spelled_names(path.read_text(), names)]
    assert problems == [], "use the names of profiler_core/rundir/layout.py:\n" + "\n".join(problems)


def test_the_layout_check_catches_a_spelled_name() -> None:
    names = _optimize_names()
    source = 'out = run / "optimize.json"\nt = run / f"trial-{i}-{name}"\nok = "optimize"\n'
    assert spelled_names(source, names) == ["optimize.json", "f'trial-...'"]
    assert names >= {"optimize.json", "walltime.json", "comparison.json", "workload_optimized.py"}

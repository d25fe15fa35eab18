"""Rules come through a registry like passes, and a plugin rule can license a plugin pass by its name."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from profiler_core.analysis import FindingKind, diagnose
from profiler_core.analysis import rules as rule_registry
from profiler_core.attribution import attribute_run
from profiler_core.errors import ProfilerError
from profiler_core.optimize.loop import candidate_passes
from profiler_core.passes import registry as pass_registry
from profiler_core.passes.findings import read_findings
from profiler_core.passes.manager import resolve_requests
from profiler_core.schema import Profile

JOINABLE = Path(__file__).parents[1] / "data" / "h200_joinable"

PASS_PLUGIN = """
    from profiler_core.passes import PassEffect, PassLevel, register_pass

    @register_pass("plugin_fusion", level=PassLevel.POST_GRAD, symptom="a chain the plugin fuses",
                   source="plugin-under-test")
    def plugin_fusion(ctx):
        '''Fuse what the plugin knows how to fuse.'''
        return PassEffect()
"""

RULE_PLUGIN = """
    from profiler_core.analysis import FindingKind, rule

    @rule("plugin_symptom", licenses=("plugin_fusion",), source="plugin-under-test")
    def plugin_symptom(ctx):
        top = max(ctx.ops, key=lambda op: op.duration_ns)
        return [ctx.finding("plugin_symptom", title="the plugin's symptom", kind=FindingKind.OPTIMIZATION,
                            symptom="the longest operator", bottleneck="whatever the plugin measures",
                            ops=[top], transformation="plugin_fusion")]
"""


def _plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: object, module: str, source: str) -> None:
    """Make ``module`` (written from ``source``) the one entry point of ``registry``'s group."""
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    entry = SimpleNamespace(name="under_test", value=module, dist=SimpleNamespace(name="oprof-plugin-under-test"),
                            load=lambda: importlib.import_module(module))
    group = registry.ENTRY_POINT_GROUP  # type: ignore[attr-defined]
    monkeypatch.setattr(registry, "entry_points", lambda group, g=group: [entry] if group == g else [])
    monkeypatch.setattr(registry, "_plugins_loaded", False)


@pytest.fixture(scope="module")
def real() -> Profile:
    return attribute_run(JOINABLE)


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    _plugin(tmp_path, monkeypatch, rule_registry, "oprof_rules_under_test", RULE_PLUGIN)
    _plugin(tmp_path, monkeypatch, pass_registry, "oprof_passes_under_test", PASS_PLUGIN)
    yield
    rule_registry.unregister_rule("plugin_symptom")
    pass_registry.unregister_pass("plugin_fusion")


def test_a_plugin_rule_licenses_a_plugin_pass(plugins: None, real: Profile, tmp_path: Path) -> None:
    report = diagnose(real)
    assert "plugin_symptom" in report.rules_run  # found through its entry point, run with the built-ins
    assert rule_registry.registered_rules()["plugin_symptom"].source == "plugin-under-test"
    (finding,) = report.by_rule("plugin_symptom")
    assert finding.transformation == "plugin_fusion" and finding.licenses == "plugin_fusion"
    assert "oprof_passes_under_test" not in sys.modules  # diagnosing did not need the pass itself
    path = tmp_path / "findings.json"
    path.write_text(report.model_dump_json(indent=1))
    written = {f["rule_id"]: f["transformation"] for f in json.loads(path.read_text())["findings"]}
    assert written["plugin_symptom"] == "plugin_fusion"
    requests = {spec.name: by for spec, by, _ in resolve_requests([], read_findings(path))}
    assert requests["plugin_fusion"] and all(label.startswith("finding") for label in requests["plugin_fusion"])
    assert ("plugin_fusion", "plugin_symptom") in candidate_passes(report)


def test_a_finding_naming_no_registered_pass_is_refused(real: Profile) -> None:
    @rule_registry.rule("test_unlicensed")
    def unlicensed(ctx: rule_registry.RuleContext) -> list:
        return [ctx.finding("test_unlicensed", title="t", kind=FindingKind.NOTE, symptom="s",
                            bottleneck="b", ops=ctx.ops[:1], transformation="nowhere_pass")]

    try:
        with pytest.raises(ProfilerError, match="'nowhere_pass' is neither a built-in nor a registered pass"):
            diagnose(real, rules=["test_unlicensed"])
    finally:
        rule_registry.unregister_rule("test_unlicensed")


def test_a_broken_rule_plugin_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real: Profile) -> None:
    _plugin(tmp_path, monkeypatch, rule_registry, "oprof_rules_broken", "raise ImportError('needs scipy')\n")
    with pytest.raises(ProfilerError, match=r"rule plugin 'under_test' .*oprof-plugin-under-test.* failed to load: "
                                            r"ImportError: needs scipy"):
        diagnose(real)


def test_diagnose_names_no_rule_itself() -> None:
    source = (Path(rule_registry.__file__).parent / "diagnose.py").read_text()
    for rule_id in rule_registry.registered_rules():
        assert f'"{rule_id}"' not in source, rule_id

"""The registry: built-ins and plugins share one door (decorator, entry points); the manager's ceremony."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from profiler_core.errors import PassError
from profiler_core.passes import (
    PassContext,
    PassEffect,
    PassLevel,
    PassStatus,
    apply_passes,
    get_pass,
    list_passes,
    register_pass,
    registry,
)
from tests.passes.models import MLP

BUILT_IN = {
    "rnn_reroute": PassLevel.DYNAMO_FX, "static_kv_cache": PassLevel.DYNAMO_FX, "qkv_fusion": PassLevel.DYNAMO_FX,
    "moe_grouped_experts": PassLevel.DYNAMO_FX,
    "sdpa": PassLevel.DYNAMO_FX,
    "bf16_promotion": PassLevel.DYNAMO_FX, "cast_cancellation": PassLevel.POST_GRAD,
    "tf32": PassLevel.INDUCTOR_CONFIG, "freezing": PassLevel.INDUCTOR_CONFIG,
    "cuda_graphs": PassLevel.INDUCTOR_CONFIG, "conv_bn_folding": PassLevel.DYNAMO_FX,
    "channels_last": PassLevel.DYNAMO_FX, "fused_optimizer": PassLevel.DYNAMO_FX,
    "inductor_compile": PassLevel.INDUCTOR_CONFIG, "bf16_autocast": PassLevel.DYNAMO_FX,
    "compiled_optimizer_step": PassLevel.INDUCTOR_CONFIG, "whole_step_cuda_graphs": PassLevel.INDUCTOR_CONFIG,
    "step_graph_capture": PassLevel.INDUCTOR_CONFIG,
}


@pytest.fixture
def scratch_pass() -> Iterator[str]:
    name = "scratch_test_pass"
    yield name
    registry.unregister_pass(name)


def test_built_ins_listed_by_level_with_symptoms() -> None:
    specs = {s.name: s for s in list_passes() if s.source == "builtin"}
    assert {name: s.level for name, s in specs.items()} == BUILT_IN
    assert all(s.symptom and s.description for s in specs.values())
    levels = [s.level.number for s in list_passes()]
    assert levels == sorted(levels)
    assert specs["rnn_reroute"].structural and not specs["sdpa"].structural
    assert {n for n, s in specs.items() if s.inference_only} == {"freezing", "conv_bn_folding", "static_kv_cache",
                                                                 "moe_grouped_experts"}


@pytest.mark.parametrize(("alias", "name"), [
    ("bf16", "bf16_promotion"), ("cudagraphs", "cuda_graphs"), ("QKV-Fusion", "qkv_fusion"),
    ("sdpa_canonicalization", "sdpa"), ("cudnn_rnn", "rnn_reroute"),
], ids=["bf16", "cudagraphs", "kebab-case", "sdpa-alias", "rnn-alias"])
def test_aliases_and_spellings_resolve(alias: str, name: str) -> None:
    assert get_pass(alias).name == name


def test_unknown_pass_names_the_known_ones() -> None:
    with pytest.raises(PassError,
                       match=r"unknown pass 'fuse_everything'; known passes: bf16_autocast, bf16_promotion, "):
        get_pass("fuse_everything")


def test_outside_pass_registers_like_a_built_in(scratch_pass: str) -> None:
    @register_pass(scratch_pass, level=PassLevel.INDUCTOR_CONFIG, symptom="testing", source="tests")
    def scratch(ctx: PassContext) -> PassEffect:
        """Declines on CPU, like a real GPU-only pass."""
        return PassEffect.not_applied(f"device is {ctx.device}") if ctx.device == "cpu" else PassEffect()

    assert get_pass(scratch_pass).description == "Declines on CPU, like a real GPU-only pass."
    assert scratch_pass in [s.name for s in list_passes()]
    _, record = apply_passes(MLP().eval(), (torch.randn(2, 16),), [scratch_pass], device="cpu",
                             compiler="eager")
    rec = record.record(scratch_pass)
    assert (rec.status, rec.reason) == (PassStatus.NOT_APPLIED, "device is cpu")
    assert rec.level is PassLevel.INDUCTOR_CONFIG


def test_two_passes_one_name_is_an_error(scratch_pass: str) -> None:
    def first(ctx: PassContext) -> PassEffect:
        return PassEffect()

    def second(ctx: PassContext) -> PassEffect:
        return PassEffect.not_applied("x")

    register_pass(scratch_pass, level=PassLevel.DYNAMO_FX, symptom="a")(first)
    with pytest.raises(PassError, match="registered twice"):
        register_pass(scratch_pass, level=PassLevel.DYNAMO_FX, symptom="b")(second)


@pytest.mark.parametrize(("body", "message"), [
    ("raise RuntimeError('boom')", "pass 'scratch_test_pass' failed while being applied: RuntimeError: boom"),
    ("return 42", "returned int, not a PassEffect"),
], ids=["raises", "wrong-return-type"])
def test_failing_pass_becomes_pass_error(scratch_pass: str, body: str, message: str) -> None:
    namespace: dict[str, Any] = {}
    exec(f"def broken(ctx):\n    {body}", namespace)  # noqa: S102 - a throwaway pass body
    register_pass(scratch_pass, level=PassLevel.DYNAMO_FX, symptom="t")(namespace["broken"])
    with pytest.raises(PassError, match=message):
        apply_passes(MLP().eval(), (torch.randn(2, 16),), [scratch_pass], device="cpu", compiler="eager")


def _fake_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str) -> None:
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    entry = SimpleNamespace(name="under_test", value=module,
                            dist=SimpleNamespace(name="oprof-plugin-under-test"),
                            load=lambda: importlib.import_module(module))
    monkeypatch.setattr(registry, "entry_points",
                        lambda group: [entry] if group == registry.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(registry, "_plugins_loaded", False)


def test_entry_point_plugin_is_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_entry_points(tmp_path, monkeypatch, "oprof_plugin_good", """
        from profiler_core.passes import PassEffect, PassLevel, register_pass

        @register_pass("plugin_pass", level=PassLevel.POST_GRAD, symptom="s", source="plugin-under-test")
        def plugin_pass(ctx):
            '''A pass from an outside package.'''
            return PassEffect()
    """)
    try:
        spec = get_pass("plugin_pass")
        assert (spec.level, spec.source) == (PassLevel.POST_GRAD, "plugin-under-test")
    finally:
        registry.unregister_pass("plugin_pass")


def test_broken_plugin_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_entry_points(tmp_path, monkeypatch, "oprof_plugin_broken", "raise ImportError('needs tensorrt')\n")
    expected = (r"pass plugin 'under_test' .*oprof-plugin-under-test.* failed to load: "
                r"ImportError: needs tensorrt; fix or uninstall")
    with pytest.raises(PassError, match=expected):
        list_passes()


def test_rewrite_failing_inside_the_backend_names_the_pass(scratch_pass: str) -> None:
    def explode(gm: Any, info: Any) -> Any:
        raise ValueError("unexpected node")

    register_pass(scratch_pass, level=PassLevel.DYNAMO_FX, symptom="t")(
        lambda ctx: PassEffect(graph_rewrite=explode))
    with pytest.raises(PassError, match=f"pass '{scratch_pass}' failed on Dynamo graph 0: ValueError: "
                                        "unexpected node; run the plan without it"):
        apply_passes(MLP().eval(), (torch.randn(2, 16),), [scratch_pass], device="cpu", compiler="eager")


def test_every_built_in_transformation_is_a_pass_or_declared_without_one() -> None:
    from profiler_core.transformations import WITHOUT_BUILTIN_PASS, Transformation, known_transformations

    named = {n for spec in list_passes() if spec.source == "builtin" for n in (spec.name, *spec.aliases)}
    assert {t.value for t in Transformation} - named == WITHOUT_BUILTIN_PASS
    assert named <= known_transformations()  # registering a pass makes its names licensable


def test_an_applicability_check_says_why_a_pass_cannot_apply() -> None:
    from profiler_core.passes.registry import unregister_pass

    def needs_conv(ctx: PassContext) -> str | None:
        return None if any(isinstance(m, torch.nn.Conv2d) for m in ctx.model.modules()) else "no nn.Conv2d"

    def broken(ctx: PassContext) -> str | None:
        raise RuntimeError("hook bug")

    try:
        register_pass("needs_conv_test", level=PassLevel.DYNAMO_FX, symptom="s", applicable=needs_conv,
                      suggests=("cuda-graphs",))(lambda ctx: PassEffect())
        register_pass("broken_hook_test", level=PassLevel.DYNAMO_FX, symptom="s", applicable=broken)(
            lambda ctx: PassEffect())
        spec = get_pass("needs_conv_test")
        assert spec.suggests == ("cuda_graphs",)
        linear = PassContext(model=torch.nn.Linear(2, 2).eval(), inputs=(), device="cpu")
        conv = PassContext(model=torch.nn.Conv2d(2, 2, 1).eval(), inputs=(), device="cpu")
        assert spec.cannot_apply(linear) == "no nn.Conv2d" and spec.cannot_apply(conv) is None
        assert "raised RuntimeError: hook bug" in (get_pass("broken_hook_test").cannot_apply(linear) or "")
        # built-in checks: a train-mode model for an inference-only pass, a CPU for CUDA graphs
        assert "train mode" in (get_pass("conv_bn_folding").cannot_apply(
            PassContext(model=torch.nn.Sequential(torch.nn.Conv2d(2, 2, 1), torch.nn.BatchNorm2d(2)).train(),
                        inputs=(), device="cpu")) or "")
        assert "CUDA device" in (get_pass("cuda_graphs").cannot_apply(linear) or "")
        assert "already torch.bfloat16" in (get_pass("bf16_promotion").cannot_apply(
            PassContext(model=torch.nn.Linear(2, 2).to(torch.bfloat16), inputs=(), device="cpu")) or "")
    finally:
        unregister_pass("needs_conv_test")
        unregister_pass("broken_hook_test")

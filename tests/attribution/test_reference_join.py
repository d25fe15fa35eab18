"""Every shipped capture's profile agrees, kernel by kernel, with a join written from the raw records."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.attribution import attribute, attribute_run
from profiler_core.ingest import read_inductor, read_kineto, read_ncu, read_nsys
from profiler_core.schema import OperatorClass, Profile, Tier
from tests.attribution.reference_join import reference_join, triton_operator

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted(p.parent for p in (ROOT / "examples" / "captures" / "h200").glob("*/*/manifest.json"))
_LIBRARY_CLASSES = (OperatorClass.GEMM, OperatorClass.CONVOLUTION, OperatorClass.ATTENTION)
JOINABLE = ROOT / "tests" / "data" / "h200_joinable"


def _output_code(run: Path) -> Path | None:
    return next((p for p in (run / "inductor" / "output_code.log", run / "inductor" / "output_code.log.gz",
                             run / "output_code.log") if p.exists()), None)


def _disagreements(profile: Profile, kineto: Path, output_code: Path | None,
                   provenance: bool = False) -> tuple[list[str], int]:
    """``provenance``: the capture ships its TORCH_TRACE, whose kernel provenance the profile reads and the
    reference does not (it names a combo kernel that the output code heads "Original ATen: []")."""
    ref = reference_join(kineto, output_code)
    unnamed_ok = (Tier.UNATTRIBUTED, Tier.CUDA_GRAPH, *((Tier.INDUCTOR_FUSION,) if provenance else ()))
    ops = {op.key: op for op in profile.operators}
    kernels = sorted(profile.kernels, key=lambda k: k.start_ns)
    assert len(kernels) == len(ref), "the profile and the raw trace hold different kernels"
    bad, checked = [], 0
    for k, r in zip(kernels, ref, strict=True):
        if r.operator is None:
            # nothing in the raw records names an operator: the profile may only say so too, or
            # name one from a CUDA graph's captured launch order (the test of graphs.py checks those)
            assert k.attribution.tier in unnamed_ok, (k.id, k.name, r.why)
            continue
        checked += 1
        op = ops.get(k.attribution.operator_key or "")
        if op is None or op.name != r.operator:
            bad.append(f"kernel {k.id} {k.name[:60]}: profile {op.name if op else None}, raw records "
                       f"{r.operator} ({r.why})")
        elif k.name.startswith(("triton_poi", "triton_per", "triton_red")) and op.op_class in _LIBRARY_CLASSES:
            bad.append(f"kernel {k.id} {k.name[:60]}: a pointwise/reduction kernel classed {op.op_class.value}")
    return bad, checked


# Where the two rules name a fused kernel differently by convention, not by error: each entry is a
# kernel-name fragment, the two names, and why. The test checks that each still occurs.
CONVENTIONS = {
    "hf_mixtral_moe": {
        "masked_fill_mul_silu": ("aten::silu", "aten::masked_fill", "a SwiGLU kernel that also applies the "
                                 "sentinel mask: the profile files it under the composite op Inductor decomposed "
                                 "(evidence.primary_op), the reference under the first elementwise op"),
        "arange_index_put": ("aten::arange", "aten::index_put", "x[...] = arange(...): two ops of one class; the "
                             "profile takes Inductor's first, the reference counts arange as a fill"),
    },
}
CONVENTIONS["hf_mixtral_moe_grouped"] = CONVENTIONS["hf_mixtral_moe"]  # the same model, its experts grouped
# Captures whose Inductor log the project refuses while the reference reads it (none now: the whole
# training step's graph, whose optimizer's combo kernels carry an "Unsorted Source Nodes" header,
# is read since).
REFUSED_LOG: set[str] = set()


def _known(run: Path, bad: list[str]) -> tuple[list[str], set[str]]:
    """``bad`` without the CONVENTIONS entries of ``run`` (and which of those entries occurred)."""
    rules = CONVENTIONS.get(run.parent.name, {})
    seen: set[str] = set()
    left = []
    for line in bad:
        hit = next((frag for frag, (ours, ref, _) in rules.items()
                    if frag in line and f"profile {ours}, raw records {ref}" in line), None)
        if hit is None:
            left.append(line)
        else:
            seen.add(hit)
    return left, seen


RUN_PARAMS = [pytest.param(p, id=f"{p.parent.name}/{p.name}", marks=pytest.mark.xfail(
    strict=True, reason="the project refuses this capture's partial Inductor log (see REFUSED_LOG)"))
    if f"{p.parent.name}/{p.name}" in REFUSED_LOG else pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in RUNS]


@pytest.mark.parametrize("run", RUN_PARAMS)
def test_shipped_capture_agrees_with_the_raw_records(run: Path) -> None:
    profile = attribute_run(run)
    bad, checked = _disagreements(profile, run / "kineto.json.gz", _output_code(run),
                                  provenance=(run / "inductor" / "torch_trace.tgz").exists())
    bad, seen = _known(run, bad)
    assert seen == set(CONVENTIONS.get(run.parent.name, {})), "a convention entry no longer occurs"
    # A CUDA graph replay records no launch per kernel: the raw records name only the kernels that
    # Inductor's output code names (ResNet-50's graphed cuDNN convolutions are not among them).
    graphed = any("CUDA graph replays" in w for w in profile.warnings)
    assert checked > (0.4 if graphed else 0.5) * len(profile.kernels)
    assert not bad, f"{len(bad)} of {checked} kernels disagree:\n" + "\n".join(bad[:15])


def test_joinable_capture_agrees_with_the_raw_records() -> None:
    profile = attribute(kineto=read_kineto(JOINABLE / "kineto.json"), nsys=read_nsys(JOINABLE / "nsys.sqlite"),
                        ncu=read_ncu(JOINABLE / "ncu_full_raw.csv"),
                        inductor=read_inductor(JOINABLE / "torch_trace.tgz"))
    bad, checked = _disagreements(profile, JOINABLE / "kineto.json", JOINABLE / "output_code.log")
    assert checked == len(profile.kernels) == 44
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(("kernel", "aten", "operator"), [
    ("triton_poi_fused_addmm_gelu_view_6", ["aten.addmm", "aten.view", "aten.gelu"], "aten::gelu"),
    ("triton_poi_fused_clone_transpose_view_4", ["aten.view", "aten.transpose", "aten.clone"], "aten::clone"),
    ("triton_tem_fused_addmm_0", ["aten.addmm"], "aten::addmm"),
], ids=["epilogue", "copy", "template"])
def test_the_reference_rule(kernel: str, aten: list[str], operator: str) -> None:
    assert triton_operator(kernel, aten) == operator

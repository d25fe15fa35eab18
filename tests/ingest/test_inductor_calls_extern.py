"""Inductor's call() on a real H200 ResNet-18 capture: convolutions assigned from extern_kernels."""

from __future__ import annotations

from profiler_core.attribution.evidence import extern_classes_of
from profiler_core.attribution.operator_class import classify_operator
from profiler_core.ingest import read_inductor
from profiler_core.schema import OperatorClass
from tests.conftest import REPO

RESNET = REPO / "examples" / "captures" / "h200" / "tv_resnet18" / "baseline" / "inductor"


def test_assigned_extern_convolutions_are_library_calls() -> None:
    # ``buf2 = extern_kernels.convolution(...)``: cuDNN ran the convolution, so a Triton kernel that
    # names it beside a batch norm holds the batch norm, not the convolution
    (calls,) = read_inductor(RESNET).call_sequences
    extern = [c for c in calls if c.kind == "extern"]
    assert sum(c.name == "aten::convolution" for c in extern) == 20  # ResNet-18's 20 convolutions
    assert OperatorClass.CONVOLUTION in extern_classes_of(calls)
    assert all(classify_operator(c.name) in (OperatorClass.CONVOLUTION, OperatorClass.GEMM) for c in extern)

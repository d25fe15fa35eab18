"""Generated-kernel names and fused-op filing."""

from __future__ import annotations

import pytest

from profiler_core.attribution.evidence import EXTERN_CLASSES, extern_classes_of, ops_from_kernel_name, primary_op
from profiler_core.records import InductorCall
from profiler_core.schema import OperatorClass


@pytest.mark.parametrize(
    ("kernel", "ops"),
    [
        ("triton_per_fused_native_layer_norm_0", ("aten::native_layer_norm",)),
        ("triton_per_fused__softmax_amax_div_mul_sub_view_3",
         ("aten::_softmax", "aten::amax", "aten::div", "aten::mul", "aten::sub", "aten::view")),
        ("triton_poi_fused_addmm_relu_view_6", ("aten::addmm", "aten::relu", "aten::view")),
        ("triton_red_fused__to_copy_add_2", ("aten::_to_copy", "aten::add")),
        ("triton_poi_fused_0", ()),
        ("sm80_xmma_gemm_f32f32", ()),
    ],
    ids=["layer-norm", "softmax", "epilogue", "to-copy", "no-ops", "not-generated"],
)
def test_ops_from_kernel_name(kernel: str, ops: tuple[str, ...]) -> None:
    assert ops_from_kernel_name(kernel) == ops


@pytest.mark.parametrize(
    ("ops", "primary"),
    [
        (["aten::mul", "aten::amax", "aten::sub", "aten::exp", "aten::_softmax"], "aten::_softmax"),
        (["aten::view", "aten::addmm", "aten::relu"], "aten::addmm"),
        (["aten::clone", "aten::transpose", "aten::view"], "aten::clone"),
        (["aten::add", "aten::mean", "aten::rsqrt", "aten::mul"], "aten::mean"),
        ([], None),
    ],
    ids=["softmax-wins", "gemm-over-epilogue", "copy-over-view", "reduction-over-elementwise", "empty"],
)
def test_primary_op(ops: list[str], primary: str | None) -> None:
    assert primary_op(ops) == primary


@pytest.mark.parametrize(
    ("kernel", "ops", "primary"),
    [
        ("triton_poi_fused_addmm_gelu_view_6", ["aten::addmm", "aten::view", "aten::gelu"], "aten::gelu"),
        ("triton_per_fused_add_addmm_native_layer_norm_view_7",
         ["aten::addmm", "aten::view", "aten::add", "aten::native_layer_norm"], "aten::native_layer_norm"),
        ("triton_poi_fused_convolution_relu_2", ["aten::convolution", "aten::relu"], "aten::relu"),
        ("triton_poi_fused_addmm_clone_transpose_view_1",
         ["aten::addmm", "aten::view", "aten::transpose", "aten::clone"], "aten::clone"),
        ("triton_poi_fused_clone_transpose_view_4", ["aten::view", "aten::transpose", "aten::clone"], "aten::clone"),
        ("triton_tem_fused_addmm_relu_0", ["aten::addmm", "aten::relu"], "aten::addmm"),
        ("triton_red_fused_mm_0", ["aten::mm"], "aten::mm"),
    ],
    ids=["gelu-epilogue", "layer-norm-epilogue", "conv-epilogue", "bias-copy", "copy-not-view", "template-gemm",
         "decomposed-gemm"],
)
def test_fused_kernel_is_filed_under_its_own_work(kernel: str, ops: list[str], primary: str) -> None:
    # the GEMM or convolution of an epilogue ran in a library kernel; a template computes it itself
    assert primary_op(ops, kernel) == primary


def test_a_graph_without_library_gemms_keeps_the_gemm_in_the_kernel() -> None:
    calls = [InductorCall("triton", "triton_poi_fused_addmm_relu_0"), InductorCall("extern", "aten::convolution")]
    extern = extern_classes_of(calls)
    assert extern == {OperatorClass.CONVOLUTION}
    assert primary_op(["aten::addmm", "aten::relu"], "triton_red_fused_addmm_relu_0", extern) == "aten::addmm"
    assert extern_classes_of([]) == EXTERN_CLASSES  # unknown launch order: Inductor's defaults

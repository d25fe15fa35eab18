"""Generated-kernel names and fused-op filing."""

from __future__ import annotations

import pytest

from profiler_core.attribution.evidence import ops_from_kernel_name, primary_op


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

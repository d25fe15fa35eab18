"""Operator class, GEMM precision and overhead kind from names as the three sources spell them."""

from __future__ import annotations

import pytest

from profiler_core.attribution.operator_class import (
    aten_name,
    classify_operator,
    gemm_precision,
    overhead_kind,
    triton_ops,
)
from profiler_core.schema import OperatorClass as C
from tests.analysis.real_profiles import pair_profile

CLASS_CASES = [
    ("aten::addmm", (), C.GEMM),
    ("aten::bmm", (), C.GEMM),
    ("aten::_cudnn_attention_forward", (), C.ATTENTION),
    ("aten::native_layer_norm", (), C.NORMALIZATION),
    ("aten::_softmax", (), C.REDUCTION),
    ("aten::_to_copy", (), C.CAST_COPY),
    ("aten::lstm", (), C.RNN),
    ("aten::relu", (), C.ELEMENTWISE),
    ("aten::some_new_op", (), C.OTHER),
    ("triton_poi_fused_addmm_clone_transpose_view_1", (), C.ELEMENTWISE),  # a bias epilogue, not a GEMM
    ("triton_poi_fused_clone_transpose_view_4", (), C.CAST_COPY),
    ("triton_poi_fused__to_copy_0", (), C.CAST_COPY),
    ("triton_per_fused__softmax_amax_div_mul_sub_view_3", (), C.REDUCTION),
    ("triton_per_fused__to_copy_native_layer_norm_0", (), C.NORMALIZATION),
    ("triton_tem_fused_addmm_relu_0", (), C.GEMM),
    ("triton_poi_fused_0", ("aten.relu", "aten.add"), C.ELEMENTWISE),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4", (), C.GEMM),
    ("nvjet_sm90_tst_64x64_64x13_4x2_h_bz_bias_TNT", (), C.GEMM),
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float>", (), C.GEMM),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7", (), C.ATTENTION),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nhwc", (), C.CONVOLUTION),
    ("RNN_blockPersist_fp_LSTM<float, float, float>", (), C.RNN),
    ("elemWiseRNNcell<float, float, float, 3>", (), C.RNN),
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", (), C.COMMUNICATION),
    ("void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>", (), C.ELEMENTWISE),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>", (), C.REDUCTION),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>", (), C.CAST_COPY),
    ("Memcpy DtoD (Device -> Device)", (), C.CAST_COPY),
]


@pytest.mark.parametrize(("name", "fused", "expected"), CLASS_CASES, ids=[c[0][:48] for c in CLASS_CASES])
def test_classify_operator(name: str, fused: tuple[str, ...], expected: C) -> None:
    assert classify_operator(name, fused) is expected


def test_every_real_kernel_gets_a_class() -> None:
    """No kernel of the H200 pair falls through to OTHER."""
    for variant in ("base", "opt"):
        for kernel in pair_profile(variant).kernels:
            assert classify_operator(kernel.name, kernel.fused_with) is not C.OTHER, kernel.name


@pytest.mark.parametrize(("name", "precision"), [
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4", "fp32"),
    ("volta_sgemm_128x64_nn", "fp32"),
    ("sm80_xmma_gemm_tf32f32_tf32f32_f32_tn_n_tilesize128x128x16", "tf32"),
    ("ampere_tf32_s1688gemm_tf32_128x128_ldg8_stages_32x3_tn", "tf32"),
    ("ampere_s1688gemm_128x128_ldg8_stages_32x3_tn", "tf32"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "bf16"),
    ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", "fp16/bf16"),
    ("sm90_xmma_gemm_e4m3e4m3_bf16f32_f32_tn_n", "fp8"),
    ("nvjet_sm90_tst_64x64_64x13_4x2_h_bz_bias_TNT", "fp16/bf16"),
    ("some_unknown_gemm_kernel", None),
], ids=["xmma-ffma", "sgemm", "xmma-tf32", "ampere-tf32", "s1688", "bf16", "fp16", "fp8", "nvjet-h",
        "unknown"])
def test_gemm_precision(name: str, precision: str | None) -> None:
    assert gemm_precision(name) == precision


@pytest.mark.parametrize(("name", "fused", "kind"), [
    ("triton_poi_fused__to_copy_0", (), "cast"),
    ("triton_poi_fused__to_copy_clone_transpose_1", (), "cast"),
    ("triton_poi_fused_clone_transpose_view_4", (), "copy"),
    ("triton_poi_fused__to_copy_add_view_1", (), None),  # the cast rides on real work
    ("void cublasLt::splitKreduce_kernel<32, 16, int, float>", (), "epilogue"),
    ("Memcpy DtoD (Device -> Device)", (), "copy"),
    ("triton_poi_fused_0", ("aten.convert_element_type",), "cast"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n", (), None),
], ids=["cast", "cast+layout", "copy", "cast-with-add", "splitk", "memcpy", "fused-with-cast", "gemm"])
def test_overhead_kind(name: str, fused: tuple[str, ...], kind: str | None) -> None:
    assert overhead_kind(name, fused) == kind


def test_triton_ops_and_aten_spelling() -> None:
    ops = triton_ops("triton_per_fused__to_copy_native_layer_norm_0")
    assert ops == ("per", ["native_layer_norm", "_to_copy"])
    assert triton_ops("sm80_xmma_gemm") is None
    assert aten_name("aten.addmm") == "aten::addmm" and aten_name("aten.addmm.default") == "aten::addmm"
    assert aten_name("aten::mm") == "aten::mm" and aten_name("triton_x") == "triton_x"

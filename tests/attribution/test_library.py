"""Which library a kernel belongs to, by kernel family."""

from __future__ import annotations

import pytest

from profiler_core.attribution.library import kernel_library


@pytest.mark.parametrize(("kernel", "library"), [
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, "
     "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "mem-efficient-attention"),
    ("fmha_cutlassB_f16_aligned_128x64_k65536_sm80", "mem-efficient-attention"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
     "cutlass::half_t>, false, false, false, false, true, true, false, false>(Flash_fwd_params)", "flash-attention"),
    # seen in the shipped attention layer's optimized capture
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0", "cudnn"),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel"
     "__5x_cublas", "cublas"),
    ("triton_poi_fused_addmm_gelu_view_6", None),
], ids=["mem-efficient-fwd", "mem-efficient-bwd", "flash", "cudnn-sdpa", "cublas", "triton"])
def test_attention_library_by_kernel_family(kernel: str, library: str | None) -> None:
    assert kernel_library(kernel) == library

"""FLOPs from shapes, measured FLOPs from counters, and the per-chip peak table."""

from __future__ import annotations

import pytest

from profiler_core.metrics.flop_counters import measured_flops
from profiler_core.metrics.flop_model import conv_flops, modelled_flops
from profiler_core.metrics.peaks import PEAKS, ROOFS, peaks_for_gpu


@pytest.mark.parametrize(("name", "shapes", "flops"), [
    # GPT-2 small, B=4 T=128 d=768: q/k/v/out projections, MLP, attention scores, LM head
    ("aten::mm", [[512, 768], [768, 768], [512, 768]], 2 * 512 * 768 * 768),
    ("aten::addmm", [[3072], [512, 768], [768, 3072]], 2 * 512 * 3072 * 768),
    ("aten::bmm", [[48, 128, 64], [48, 64, 128], [48, 128, 128]], 2 * 48 * 128 * 128 * 64),
    ("aten::mm", [[512, 768], [768, 50257]], 2 * 512 * 50257 * 768),
    ("aten::linear", [[4, 128, 768], [3072, 768], [3072]], 2 * 512 * 3072 * 768),
    ("aten::matmul", [[4, 12, 128, 64], [4, 12, 64, 128]], 2 * 48 * 128 * 128 * 64),
    ("aten::matmul", [[4, 12, 128, 64], [64, 128]], 2 * 48 * 128 * 128 * 64),  # broadcast batch
    ("aten::baddbmm", [[1], [8, 16, 32], [8, 32, 4]], 2 * 8 * 16 * 4 * 32),
    ("aten::scaled_dot_product_attention", [[4, 8, 512, 64], [4, 8, 512, 64], [4, 8, 512, 64]],
     4 * 4 * 8 * 512 * 512 * 64),
    # the kernels' entry points take (batch, seq, heads, dim): B=4, 512 tokens, 8 heads
    ("aten::_efficient_attention_forward", [[4, 512, 8, 64], [4, 512, 8, 64], [4, 512, 8, 64]],
     4 * 4 * 8 * 512 * 512 * 64),
    ("aten::_flash_attention_forward", [[4, 512, 8, 64], [4, 256, 8, 64], [4, 256, 8, 64]],
     4 * 4 * 8 * 512 * 256 * 64),
], ids=["q_proj", "c_fc", "qk_bmm", "lm_head", "linear", "matmul", "matmul_broadcast", "baddbmm", "sdpa",
        "efficient_bmhk", "flash_bmhk"])
def test_gemm_and_attention_flops_from_shapes(name: str, shapes: list, flops: int) -> None:
    got = modelled_flops(name, shapes)
    assert got is not None and got.flops == flops


def test_causal_attention_is_half_and_an_unknown_flag_is_said() -> None:
    shapes = [[2, 4, 256, 32], [2, 4, 256, 32], [2, 4, 256, 32]]
    full = modelled_flops("aten::_scaled_dot_product_flash_attention", shapes)
    causal = modelled_flops("aten::_scaled_dot_product_flash_attention", shapes, is_causal=True)
    assert full is not None and causal is not None and causal.flops == full.flops / 2
    assert full.note and "is_causal" in full.note and causal.note is None


@pytest.mark.parametrize(("name", "shapes"), [
    ("aten::mm", [[512, 768], [512, 768]]),  # inner dimensions differ
    ("aten::bmm", [[4, 8, 16], [5, 16, 8]]),  # batch differs
    ("aten::addmm", [[768], [512, 768], [4, 12, 128, 64], []]),  # an Inductor kernel's own arguments
    ("aten::relu", [[512, 768]]),  # no formula
    ("aten::conv2d", [[1, 3, 32, 32], [16, 3, 3, 3], [16]]),  # stride/padding unknown
    ("aten::mm", None),
])
def test_no_count_where_the_shapes_do_not_fit(name: str, shapes: list | None) -> None:
    assert modelled_flops(name, shapes) is None


def test_convolution_counts_its_output_positions() -> None:
    # ResNet stem: 224x224 RGB, 64 filters of 7x7, stride 2, padding 3 -> 112x112 output
    got = conv_flops([8, 3, 224, 224], [64, 3, 7, 7], stride=[2, 2], padding=[3, 3], dilation=[1, 1])
    assert got is not None and got.flops == 2 * 8 * 64 * 3 * 49 * 112 * 112
    grouped = modelled_flops("aten::conv2d", [[1, 32, 56, 56], [32, 1, 3, 3]],
                             conv_args={"stride": [1], "padding": [1], "dilation": [1], "groups": 32})
    assert grouped is not None and grouped.flops == 2 * 32 * 1 * 9 * 56 * 56  # depthwise


def test_measured_flops_count_fma_twice_and_tensor_ops_once() -> None:
    counters = {f"inst_{p}{op}": 0.0 for p in "fhd" for op in ("fma", "add", "mul")}
    counters.update(inst_ffma=1000.0, inst_fadd=10.0, inst_fmul=5.0, tensor_ops_bf16=2.0e6, tensor_ops_tf32=None)
    got = measured_flops(counters)
    assert got is not None and got.by_roof == {"fp32": 2015.0, "bf16_tensor": 2.0e6}
    assert got.complete and got.dominant_roof == "bf16_tensor" and got.tensor == 2.0e6
    partial = measured_flops({"inst_ffma": 3.0, "inst_fadd": None, "inst_fmul": 1.0})
    assert partial is None  # no precision fully measured
    assert measured_flops({"dram_bytes_read": 1.0}) is None


@pytest.mark.parametrize(("gpu", "key", "bf16_tflops", "bandwidth_tbs"), [
    ("NVIDIA H200", "h200_sxm", 989.5, 4.8),
    ("NVIDIA H200 NVL", "h200_nvl", 835.5, 4.8),
    ("NVIDIA H100 80GB HBM3", "h100_sxm", 989.5, 3.35),
    ("NVIDIA H100 PCIe", "h100_pcie", 756.5, 2.0),
    ("NVIDIA B200", "b200", 2250, 7.7),
    ("NVIDIA A100-SXM4-80GB", "a100_sxm_80gb", 312, 2.039),
    ("NVIDIA A100 80GB PCIe", "a100_pcie_80gb", 312, 1.935),
    ("NVIDIA A100-SXM4-40GB", "a100_sxm_40gb", 312, 1.555),
    ("NVIDIA L40S", "l40s", 362.05, 0.864),
    ("NVIDIA RTX 6000 Ada Generation", "rtx_6000_ada", 364.2, 0.96),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx_pro_6000_blackwell", 500, 1.792),
])
def test_peaks_per_chip(gpu: str, key: str, bf16_tflops: float, bandwidth_tbs: float) -> None:
    peaks = peaks_for_gpu(gpu)
    assert peaks is not None and peaks.key == key
    assert peaks.flops_per_s("bf16_tensor") == pytest.approx(bf16_tflops * 1e12)
    assert peaks.dram_bytes_per_s == pytest.approx(bandwidth_tbs * 1e12)


def test_peak_table_is_dense_and_h200_carries_its_measured_roofs() -> None:
    for p in PEAKS:
        assert set(p.flops) <= set(ROOFS) and p.source
        # dense tensor rates: bf16 runs at twice tf32 and fp8 (where offered) at twice bf16
        assert p.flops["bf16_tensor"] == pytest.approx(2 * p.flops["tf32_tensor"], rel=0.05)  # B200: 2.2 vs 4.5
        if "fp8_tensor" in p.flops:
            assert p.flops["fp8_tensor"] == pytest.approx(2 * p.flops["bf16_tensor"], rel=0.02)
    h200 = peaks_for_gpu("NVIDIA H200")
    assert h200 is not None
    assert h200.flops_per_s("bf16_tensor", measured=True) == pytest.approx(790e12)
    assert h200.bandwidth(measured=True) == pytest.approx(4.3e12) and h200.bandwidth() == pytest.approx(4.8e12)
    assert peaks_for_gpu("NVIDIA H100 NVL") is None and peaks_for_gpu("Tesla T4") is None
    assert peaks_for_gpu("NVIDIA A100-SXM4-80GB").flops_per_s("fp8_tensor") is None  # type: ignore[union-attr]

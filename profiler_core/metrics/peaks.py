"""Per-chip roofs: dense peak FLOP/s per precision and DRAM bandwidth, from NVIDIA's datasheets.

Every figure is the *dense* one (NVIDIA's tensor-core headlines are with 2:4 sparsity; dense is
half of them). A roof a datasheet does not give is absent (None), never filled in; a figure
worked out from a published one says so in ``derived``. The H200 entry also carries what was
measured on this project's own H200 (a bf16 GEMM sweep and device-to-device copies), beside
the published figures: a roofline drawn against the measured roof shows attainable headroom,
against the published one the marketing distance.

    peaks = peaks_for_gpu("NVIDIA H200")
    peaks.flops_per_s("bf16_tensor")   -> 989.5e12 (published), peaks.measured["bf16_tensor"] -> 790e12
    peaks.dram_bytes_per_s             -> 4.8e12
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Roof names: CUDA-core rates by precision, then tensor-core rates by input precision.
ROOFS: tuple[str, ...] = ("fp64", "fp32", "fp16", "fp64_tensor", "tf32_tensor", "fp16_tensor", "bf16_tensor",
                          "fp8_tensor")
T = 1e12


@dataclass(frozen=True)
class ChipPeaks:
    """One GPU model's roofs (FLOP/s, bytes/s) and where each figure comes from."""

    key: str
    name: str
    flops: dict[str, float]  # roof -> dense FLOP/s, published
    dram_bytes_per_s: float
    source: str  # the datasheet the figures come from
    derived: dict[str, str] = field(default_factory=dict)  # roof -> how it was worked out
    measured: dict[str, float] = field(default_factory=dict)  # roof (or "dram") -> measured here
    measured_how: str | None = None

    def flops_per_s(self, roof: str, *, measured: bool = False) -> float | None:
        """The roof's FLOP/s (the measured figure where asked for and known)."""
        if measured and roof in self.measured:
            return self.measured[roof]
        return self.flops.get(roof)

    def bandwidth(self, *, measured: bool = False) -> float:
        return self.measured.get("dram", self.dram_bytes_per_s) if measured else self.dram_bytes_per_s


_HOPPER_FP16 = "CUDA-core fp16 at twice the fp32 rate (H100 whitepaper: 133.8 TFLOP/s on SXM5, same GH100 clocks)"

PEAKS: tuple[ChipPeaks, ...] = (
    # NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column): FP64 34, FP64 TC 67, FP32 67,
    # TF32 TC 989*, BF16/FP16 TC 1,979*, FP8 TC 3,958* TFLOPS (*with sparsity), 4.8 TB/s HBM3e.
    ChipPeaks("h200_sxm", "H200 SXM", {
        "fp64": 34 * T, "fp32": 67 * T, "fp16": 133.8 * T, "fp64_tensor": 67 * T, "tf32_tensor": 494.5 * T,
        "fp16_tensor": 989.5 * T, "bf16_tensor": 989.5 * T, "fp8_tensor": 1979 * T},
        4.8e12, "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM)", {"fp16": _HOPPER_FP16},
        # measured on this project's H200 (docs/roofline.md): a dense bf16 GEMM sweep peaked near
        # 790 TFLOP/s, device-to-device copies near 4.3 TB/s (counting read + write bytes)
        {"bf16_tensor": 790 * T, "dram": 4.3e12},
        "bf16 GEMM sweep (torch.matmul, 8192^3) and device-to-device torch copies on one H200 SXM"),
    # Same datasheet, H200 NVL column: FP64 30, FP64 TC 60, FP32 60, TF32 835*, BF16/FP16 1,671*,
    # FP8 3,341* TFLOPS, 4.8 TB/s.
    ChipPeaks("h200_nvl", "H200 NVL", {
        "fp64": 30 * T, "fp32": 60 * T, "fp64_tensor": 60 * T, "tf32_tensor": 417.5 * T,
        "fp16_tensor": 835.5 * T, "bf16_tensor": 835.5 * T, "fp8_tensor": 1670.5 * T},
        4.8e12, "NVIDIA H200 Tensor Core GPU datasheet (H200 NVL)"),
    # NVIDIA H100 Tensor Core GPU datasheet (H100 SXM): FP64 34, FP64 TC 67, FP32 67, TF32 989*,
    # BF16/FP16 1,979*, FP8 3,958* TFLOPS, 3.35 TB/s; fp16 non-tensor 133.8 from the H100 whitepaper.
    ChipPeaks("h100_sxm", "H100 SXM", {
        "fp64": 34 * T, "fp32": 67 * T, "fp16": 133.8 * T, "fp64_tensor": 67 * T, "tf32_tensor": 494.5 * T,
        "fp16_tensor": 989.5 * T, "bf16_tensor": 989.5 * T, "fp8_tensor": 1979 * T},
        3.35e12, "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM); H100 whitepaper for fp16"),
    # Same datasheet, H100 PCIe: FP64 26, FP64 TC 51, FP32 51, TF32 756*, BF16/FP16 1,513*,
    # FP8 3,026* TFLOPS, 2 TB/s; fp16 non-tensor 102.4 from the H100 whitepaper.
    ChipPeaks("h100_pcie", "H100 PCIe", {
        "fp64": 26 * T, "fp32": 51 * T, "fp16": 102.4 * T, "fp64_tensor": 51 * T, "tf32_tensor": 378 * T,
        "fp16_tensor": 756.5 * T, "bf16_tensor": 756.5 * T, "fp8_tensor": 1513 * T},
        2.0e12, "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe); H100 whitepaper for fp16"),
    # NVIDIA DGX B200 / HGX B200 datasheet, per GPU: FP64/FP64 TC 37, FP32 75 TFLOPS, TF32 2.2*,
    # FP16/BF16 4.5*, FP8 9* PFLOPS, 7.7 TB/s HBM3e.
    ChipPeaks("b200", "B200 (HGX)", {
        "fp64": 37 * T, "fp32": 75 * T, "fp64_tensor": 37 * T, "tf32_tensor": 1100 * T,
        "fp16_tensor": 2250 * T, "bf16_tensor": 2250 * T, "fp8_tensor": 4500 * T},
        7.7e12, "NVIDIA GB200 NVL72 / HGX B200 datasheet (individual HGX B200 GPU)"),
    # NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM): FP64 9.7, FP64 TC 19.5, FP32 19.5,
    # TF32 156, BF16/FP16 312 TFLOPS (dense), 2,039 GB/s; fp16 non-tensor 78 from the A100 whitepaper.
    ChipPeaks("a100_sxm_80gb", "A100 80GB SXM", {
        "fp64": 9.7 * T, "fp32": 19.5 * T, "fp16": 78 * T, "fp64_tensor": 19.5 * T, "tf32_tensor": 156 * T,
        "fp16_tensor": 312 * T, "bf16_tensor": 312 * T},
        2.039e12, "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM); A100 whitepaper for fp16"),
    # Same datasheet, A100 80GB PCIe: same compute, 1,935 GB/s.
    ChipPeaks("a100_pcie_80gb", "A100 80GB PCIe", {
        "fp64": 9.7 * T, "fp32": 19.5 * T, "fp16": 78 * T, "fp64_tensor": 19.5 * T, "tf32_tensor": 156 * T,
        "fp16_tensor": 312 * T, "bf16_tensor": 312 * T},
        1.935e12, "NVIDIA A100 Tensor Core GPU datasheet (80GB PCIe)"),
    # Same datasheet, A100 40GB SXM: same compute, 1,555 GB/s.
    ChipPeaks("a100_sxm_40gb", "A100 40GB SXM", {
        "fp64": 9.7 * T, "fp32": 19.5 * T, "fp16": 78 * T, "fp64_tensor": 19.5 * T, "tf32_tensor": 156 * T,
        "fp16_tensor": 312 * T, "bf16_tensor": 312 * T},
        1.555e12, "NVIDIA A100 Tensor Core GPU datasheet (40GB SXM)"),
    # NVIDIA L40S datasheet: FP32 91.6, TF32 TC 183 (366*), BF16/FP16 TC 362.05 (733*),
    # FP8 733 (1,466*) TFLOPS, 864 GB/s; no FP64 figure published.
    ChipPeaks("l40s", "L40S", {
        "fp32": 91.6 * T, "tf32_tensor": 183 * T, "fp16_tensor": 362.05 * T, "bf16_tensor": 362.05 * T,
        "fp8_tensor": 733 * T},
        0.864e12, "NVIDIA L40S datasheet"),
    # NVIDIA RTX 6000 Ada Generation datasheet: FP32 91.1 TFLOPS, Tensor 1,457 TFLOPS (FP8, sparse),
    # 960 GB/s; the Ada whitepaper's RTX 6000 column: FP16/BF16 TC (FP32 accumulate) 364.2, TF32 182.1 dense.
    ChipPeaks("rtx_6000_ada", "RTX 6000 Ada", {
        "fp32": 91.1 * T, "tf32_tensor": 182.1 * T, "fp16_tensor": 364.2 * T, "bf16_tensor": 364.2 * T,
        "fp8_tensor": 728.5 * T},
        0.960e12, "NVIDIA RTX 6000 Ada Generation datasheet; Ada Lovelace architecture whitepaper",
        {"fp8_tensor": "half the datasheet's 1,457 TFLOPS FP8 with sparsity"}),
    # NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet: FP32 125 TFLOPS, 4,000 AI TOPS
    # (FP4, sparse), 1,792 GB/s GDDR7. Tensor rates per precision are not published: derived.
    ChipPeaks("rtx_pro_6000_blackwell", "RTX PRO 6000 Blackwell", {
        "fp32": 125 * T, "tf32_tensor": 250 * T, "fp16_tensor": 500 * T, "bf16_tensor": 500 * T,
        "fp8_tensor": 1000 * T},
        1.792e12, "NVIDIA RTX PRO 6000 Blackwell Workstation Edition datasheet",
        dict.fromkeys(("tf32_tensor", "fp16_tensor", "bf16_tensor", "fp8_tensor"),
                      "from the 4,000 FP4 sparse AI TOPS: halved for dense, halved again per doubling of precision")),
)
_BY_KEY = {p.key: p for p in PEAKS}

# GPU names as NVML / torch report them -> table key; most specific first.
_NAME_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p, re.IGNORECASE), k) for p, k in (
    (r"\bH200\b.*\bNVL\b", "h200_nvl"),
    (r"\bH200\b", "h200_sxm"),
    (r"\bH100\b.*\bNVL\b", ""),  # not in the table: no roofs rather than another part's
    (r"\bH100\b.*\bPCIe\b", "h100_pcie"),
    (r"\bH100\b", "h100_sxm"),
    (r"\bB200\b", "b200"),
    (r"\bA100\b.*\bPCIe\b", "a100_pcie_80gb"),
    (r"\bA100\b.*40\s*GB", "a100_sxm_40gb"),
    (r"\bA100\b", "a100_sxm_80gb"),
    (r"\bL40S\b", "l40s"),
    (r"\bRTX\s*PRO\s*6000\b", "rtx_pro_6000_blackwell"),
    (r"\bRTX\s*6000\s*Ada\b", "rtx_6000_ada"),
))


def peaks_for_gpu(gpu_name: str | None) -> ChipPeaks | None:
    """The table entry for a GPU name (``NVIDIA H200``, ``NVIDIA A100-SXM4-80GB``); None if unknown."""
    if not gpu_name:
        return None
    for pattern, key in _NAME_RULES:
        if pattern.search(gpu_name):
            return _BY_KEY.get(key)
    return None


def peaks_by_key(key: str) -> ChipPeaks | None:
    return _BY_KEY.get(key)

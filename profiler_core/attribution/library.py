"""Which vendor library a kernel belongs to, from its name (cuBLAS, cuDNN, NCCL, ...).

Library kernels are attributed to the launching ATen op like any other, and flagged: a
graph pass can swap the op that calls cuBLAS, never what happens inside the call.
"""

from __future__ import annotations

import re

_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("nccl", re.compile(r"nccl", re.I)),
    ("cudnn", re.compile(r"cudnn|RNN|elemWiseRNNcell|LSTM_elementWise|persistRNN", re.I)),
    # attention by kernel family: PyTorch's memory-efficient kernels (from xformers, on CUTLASS) are
    # fmha_cutlassF/B; FlashAttention's are flash_fwd/bwd; cuDNN's (named "..._sdpa_..._flash_fprop")
    # matched cuDNN above
    ("mem-efficient-attention", re.compile(r"fmha_cutlass|mem_eff|efficient_attention", re.I)),
    ("flash-attention", re.compile(r"flash", re.I)),
    ("cutlass", re.compile(r"cutlass", re.I)),
    ("cublas", re.compile(r"cublas|xmma_gemm|nvjet|gemv|gemmk1|splitKreduce|sm\d+_xmma|gemm_|ampere_\w*gemm", re.I)),
)


def kernel_library(name: str) -> str | None:
    """``"sm90_xmma_gemm_..._cublas"`` -> ``"cublas"``; Triton and ATen kernels -> None."""
    if name.startswith("triton_"):
        return None
    for library, pattern in _RULES:
        if pattern.search(name):
            return library
    return None

"""Operator classes for roll-ups: GEMM, attention, normalization, elementwise, ...

Classified from the clean operator name, falling back to the kernel name for kernels no
operator claimed (``sm90_xmma_gemm_...`` is a GEMM whoever launched it).
"""

from __future__ import annotations

import re

from profiler_core.schema import OperatorClass

_OP_RULES: tuple[tuple[OperatorClass, re.Pattern[str]], ...] = (
    (OperatorClass.COMMUNICATION, re.compile(r"^(c10d|nccl|_c10d_functional|c10d_functional)::|allreduce|all_gather|reduce_scatter|broadcast|all_to_all")),
    (OperatorClass.ATTENTION, re.compile(r"scaled_dot_product|flash_attention|efficient_attention|_cudnn_attention|fmha|attention")),
    (OperatorClass.RNN, re.compile(r"::(lstm|gru|rnn_tanh|rnn_relu|_cudnn_rnn|_thnn_fused_lstm_cell|lstm_cell|gru_cell)\b")),
    (OperatorClass.CONVOLUTION, re.compile(r"::(_?convolution|conv\d?d|cudnn_convolution|conv_transpose\d?d|_conv_depthwise2d)\b")),
    (OperatorClass.GEMM, re.compile(r"::(mm|addmm|bmm|baddbmm|matmul|linear|addmv|mv|dot|_scaled_mm|addbmm|einsum|_int_mm)\b")),
    (OperatorClass.NORMALIZATION, re.compile(r"(layer_norm|batch_norm|group_norm|rms_norm|instance_norm|_fused_rms_norm)")),
    (OperatorClass.REDUCTION, re.compile(r"::(_?softmax|_?log_softmax|sum|mean|amax|amin|max|min|argmax|argmin|var|std|norm|prod|cumsum|logsumexp|topk|sort)\b")),
    (OperatorClass.CAST_COPY, re.compile(r"::(to|_to_copy|copy_|clone|contiguous|cat|stack|index_select|gather|scatter|embedding|_unsafe_view|t|transpose|permute|view|reshape|expand|fill_|zero_|zeros|ones|empty|empty_strided)\b")),
)

_KERNEL_RULES: tuple[tuple[OperatorClass, re.Pattern[str]], ...] = (
    (OperatorClass.COMMUNICATION, re.compile(r"nccl", re.I)),
    (OperatorClass.ATTENTION, re.compile(r"flash|fmha|attention|sdpa", re.I)),
    (OperatorClass.RNN, re.compile(r"RNN|lstm|gru", re.I)),
    (OperatorClass.CONVOLUTION, re.compile(r"conv|implicit_gemm|wgrad|dgrad", re.I)),
    (OperatorClass.GEMM, re.compile(r"gemm|xmma|cutlass|nvjet|cublas|sm\d+_.*tile|splitK|mma", re.I)),
    (OperatorClass.NORMALIZATION, re.compile(r"layer_norm|batch_norm|group_norm|rms_norm|layernorm", re.I)),
    (OperatorClass.REDUCTION, re.compile(r"reduce|softmax|triton_(per|red)_", re.I)),
    (OperatorClass.CAST_COPY, re.compile(r"copy|memcpy|memset|cast|transpose|fill|cat_|gather|scatter", re.I)),
    (OperatorClass.ELEMENTWISE, re.compile(r"elementwise|triton_poi_|pointwise|unrolled", re.I)),
)

_ELEMENTWISE_OPS = re.compile(
    r"::(add|sub|mul|div|relu|gelu|silu|sigmoid|tanh|exp|log|sqrt|rsqrt|pow|neg|abs|where|"
    r"clamp|dropout|native_dropout|masked_fill|erf|maximum|minimum|le|lt|ge|gt|eq|ne|threshold|"
    r"hardtanh|leaky_relu|elu|softplus|addcmul|addcdiv|lerp|reciprocal|sign|square|bitwise_\w+)_?\b"
)


def classify_operator(name: str) -> OperatorClass:
    """Class of an operator from its clean name (``aten::addmm`` -> GEMM)."""
    for cls, pattern in _OP_RULES:
        if pattern.search(name):
            return cls
    if _ELEMENTWISE_OPS.search(name):
        return OperatorClass.ELEMENTWISE
    if name.startswith("triton_") or "::" not in name:
        return classify_kernel(name)
    return OperatorClass.OTHER


def classify_kernel(name: str) -> OperatorClass:
    """Class of a kernel from its name alone (used when no operator claims it)."""
    for cls, pattern in _KERNEL_RULES:
        if pattern.search(name):
            return cls
    return OperatorClass.OTHER

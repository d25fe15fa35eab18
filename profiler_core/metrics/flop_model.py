"""Modelled floating-point work: FLOPs of GEMM, convolution and attention operators from their shapes.

The cross-check for the measured counts (metrics/flop_counters.py), and the only figure for
captures taken without the FLOP counters. One multiply-add is 2 FLOPs; bias adds, scaling and
softmax are left out (they are O(output), not O(output x K))::

    aten::mm      [M, K] @ [K, N]                      2*M*N*K
    aten::addmm   bias, [M, K] @ [K, N]                2*M*N*K
    aten::bmm     [B, M, K] @ [B, K, N]                2*B*M*N*K
    aten::matmul  [..., M, K] @ [..., K, N]            2*batch*M*N*K (batch dims broadcast)
    aten::linear  x [..., K], weight [N, K]            2*prod(x[:-1])*N*K
    conv          x [N, C, *S], w [O, C/g, *k]         2*N*O*(C/g)*prod(k)*prod(S_out)
    attention     q [B, H, Lq, D], k [.., Lk, D], v    2*B*H*Lq*Lk*(D + Dv)  (= 4*B*H*Lq*Lk*D), causal halves

Shapes are the operator's recorded ``input_shapes`` (Kineto ``Input Dims``). A convolution's
output size needs its stride, padding and dilation, which Kineto records only as "Concrete
Inputs"; without them the model says so rather than assuming them. An attention call's
``is_causal`` flag is likewise a scalar: given, it halves the count; unknown, the full count
stands and the note says so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_MM = frozenset({"aten::mm", "aten::_mm", "aten::mm.out"})
_ADDMM = frozenset({"aten::addmm", "aten::addmm_", "aten::_addmm_activation"})
_BMM = frozenset({"aten::bmm"})
_BADDBMM = frozenset({"aten::baddbmm"})
_MATMUL = frozenset({"aten::matmul"})
_LINEAR = frozenset({"aten::linear"})
_CONV = frozenset({
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution",
    "aten::cudnn_convolution", "aten::conv_transpose1d", "aten::conv_transpose2d", "aten::conv_transpose3d",
    "aten::mkldnn_convolution", "aten::_convolution_mode",
})
_ATTENTION = frozenset({
    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
    "aten::_flash_attention_forward", "aten::_efficient_attention_forward", "aten::_cudnn_attention_forward",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_attention_math",
})
# The kernels' own entry points take (batch, seq, heads, dim), not SDPA's (batch, heads, seq, dim)
_ATTENTION_BMHK = frozenset({"aten::_flash_attention_forward", "aten::_efficient_attention_forward"})


@dataclass(frozen=True)
class ModelledFlops:
    """FLOPs from an operator's shapes, with the formula that gave them."""

    flops: float
    formula: str  # e.g. "2*M*N*K, M=512 N=768 K=768"
    note: str | None = None  # an assumption the count rests on


def _dims(shape: Any) -> list[int] | None:
    if isinstance(shape, list | tuple) and all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        return [int(d) for d in shape]
    return None


def _tensors(shapes: Sequence[Any]) -> list[list[int] | None]:
    return [_dims(s) for s in shapes]


def _gemm(m: int, n: int, k: int, batch: int = 1) -> ModelledFlops:
    flops = 2.0 * batch * m * n * k
    lead = f"2*B*M*N*K, B={batch} " if batch != 1 else "2*M*N*K, "
    return ModelledFlops(flops, f"{lead}M={m} N={n} K={k}")


def _mm(a: list[int] | None, b: list[int] | None) -> ModelledFlops | None:
    if a is None or b is None or len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        return None
    return _gemm(a[0], b[1], a[1])


def _bmm(a: list[int] | None, b: list[int] | None) -> ModelledFlops | None:
    if a is None or b is None or len(a) != 3 or len(b) != 3 or a[0] != b[0] or a[2] != b[1]:
        return None
    return _gemm(a[1], b[2], a[2], a[0])


def _matmul(a: list[int] | None, b: list[int] | None) -> ModelledFlops | None:
    if not a or not b:
        return None
    a2 = [1, *a] if len(a) == 1 else a  # a vector is a 1-row matrix (and b a 1-column one)
    b2 = [*b, 1] if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        return None
    batch_a, batch_b = a2[:-2], b2[:-2]
    width = max(len(batch_a), len(batch_b))
    batch_a = [1] * (width - len(batch_a)) + batch_a
    batch_b = [1] * (width - len(batch_b)) + batch_b
    batch = 1
    for x, y in zip(batch_a, batch_b, strict=True):
        if x != y and 1 not in (x, y):
            return None
        batch *= max(x, y)
    return _gemm(a2[-2], b2[-1], a2[-1], batch)


def _linear(x: list[int] | None, w: list[int] | None) -> ModelledFlops | None:
    if not x or w is None or len(w) != 2 or x[-1] != w[1]:
        return None
    rows = math.prod(x[:-1]) if len(x) > 1 else 1
    return _gemm(rows, w[0], w[1])


def conv_flops(x: Sequence[int], w: Sequence[int], *, stride: Sequence[int], padding: Sequence[int],
               dilation: Sequence[int], groups: int = 1, transposed: bool = False) -> ModelledFlops | None:
    """2*N*C_out*(C_in/groups)*prod(kernel)*prod(output spatial), output size from the conv arithmetic."""
    spatial = len(x) - 2
    if spatial < 1 or len(w) != len(x) or groups < 1:
        return None
    n, c_in = x[0], x[1]
    kernel = list(w[2:])
    s, p, d = (list(v) if len(v) == spatial else list(v) * spatial for v in (stride, padding, dilation))
    if transposed:  # weight [C_in, C_out/g, *k]; each input element scatters into C_out/g*prod(k) outputs
        c_out_per_group = w[1]
        flops = 2.0 * n * c_in * c_out_per_group * math.prod(kernel) * math.prod(x[2:])
        return ModelledFlops(flops, f"2*N*C_in*(C_out/g)*prod(k)*prod(S_in), N={n} C_in={c_in} k={kernel}")
    c_out = w[0]
    if c_in != w[1] * groups:
        return None
    out = [(x[2 + i] + 2 * p[i] - d[i] * (kernel[i] - 1) - 1) // s[i] + 1 for i in range(spatial)]
    if any(o <= 0 for o in out):
        return None
    flops = 2.0 * n * c_out * w[1] * math.prod(kernel) * math.prod(out)
    return ModelledFlops(flops, f"2*N*C_out*(C_in/g)*prod(k)*prod(S_out), N={n} C_out={c_out} "
                                f"C_in/g={w[1]} k={kernel} S_out={out}")


def _seq_before_heads(shape: list[int] | None) -> list[int] | None:
    """(B, M, H, K) as (B, H, M, K); other ranks (the varlen (total, H, K) form) as they are."""
    return [shape[0], shape[2], shape[1], shape[3]] if shape is not None and len(shape) == 4 else shape


def _attention(q: list[int] | None, k: list[int] | None, v: list[int] | None,
               causal: bool | None) -> ModelledFlops | None:
    if q is None or k is None or len(q) < 3 or len(k) != len(q):
        return None
    dv = v[-1] if v is not None and len(v) == len(q) else q[-1]
    batch_heads = math.prod(q[:-2])
    lq, lk, d = q[-2], k[-2], q[-1]
    if k[-1] != d:
        return None
    flops = 2.0 * batch_heads * lq * lk * (d + dv)
    formula = f"2*B*H*Lq*Lk*(D+Dv), B*H={batch_heads} Lq={lq} Lk={lk} D={d} Dv={dv}"
    if causal:
        return ModelledFlops(flops / 2, formula + ", causal: half", None)
    note = None if causal is False else "is_causal not recorded: counted as full (non-causal) attention"
    return ModelledFlops(flops, formula, note)


def modelled_flops(name: str, input_shapes: Sequence[Any] | None, *, is_causal: bool | None = None,
                   conv_args: dict[str, Any] | None = None) -> ModelledFlops | None:
    """FLOPs of one operator call from its name and input shapes; None when the model has no formula.

    ``conv_args`` (stride, padding, dilation, groups, transposed) and ``is_causal`` are the scalar
    arguments the shapes do not carry; give them where known.
    """
    if not input_shapes:
        return None
    t = _tensors(input_shapes)
    first = t[0] if t else None
    second = t[1] if len(t) > 1 else None
    third = t[2] if len(t) > 2 else None
    if name in _MM:
        return _mm(first, second)
    if name in _ADDMM:
        return _mm(second, third)
    if name in _BMM:
        return _bmm(first, second)
    if name in _BADDBMM:
        return _bmm(second, third)
    if name in _MATMUL:
        return _matmul(first, second)
    if name in _LINEAR:
        return _linear(first, second)
    if name in _ATTENTION:
        if name in _ATTENTION_BMHK:
            first, second, third = (_seq_before_heads(x) for x in (first, second, third))
        return _attention(first, second, third, is_causal)
    if name in _CONV:
        if first is None or second is None:
            return None
        if not conv_args:
            return None  # output size unknown without stride/padding/dilation
        return conv_flops(first, second, stride=conv_args.get("stride", [1]), padding=conv_args.get("padding", [0]),
                          dilation=conv_args.get("dilation", [1]), groups=int(conv_args.get("groups", 1)),
                          transposed=bool(conv_args.get("transposed", False)))
    return None


def has_flop_model(name: str) -> bool:
    """Whether ``name`` is an operator this module can count from shapes."""
    return name in _MM | _ADDMM | _BMM | _BADDBMM | _MATMUL | _LINEAR | _CONV | _ATTENTION

"""An independent reference join, written from the raw records only (no profiler_core code).

For every GPU kernel of a Kineto trace:

    kernel --correlation id--> the CUDA runtime/driver call that launched it
           --thread + time-->  the innermost ``cpu_op`` open on that thread at the launch

An eager kernel's operator is that op. A Triton kernel's launching op is named after the kernel
itself, so its operator comes from Inductor's own record of the kernel (the ``Original ATen``
comment above its definition in the output code), by a rule stated here on its own terms: the
op that does the kernel's work, leaving out

* ops whose compute a pointwise/reduction kernel cannot hold (a GEMM, a convolution, attention,
  an RNN run by a library: what is left of them in the kernel is their epilogue), unless the
  kernel is a template (``triton_tem_``) or nothing else is in it;
* views, which launch nothing, unless nothing else is in it.

Of what remains, the first by kind of work (normalization, softmax, other reductions,
elementwise math, casts and copies), and within a kind the first in Inductor's order.
Kernels replayed by a CUDA graph have no launching op: they get None with the reason.
"""

from __future__ import annotations

import gzip
import json
import re
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

_LIBRARY_WORK = {
    "mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "convolution", "_convolution", "conv2d",
    "cudnn_convolution", "_scaled_dot_product_efficient_attention", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_cudnn_attention", "scaled_dot_product_attention", "_cudnn_rnn", "lstm", "gru",
}
_VIEWS = {"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "squeeze", "unsqueeze",
          "slice", "select", "as_strided", "alias", "split", "split_with_sizes", "unbind", "detach"}
# kinds of work, most significant first; an op not listed is elementwise math
_KINDS: tuple[set[str], ...] = (
    {"native_layer_norm", "layer_norm", "native_batch_norm", "_native_batch_norm_legit_no_training",
     "native_group_norm", "rms_norm", "_fused_rms_norm", "native_layer_norm_backward",
     "native_batch_norm_backward", "native_group_norm_backward"},
    {"_softmax", "softmax", "_log_softmax", "log_softmax", "_safe_softmax", "_softmax_backward_data",
     "_log_softmax_backward_data"},
    {"sum", "mean", "amax", "amin", "max", "min", "var_mean", "var", "std", "argmax", "argmin", "prod",
     "cumsum", "logsumexp", "any", "all", "embedding_dense_backward"},
)
_COPIES = {"_to_copy", "to", "clone", "contiguous", "copy_", "copy", "cat", "stack", "embedding", "index_select",
           "gather", "arange", "fill_", "zeros", "empty", "full", "convert_element_type", "scalar_tensor"}
_ATEN_LINE = re.compile(r"# Topologically Sorted Source Nodes: \[.*\], Original ATen: \[(?P<ops>[^\]]*)\]")
_DEF_LINE = re.compile(r"^(?P<name>triton_\w+) = async_compile\.triton\('(?P=name)'")
_LOG_PREFIX = re.compile(r"^[VIWE]\d{4} [\d:.]+ \d+ \S+\] (?:\[[^\]]*\] )*")


_GPU_WORK = ("kernel", "gpu_memset", "gpu_memcpy")


@dataclass(frozen=True)
class ReferenceKernel:
    name: str
    start_us: float
    operator: str | None  # clean ATen name (``aten::addmm``), None when no op launched it
    why: str  # how the reference knows, or why it does not


def _short(op: str) -> str:
    for prefix in ("aten::", "aten."):
        if op.startswith(prefix):
            return op[len(prefix):].split(".", 1)[0]
    return op


def triton_operator(kernel: str, original_aten: list[str]) -> str | None:
    """The op a Triton kernel's work belongs to, by the rule in the module docstring."""
    ops = [_short(op) for op in original_aten if op.startswith("aten.")]
    if not ops:
        return None
    if not kernel.startswith("triton_tem_"):
        ops = [op for op in ops if op not in _LIBRARY_WORK] or ops
    ops = [op for op in ops if op not in _VIEWS] or ops
    for kind in _KINDS:
        hit = sorted((op for op in ops if op in kind), key=lambda op: "_backward" not in op)
        if hit:
            return f"aten::{hit[0]}"
    math = [op for op in ops if op not in _COPIES]
    return f"aten::{(math or ops)[0]}"


def original_aten_by_kernel(output_code: Path) -> dict[str, list[str]]:
    """Triton kernel name -> its ``Original ATen`` list, from an output-code log (plain or .gz)."""
    opener = gzip.open if output_code.suffix == ".gz" else open
    out: dict[str, list[str]] = {}
    pending: list[str] | None = None
    with opener(output_code, "rt", encoding="utf-8", errors="replace") as fh:
        for raw in fh:
            line = _LOG_PREFIX.sub("", raw.rstrip("\n"))
            if (m := _ATEN_LINE.match(line)) is not None:
                pending = [op.strip() for op in m.group("ops").split(",") if op.strip()]
            elif (d := _DEF_LINE.match(line)) is not None:
                out.setdefault(d.group("name"), pending or [])
                pending = None
    return out


def reference_join(kineto: Path, output_code: Path | None) -> list[ReferenceKernel]:
    """Every GPU kernel, memset and memcpy of the trace, in start order, with the operator the raw records give."""
    opener = gzip.open if kineto.suffix == ".gz" else open
    with opener(kineto, "rt", encoding="utf-8") as fh:
        events = json.load(fh)["traceEvents"]
    aten = original_aten_by_kernel(output_code) if output_code is not None else {}
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    ops_by_tid: dict[object, list[dict]] = {}
    for e in events:
        if e.get("cat") == "cpu_op" and e.get("ph") == "X":
            ops_by_tid.setdefault(e["tid"], []).append(e)
    starts_by_tid = {}
    for tid, ops in ops_by_tid.items():
        ops.sort(key=lambda e: e["ts"])
        starts_by_tid[tid] = [e["ts"] for e in ops]
    out = []
    for k in sorted((e for e in events if e.get("cat") in _GPU_WORK), key=lambda e: e["ts"]):
        launch = launches.get(k["args"].get("correlation"))
        if launch is None:
            out.append(ReferenceKernel(k["name"], k["ts"], None, "no launching call in the trace"))
            continue
        if "GraphLaunch" in launch["name"]:
            op = aten.get(k["name"])
            out.append(ReferenceKernel(k["name"], k["ts"], triton_operator(k["name"], op) if op else None,
                                       "CUDA graph replay; Inductor's record" if op else "CUDA graph replay"))
            continue
        ops, starts = ops_by_tid.get(launch["tid"], []), starts_by_tid.get(launch["tid"], [])
        t = launch["ts"]
        inner = None
        for i in range(bisect_right(starts, t) - 1, -1, -1):  # latest-starting op still open at t
            if ops[i]["ts"] + ops[i]["dur"] >= t:
                inner = ops[i]
                break
        if inner is None:
            out.append(ReferenceKernel(k["name"], k["ts"], None, "no operator open at the launch"))
        elif inner["name"].startswith("triton_"):
            found = aten.get(inner["name"])
            out.append(ReferenceKernel(k["name"], k["ts"], triton_operator(inner["name"], found or []),
                                       "Inductor's Original ATen record" if found else "no Inductor record"))
        else:
            name = inner["name"]
            out.append(ReferenceKernel(k["name"], k["ts"], _clean(name), f"launched inside '{name}'"))
    return out


def _clean(name: str) -> str:
    head = name.split(",", 1)[0].strip()
    if "::" in head:
        ns, _, op = head.partition("::")
        return f"{ns}::{op.split('.', 1)[0]}"
    return head

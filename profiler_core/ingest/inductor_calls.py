"""The launch order of Inductor's generated ``call()`` functions, from output code.

A CUDA-graph replay launches exactly what the captured ``call()`` launched, in order, with
no per-kernel launch record. Reading that order lets attribution name the library kernels of
a replay (the cuBLAS GEMM between two Triton kernels belongs to the ``extern_kernels.addmm``
call between them). Works on output-code logs (``TORCH_LOGS=output_code``), ``output_code.py``
files and TORCH_TRACE logs (whose payload lines carry the same code, tab-indented).

    triton_poi_fused__to_copy_1.run(arg5_1, buf4, ...)     -> InductorCall("triton", "triton_poi_fused__to_copy_1")
    extern_kernels.addmm(buf5, ..., out=buf6)               -> InductorCall("extern", "aten::addmm")
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from profiler_core.ingest.inductor_output_code import strip_log_prefix
from profiler_core.records import InductorCall

_CALL_DEF = re.compile(r"^\s*def (?:call|partition_\d+)\(")  # cudagraph trees split call() into partitions
_TRITON_RUN = re.compile(r"^\s+(triton_\w+)\.run\(")
_EXTERN = re.compile(r"^\s+(?:\w+ = )?extern_kernels\.(\w+)\(")
_ATEN_FALLBACK = re.compile(r"^\s+(?:\w+ = )?torch\.ops\.aten\.(\w+)\.\w+\(")


def parse_call_sequences(lines: Iterable[str]) -> list[tuple[InductorCall, ...]]:
    """Each ``def call(`` body's launches, in order; identical sequences are kept once."""
    sequences: list[tuple[InductorCall, ...]] = []
    current: list[InductorCall] | None = None
    for raw in lines:
        line = strip_log_prefix(raw.lstrip("\t") if raw.startswith("\t") else raw).rstrip("\n")
        if _CALL_DEF.match(line):
            if current:
                sequences.append(tuple(current))
            current = []
            continue
        if current is None:
            continue
        if match := _TRITON_RUN.match(line):
            current.append(InductorCall("triton", match.group(1)))
        elif (match := _EXTERN.match(line)) or (match := _ATEN_FALLBACK.match(line)):
            current.append(InductorCall("extern", f"aten::{match.group(1)}"))
        elif line.startswith("def ") or line.startswith("class "):
            sequences.append(tuple(current))
            current = None
    if current:
        sequences.append(tuple(current))
    return list(dict.fromkeys(s for s in sequences if s))

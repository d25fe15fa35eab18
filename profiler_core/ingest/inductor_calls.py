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


_UNPACK = re.compile(r"^\s+(\w+(?:, \w+)*),? = args$")
_ALIAS = re.compile(r"^\s+(buf\w*) = (buf\w*)(?:\[\d+\])?$")
_ASSIGNED = re.compile(r"^\s+(buf\w*) = ")
_IDENT = re.compile(r"\b([A-Za-z_]\w*)\b")


def parse_call_sites(lines: Iterable[str]) -> tuple[frozenset[str], list[tuple[str, tuple[str, ...]]]]:
    """The graph inputs a generated module's ``call()`` unpacks, and each kernel call in order as
    (debug handle, the inputs and buffers its arguments name)::

        primals_4, view_132, tangents_1 = args
        extern_kernels.mm(reinterpret_tensor(buf10, ...), view_132, out=buf12)
        -> ({"primals_4", "view_132", "tangents_1"}, [("extern_kernels.mm:1", ("buf10", "view_132", "buf12"))])

    Handles are numbered in call order, as Inductor's provenance numbers its debug handles.
    """
    inputs: set[str] = set()
    sites: list[tuple[str, tuple[str, ...]]] = []
    alias: dict[str, str] = {}  # buf38 = buf37[0]: a fallback's outputs, read under their own names
    inside = False
    for raw in lines:
        line = strip_log_prefix(raw.lstrip("\t") if raw.startswith("\t") else raw).rstrip("\n")
        if _CALL_DEF.match(line):
            inside = True
            continue
        if not inside:
            continue
        if match := _UNPACK.match(line):
            inputs.update(match.group(1).split(", "))
            continue
        if match := _ALIAS.match(line):
            alias[match.group(1)] = alias.get(match.group(2), match.group(2))
            continue
        if match := _TRITON_RUN.match(line):
            name = match.group(1)
        elif match := _EXTERN.match(line):
            name = f"extern_kernels.{match.group(1)}"
        elif match := _ATEN_FALLBACK.match(line):
            name = f"torch.ops.aten.{match.group(1)}.default"
        else:
            continue
        assigned = _ASSIGNED.match(line)
        args = ("" if assigned is None else f"{assigned.group(1)} ") + line[match.end():]
        reads = tuple(dict.fromkeys(alias.get(w, w) for w in _IDENT.findall(args)
                                    if w in inputs or w.startswith("buf")))
        sites.append((f"{name}:{len(sites) + 1}", reads))
    return frozenset(inputs), sites

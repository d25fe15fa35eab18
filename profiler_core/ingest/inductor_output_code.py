"""Fusion records from Inductor's generated wrapper code (``TORCH_LOGS=output_code``).

Above each generated Triton kernel Inductor writes where it came from::

    # Topologically Sorted Source Nodes: [input_1, input_2], Original ATen: [aten.addmm, aten.relu]
    # Source node to ATen node mapping:
    #   input_1 => add_tensor
    #   input_2 => relu
    triton_poi_fused_addmm_relu_0 = async_compile.triton('triton_poi_fused_addmm_relu_0', '''

becomes ``FusionRecord("triton_poi_fused_addmm_relu_0", ("aten::addmm", "aten::relu"),
source_nodes=("input_1", "input_2"), post_grad_nodes=("add_tensor", "relu"))``. The "Original
ATen" names are the operators *before* decomposition, the names an eager profile shows.

Log prefixes (``V1129 07:44:21.362000 427 torch/_inductor/graph.py:2552] [0/0] [__output_code] ``)
are stripped, so the log, the ``output_code.py`` file and a TORCH_TRACE payload read alike. The
comments Inductor writes above *call sites* in ``call()`` are not used: above extern kernel calls
they accumulate the nodes of earlier buffers and would attribute the wrong operators.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from profiler_core.records import FusionRecord

_LOG_PREFIX = re.compile(r"^[A-Z]\d{4} [\d:.]+\s+\d+ \S+\] (?:\[[^\]]*\] )*\[__output_code\] ?")
_ORIGIN = re.compile(r"^\s*# (?:Topologically Sorted|Unsorted) Source Nodes: \[(.*)\], Original ATen: \[(.*)\]\s*$")
_NODE_MAP_TITLE = "# Source node to ATen node mapping:"
_NODE_MAP = re.compile(r"^\s*#\s+(\S*) => (.+)$")
_TRITON_ASSIGN = re.compile(r"^(\w+) = async_compile\.triton\(['\"](\w+)['\"]")
_TRITON_DEF = re.compile(r"^def (triton_\w+)\(")


def strip_log_prefix(line: str) -> str:
    """The code of one ``TORCH_LOGS=output_code`` line (unchanged when it has no prefix)."""
    match = _LOG_PREFIX.match(line)
    return line[match.end():] if match else line


def aten_name(name: str) -> str:
    """``aten.addmm`` -> ``aten::addmm`` (the namespace separator profilers print)."""
    namespace, dot, op = name.strip().partition(".")
    return f"{namespace}::{op}" if dot else namespace


def parse_output_code(lines: Iterable[str]) -> dict[str, FusionRecord]:
    """Kernel name -> fusion record, for every Triton kernel with an origin comment."""
    fusions: dict[str, FusionRecord] = {}
    pending: tuple[list[str], list[str], list[str]] | None = None  # source nodes, ATen ops, post-grad
    in_decorator = in_node_map = False
    for raw in lines:
        line = strip_log_prefix(raw.rstrip("\r\n"))
        stripped = line.strip()
        origin = _ORIGIN.match(line)
        if origin:
            pending = (_split_list(origin.group(1)), [aten_name(a) for a in _split_list(origin.group(2))], [])
            in_decorator = in_node_map = False
            continue
        if not stripped or stripped.startswith("#"):
            if pending is not None:
                node_map = _NODE_MAP.match(line) if in_node_map else None
                if node_map:
                    pending[2].extend(_split_list(node_map.group(2)))
                else:
                    in_node_map = stripped == _NODE_MAP_TITLE
            continue
        kernel = _kernel_defined(line)
        if kernel is not None:
            if pending is not None:
                _add(fusions, kernel, pending)
            pending, in_decorator = None, False
            continue
        continues_decorator = in_decorator and line[:1] in (" ", "\t", ")")
        if pending is not None and (stripped.startswith("@") or continues_decorator):
            in_decorator = True  # decorators between the comment and a ``def triton_...``
            continue
        pending, in_decorator = None, False
    return fusions


def _kernel_defined(line: str) -> str | None:
    assign = _TRITON_ASSIGN.match(line)
    if assign:
        return assign.group(2)
    definition = _TRITON_DEF.match(line)
    return definition.group(1) if definition else None


def _split_list(text: str) -> list[str]:
    # Empty names occur: nodes a pattern rewrite created have no source node.
    return [item.strip() for item in text.split(",") if item.strip()]


def _add(fusions: dict[str, FusionRecord], kernel: str,
         found: tuple[list[str], list[str], list[str]]) -> None:
    sources, aten_ops, post_grad = found
    # The same name in another graph: keep what both say, in first-seen order.
    fusions[kernel] = union_fusion_records(fusions.get(kernel), FusionRecord(
        kernel_name=kernel,
        aten_ops=tuple(dict.fromkeys(aten_ops)),
        source_nodes=tuple(dict.fromkeys(sources)),
        source="output_code",
        post_grad_nodes=tuple(dict.fromkeys(post_grad)),
    ))


def union_fusion_records(old: FusionRecord | None, new: FusionRecord) -> FusionRecord:
    """Two records of one kernel as one: every field's items in first-seen order (``old``'s first).

    ``new`` gives the kernel name and source; ``old`` may be None (then ``new`` itself).
    """
    if old is None:
        return new
    return FusionRecord(
        kernel_name=new.kernel_name,
        aten_ops=tuple(dict.fromkeys([*old.aten_ops, *new.aten_ops])),
        source_nodes=tuple(dict.fromkeys([*old.source_nodes, *new.source_nodes])),
        source=new.source,
        post_grad_nodes=tuple(dict.fromkeys([*old.post_grad_nodes, *new.post_grad_nodes])),
        stack_traces=tuple(dict.fromkeys([*old.stack_traces, *new.stack_traces])),
    )

"""Read PyTorch structured trace logs (``TORCH_TRACE=<dir>``) for Inductor's kernel provenance.

Each record is one glog-prefixed line holding a JSON envelope, followed by its payload on
tab-indented lines::

    V1129 07:44:23.812000 427 torch/_inductor/compile_fx.py:1586] {"artifact": {"name":
        "inductor_provenance_tracking_node_mappings", "encoding": "json"}, "frame_id": 0, ...}
    \t{"preToPost": {...}, "postToPre": {...}, "cppCodeToPost": {"triton_poi_fused_addmm_relu_6:15":
        ["relu", "view_19", "add_tensor_1"], "extern_kernels.mm:16": ["mm_default"]}, ...}

Four records matter, read per compile (frame id, compile id, attempt):

* ``inductor_post_grad_graph``: each post-grad node's operator (``mm_default = torch.ops.aten.mm...``);
* ``inductor_provenance_tracking_node_mappings``: kernel call -> post-grad nodes -> pre-grad nodes;
* ``inductor_provenance_tracking_kernel_stack_traces``: kernel call -> user source lines;
* ``inductor_output_code``: the generated code itself (read by ``inductor_output_code``).

Generated kernels (``triton_*``, ``cpp_*``) are keyed by name, merging every call site, since a
name is all a GPU timeline shows. Extern and fallback calls (``extern_kernels.mm:2``) keep their
debug handle: each call site computes different nodes, and the handle orders them in ``call()``.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest.inductor_calls import parse_call_sites
from profiler_core.ingest.inductor_output_code import parse_output_code, union_fusion_records
from profiler_core.records import FusionRecord

_ENVELOPE = re.compile(r"^[A-Z]\d{4} [\d:.]+\s+\d+ \S+\] (\{.*\})\s*$")
_GRAPH_NODE = re.compile(r"^\s+(\w+)(?:: \"[^\"]*\")? = torch\.ops\.(\w+)\.(\w+)(?:\.\w+)?\((.*)$")
_POST_GRAD = "inductor_post_grad_graph"
_NODE_MAPPINGS = "inductor_provenance_tracking_node_mappings"
_STACK_TRACES = "inductor_provenance_tracking_kernel_stack_traces"
_OUTPUT_CODE = "inductor_output_code"
_PRE_GRAD = "before_pre_grad_graph"
_WANTED = frozenset({_POST_GRAD, _NODE_MAPPINGS, _STACK_TRACES, _OUTPUT_CODE, _PRE_GRAD})


def is_trace_line(line: str) -> bool:
    """Whether ``line`` is a structured-trace envelope (glog prefix + JSON object)."""
    return _ENVELOPE.match(line) is not None


@dataclass
class TraceContents:
    """What one or more trace logs said about kernels."""

    provenance: dict[str, FusionRecord] = field(default_factory=dict)
    output_code: dict[str, FusionRecord] = field(default_factory=dict)
    envelopes: int = 0
    # every kernel call of every compiled graph in call() order, with the module it ran under
    call_modules: list[tuple[str, str | None]] = field(default_factory=list)


def parse_torch_trace(lines: Iterable[str], origin: str, into: TraceContents | None = None) -> TraceContents:
    """Kernel provenance and output-code fusions from one structured trace log."""
    contents = into if into is not None else TraceContents()
    reader = _TraceReader(origin, contents)
    for line in lines:
        if line.startswith("\t"):
            reader.payload_line(line[1:].rstrip("\r\n"))
            continue
        match = _ENVELOPE.match(line)
        if match:
            reader.finish()
            reader.start(match.group(1))
    reader.finish()
    reader.enclose()
    return contents


class _TraceReader:
    """Collects the payload of the current record and dispatches it when the next one starts."""

    def __init__(self, origin: str, contents: TraceContents) -> None:
        self.origin = origin
        self.contents = contents
        self.kind: str | None = None
        self.compile_key: tuple[Any, ...] = ()
        self.payload: list[str] = []
        self.targets: dict[tuple[Any, ...], dict[str, str]] = {}  # compile -> post-grad node -> op
        self.last_handles: dict[tuple[Any, ...], dict[str, str]] = {}  # compile -> handle -> record key
        self.node_modules: dict[tuple[Any, ...], dict[str, str]] = {}  # compile -> pre-grad node -> module
        # compile -> the pre-grad graph's inputs in order, each as the module whose parameter or buffer it is
        self.input_modules: dict[tuple[Any, ...], list[tuple[str | None, bool]]] = {}
        self.post_to_pre: dict[tuple[Any, ...], dict[str, list[str]]] = {}  # compile -> post-grad -> pre-grad nodes
        self.code_sites: dict[tuple[Any, ...], Any] = {}  # compile -> its latest output code's call sites
        # compile -> post-grad node -> the nodes and inputs it reads (the latest graph; the forward's kept)
        self.graph_args: dict[tuple[Any, ...], dict[str, tuple[str, ...]]] = {}
        self.forward_args: dict[tuple[Any, ...], dict[str, tuple[str, ...]]] = {}
        self.stacks: dict[Any, tuple[tuple[Any, Any, Any], ...]] = {}  # frame -> the stack dynamo compiled it at
        self.frame_calls: dict[Any, list[int]] = defaultdict(list)  # frame -> its calls' indices in call_modules

    def _add_call(self, handle: str, module: str | None) -> None:
        self.frame_calls[self.compile_key[1]].append(len(self.contents.call_modules))
        self.contents.call_modules.append((handle, module))

    def enclose(self) -> None:
        """A compiled frame whose graph names no module takes the module whose forward called it.

        A function a model's forward calls (transformers' ``ForCausalLMLoss``, called through
        ``self.loss_function``) compiles as a frame of its own after a graph break; its graph holds
        no module. The frame dynamo compiled it from inside is the compiled ``forward`` whose stack,
        less that forward itself, begins its own stack (the forward's frame is not listed: it runs
        compiled code). Its calls take that forward's own module: ``self`` of the forward's frame,
        the root its module paths are written from (``""``; a tied ``lm_head`` that reads
        ``transformer.wte``'s weight keeps the common prefix of its calls from saying so).
        """
        calls = self.contents.call_modules
        placed = {f: [m for i in idx if (m := calls[i][1]) is not None] for f, idx in self.frame_calls.items()}
        for frame, idx in self.frame_calls.items():
            stack = self.stacks.get(frame)
            if stack is None or placed[frame]:
                continue
            called = False
            for other, modules in placed.items():
                outer = self.stacks.get(other)
                if other == frame or not modules or outer is None or outer[-1][2] != "forward":
                    continue
                caller = outer[:-1]
                called = called or (len(caller) < len(stack) and stack[:len(caller)] == caller)
            if called:
                for i in idx:
                    calls[i] = (calls[i][0], "")

    def start(self, envelope_text: str) -> None:
        self.contents.envelopes += 1
        try:
            envelope = json.loads(envelope_text)
        except ValueError:
            return  # a damaged envelope we would not have used anyway
        if not isinstance(envelope, dict):
            return
        started = envelope.get("dynamo_start")
        if isinstance(started, dict) and isinstance(started.get("stack"), list):
            self.stacks.setdefault(envelope.get("frame_id"), tuple(
                (f.get("filename"), f.get("line"), f.get("name")) for f in started["stack"] if isinstance(f, dict)))
        artifact = envelope.get("artifact")
        kind = artifact.get("name") if isinstance(artifact, dict) else None
        if kind is None and _OUTPUT_CODE in envelope:
            kind = _OUTPUT_CODE
        if kind in _WANTED:
            self.kind = kind
            self.compile_key = tuple(
                envelope.get(k) for k in ("compiled_autograd_id", "frame_id", "frame_compile_id", "attempt")
            )

    def payload_line(self, text: str) -> None:
        if self.kind is not None:
            self.payload.append(text)

    def finish(self) -> None:
        kind, payload = self.kind, self.payload
        self.kind, self.payload = None, []
        if kind == _POST_GRAD:
            self.targets[self.compile_key], self.graph_args[self.compile_key] = _graph_nodes(payload)
        elif kind == _PRE_GRAD:
            nodes, inputs = _pre_grad_graph(payload)
            shared = _shared_tokens(nodes)
            self.node_modules[self.compile_key] = _node_modules(nodes, shared)
            self.input_modules[self.compile_key] = _input_modules(inputs, shared)
        elif kind == _OUTPUT_CODE:
            for name, record in parse_output_code(payload).items():
                self.contents.output_code[name] = union_fusion_records(self.contents.output_code.get(name), record)
            self.code_sites[self.compile_key] = parse_call_sites(payload)
        elif kind == _NODE_MAPPINGS:
            self._node_mappings(self._json(kind, payload))
        elif kind == _STACK_TRACES:
            self._stack_traces(self._json(kind, payload))

    def _json(self, kind: str, payload: list[str]) -> dict[str, Any]:
        try:
            data = json.loads("\n".join(payload))
        except ValueError as err:
            raise ArtifactFormatError(
                f"{self.origin}: the {kind} record is not valid JSON ({err}): the trace is truncated "
                "or corrupt"
            ) from err
        if not isinstance(data, dict):
            raise ArtifactFormatError(f"{self.origin}: the {kind} record is not a JSON object")
        return data

    def _node_mappings(self, data: dict[str, Any]) -> None:
        kernel_to_post = _str_lists(data.get("cppCodeToPost"))
        post_to_pre = _str_lists(data.get("postToPre"))
        if kernel_to_post:
            self.post_to_pre[self.compile_key] = post_to_pre
            self.forward_args[self.compile_key] = self.graph_args.get(self.compile_key, {})
        targets = self.targets.get(self.compile_key, {})
        handles: dict[str, str] = {}
        for handle, post_nodes in kernel_to_post.items():
            key = record_key(handle)
            handles[handle] = key
            pre_nodes = [pre for node in post_nodes for pre in post_to_pre.get(node, ())]
            record = FusionRecord(
                kernel_name=key,
                aten_ops=tuple(dict.fromkeys(targets[n] for n in post_nodes if n in targets)),
                source_nodes=tuple(dict.fromkeys(pre_nodes)),
                source="provenance",
                post_grad_nodes=tuple(dict.fromkeys(post_nodes)),
            )
            self.contents.provenance[key] = union_fusion_records(self.contents.provenance.get(key), record)
        self.last_handles[self.compile_key] = handles
        sites = self.code_sites.get(self.compile_key)
        if not kernel_to_post or (sites and _few_mapped(kernel_to_post, sites[1])):
            # a backward graph (Inductor maps none of its calls), or a graph whose generated kernels the
            # mapping does not name (a compiled optimizer's combo kernels): placed by what they read
            self._modules_from_inputs()
            return
        modules = self.node_modules.get(self.compile_key)
        if modules is not None:
            shared = _shared_nodes({h: [p for node in post for p in post_to_pre.get(node, ())]
                                    for h, post in kernel_to_post.items()})
            for handle in sorted(kernel_to_post, key=_call_position):
                pre = [p for node in kernel_to_post[handle] for p in post_to_pre.get(node, ())]
                own = [p for p in pre if p not in shared]
                paths = [modules[p] for p in (own or pre) if p in modules]
                self._add_call(handle, common_module(paths) if paths else None)

    def _modules_from_inputs(self) -> None:
        """Each call of the compile's latest generated code placed by the graph inputs it reads.

        Inductor's provenance maps no call of a backward graph. Its inputs are the forward's:
        parameters (``primals_4``, the forward's fourth input: a parameter whose module the
        pre-grad graph names) and saved activations (``view_132``, a forward node whose module
        the forward's provenance gives). A call's module is the deepest one enclosing those of
        the inputs it reads (gradients, ``tangents_*``, say nothing); a call that reads none
        takes the module of the calls that wrote the buffers it reads.
        """
        found = self.code_sites.pop(self.compile_key, None)
        if not found:
            return
        inputs, sites = found
        key = self.compile_key
        params, saved, modules = self.input_modules.get(key, []), self.post_to_pre.get(key, {}), \
            self.node_modules.get(key, {})
        forward = self.forward_args.get(key, {})

        def param(name: str) -> tuple[str | None, bool] | None:
            """(module, tied) of a graph input that is the pre-grad graph's: ``primals_4`` (a joint
            graph's fourth), ``arg3_1`` (an inference graph's fourth); None for any other name."""
            found = _GRAPH_INPUT.match(name)
            if found is None:
                return None
            index = int(found.group(1)) - 1 if found.group(1) is not None else int(found.group(2))
            return params[index] if 0 <= index < len(params) else (None, False)

        def module_of(name: str, depth: int = 0) -> str | None:
            if (entry := param(name)) is not None:
                return entry[0]
            pre = [modules[p] for p in saved.get(name, ()) if p in modules]
            if pre:
                return common_module(pre)
            if depth < 3 and name in forward:  # a node Inductor mapped to nothing (a weight's permute)
                found = [m for arg in forward[name] if (m := module_of(arg, depth + 1)) is not None]
                return common_module(found) if found else None
            return None

        buffers: dict[str, str] = {}
        placed: list[str | None] = []
        for _handle, reads in sites:
            # a tied weight of a joint graph (an optimizer's inputs are all read by several nodes)
            own = [name for name in reads if name in inputs
                   and not (name.startswith("primals_") and (entry := param(name)) and entry[1])]
            direct = [m for name in (own or reads) if name in inputs and (m := module_of(name)) is not None]
            written = [buffers[name] for name in reads if name in buffers]
            module = common_module(direct) if direct else common_module(written) if written else None
            if module is not None:
                for name in reads:
                    if name.startswith("buf"):
                        buffers.setdefault(name, module)
            placed.append(module)
        # a call that reads only gradients (a transpose of the incoming one) runs for the call that
        # consumes its buffers next
        for i, (_handle, reads) in enumerate(sites):
            if placed[i] is None:
                mine = {name for name in reads if name.startswith("buf")}
                placed[i] = next((placed[j] for j in range(i + 1, len(sites))
                                  if placed[j] is not None and mine & set(sites[j][1])), None)
        for (handle, _), module in zip(sites, placed, strict=True):
            self._add_call(handle, module)

    def _stack_traces(self, data: dict[str, Any]) -> None:
        handles = self.last_handles.get(self.compile_key, {})
        for handle, traces in _str_lists(data).items():
            key = handles.get(handle, record_key(handle))
            record = self.contents.provenance.get(key)
            if record is None:
                continue  # a trace for a kernel the node mappings never named: nothing to attach to
            merged = tuple(dict.fromkeys([*record.stack_traces, *traces]))
            self.contents.provenance[key] = FusionRecord(
                kernel_name=record.kernel_name, aten_ops=record.aten_ops, source_nodes=record.source_nodes,
                source=record.source, post_grad_nodes=record.post_grad_nodes, stack_traces=merged,
            )


_MODULE_TOKEN = re.compile(r"\b[lL]_self_(\w+)")
_MODULE_PART = re.compile(r"(?:^|_)(modules|parameters|buffers)_")
_NODE_LINE = re.compile(r"^\s+(\w+)(?:: \"[^\"]*\")? = (.+)$")


_OPTIMIZER_GROUP = re.compile(r"^param_groups_(\d+)_")


def module_of_token(token: str) -> str | None:
    """``modules_h_modules_0_modules_attn_modules_q_proj_parameters_weight_`` -> ``h.0.attn.q_proj``.

    Dynamo names a lifted parameter or buffer after its attribute path
    (``L['self']._modules['h']._modules['0'] ... ._parameters['weight']``). In a compiled optimizer
    step ``self`` is the optimizer: ``param_groups_0_params_3_grad`` -> ``optimizer.param_groups.0``.
    """
    group = _OPTIMIZER_GROUP.match(token)
    if group:
        return f"optimizer.param_groups.{group.group(1)}"
    parts = _MODULE_PART.split(token)
    if len(parts) < 3 or parts[0]:
        return None
    names = [parts[i + 1] for i in range(1, len(parts) - 1, 2) if parts[i] == "modules"]
    if not any(parts[i] in ("parameters", "buffers") for i in range(1, len(parts), 2)):
        return None
    return ".".join(names)


def common_module(paths: Iterable[str]) -> str:
    """The deepest module enclosing all of ``paths`` (``h.0.attn.q_proj``, ``h.0.mlp`` -> ``h.0``)."""
    split = [p.split(".") if p else [] for p in paths]
    if not split:
        return ""
    prefix = split[0]
    for parts in split[1:]:
        n = 0
        while n < min(len(prefix), len(parts)) and prefix[n] == parts[n]:
            n += 1
        prefix = prefix[:n]
    return ".".join(prefix)


def pre_grad_node_modules(payload: Iterable[str]) -> dict[str, str]:
    """Each pre-grad FX node's module path, from the parameters and buffers it reads.

    A node that reads none (a matmul, a softmax, a residual add) ran in the deepest module
    enclosing its neighbours': the nearest parameter-reading nodes before and after it in
    graph order (``att @ v`` between ``v_proj`` and ``c_proj`` -> ``h.0.attn``).
    """
    nodes, _ = _pre_grad_graph(payload)
    return _node_modules(nodes, _shared_tokens(nodes))


def _pre_grad_graph(payload: Iterable[str]) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """The pre-grad graph's nodes, each with the parameter tokens it reads, and its ``forward()``'s
    inputs in order (``L_kwargs_input_ids_, L_self_modules_...``)."""
    nodes: list[tuple[str, list[str]]] = []
    inputs: list[str] = []
    lines = list(payload)
    attributes = {name for line in lines if _CODE_COMMENT.match(line) for name in _SELF_ATTRIBUTE.findall(line)}
    for line in lines:
        if not inputs and (signature := _SIGNATURE.match(line)) is not None:
            inputs = _ARGUMENT.findall(signature.group(1))
            continue
        match = _NODE_LINE.match(line)
        if match is None or match.group(1).startswith(("l_self_", "L_")):
            continue  # placeholders: a lifted parameter aliased to its input name
        tokens = _MODULE_TOKEN.findall(match.group(2))
        tokens += [t for flat in _FLAT_TOKEN.findall(match.group(2)) if (t := _flat_token(flat, attributes))]
        nodes.append((match.group(1), list(dict.fromkeys(tokens))))
    return nodes, inputs


_CODE_COMMENT = re.compile(r"^\s*# File: .* code: ")
_SELF_ATTRIBUTE = re.compile(r"\bself\.([A-Za-z_]\w*)")
_FLAT_TOKEN = re.compile(r"\b[lL]__self___(\w+)")


def _flat_token(flat: str, attributes: set[str]) -> str | None:
    """A parameter Dynamo lifted under its flattened attribute path (``l__self___h_0_attn_q_proj_weight``,
    as a graph with Inductor's freezing names them), as the token the nested form gives
    (``modules_h_modules_0_modules_attn_modules_q_proj_parameters_weight``); None if it cannot be split.

    Underscores join path segments and sit inside them alike, so the path is read with the attribute
    names the graph's own code comments call on ``self`` (``self.q_proj(x)``, ``self.attn(...)``),
    ModuleList indices, and the name before an index (``h`` in ``h_0``, a list the code iterates):
    the longest module path that leaves a parameter name.
    """
    parts = flat.split("_")
    n = len(parts)
    # parts consumed -> (segments the code names, fewer segments) and the module segments read so far
    best: dict[int, tuple[tuple[int, int], list[str]]] = {0: ((0, 0), [])}
    for i in range(n):
        if i not in best:
            continue
        (named, fewer), path = best[i]
        for j in range(i + 1, n):  # a segment is parts[i:j]; a parameter name must remain after it
            segment = "_".join(parts[i:j])
            known = segment in attributes
            fits = (known or segment.isdigit()
                    or (parts[j].isdigit() and not any(part.isdigit() for part in parts[i:j])))
            score = (named + known, fewer - 1)
            if fits and (j not in best or score > best[j][0]):
                best[j] = (score, [*path, segment])
    end = max((j for j in best if j > 0), default=0)
    if end == 0:
        return None
    return "".join(f"modules_{segment}_" for segment in best[end][1]) + "parameters_" + "_".join(parts[end:])


def _input_modules(inputs: list[str], shared: set[str]) -> list[tuple[str | None, bool]]:
    """Each input as (the module of the parameter or buffer it lifts, None for a user input; whether
    more than one node reads it, as a tied weight is)."""
    out: list[tuple[str | None, bool]] = []
    for name in inputs:
        token = _MODULE_TOKEN.match(name)
        out.append((module_of_token(token.group(1)), token.group(1) in shared) if token else (None, False))
    return out


def _node_modules(nodes: list[tuple[str, list[str]]], shared: set[str]) -> dict[str, str]:
    order: list[tuple[str, str | None]] = []
    for node, tokens in nodes:
        # a tied weight (the embedding an output projection reuses) places neither of its readers
        # when the node reads a parameter of its own (the projection's bias)
        own = [t for t in tokens if t not in shared] or tokens
        found = [m for tok in own if (m := module_of_token(tok)) is not None]
        order.append((node, common_module(found) if found else None))
    out: dict[str, str] = {}
    before: list[str | None] = []
    last: str | None = None
    for _, module in order:
        last = module if module is not None else last
        before.append(last)
    after: list[str | None] = [None] * len(order)
    nxt: str | None = None
    for i in range(len(order) - 1, -1, -1):
        nxt = order[i][1] if order[i][1] is not None else nxt
        after[i] = nxt
    for i, (node, module) in enumerate(order):
        if module is not None:
            out[node] = module
        else:
            near = [m for m in (before[i], after[i]) if m is not None]
            if near:
                out[node] = common_module(near)
    return out


_SIGNATURE = re.compile(r"^\s+def forward\(self, (.*)\):?")
_ARGUMENT = re.compile(r"(\w+)(?:: \"[^\"]*\")?(?:, |$)")


def _shared_tokens(nodes: Iterable[tuple[str, list[str]]]) -> set[str]:
    """Parameters read by more than one node of the graph: tied weights, mostly."""
    readers: dict[str, int] = defaultdict(int)
    for _, tokens in nodes:
        for token in tokens:
            readers[token] += 1
    return {token for token, n in readers.items() if n > 1}


def _shared_nodes(call_nodes: dict[str, list[str]]) -> set[str]:
    """Pre-grad nodes that calls of different subgraphs all list: tables and masks built once.

    Inductor's provenance lists, for each call, every pre-grad node it derives from; a rotary
    table or an attention mask computed once for the model is listed by each layer's attention.
    Calls listing the same nodes are one subgraph (a layer's attention, split over kernels); a node
    in the lists of more than two subgraphs is shared and does not place a call in a module (two
    is a residual stream: the kernel that writes it and the one that reads it).
    """
    subgraphs: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for nodes in call_nodes.values():
        key = tuple(sorted(set(nodes)))
        for node in key:
            subgraphs[node].add(key)
    return {node for node, keys in subgraphs.items() if len(keys) > 2}


_GRAPH_INPUT = re.compile(r"^(?:primals_(\d+)|arg(\d+)_1)$")


def _few_mapped(kernel_to_post: dict[str, list[str]], sites: list[tuple[str, tuple[str, ...]]]) -> bool:
    """Whether the mapping names under half the generated kernels the code launches."""
    launched = {record_key(handle) for handle, _ in sites if handle.startswith(("triton_", "cpp_"))}
    mapped = {record_key(handle) for handle in kernel_to_post}
    return len(launched & mapped) * 2 < len(launched)


def _call_position(handle: str) -> int:
    tail = handle.rpartition(":")[2]
    return int(tail) if tail.isdigit() else 0


def record_key(handle: str) -> str:
    """``triton_poi_fused_relu_0:7`` -> ``triton_poi_fused_relu_0``; ``extern_kernels.mm:2`` unchanged."""
    kernel, colon, index = handle.rpartition(":")
    if colon and index.isdigit() and kernel.startswith(("triton_", "cpp_")):
        return kernel
    return handle


_NAME = re.compile(r"\b([A-Za-z_]\w*)\b")


def _graph_nodes(payload: list[str]) -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """Each post-grad node's operator (``mm_default`` -> ``aten::mm``), and the arguments that name
    other nodes or inputs (``permute_90 = ...(primals_20, ...)`` -> ``("primals_20",)``)."""
    targets: dict[str, str] = {}
    args: dict[str, tuple[str, ...]] = {}
    for line in payload:
        match = _GRAPH_NODE.match(line)
        if match:
            node = match.group(1)
            targets[node] = f"{match.group(2)}::{match.group(3)}"
            args[node] = tuple(w for w in _NAME.findall(match.group(4)) if w in args or w.startswith("primals_"))
    return targets, args


def _str_lists(value: Any) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        return {}
    return {
        str(k): [str(item) for item in v] for k, v in value.items() if isinstance(v, list)
    }

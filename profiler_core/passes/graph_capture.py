"""Whether a model's step can be captured as a CUDA graph: data-dependent dispatch says no.

A CUDA graph replays a fixed sequence of launches; a step that reads a GPU value on the host
to choose what to launch next (a mixture-of-experts router's ``nonzero`` over the experts
hit, ``.tolist()`` of token counts, ``.item()``) copies to the host inside the capture, which
CUDA refuses ("Cannot copy between CPU and CUDA tensors during CUDA graph capture"). The
modules' own source says so before any trial: each submodule class is read for such calls::

    model.layers.0.mlp.experts  MixtralExperts  .nonzero(
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from profiler_core.passes.contract import PassContext

_HOST_READS = re.compile(r"\.(nonzero|tolist|item)\(\s*\)|torch\.nonzero\(|\.cpu\(\)")


def _class_source(cls: type) -> str | None:
    try:
        return inspect.getsource(cls)
    except (OSError, TypeError):
        return None


def data_dependent_modules(model: Any) -> list[tuple[str, str, str]]:
    """(module path, class, the host read found) for each submodule whose class reads GPU values back."""
    named = getattr(model, "named_modules", None)
    if named is None:
        return []
    from profiler_core.passes.moe_experts import experts_host_read, experts_modules

    found: list[tuple[str, str, str]] = []
    reads: dict[type, str | None] = {}
    dispatched = {id(m): experts_host_read(m) for _, m in experts_modules(model)}
    for path, module in named():
        cls = type(module)
        if dispatched.get(id(module)) is not None:  # transformers experts: the dispatch, not the source, decides
            if read := dispatched[id(module)]:
                found.append((path or "(the model)", cls.__name__, read))
            continue
        if cls not in reads:
            source = _class_source(cls) if cls.__module__.split(".")[0] != "torch" else None
            match = _HOST_READS.search(source) if source else None
            reads[cls] = match.group(0) if match else None
        if reads[cls] is not None:
            found.append((path or "(the model)", cls.__name__, reads[cls] or ""))
    return found


def graph_capture_applicability(ctx: PassContext) -> str | None:
    """None when a graph pass (cuda_graphs) may capture the model's step, else why it cannot."""
    if not ctx.on_cuda:
        return f"CUDA graphs need a CUDA device; the plan targets '{ctx.device}'"
    for finding in ctx.findings:
        if finding.get("rule_id") == "host_syncs":
            facts = (finding.get("evidence") or {}).get("facts") or []
            return ("not applicable: the capture shows host syncs inside the step"
                    + (f" ({facts[0]})" if facts else "") + "; a CUDA graph cannot capture them")
    hits = data_dependent_modules(ctx.model)
    if hits:
        shown = ", ".join(f"{path} ({cls}: {call})" for path, cls, call in hits[:3])
        more = f" and {len(hits) - 3} more" if len(hits) > 3 else ""
        return (f"not applicable: data-dependent dispatch reads GPU values on the host in {shown}{more}; a CUDA "
                "graph cannot capture a copy to the host (bf16 and compile settings still apply)")
    return None

"""A graph pass is judged on end-to-end time whatever licensed it: graphs remove gaps, not kernels."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from profiler_core.optimize.state import Candidate
from profiler_core.optimize.trial import _on_timeline


@pytest.mark.parametrize(("transformation", "finding", "timeline"), [
    ("cuda_graphs", "kept:moe_grouped_experts", True),  # suggested, no finding licenses it
    ("cuda_graphs", "tensor_core_idle", True),
    ("whole_step_cuda_graphs", "kept:bf16_autocast", True),
    ("bf16_promotion", "kept:moe_grouped_experts", False),
    ("sdpa", "host_bound:sdpa", True),
])
def test_graph_passes_are_judged_on_the_timeline(transformation: str, finding: str, timeline: bool) -> None:
    state = SimpleNamespace(findings=SimpleNamespace(findings=[]), current=SimpleNamespace(findings=[]))
    assert _on_timeline(state, Candidate(transformation, finding)) is timeline  # type: ignore[arg-type]

"""The rules that read every operator's figures at once give the findings their per-operator paths give.

Where no two operators share a key, the view answers ``kernels_of`` and the counter aggregate by
position: ``tensor_core_idle`` reads its candidates' kernel precisions off the name codes, the
aggregate's rows are the operators' positions, ``far_below_roofline`` takes the view's key map.
Where keys repeat, each of them falls back to asking operator by operator. Forcing that fallback on
profiles whose keys are distinct must change nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.analysis import diagnose
from profiler_core.analysis.profile_view import ProfileView
from tests.conftest import REPO

CAPTURES = REPO / "examples" / "captures" / "h200"
# FP32 GEMMs with idle Tensor Cores, a training step, bf16 kernels beside FP32 ones, convolutions
RUNS = [CAPTURES / "gpt2" / "baseline", CAPTURES / "hf_bert_train" / "baseline",
        CAPTURES / "hf_gpt2_train_step_graph" / "bf16_trial", CAPTURES / "tv_resnet18" / "baseline"]


@pytest.mark.parametrize("run", RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_findings_read_at_once_equal_those_asked_operator_by_operator(run: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from profiler_core.attribution import attribute_run

    profile = attribute_run(run)
    at_once = diagnose(profile).model_dump(mode="json")
    assert not ProfileView(profile).keys_repeat
    monkeypatch.setattr(ProfileView, "keys_repeat", property(lambda self: True))
    one_by_one = diagnose(profile).model_dump(mode="json")
    assert at_once == one_by_one
    assert any(f["rule_id"] == "tensor_core_idle" for f in at_once["findings"]) or run.name == "bf16_trial"


# eager and hand-written attention, a GQA decoder, a generate() loop, and a compiled training step
# whose two addmm-named operators hold only their GEMMs' epilogues (not GEMM work)
PATTERN_RUNS = [CAPTURES / "gpt2" / "baseline", CAPTURES / "hf_qwen2_decoder" / "baseline",
                CAPTURES / "hf_bert_train" / "optimized", CAPTURES / "hf_llama_generate" / "baseline"]


@pytest.mark.parametrize("run", PATTERN_RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_patterns_read_the_views_classes_at_once_as_they_ask_them_one_by_one(run: Path) -> None:
    """Attention groups, GEMM signatures and projection groups of the view's operators in launch
    order read the work classes at once; the same operators in another list ask each one."""
    from profiler_core.analysis.patterns import gemm_signatures, manual_attention_groups, parallel_projection_groups
    from profiler_core.attribution import attribute_run

    profile = attribute_run(run)
    fast, slow = ProfileView(profile), ProfileView(profile)
    ops, copy = fast.ops_in_order, list(slow.ops_in_order)
    assert gemm_signatures(fast, ops) == gemm_signatures(slow, copy)
    assert any(s is not None for s in gemm_signatures(fast, ops))
    assert manual_attention_groups(fast, ops, 8) == manual_attention_groups(slow, copy, 8)
    groups = parallel_projection_groups(fast, ops, min_size=2, max_size=4)
    assert groups == parallel_projection_groups(slow, copy, min_size=2, max_size=4)
    assert groups or run.parent.name == "hf_bert_train"

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

"""validate_outputs: per-dtype tolerances, nested outputs, shape/dtype/structure checks, honest numbers."""

from __future__ import annotations

import collections

import pytest
import torch
from torch.utils._pytree import tree_map

from profiler_core.passes import DtypePolicy, validate_outputs


def test_identical_nested_outputs_pass_with_zero_error() -> None:
    torch.manual_seed(0)
    out = {"logits": torch.randn(2, 5), "aux": (torch.randn(3), torch.arange(4)), "steps": 3}
    result = validate_outputs(out, tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, out))
    assert result.passed and result.max_abs_err == 0.0 and result.max_rel_err == 0.0
    assert [c.path for c in result.outputs] == ["['logits']", "['aux'][0]", "['aux'][1]", "['steps']"]
    by_path = {c.path: c for c in result.outputs}
    assert by_path["['aux'][1]"].tolerance is None  # integers: exact
    assert by_path["['logits']"].tolerance is not None and by_path["['logits']"].tolerance.rtol == 1e-4


def test_bf16_policy_is_looser_than_fp32() -> None:
    torch.manual_seed(0)
    base = torch.randn(64, 64)
    cand = base * (1 + 1e-2)  # a 1% relative error, typical of bf16 GEMMs
    fp32 = validate_outputs(base, cand)
    bf16 = validate_outputs(base, cand, dtype_policy=DtypePolicy(compute_precision="bfloat16"))
    assert not fp32.passed and bf16.passed
    expected_abs = float((cand - base).abs().max())
    assert fp32.max_abs_err == pytest.approx(expected_abs, rel=1e-6)
    assert bf16.max_abs_err == pytest.approx(expected_abs, rel=1e-6)
    assert fp32.outputs[0].mismatched > 0 and "outside rtol=0.0001, atol=0.0001" in fp32.reason
    assert bf16.outputs[0].tolerance.rtol == 5e-2


@pytest.mark.parametrize(
    ("baseline", "candidate", "reason"),
    [
        (torch.zeros(2, 3), torch.zeros(3, 2), "shape (3, 2) differs from the baseline's (2, 3)"),
        (torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.bfloat16), "dtype torch.bfloat16 differs"),
        ((torch.zeros(2),), {"out": torch.zeros(2)}, "output structure differs"),
        ({"a": torch.zeros(2)}, {"b": torch.zeros(2)}, "output structure differs"),
        (torch.arange(4), torch.arange(4) + (torch.arange(4) == 2), "1 elements differ (exact comparison)"),
        (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, 2.0]), "1 of 2 elements outside"),
    ],
    ids=["shape", "dtype", "tuple-vs-dict", "dict-keys", "integers", "nan-one-side"],
)
def test_mismatches_fail_with_the_reason(baseline: object, candidate: object, reason: str) -> None:
    result = validate_outputs(baseline, candidate)
    assert not result.passed
    assert reason in result.reason


def test_nan_and_inf_in_the_same_places_match() -> None:
    values = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert validate_outputs(values, values.clone()).passed


def test_named_tuple_outputs_compare_by_field() -> None:
    Out = collections.namedtuple("Out", ["hidden", "logits"])
    base = Out(torch.ones(2), torch.zeros(2))
    result = validate_outputs(base, Out(torch.ones(2), torch.full((2,), 0.5)))
    assert not result.passed
    assert [c.passed for c in result.outputs] == [True, False]
    assert result.max_abs_err == 0.5


def test_unknown_compute_precision_is_refused() -> None:
    with pytest.raises(ValueError, match="compute precision 'int4' has no tolerance"):
        validate_outputs(torch.zeros(1), torch.zeros(1), dtype_policy=DtypePolicy(compute_precision="int4"))

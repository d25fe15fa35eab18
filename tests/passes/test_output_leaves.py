"""output_leaves and validation on what models really return: ModelOutputs, caches, objects, cycles."""

from __future__ import annotations

import collections
import dataclasses
import enum

import pytest
import torch

from profiler_core.passes import DtypePolicy, validate_outputs
from profiler_core.passes.leaves import output_leaves, snapshot_leaves
from profiler_core.passes.validation import compare_leaves, summarize

transformers = pytest.importorskip("transformers")  # CI installs it; a fallback for bare machines


def _tiny_qwen2() -> torch.nn.Module:
    config = transformers.Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                      num_attention_heads=4, num_key_value_heads=2, use_cache=True)
    torch.manual_seed(0)
    return transformers.Qwen2ForCausalLM(config).eval()


def _cache_field(out: object) -> str:
    # transformers 5.x names the cache field 'past_key_values' (and, later, 'cache')
    return next(k for k in ("cache", "past_key_values") if getattr(out, k, None) is not None)


@pytest.fixture(scope="module")
def decoder_outputs() -> tuple[object, object]:
    model = _tiny_qwen2()
    ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        return model(ids), model(ids)


def test_a_real_decoder_output_is_compared_down_to_every_cache_tensor(decoder_outputs: tuple) -> None:
    first, second = decoder_outputs
    cache = _cache_field(first)
    assert type(getattr(first, cache)).__name__ == "DynamicCache"
    leaves = output_leaves(first)
    tensors = [p for p, v in leaves.items() if isinstance(v, torch.Tensor)]
    assert tensors == ["logits"] + [f"{cache}.layers[{i}].{kv}" for i in range(3) for kv in ("keys", "values")]
    result = validate_outputs(first, second)
    assert result.passed, result.reason
    assert {c.path for c in result.outputs} >= set(tensors)


def test_a_moved_cache_tensor_fails_and_is_named(decoder_outputs: tuple) -> None:
    first, _ = decoder_outputs
    cache = _cache_field(first)
    moved = snapshot_leaves(first)
    moved[f"{cache}.layers[2].keys"] = moved[f"{cache}.layers[2].keys"] + 1e-2
    result = validate_outputs(first, moved)
    assert not result.passed
    assert result.worst == f"output {cache}.layers[2].keys"
    assert result.reason.startswith(f"output {cache}.layers[2].keys: ")
    assert [c.path for c in result.outputs if not c.passed] == [f"{cache}.layers[2].keys"]


def test_a_cache_of_another_length_is_a_shape_mismatch(decoder_outputs: tuple) -> None:
    first, _ = decoder_outputs
    model = _tiny_qwen2()
    with torch.no_grad():
        shorter = model(torch.randint(0, 64, (2, 7)))
    result = validate_outputs(first, shorter)
    assert not result.passed and "shape (2, 7, 64) differs from the baseline's (2, 8, 64)" in result.reason


def test_a_resnet_classifier_output_compares_logits() -> None:
    config = transformers.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=5)
    torch.manual_seed(0)
    model = transformers.ResNetForImageClassification(config).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        a, b = model(x), model(x)
    assert [p for p, v in output_leaves(a).items() if isinstance(v, torch.Tensor)] == ["logits"]
    assert validate_outputs(a, b).passed


class Colour(enum.Enum):
    RED = 1


@dataclasses.dataclass
class Pair:
    left: torch.Tensor
    right: object


class Holder:
    """A plain object holding tensors as attributes, and a link back to itself."""

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t
        self.me = self
        self.name = "holder"
        self.fn = len  # a callable: skipped


class NoTensors:
    def __init__(self) -> None:
        self.config = {"hidden": 32}


def test_objects_dataclasses_and_cycles_are_walked_once() -> None:
    Out = collections.namedtuple("Out", ["hidden", "extra"])
    t = torch.ones(2)
    holder = Holder(t)
    value = Out(t, {"pair": Pair(t, holder), "colour": Colour.RED, "meta": NoTensors(), "dtype": torch.float32})
    leaves = output_leaves(value)
    assert list(leaves) == ["hidden", "extra['pair'].left", "extra['pair'].right.t", "extra['pair'].right.name",
                            "extra['colour']", "extra['dtype']"]
    assert validate_outputs(value, value).passed


def test_an_object_without_tensors_is_not_a_mismatch() -> None:
    result = validate_outputs((torch.ones(1), NoTensors()), (torch.ones(1), NoTensors()))
    assert result.passed and [c.path for c in result.outputs] == ["[0]"]


def test_plain_data_leaves_must_be_equal() -> None:
    result = validate_outputs({"t": torch.ones(1), "n": 3, "kind": "a"}, {"t": torch.ones(1), "n": 4, "kind": "a"})
    assert not result.passed and result.reason == "output ['n']: 4 differs from the baseline's 3"


def test_a_leaf_on_one_side_only_fails_naming_it() -> None:
    base = Pair(torch.ones(2), Holder(torch.zeros(1)))
    cand = Pair(torch.ones(2), NoTensors())
    result = validate_outputs(base, cand)
    assert not result.passed
    assert "output right.t: output structure differs: missing from the candidate" in result.reason


def test_reasons_name_the_worst_leaves_first_and_count_the_rest() -> None:
    base = [torch.zeros(4) for _ in range(8)]
    cand = [b + 0.1 * (i + 1) for i, b in enumerate(base)]
    result = validate_outputs(base, cand, dtype_policy=DtypePolicy("float32"))
    assert result.worst == "output [7]"
    assert result.reason.startswith("output [7]: ") and result.reason.endswith("and 3 more leaves outside tolerance")


def test_every_cache_leaf_of_a_bf16_run_gets_the_bf16_tolerance() -> None:
    model = _tiny_qwen2()
    ids = torch.randint(0, 64, (2, 256), generator=torch.Generator().manual_seed(2))  # angles up to 255 rad
    with torch.no_grad():
        fp32 = model(ids)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = model(ids)
    bf16_leaves = {p: v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v
                   for p, v in output_leaves(bf16).items()}
    bf16_policy = DtypePolicy("bfloat16")
    result = summarize(compare_leaves(output_leaves(fp32), bf16_leaves, bf16_policy), bf16_policy)
    assert result.passed, result.reason
    tensors = [c for c in result.outputs if c.max_abs_err is not None]
    assert len(tensors) == 7 and all(c.tolerance is not None and (c.tolerance.rtol, c.tolerance.atol) == (5e-2, 5e-2)
                                     for c in tensors)
    assert all(0 < (c.max_abs_err or 0) < 5e-2 for c in tensors)  # bf16 rounding, not a wrong rotation
    fp32_policy = DtypePolicy()  # a float32 plan keeps the float32 tolerance
    strict = summarize(compare_leaves(output_leaves(fp32), bf16_leaves, fp32_policy), fp32_policy)
    assert not strict.passed

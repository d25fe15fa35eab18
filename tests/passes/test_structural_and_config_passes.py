"""rnn_reroute, freezing, tf32, cuda_graphs: decided from the model, the device and the first call."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from profiler_core.passes import PassStatus, apply_passes
from profiler_core.passes.backend import _under_precision, float32_matmul_precision
from tests.passes.models import MLP, TinyAttention


class _Encoder(nn.Module):
    def __init__(self, rnn: nn.Module) -> None:
        super().__init__()
        self.pre = nn.Linear(8, 8)
        self.rnn = rnn
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(torch.relu(self.pre(x)))
        h0 = torch.zeros(self.rnn.num_layers, x.shape[0], self.rnn.hidden_size)  # attribute access survives
        return self.head(out) + h0.sum()


@pytest.mark.parametrize("rnn_type", [nn.LSTM, nn.GRU], ids=["lstm", "gru"])
def test_rnn_reroute_keeps_rnn_eager_and_compiles_around_it(rnn_type: type[nn.Module]) -> None:
    torch.manual_seed(0)
    model = _Encoder(rnn_type(8, 16, num_layers=2, batch_first=True)).eval()
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        expected = model(x)
    optimized, record = apply_passes(model, (x,), ["rnn_reroute"], device="cpu", compiler="eager")
    rec = record.record("rnn_reroute")
    assert rec.status is PassStatus.APPLIED and rec.structural
    assert rec.details["rerouted"][0]["module"] == "rnn" and rec.details["rerouted"][0]["num_layers"] == 2
    assert record.graphs_compiled == 2  # the code before and after the RNN; the RNN itself runs eagerly
    assert isinstance(model.rnn, rnn_type)  # the caller's model is untouched
    assert "rnn._orig_mod.weight_ih_l0" in optimized._orig_mod.state_dict()
    with torch.no_grad():
        torch.testing.assert_close(optimized(x), expected)


def test_rnn_reroute_not_applied_without_rnn() -> None:
    _, record = apply_passes(MLP().eval(), (torch.randn(2, 16),), ["rnn_reroute"], device="cpu",
                             compiler="eager")
    rec = record.record("rnn_reroute")
    assert rec.status is PassStatus.NOT_APPLIED
    assert rec.reason == "no nn.LSTM, nn.GRU or nn.RNN in the model"


@pytest.mark.parametrize(("device", "allow_tf32", "dtype", "precision"), [
    ("cuda", True, torch.float32, "tf32"),  # cuDNN's default: float32 RNN GEMMs on TF32 tensor cores
    ("cuda", False, torch.float32, None),
    ("cuda", True, torch.bfloat16, None),  # not float32: TF32 does not enter
    ("cpu", True, torch.float32, None),
], ids=["cuda-tf32", "cuda-fp32", "cuda-bf16", "cpu"])
def test_rnn_reroute_holds_validation_to_cudnn_precision(device: str, allow_tf32: bool, dtype: torch.dtype,
                                                         precision: str | None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from profiler_core.passes.contract import PassContext
    from profiler_core.passes.rnn_reroute import rnn_reroute

    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", allow_tf32)
    model = _Encoder(nn.LSTM(8, 16, num_layers=2, batch_first=True)).to(dtype).eval()
    effect = rnn_reroute(PassContext(model=model, inputs=(torch.randn(2, 5, 8, dtype=dtype),), device=device))
    assert effect.applied
    assert effect.compute_precision == precision
    assert effect.details["rerouted"][0]["dtype"] == str(dtype).removeprefix("torch.")
    assert effect.details.get("cudnn_allow_tf32", False) is (precision == "tf32")


def _step_with_grad(model: Any, inputs: tuple) -> Any:
    return model(*inputs)  # no torch.no_grad(): autograd stays on


@pytest.mark.parametrize(
    ("train", "step", "status", "reason"),
    [
        (False, None, PassStatus.NOT_APPLIED, "the 'eager' compiler applies no Inductor settings"),
        (True, None, PassStatus.NOT_APPLIED, "the model is in train mode"),
        (False, _step_with_grad, PassStatus.NOT_APPLIED, "compiled with autograd enabled"),
    ],
    ids=["eval-no-grad-eager-compiler", "train-mode", "grad-enabled-step"],
)
def test_freezing_legality(train: bool, step: Any, status: PassStatus, reason: str) -> None:
    model = MLP().train(train)
    _, record = apply_passes(model, (torch.randn(2, 16),), ["freezing"], device="cpu", compiler="eager",
                             step=step)
    rec = record.record("freezing")
    assert rec.status is status
    assert reason in rec.reason
    if not train and step is None:  # the eager compiler traces without freezing: parameters stay inputs
        assert rec.details["parameters_as_inputs"] == 4 and "parameters_frozen" not in rec.details
        assert rec.details["inductor_config"] == {"freezing": True}


@pytest.mark.slow
def test_freezing_folds_weight_casts_in_inductor() -> None:
    """With freezing on while Dynamo traces, parameters arrive as constants and bf16 weight casts fold."""
    torch.manual_seed(0)
    model, x = MLP().eval(), torch.randn(4, 16)
    with torch.no_grad():
        expected = model(x)
    compiled, record = apply_passes(model, (x,), ["bf16_promotion", "freezing"], device="cpu")
    rec = record.record("freezing")
    assert rec.status is PassStatus.APPLIED, rec.reason
    assert rec.details["parameters_frozen"] == 4 and rec.details["parameters_as_inputs"] == 0
    assert torch._inductor.config.freezing is False  # only around the compiled model's calls
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), expected, rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize(("name", "reason"), [
    ("tf32", "TF32 is an NVIDIA tensor-core mode"),
    ("cuda_graphs", "CUDA graphs need a CUDA device"),
], ids=["tf32", "cuda_graphs"])
def test_gpu_only_passes_decline_on_cpu_and_validation_still_runs(name: str, reason: str) -> None:
    torch.manual_seed(0)
    model, x = TinyAttention().eval(), torch.randn(2, 8, 16)
    optimized, record = apply_passes(model, (x,), [name, "sdpa"], device="cpu", compiler="eager")
    assert record.record(name).status is PassStatus.NOT_APPLIED
    assert reason in record.record(name).reason
    assert record.compile_mode == "default" and record.matmul_precision is None
    assert record.compute_precision == "float32"
    with torch.no_grad():
        torch.testing.assert_close(optimized(x), model(x))


def test_matmul_precision_scoped_to_compiled_calls() -> None:
    seen: list[str] = []

    def compiled(*args: Any) -> int:
        seen.append(torch.get_float32_matmul_precision())
        return len(args)

    before = torch.get_float32_matmul_precision()
    wrapped = _under_precision(compiled, "high")
    assert wrapped(1, 2) == 2
    assert seen == ["high"]
    assert torch.get_float32_matmul_precision() == before
    with float32_matmul_precision("medium"):
        assert torch.get_float32_matmul_precision() == "medium"
    assert torch.get_float32_matmul_precision() == before


@pytest.mark.gpu
def test_tf32_and_cuda_graphs_on_gpu() -> None:
    torch.manual_seed(0)
    model, x = TinyAttention().cuda().eval(), torch.randn(2, 8, 16, device="cuda")
    optimized, record = apply_passes(model, (x,), ["tf32", "cuda_graphs"], device="cuda")
    assert record.record("tf32").status is PassStatus.APPLIED
    assert record.matmul_precision == "high" and record.compute_precision == "tf32"
    assert record.compile_mode == "reduce-overhead"
    assert record.record("cuda_graphs").status is PassStatus.APPLIED
    with torch.no_grad():
        for _ in range(3):
            out = optimized(x).clone()
        torch.testing.assert_close(out, model(x), rtol=5e-3, atol=5e-3)


@pytest.mark.gpu
def test_rnn_reroute_on_gpu_keeps_cudnn_weights_in_one_buffer() -> None:
    # the plan works on a deep copy; without flattening its LSTM weights again, cuDNN compacts them
    # on every call and warns "RNN module weights are not part of single contiguous chunk of memory"
    import warnings

    torch.manual_seed(0)
    model = _Encoder(nn.LSTM(8, 16, num_layers=2, batch_first=True)).cuda().eval()
    x = torch.randn(2, 5, 8, device="cuda")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimized, record = apply_passes(model, (x,), ["rnn_reroute"], device="cuda")
        with torch.no_grad():
            out = optimized(x)
    assert record.record("rnn_reroute").status is PassStatus.APPLIED
    assert not [w for w in caught if "contiguous chunk" in str(w.message)]
    with torch.no_grad():
        torch.testing.assert_close(out, model(x), rtol=5e-3, atol=5e-3)

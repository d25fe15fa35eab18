"""bf16_promotion and cast cancellation: GEMMs run in bf16, outputs stay fp32, round trips cancel."""

from __future__ import annotations

import pytest
import torch
from torch import fx, nn

from profiler_core.passes.bf16_promotion import promote_gemms
from profiler_core.passes.cast_cancellation import CastCancellation, cancel_round_trips, dynamo_cast_dtype
from profiler_core.passes.post_grad import PostGradPipeline
from tests.passes.models import MLP, TinyAttention, capture, run_graph

BF16_TOL = {"rtol": 5e-2, "atol": 5e-2}


def _casts(gm: fx.GraphModule, dtype: torch.dtype) -> list[fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "call_method" and dynamo_cast_dtype(n) == dtype]


def test_mlp_gemms_promoted_outputs_stay_fp32() -> None:
    torch.manual_seed(0)
    model, x = MLP().eval(), torch.randn(4, 16)
    expected = model(x)
    got = capture(model, x, rewrite=promote_gemms)
    assert got.change is not None and got.change.applied
    assert got.change.details["gemms_promoted"] == {"linear": 2}
    # fc1: x, w1, b1 to bf16 and the result back; fc2: its input, w2, b2 and the result back.
    assert len(_casts(got.gm, torch.bfloat16)) == 6 and len(_casts(got.gm, torch.float32)) == 2
    assert got.change.details["casts_cancelled"] == 0  # GELU sits between the GEMMs: nothing to cancel
    out = run_graph(got.gm, got.example)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected, **BF16_TOL)
    assert not torch.equal(out, expected)  # it did compute in bf16


class _ChainedMatmuls(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1, self.w2 = nn.Parameter(torch.randn(8, 16) / 4), nn.Parameter(torch.randn(4, 2, 8) / 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = (x @ self.w1).view(-1, 4, 4).transpose(1, 2)  # layout-only ops between the GEMMs
        return torch.bmm(y, self.w2.transpose(1, 2).reshape(4, 4, 4))


def test_round_trip_casts_between_gemms_cancel_across_layout_ops() -> None:
    torch.manual_seed(0)
    model, x = _ChainedMatmuls().eval(), torch.randn(4, 8)
    expected = model(x)
    got = capture(model, x, rewrite=promote_gemms)
    assert got.change is not None and got.change.applied
    assert got.change.details["gemms_promoted"] == {"matmul": 1, "bmm": 1}
    assert got.change.details["casts_cancelled"] == 2  # matmul's .to(f32) and bmm's .to(bf16)
    assert len(_casts(got.gm, torch.float32)) == 1  # only the final result goes back to fp32
    torch.testing.assert_close(run_graph(got.gm, got.example), expected, **BF16_TOL)


def test_attention_promotes_sdpa_operands_too() -> None:
    torch.manual_seed(0)
    model, x = TinyAttention(causal=True).eval(), torch.randn(2, 8, 16)
    expected = model(x)
    got = capture(model, x, rewrite=promote_gemms)
    assert got.change is not None
    assert got.change.details["gemms_promoted"] == {"linear": 4, "matmul": 2}
    torch.testing.assert_close(run_graph(got.gm, got.example), expected, **BF16_TOL)


class _Elementwise(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 2


@pytest.mark.parametrize(
    ("model", "x", "reason"),
    [
        (_Elementwise(), torch.randn(4, 16), "no GEMM-family operator"),
        (MLP().to(torch.bfloat16), torch.randn(4, 16, dtype=torch.bfloat16), "no float32 GEMM"),
    ],
    ids=["no-gemm", "already-bf16"],
)
def test_not_applied(model: nn.Module, x: torch.Tensor, reason: str) -> None:
    got = capture(model.eval(), x, rewrite=promote_gemms)
    assert got.change is not None and not got.change.applied
    assert reason in got.change.reason
    assert str(got.gm.graph) == got.before


def _graph_with(widen_to: torch.dtype, then: str, source: torch.dtype = torch.bfloat16) -> fx.Graph:
    """x(source) -> .to(widen_to) -> [then] -> .to(source) -> output, with meta tensors as fake values."""
    graph = fx.Graph()
    x = graph.placeholder("x")
    x.meta["example_value"] = torch.empty(4, 4, dtype=source, device="meta")
    node = graph.call_method("to", (x, widen_to))
    if then == "view":
        node = graph.call_method("view", (node, 16))
    elif then == "relu":
        node = graph.call_function(torch.relu, (node,))
    graph.output(graph.call_method("to", (node, source)))
    return graph


@pytest.mark.parametrize(
    ("widen_to", "then", "source", "removed"),
    [
        (torch.float32, "none", torch.bfloat16, 2),
        (torch.float32, "view", torch.bfloat16, 2),
        (torch.float32, "relu", torch.bfloat16, 0),  # a real op in between: the fp32 value is used
        (torch.float16, "none", torch.float32, 0),  # narrowing first: not an exact round trip
    ],
    ids=["adjacent", "across-view", "across-relu", "narrow-first"],
)
def test_cancel_round_trips(widen_to: torch.dtype, then: str, source: torch.dtype, removed: int) -> None:
    graph = _graph_with(widen_to, then, source)
    assert cancel_round_trips(graph, dynamo_cast_dtype, through_layout=True) == removed
    graph.lint()
    casts = [n for n in graph.nodes if n.op == "call_method" and n.target == "to"]
    assert len(casts) == 2 - removed


def test_post_grad_cast_cancellation_on_aten_graph() -> None:
    convert = torch.ops.prims.convert_element_type.default
    graph = fx.Graph()
    x = graph.placeholder("x")
    x.meta["val"] = torch.empty(4, dtype=torch.bfloat16, device="meta")
    wide = graph.call_function(convert, (x, torch.float32))
    back = graph.call_function(convert, (wide, torch.bfloat16))
    kept = graph.call_function(convert, (x, torch.float32))
    graph.output((graph.call_function(torch.ops.aten.mul.Tensor, (back, back)), kept))
    cancellation = CastCancellation()
    cancellation(graph)
    (change,) = cancellation.changes
    assert change.applied and change.details == {"casts_cancelled": 2}
    assert [n.target for n in graph.nodes if n.op == "call_function"] == [convert, torch.ops.aten.mul.Tensor]


def test_post_grad_uuids_are_stable_and_cache_safe() -> None:
    assert CastCancellation().uuid() == CastCancellation().uuid()
    pipeline = PostGradPipeline([CastCancellation()])
    assert pipeline.uuid() == (CastCancellation().uuid(),)
    # A plain callable cannot name itself: the pipeline then opts out of Inductor's cache (None).
    assert PostGradPipeline([CastCancellation(), lambda graph: None]).uuid() is None


class _LSTMHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.head(out)


def _lstm_without_fake_support(*args: object, **kwargs: object) -> object:
    """torch.lstm as CUDA runs it under fake tensors: cuDNN asks for a data pointer."""
    from torch._subclasses.fake_tensor import FakeTensor

    if isinstance(args[0], FakeTensor):
        raise RuntimeError("Cannot access data pointer of Tensor (e.g. FakeTensor, FunctionalTensor)")
    return torch.lstm(*args, **kwargs)  # type: ignore[call-overload]


def test_promotion_keeps_recorded_values_for_ops_fake_tensors_cannot_run() -> None:
    torch.manual_seed(0)
    model, x = _LSTMHead().eval(), torch.randn(2, 5, 8)

    def rewrite(gm: fx.GraphModule, info: object) -> object:
        (lstm,) = [n for n in gm.graph.nodes if n.target is torch.lstm]
        lstm.target = _lstm_without_fake_support
        gm.recompile()
        return promote_gemms(gm, info)  # type: ignore[arg-type]

    with torch._dynamo.config.patch(allow_rnn=True):  # trace nn.LSTM into the graph
        captured = capture(model, x, rewrite=rewrite)
    assert captured.change is not None and captured.change.applied
    assert captured.change.details["gemms_promoted"] == {"linear": 1}
    assert captured.change.details["recorded_values_kept"] == ["lstm"]
    with torch.no_grad():
        expected = model(x)
    torch.testing.assert_close(run_graph(captured.gm, captured.example), expected, rtol=5e-2, atol=5e-2)


class _Rotary(nn.Module):
    """A projection rotated by position angles computed as transformers 4.x does: a matmul under autocast off."""

    def __init__(self, dim: int = 64) -> None:
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[1], device=x.device)[None, None, :].float()
        inv = self.inv_freq[None, :, None]
        with torch.autocast(device_type=x.device.type, enabled=False):
            freqs = (inv.float() @ positions.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
        return self.proj(x) * emb.cos()


def test_gemms_under_autocast_disabled_stay_fp32() -> None:
    torch.manual_seed(0)
    model, x = _Rotary().eval(), torch.randn(2, 256, 64)
    expected = model(x)
    got = capture(model, x, rewrite=promote_gemms)
    assert got.change is not None and got.change.applied
    assert got.change.details["gemms_promoted"] == {"linear": 1}
    skipped = got.change.details["gemms_skipped"]
    assert len(skipped) == 1 and "autocast(enabled=False)" in next(iter(skipped.values()))
    torch.testing.assert_close(run_graph(got.gm, got.example), expected, **BF16_TOL)
    # The angles in bf16 (what promoting that matmul would compute) are off by tenths of a radian.
    angles = (model.inv_freq[:, None] @ torch.arange(256.0)[None, :])
    in_bf16 = (model.inv_freq[:, None].bfloat16() @ torch.arange(256.0)[None, :].bfloat16()).float()
    assert float((in_bf16 - angles).abs().max()) > 0.1


class _RotaryNoAutocastBlock(_Rotary):
    """The same angles as transformers 5 computes them: ``maybe_autocast(enabled=False)`` is a no-op
    when autocast is off, so the traced graph holds a bare outer product and no autocast block."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[1], device=x.device)[None, None, :].float()
        freqs = (self.inv_freq[None, :, None].float() @ positions).transpose(1, 2)
        return self.proj(x) * torch.cat((freqs, freqs), dim=-1).cos()


def test_an_outer_product_stays_fp32_without_an_autocast_block() -> None:
    torch.manual_seed(0)
    model, x = _RotaryNoAutocastBlock().eval(), torch.randn(2, 256, 64)
    expected = model(x)
    got = capture(model, x, rewrite=promote_gemms)
    assert got.change is not None and got.change.details["gemms_promoted"] == {"linear": 1}
    (why,) = got.change.details["gemms_skipped"].values()
    assert "outer product (inner dimension 1)" in why
    torch.testing.assert_close(run_graph(got.gm, got.example), expected, **BF16_TOL)


@pytest.mark.slow
def test_a_real_qwen2_keeps_its_cached_keys_within_bf16_tolerance_at_256_positions() -> None:
    """However this transformers computes the angles (a matmul under autocast off, a bare outer product,
    an elementwise product), the promoted graph must rotate the keys as the float32 model does."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
    model = transformers.Qwen2ForCausalLM(config).eval()
    ids = torch.randint(0, 64, (1, 256))

    class Keys(nn.Module):  # the first layer's cached keys: the tensor a wrong rotation turns
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.model(ids, use_cache=True).past_key_values.layers[0].keys

    wrapped = Keys().eval()
    with torch.no_grad():
        expected = wrapped(ids)
        got = capture(wrapped, ids, rewrite=promote_gemms)
        assert got.change is not None and got.change.details["gemms_promoted"]["linear"] >= 4
        torch.testing.assert_close(run_graph(got.gm, got.example), expected, **BF16_TOL)

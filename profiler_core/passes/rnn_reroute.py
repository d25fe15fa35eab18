"""RNN reroute: keep nn.LSTM / nn.GRU / nn.RNN on cuDNN's fused kernels, outside the compiled region.

Traced into a graph, a recurrent layer unrolls into one small GEMM per time step (M = batch)
plus split-K epilogues; cuDNN's fused RNN instead runs the input projection for all steps as
one GEMM (M = batch x time) and the recurrence in persistent kernels. This pass edits the
module before Dynamo sees it: each RNN submodule is replaced by ``torch.compiler.disable(rnn)``,
which Dynamo turns into a graph break at the call (the code around it still compiles) and
which runs the RNN eagerly. Outputs and attribute access (``self.lstm.hidden_size``) are
unchanged; the compiled region and the state_dict keys (``lstm.`` becomes ``lstm._orig_mod.``)
are not, which is why the plan reports a structural change::

    before:  encoder.lstm: LSTM                      (Dynamo gives up on the frame at the LSTM,
                                                      or unrolls it with allow_rnn=True)
    after:   encoder.lstm: disable(LSTM)             (graph break at the call; eager cuDNN)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from profiler_core.passes.contract import PassContext, PassEffect
from profiler_core.passes.registry import PassLevel, register_pass


def _dtype_name(module: nn.Module) -> str | None:
    param = next(module.parameters(), None)
    return None if param is None else str(param.dtype).removeprefix("torch.")


def _describe(path: str, module: nn.Module) -> dict[str, Any]:
    return {
        "module": path, "type": type(module).__name__,
        "num_layers": getattr(module, "num_layers", None),
        "input_size": getattr(module, "input_size", None),
        "hidden_size": getattr(module, "hidden_size", None),
        "bidirectional": getattr(module, "bidirectional", None),
        "dtype": _dtype_name(module),
        "state_dict_prefix": f"{path}._orig_mod.",
    }


def reroute_rnns(model: nn.Module) -> list[dict[str, Any]]:
    """Replace every RNN submodule of ``model`` by its compiler-disabled twin; describe each one."""
    found = [(path, module) for path, module in model.named_modules()
             if path and isinstance(module, nn.RNNBase)]
    rerouted: list[dict[str, Any]] = []
    for path, module in found:
        parent_path, _, name = path.rpartition(".")
        parent = model.get_submodule(parent_path) if parent_path else model
        rerouted.append(_describe(path, module))
        setattr(parent, name, torch.compiler.disable(module))
    return rerouted


def rnn_reroute_applicability(ctx: PassContext) -> str | None:
    """None when rnn_reroute can apply (an nn.LSTM, nn.GRU or nn.RNN inside the model), else why not.

    Cheap and side-effect free: asked before a trial, so a model without an RNN module (a
    decode loop's per-token GEMMs look like a recurrence) costs no trial.
    """
    if not isinstance(ctx.model, nn.Module):
        return "the model is not an nn.Module; no RNN submodules to find"
    if isinstance(ctx.model, nn.RNNBase):
        return ("the model is itself an RNN: nothing would be left to compile around it; run it without "
                "torch.compile")
    if not any(path and isinstance(m, nn.RNNBase) for path, m in ctx.model.named_modules()):
        return "no nn.LSTM, nn.GRU or nn.RNN in the model"
    return None


@register_pass(
    "rnn_reroute",
    level=PassLevel.DYNAMO_FX,
    symptom="an unrolled recurrent region: many small per-time-step GEMMs (M = batch) and split-K "
            "epilogues, or RNN time spent outside cuDNN",
    order=0,
    structural=True,
    aliases=("cudnn_rnn", "rnn"),
    applicable=rnn_reroute_applicability,
)
def rnn_reroute(ctx: PassContext) -> PassEffect:
    """Keep nn.LSTM/nn.GRU on the fused cuDNN path, out of the compiled region (structural)."""
    why = rnn_reroute_applicability(ctx)
    if why is not None:
        return PassEffect.not_applied(why)
    rerouted = reroute_rnns(ctx.model)
    details: dict[str, Any] = {
        "rerouted": rerouted,
        "compiled_region": "ends before and resumes after each rerouted module (graph breaks)",
        "dynamo_allow_rnn": bool(torch._dynamo.config.allow_rnn),
    }
    precision = None
    if ctx.on_cuda:
        details["cudnn_enabled"] = bool(torch.backends.cudnn.enabled)
        if _computes_in_tf32(rerouted):
            # cuDNN runs float32 RNN GEMMs on TF32 tensor cores unless the user turned that off
            # (torch.backends.cudnn.allow_tf32, default True), while Inductor's unrolled matmuls
            # follow torch.backends.cuda.matmul.allow_tf32 (default False): hold validation to TF32
            precision = "tf32"
            details["cudnn_allow_tf32"] = True
    return PassEffect(details=details, compute_precision=precision)


def _computes_in_tf32(rerouted: list[dict[str, Any]]) -> bool:
    """Whether cuDNN will run the rerouted float32 RNNs' GEMMs in TF32."""
    return (bool(torch.backends.cudnn.enabled) and bool(torch.backends.cudnn.allow_tf32)
            and any(r.get("dtype") in (None, "float32") for r in rerouted))

"""Convolution-network passes: fold eval BatchNorms into their convolutions, and run convolutions channels_last.

conv_bn_folding (module level, inference only): a BatchNorm in eval mode is an affine map with
fixed statistics, so the convolution feeding it can absorb it::

    before:  y = bn(conv(x))            w, b; mean, var, gamma, beta
    after:   y = conv'(x)               w' = w * gamma / sqrt(var + eps)
                                        b' = (b - mean) * gamma / sqrt(var + eps) + beta

Legal only where the convolution's output feeds the BatchNorm and nothing else, which is
read from the data flow (``torch.fx.symbolic_trace`` of the module holding both), never
from the order modules were declared in. The folding itself is
``torch.nn.utils.fusion.fuse_conv_bn_eval``; the BatchNorm becomes ``nn.Identity``.

channels_last (module level): cuDNN's tensor-core convolutions want NHWC; an NCHW model pays
for layout-transposition kernels (``nchwToNhwcKernel``) around them. The pass converts the
parameters and buffers to ``torch.channels_last`` and converts 4-D floating inputs on entry
(a forward pre-hook); values are unchanged.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn.utils.fusion import fuse_conv_bn_eval

from profiler_core.passes.contract import PassContext, PassEffect
from profiler_core.passes.registry import PassLevel, register_pass

_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def _pairs_in(root: nn.Module) -> list[tuple[str, str]]:
    """(conv path, bn path) relative to ``root`` where the conv's only user is the BatchNorm."""
    graph = torch.fx.symbolic_trace(root).graph
    pairs = []
    for node in graph.nodes:
        if node.op != "call_module" or len(node.users) != 1:
            continue
        (user,) = node.users
        if user.op != "call_module" or user.args[:1] != (node,):
            continue
        conv, bn = root.get_submodule(str(node.target)), root.get_submodule(str(user.target))
        if isinstance(conv, _CONVS) and isinstance(bn, _NORMS):
            pairs.append((str(node.target), str(user.target)))
    return pairs


def _has_both(module: nn.Module) -> bool:
    kids = list(module.children())
    return any(isinstance(k, _CONVS) for k in kids) and any(isinstance(k, _NORMS) for k in kids)


def find_conv_bn_pairs(model: nn.Module) -> tuple[list[tuple[str, str]], list[str]]:
    """Folding candidates by full path, and the modules that could not be traced (with why).

    The whole model is traced first; where that fails (models with data-dependent control
    flow), each module that directly holds a convolution and a BatchNorm is traced alone.
    """
    try:
        return _pairs_in(model), []
    except Exception as err:
        whole_error = f"the model as a whole: {type(err).__name__}"
    pairs: list[tuple[str, str]] = []
    untraced = [whole_error]
    for path, module in model.named_modules():
        if not _has_both(module):
            continue
        try:
            local = _pairs_in(module)
        except Exception as err:
            untraced.append(f"{path or '(root)'}: {type(err).__name__}")
            continue
        prefix = f"{path}." if path else ""
        pairs.extend((prefix + c, prefix + b) for c, b in local)
    return pairs, untraced


def _foldable(conv: nn.Module, bn: nn.Module) -> str | None:
    if conv.training or bn.training:
        return "in train mode"
    if not (isinstance(bn, _NORMS) and bn.track_running_stats and bn.running_mean is not None):
        return "the BatchNorm keeps no running statistics"
    if conv.weight.dtype != bn.running_mean.dtype or conv.weight.device != bn.running_mean.device:
        return "convolution and BatchNorm differ in dtype or device"
    return None


def _set(model: nn.Module, path: str, module: nn.Module) -> None:
    parent_path, _, name = path.rpartition(".")
    setattr(model.get_submodule(parent_path) if parent_path else model, name, module)


def conv_bn_applicable(ctx: PassContext) -> str | None:
    """A fold needs a convolution and a BatchNorm in the model."""
    if not isinstance(ctx.model, nn.Module):
        return "the model is not an nn.Module; no convolutions to find"
    mods = list(ctx.model.modules())
    if not any(isinstance(m, _CONVS) for m in mods) or not any(isinstance(m, _NORMS) for m in mods):
        return "the model has no convolution and BatchNorm modules to fold"
    return None


def channels_last_applicable(ctx: PassContext) -> str | None:
    """channels_last needs a 2-D convolution whose weight is not channels_last already."""
    if not isinstance(ctx.model, nn.Module):
        return "the model is not an nn.Module; no convolutions to find"
    convs = [m for m in ctx.model.modules() if isinstance(m, nn.Conv2d)]
    if not convs:
        return "no nn.Conv2d in the model: channels_last changes 4-D (NCHW) tensors only"
    if all(c.weight.is_contiguous(memory_format=torch.channels_last) and not c.weight.is_contiguous()
           for c in convs):
        return "every nn.Conv2d weight is channels_last already"
    return None


@register_pass(
    "conv_bn_folding",
    level=PassLevel.DYNAMO_FX,
    symptom="normalization kernels right after convolutions (eval BatchNorm recomputed every call)",
    order=5,
    structural=True,
    inference_only=True,
    aliases=("conv_bn", "fold_batchnorm"),
    applicable=conv_bn_applicable,
    suggests=("channels_last", "bf16_promotion"),
)
def conv_bn_folding(ctx: PassContext) -> PassEffect:
    """Fold each eval-mode BatchNorm into the convolution that alone feeds it (inference only)."""
    if not isinstance(ctx.model, nn.Module):
        return PassEffect.not_applied("the model is not an nn.Module; no convolutions to find")
    pairs, untraced = find_conv_bn_pairs(ctx.model)
    folded, skipped = [], {}
    for conv_path, bn_path in pairs:
        conv, bn = ctx.model.get_submodule(conv_path), ctx.model.get_submodule(bn_path)
        why = _foldable(conv, bn)
        if why is not None:
            skipped[f"{conv_path} -> {bn_path}"] = why
            continue
        _set(ctx.model, conv_path, fuse_conv_bn_eval(conv, bn))  # type: ignore[type-var, arg-type]
        _set(ctx.model, bn_path, nn.Identity())
        folded.append(f"{conv_path} <- {bn_path}")
    details: dict[str, Any] = {"folded": len(folded), "pairs": folded[:8]}
    if skipped:
        details["skipped"] = skipped
    if untraced[1:] or not pairs:
        details["untraced"] = untraced
    if not folded:
        why = "; ".join(f"{k}: {v}" for k, v in skipped.items()) if skipped else (
            "no convolution feeding a BatchNorm alone" + (f" (could not trace {', '.join(untraced)})"
                                                          if untraced else ""))
        return PassEffect.not_applied(why, **details)
    return PassEffect(details=details)


def _to_channels_last(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    def convert(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and v.dim() == 4 and v.is_floating_point():
            return v.contiguous(memory_format=torch.channels_last)
        return v

    return tuple(convert(a) for a in args), {k: convert(v) for k, v in kwargs.items()}


@register_pass(
    "channels_last",
    level=PassLevel.DYNAMO_FX,
    symptom="layout-transposition kernels (nchwToNhwcKernel) around convolutions, or NCHW convolutions",
    order=8,
    structural=True,
    aliases=("nhwc", "channels_last_layout"),
    applicable=channels_last_applicable,
    suggests=("bf16_promotion", "conv_bn_folding"),
)
def channels_last(ctx: PassContext) -> PassEffect:
    """Run the model's 2-D convolutions in channels_last (NHWC) memory format."""
    if not isinstance(ctx.model, nn.Module):
        return PassEffect.not_applied("the model is not an nn.Module; no convolutions to find")
    convs = [name for name, m in ctx.model.named_modules() if isinstance(m, nn.Conv2d)]
    if not convs:
        return PassEffect.not_applied("no nn.Conv2d in the model: channels_last changes 4-D (NCHW) tensors only")
    ctx.model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # parameters keep identity
    ctx.model.register_forward_pre_hook(_to_channels_last, with_kwargs=True)
    return PassEffect(details={"conv2d_modules": len(convs), "inputs": "4-D floating inputs converted on entry"})


def cudnn_conv_precision(model: Any, device: str) -> str | None:
    """``tf32`` where cuDNN runs this model's float32 convolutions in TF32 (PyTorch's default on CUDA), else None.

    ``torch.backends.cudnn.allow_tf32`` is on by default, so on CUDA the baseline's float32
    convolutions already round their operands to TF32's 10-bit mantissa. A plan that changes
    the weights (conv_bn_folding) or lets cuDNN choose another algorithm (cuda_graphs, a new
    layout) moves those roundings, by far more than float32 reassociation would: the plan is
    held to the TF32 tolerance. A model whose user turned the flag off keeps float32's.
    """
    if not str(device).startswith("cuda") or not isinstance(model, nn.Module):
        return None
    if not (torch.backends.cudnn.enabled and torch.backends.cudnn.allow_tf32):
        return None
    convs = (m for m in model.modules() if isinstance(m, nn.modules.conv._ConvNd))
    return "tf32" if any(c.weight.dtype == torch.float32 for c in convs) else None

"""The float64 reference: the original step run once more in double precision, TF32 off.

Validation judges a candidate by how far it is from this reference compared with how far the
baseline is (policy.py). The reference runs on a copy of the original model and inputs (taken
together, so an optimizer in the inputs follows the copied parameters), with every floating
parameter, buffer, input tensor and optimizer state cast to float64, float64 as the default
dtype (tensors the model creates itself follow), and TF32 off for matmuls and cuDNN::

    ref = float64_reference(step, model, inputs, device="cuda")
    ref.record      # a StepRecord in float64, or None when the model cannot run so
    ref.describe()  # "float64 on cuda, TF32 off" / "none: ... (judged by the tolerance table)"

Where float64 cannot run (out of memory, an operator without a float64 kernel, a model that
pins its own dtypes) the reference is None with the reason, and validation falls back to the
tolerance table and says so.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from profiler_core.passes.output_kinds import leaf_kind
from profiler_core.passes.step_run import Step, StepRecord, base_module, find_optimizers, run_step

_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


@dataclass
class Reference:
    """The float64 run of the original step, or why there is none."""

    record: StepRecord | None
    device: str
    reason: str = ""  # why there is no record; with one, what the float64 copy ran differently

    def describe(self) -> str:
        """Which reference the verdict used, in words."""
        if self.record is not None:
            return f"float64 on {self.device}, TF32 off" + (f" ({self.reason})" if self.reason else "")
        return f"none: float64 could not run ({self.reason}); judged by the tolerance table"


def _to_double(value: Any) -> Any:
    """``value`` with its floating tensors in float64 (containers rebuilt, other objects as they are)."""
    if isinstance(value, torch.Tensor):
        return value.double() if value.dtype in _FLOATS else value
    if isinstance(value, tuple) and not hasattr(type(value), "_fields"):
        return tuple(_to_double(v) for v in value)
    if isinstance(value, list):
        return [_to_double(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_double(v) for k, v in value.items()}
    return value


def _double_optimizer_state(optimizers: list[torch.optim.Optimizer]) -> None:
    for opt in optimizers:
        for entry in opt.state.values():
            for key, v in list(entry.items()):
                if isinstance(v, torch.Tensor) and v.dtype in _FLOATS:
                    entry[key] = v.double()


@contextlib.contextmanager
def float64_mode() -> Iterator[None]:
    """float64 as the default dtype and TF32 off, restored on exit."""
    dtype = torch.get_default_dtype()
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    precision = torch.get_float32_matmul_precision()
    torch.set_default_dtype(torch.float64)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_default_dtype(dtype)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
        torch.set_float32_matmul_precision(precision)


def _eager_experts(module: torch.nn.Module) -> str:
    """Switch a ``transformers`` MoE copy to its eager experts (grouped-GEMM kernels have no float64)."""
    getter = getattr(module, "get_experts_implementation", None)
    setter = getattr(module, "set_experts_implementation", None)
    if not (callable(getter) and callable(setter)):
        return ""
    try:
        current = getter()
        if all(v in (None, "eager") for v in current.values()) and current.get("") == "eager":
            return ""
        setter("eager")
    except Exception:  # a model that cannot switch keeps its own: float64 may still run
        return ""
    return "MoE experts by the eager implementation"


def _first_line(err: BaseException) -> str:
    text = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {text[:160]}"


def float64_reference(step: Step, model: Any, inputs: tuple[Any, ...], *, device: str,
                      in_place: bool = False) -> Reference:
    """Run ``step`` on a float64 copy of ``model`` and ``inputs``; never raises on the model's account.

    ``in_place``: convert and run ``model`` itself, for a build made for this run alone (a
    training build, whose optimizer may live outside the inputs: on the model, in a global or a
    closure of the workload file, holding this very model's parameters, which a copy would lose).
    """
    module = base_module(model)
    if not isinstance(module, torch.nn.Module):
        return Reference(None, device, "the model is not an nn.Module")
    try:
        work, work_inputs = (module, inputs) if in_place else copy.deepcopy((module, inputs))
    except Exception as err:
        return Reference(None, device, f"the model cannot be copied: {_first_line(err)}")
    adapted = _eager_experts(work)
    try:
        with float64_mode():
            work.to(torch.float64)  # in place: an optimizer in the inputs keeps its parameters
            work_inputs = _to_double(work_inputs)
            _double_optimizer_state(find_optimizers(work_inputs))
            record = run_step(step, work, tuple(work_inputs), seed=0)
    except torch.OutOfMemoryError:
        return Reference(None, device, "out of memory")
    except Exception as err:
        return Reference(None, device, _first_line(err))
    finally:
        if str(device).startswith("cuda"):
            torch.cuda.empty_cache()
    floats = [v for v in record.outputs.values() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    if floats and not any(v.dtype == torch.float64 for v in floats):
        kept = str(floats[0].dtype).removeprefix("torch.")
        if any(isinstance(g, torch.Tensor) and g.dtype == torch.float64 for g in record.gradients.values()):
            # a training step whose loss the model upcasts itself (transformers' causal-LM loss does
            # logits.float()): gradients and updated parameters are float64, the loss one rounding off
            note = f"the loss came back in {kept}: the model casts it; gradients and parameters in float64"
        elif any(leaf_kind(path, v) == "token_ids" for path, v in record.outputs.items()):
            # generate() hands back each step's scores in float32 (it casts the next-token logits):
            # one rounding of the float64 model's, which decided the tokens
            note = f"generate() returned its scores in {kept}: one rounding of the float64 logits"
        else:
            return Reference(None, device, f"the model's outputs stayed in {kept} (it sets its own dtypes)")
        return Reference(record, device, "; ".join(x for x in (adapted, note) if x))
    return Reference(record, device, adapted)

"""The workload contract: one Python file every stage (capture, passes, validation) loads.

A workload file defines::

    def get_model_and_inputs(device: str = "cuda") -> tuple[torch.nn.Module, tuple]:
        ...                     # model in eval or train mode, example inputs on `device`

    def step(model, inputs):    # optional: one iteration; default below
        ...

Under ``oprof capture --nproc-per-node N`` every rank runs the file under torchrun; the
harness joins the process group itself and passes ``device`` = ``cuda:<LOCAL_RANK>``. A
workload asks for a distributed model in one of two ways (without either, each rank runs
the model as is)::

    DISTRIBUTED = "ddp"         # the harness wraps the model in DistributedDataParallel

    def get_distributed_model(model, device):   # or: wrap it yourself (FSDP, custom DDP args)
        ...

Both are ignored in a single-process capture. For gradients to be all-reduced, ``step``
must run a backward pass.

The default step is ``model(*inputs)`` under ``torch.no_grad()`` when the model is in eval
mode, and plain ``model(*inputs)`` otherwise. A training step returns the model in train mode;
its optimizer may live wherever the file keeps it: among the inputs, on the model
(``model._opt``), in a module global, in a closure ``get_model_and_inputs`` defines ``step``
in, or in a helper object. Validation builds baseline and candidate each from its own import
of the file and call of ``get_model_and_inputs``, so each build's optimizer steps that build's
parameters; the call must therefore be deterministic (seed it), and two builds must agree on
every parameter, buffer, optimizer state and input tensor, or the workload is refused by
name. An optimizer kept in another module the file imports is shared by the builds and is
refused::

    def get_model_and_inputs(device="cuda"):
        torch.manual_seed(0)
        model = build().to(device).train()
        model._opt = torch.optim.AdamW(model.parameters())
        return model, (batch, labels)

    def step(model, inputs):
        batch, labels = inputs
        model._opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(batch), labels)
        loss.backward()
        model._opt.step()
        return loss.detach()

 Anything wrong with the file raises
:class:`~profiler_core.errors.WorkloadError` naming the file and the fix.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from profiler_core.errors import WorkloadError

ENTRY_POINT = "get_model_and_inputs"
STEP_NAME = "step"


@dataclass(frozen=True)
class Workload:
    """A loaded workload: the module, its model, its example inputs and its step function."""

    path: Path
    module: ModuleType
    model: Any  # torch.nn.Module
    inputs: tuple[Any, ...]
    step: Callable[[Any, tuple[Any, ...]], Any]
    custom_step: bool


def last_frame(err: BaseException) -> str:
    """`` (at file.py:LINE)`` for the innermost frame of ``err``'s traceback; "" without one."""
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {Path(last.filename).name}:{last.lineno})"


_IDENTITY_LINE = re.compile(r"""^WORKLOAD_IDENTITY = (['"])(?P<identity>[^'"]+)\1(?:\s*#.*)?$""", re.M)


def workload_identity(path: str | Path) -> str:
    """Which workload a file measures: the ``WORKLOAD_IDENTITY`` it declares, else its file name.

    A plan's ``workload_optimized.py`` declares its original's identity, so a baseline and every
    optimized trial of it are one workload for ``oprof compare``; a file that cannot be read
    is known by its name.
    """
    p = Path(path)
    try:
        found = _IDENTITY_LINE.search(p.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        found = None
    return found.group("identity") if found else p.name


def checked_workload_path(workload: str | Path) -> Path:
    """``workload`` resolved, once it is known to be an existing .py file (else WorkloadError)."""
    path = Path(workload).expanduser()
    if not path.is_file():
        raise WorkloadError(f"{workload}: no such workload file; pass a .py file defining {ENTRY_POINT}()")
    if path.suffix != ".py":
        raise WorkloadError(f"{workload}: a workload must be a .py file defining {ENTRY_POINT}()")
    return path.resolve()


def import_workload_module(path: str | Path) -> ModuleType:
    """Import a workload file as a fresh module, without running its ``__main__`` block."""
    p = checked_workload_path(path)
    digest = hashlib.sha1(str(p).encode()).hexdigest()[:10]
    name = f"oprof_workload_{p.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise WorkloadError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(p.parent))
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        raise WorkloadError(f"{path}:{err.lineno}: syntax error ({err.msg}); fix the file") from err
    except ImportError as err:
        raise WorkloadError(
            f"{path}: import failed: {err}{last_frame(err)}; install the missing package "
            "in the environment oprof runs in"
        ) from err
    except Exception as err:
        raise WorkloadError(
            f"{path}: raised {type(err).__name__} while importing: {err}{last_frame(err)}"
        ) from err
    finally:
        if sys.path and sys.path[0] == str(p.parent):
            sys.path.pop(0)
    if not callable(getattr(module, ENTRY_POINT, None)):
        raise WorkloadError(
            f"{path}: defines no {ENTRY_POINT}(device) function; add one returning "
            "(model, example_inputs)"
        )
    return module


def default_step(model: Any, inputs: tuple[Any, ...]) -> Any:
    """``model(*inputs)``, under ``torch.no_grad()`` for a model in eval mode."""
    import torch

    if not getattr(model, "training", False):
        with torch.no_grad():
            return model(*inputs)
    return model(*inputs)


def load_workload(path: str | Path, device: str = "cuda") -> Workload:
    """Import ``path`` and build its model and inputs on ``device``."""
    module = import_workload_module(path)
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise WorkloadError(
                f"{path}: device '{device}' asked for but CUDA is not available here; "
                "run on a machine with an NVIDIA GPU, or use --device cpu where the command allows it"
            )
    try:
        result = getattr(module, ENTRY_POINT)(device=device)
    except TypeError as err:
        if "device" in str(err):
            raise WorkloadError(
                f"{path}: {ENTRY_POINT} must accept a 'device' argument (def {ENTRY_POINT}(device='cuda'))"
            ) from err
        raise WorkloadError(f"{path}: {ENTRY_POINT}() raised TypeError: {err}{last_frame(err)}") from err
    except Exception as err:
        raise WorkloadError(
            f"{path}: {ENTRY_POINT}() raised {type(err).__name__}: {err}{last_frame(err)}"
        ) from err
    if not (isinstance(result, tuple) and len(result) == 2):
        raise WorkloadError(
            f"{path}: {ENTRY_POINT}() must return (model, inputs), got {type(result).__name__}"
        )
    model, inputs = result
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if not isinstance(inputs, list) else tuple(inputs)
    if not callable(model):
        raise WorkloadError(f"{path}: the model returned by {ENTRY_POINT}() is not callable")
    custom = getattr(module, STEP_NAME, None)
    if custom is not None and not callable(custom):
        raise WorkloadError(f"{path}: '{STEP_NAME}' must be a function step(model, inputs)")
    return Workload(
        path=Path(path).resolve(), module=module, model=model, inputs=inputs,
        step=custom or default_step, custom_step=custom is not None,
    )

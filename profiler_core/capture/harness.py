"""The child process every capture phase runs: ``python -m profiler_core.capture.harness``.

It owns the measurement conditions so that every phase runs the workload identically::

    load workload -> seed -> move to device -> torch.compile(mode) -> warmup x N -> synchronize
    -> measured region (per phase) x N -> synchronize -> one JSON line on stdout

Phases: ``kineto`` (torch.profiler trace, record_shapes, of the measured region),
``region`` (cudaProfilerStart/Stop + emit_nvtx(record_shapes=True) around it, for nsys
and ncu), ``plain`` (no profiler: the floor) and ``probe`` (a synthetic matmul loop for
clock probing; no workload). A workload that breaks the contract prints one line
``oprof-workload-error: <message>`` on stderr and exits 3; the parent re-raises it as
:class:`~profiler_core.errors.WorkloadError`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profiler_core.atomic_write import write_text_atomic
from profiler_core.capture.config import CompileMode, HarnessPhase
from profiler_core.compile_mode import compile_model
from profiler_core.errors import WorkloadError
from profiler_core.ingest.driver_copies import driver_copy_kind
from profiler_core.rundir.layout import GRAPH_CAPTURE_ENV, GRAPH_CAPTURE_NAME, MODULE_MAP_NAME
from profiler_core.workload import last_frame

RESULT_KEY = "oprof_harness"
WORKLOAD_ERROR_PREFIX = "oprof-workload-error: "
WORKLOAD_ERROR_EXIT = 3


# ---------------------------------------------------------------- parent side


def parse_result(stdout_text: str) -> dict[str, Any] | None:
    """The harness's result object: the last stdout line that is ``{"oprof_harness": ...}``.

    Tools that wrap the harness (nsys, ncu) print their own lines after it, so search
    from the end rather than take the very last line.
    """
    for line in reversed(stdout_text.splitlines()):
        line = line.strip()
        if line.startswith("{") and RESULT_KEY in line:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and RESULT_KEY in data:
                return data
    return None


def workload_error_line(text: str) -> str | None:
    """The workload error the harness reported, if any (tools may prefix their own tags)."""
    for line in reversed(text.splitlines()):
        at = line.find(WORKLOAD_ERROR_PREFIX)
        if at >= 0:
            return line[at + len(WORKLOAD_ERROR_PREFIX):].strip()
    return None


# ---------------------------------------------------------------- child side



def model_methods(model: Any) -> list[list[str]]:
    """The model's own methods outside torch (``GenerationMixin.generate``), as ``[file, name]``:
    work a step runs inside one of them but outside every module call (``generate()``'s token
    selection) belongs to the model itself. A model the workload compiled itself (an optimized
    plan's workload does) lists its original module's methods."""
    import inspect

    found: dict[tuple[str, str], None] = {}
    for cls in type(getattr(model, "_orig_mod", model)).__mro__:
        if cls is object or str(getattr(cls, "__module__", "")).split(".")[0] == "torch":
            continue
        for name, value in vars(cls).items():
            if name == "forward" or name.startswith("__"):
                continue
            try:  # a class attribute is anything: only plain functions, unwrapped, are kept
                fn = inspect.unwrap(value.__func__ if isinstance(value, (classmethod, staticmethod)) else value)
                code = getattr(fn, "__code__", None)
            except Exception:  # noqa: BLE001 - an odd descriptor is not a method to list
                continue
            if code is not None:
                found[(code.co_filename, code.co_name)] = None
    return [list(key) for key in found]


def traced_module_map(prof: Any, paths: dict[int, str]) -> list[list[Any]]:
    """``modules.json``'s rows from the profiler's own record of each module call.

    torch.profiler's Python tracer labels a module call ``<Class>_<n>``, n counting the instances
    of that class in first-call order, and keeps the called module's ``self`` with it: ``paths``
    (``id(module)`` -> its path in the model) turns each label into the module's path::

        {"modules": [["GPT2", 0, ""], ["Block", 0, "h.0"], ["LayerNorm", 0, "h.0.ln_1"], ...],
         "methods": [[".../transformers/generation/utils.py", "generate"], ...]}

    No hook is installed, so nothing runs in the measured region that Dynamo would see; a module
    outside the model keeps an ``<unnamed Class>`` path.
    """
    rows: dict[str, list[Any]] = {}
    pending = list(prof.profiler.kineto_results.experimental_event_tree())
    while pending:
        event = pending.pop()
        pending.extend(event.children)
        module = getattr(event.extra_fields, "module", None)
        label = str(event.name).removeprefix("nn.Module: ")
        if module is None or label in rows:
            continue
        cls, _, index = label.rpartition("_")
        path = paths.get(module.self_ptr)
        rows[label] = [cls, int(index), f"<unnamed {cls}>" if path is None else path]
    return sorted(rows.values(), key=lambda row: (row[0], row[1]))


def module_paths(plain: Any, called: Any) -> dict[int, str]:
    """``id(module)`` -> path for every module of ``plain``; ``called`` (torch.compile's wrapper,
    called as the model) is the model itself."""
    inner = getattr(plain, "_orig_mod", plain)  # a workload that compiled its model itself
    paths = {id(m): name for name, m in inner.named_modules()}
    paths.setdefault(id(plain), "")
    paths.setdefault(id(called), "")
    return paths


def _eager_modules_ran(step: Callable[[], None], plain: Any, called: Any) -> bool:
    """Whether one (warm-up) iteration of ``step`` called any module of the model below the model
    itself as Python code: a compiled run whose graphs are whole can still run some of the model
    eagerly, where Dynamo never looked (the static-KV-cache plan runs generate()'s prefill through the
    plain model and only its decode step compiled). Inside a compiled graph no module is called."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as probe:
        step()
    rows = _module_rows(probe, module_paths(plain, called)) or []
    return any(path and not path.startswith("<unnamed ") for _, _, path in rows)


def _module_rows(prof: Any, paths: dict[int, str]) -> list[list[Any]] | None:
    """:func:`traced_module_map`, or None (said on stderr) where this torch's profiler does not keep
    the called module with its record: the capture goes on, its kernels without module paths."""
    try:
        return traced_module_map(prof, paths)
    except (AttributeError, TypeError, ValueError) as err:
        print(f"oprof harness: no module map: torch.profiler's record of module calls is not readable "
              f"here ({type(err).__name__}: {err}); kernels keep no module path", file=sys.stderr)
        return None


def _traces_modules(mode: CompileMode, model: Any) -> bool | None:
    """Whether the Kineto phase runs the Python tracer to learn the module of eager code, decided
    after the warm-up (None: only a probe can tell):

    * eager mode, or a compiled model whose step never reaches a compiled frame
      (``model.generate(...)`` on a compiled model runs the plain module's ``__call__``): yes;
    * Dynamo ran and left code to run eagerly (a graph break, or a frame it gave up on at once, as
      at a cuDNN LSTM): yes;
    * whole graphs: None. Inductor's provenance places every kernel, unless the step also called
      a module of the model eagerly: the last warm-up iteration is run under the Python tracer
      (:func:`_eager_modules_ran`) to see;
    * a model that is no ``nn.Module`` (a function): no; it has no modules to name.
    """
    import torch

    if not isinstance(model, torch.nn.Module):
        return False
    if mode is CompileMode.EAGER:
        return True
    from torch._dynamo.utils import counters

    if not counters["frames"].get("total", 0):
        return True
    compiled = counters["stats"].get("unique_graphs", 0) or counters["frames"].get("ok", 0)
    return True if not compiled or any(counters["graph_break"].values()) else None


def _seed(seed: int) -> None:
    import torch

    random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass


def _synchronizer(device: str) -> Callable[[], None]:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.synchronize
    return lambda: None


def _device_info(device: str) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"device": device}
    if device.startswith("cuda") and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(name=props.name, sm_count=int(props.multi_processor_count),
                    compute_capability=f"{props.major}.{props.minor}",
                    memory_total_bytes=int(props.total_memory))
    return info


def _versions() -> dict[str, Any]:
    import torch

    versions: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                                "python": platform.python_version()}
    try:
        from importlib.metadata import version

        versions["triton"] = version("triton")
    except Exception:
        versions["triton"] = None
    return versions


def _placed(model: Any, inputs: tuple[Any, ...], device: str) -> tuple[Any, tuple[Any, ...]]:
    """Model and top-level tensor inputs on ``device`` (a no-op when the workload already did it)."""
    import torch

    if isinstance(model, torch.nn.Module):
        model = model.to(device)
    placed = tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs)
    return model, placed


def _count_kernels(trace: Path) -> int:
    try:
        import orjson

        data = orjson.loads(trace.read_bytes())
    except ImportError:
        data = json.loads(trace.read_text())
    # the driver's copy kernels (a CUDA graph's copy nodes) are copies to the readers, as here
    return sum(1 for ev in data.get("traceEvents", [])
               if ev.get("cat") == "kernel" and not driver_copy_kind(str(ev.get("name", ""))))


def _probe(device: str, seconds: float) -> dict[str, Any]:
    """Keep the GPU busy with matmuls for ``seconds``; report the loaded window (unix time)."""
    import torch

    dtype = torch.float16 if device.startswith("cuda") else torch.float32
    a = torch.randn(4096, 4096, device=device, dtype=dtype)
    b = torch.randn(4096, 4096, device=device, dtype=dtype)
    sync = _synchronizer(device)
    ramp_end = time.monotonic() + min(1.0, seconds / 4)  # let the clock settle before the window
    while time.monotonic() < ramp_end:
        for _ in range(8):
            a @ b
        sync()
    start_unix = time.time()
    end = time.monotonic() + seconds
    matmuls = 0
    while time.monotonic() < end:
        for _ in range(8):
            a @ b
        sync()
        matmuls += 8
    return {"load_start_unix": start_unix, "load_end_unix": time.time(), "matmuls": matmuls}


def _distributed_init(device: str) -> tuple[str, int | None, int | None]:
    """Under torchrun (RANK, WORLD_SIZE, LOCAL_RANK set): join the process group, pick this rank's GPU.

    Outside torchrun nothing changes: the device stays as given and no process group exists.
    """
    import os

    if not all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK")):
        return device, None, None
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ["LOCAL_RANK"])
    if device.startswith("cuda"):
        device = f"cuda:{local_rank}"
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    return device, dist.get_rank(), dist.get_world_size()


def _distributed_model(wl: Any, model: Any, device: str, path: Path) -> Any:
    """The workload's own hook, or DDP when it sets ``DISTRIBUTED = "ddp"``; else the model as is."""
    hook = getattr(wl.module, "get_distributed_model", None)
    flag = getattr(wl.module, "DISTRIBUTED", None)
    try:
        if callable(hook):
            return hook(model, device)
        if flag == "ddp":
            from torch.nn.parallel import DistributedDataParallel

            ids = [int(device.split(":", 1)[1])] if device.startswith("cuda:") else None
            return DistributedDataParallel(model, device_ids=ids)
    except Exception as err:
        raise WorkloadError(f"{path}: wrapping the model for distributed runs failed: "
                            f"{type(err).__name__}: {err}{last_frame(err)}") from err
    if flag is not None and flag != "ddp":
        raise WorkloadError(f"{path}: DISTRIBUTED = {flag!r} is not supported; use \"ddp\" or define "
                            "get_distributed_model(model, device)")
    return model


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Do one phase and return its result object (raises WorkloadError for workload faults)."""
    try:
        import torch
    except ImportError as err:
        raise WorkloadError(
            f"{args.workload or 'the harness'}: torch is not importable by {sys.executable} ({err}); "
            "install PyTorch there or pass --python with an interpreter that has it"
        ) from err

    from profiler_core.workload import load_workload

    phase = HarnessPhase(args.phase)
    mode = CompileMode(args.compile_mode)
    device: str = args.device
    result: dict[str, Any] = {RESULT_KEY: 1, "phase": phase.value, "compile_mode": mode.value,
                              "warmup": args.warmup, "iters": args.iters}
    if device.startswith("cuda") and not torch.cuda.is_available():
        where = args.workload or "the probe"
        raise WorkloadError(f"{where}: device '{device}' asked for but CUDA is not available to this "
                            "Python (torch.version.cuda is None or no driver); run on a CUDA machine")
    device, rank, world_size = _distributed_init(device)
    if rank is not None:
        result.update(rank=rank, world_size=world_size)
        if args.out is not None:
            args.out = str(args.out).replace("{rank}", str(rank))
    _seed(args.seed)
    if phase is HarnessPhase.PROBE:
        result.update(_probe(device, args.probe_seconds))
        result.update(device_info=_device_info(device), versions=_versions())
        return result
    if not args.workload:
        raise WorkloadError(f"phase {phase.value} needs --workload FILE.py")
    path = Path(args.workload)
    if args.provenance and mode is not CompileMode.EAGER:
        import torch._inductor.config as inductor_config

        inductor_config.trace.provenance_tracking_level = 1
    wl = load_workload(path, device=device)
    result["model_training"] = bool(getattr(wl.model, "training", False))
    model, inputs = _placed(wl.model, wl.inputs, device)
    if rank is not None:
        model = _distributed_model(wl, model, device, path)
    plain = model
    model = compile_model(model, mode, path)
    sync = _synchronizer(device)

    def step() -> None:
        wl.step(model, inputs)

    def guarded(stage: str) -> None:
        try:
            step()
        except Exception as err:
            hint = ("; try --compile-mode eager to tell a compile problem from a model bug"
                    if mode is not CompileMode.EAGER and stage == "warmup"
                    else "; fix the model or its inputs so that one iteration runs on the device")
            raise WorkloadError(
                f"{path}: step() raised {type(err).__name__} during {stage}: {err}{last_frame(err)}{hint}"
            ) from err

    if phase is HarnessPhase.KINETO and args.out is not None:
        # a step recorded as one CUDA graph during warm-up (step_graph_capture) traces its recording here
        os.environ[GRAPH_CAPTURE_ENV] = str(Path(args.out).with_name(GRAPH_CAPTURE_NAME))
    probe = phase is HarnessPhase.KINETO and args.warmup >= 2 and mode is not CompileMode.EAGER
    eager_modules = False
    for done in range(args.warmup):
        if probe and done == args.warmup - 1 and _traces_modules(mode, plain) is None:
            eager_modules = _eager_modules_ran(lambda: guarded("warmup"), plain, model)
        else:
            guarded("warmup")
    sync()

    iteration_ms: list[float] = []
    # the iterations' host time (region_ms) and GPU time by CUDA events (gpu_ms), taken inside each
    # phase's profiler once it runs, the same in every phase: what a profiler adds per iteration
    # shows against the plain run (benchmarks/bench_overhead.py); measured_ms also holds its start/stop
    events = _region_events(device)
    start = time.perf_counter()
    if phase is HarnessPhase.KINETO:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if device.startswith("cuda"):
            activities.append(ProfilerActivity.CUDA)
        # eager code: the Python tracer records every nn.Module call (module_map names them); a
        # compiled graph's module paths come from Inductor's provenance instead
        tracing = eager_modules or bool(_traces_modules(mode, plain))
        with profile(activities=activities, record_shapes=True, with_stack=tracing,
                     with_modules=tracing) as prof:
            inner = _record_start(events)
            for _ in range(args.iters):
                guarded("the measured iterations")
            _record_end(events)
            sync()
            region_ms = (time.perf_counter() - inner) * 1e3
        total_ms = (time.perf_counter() - start) * 1e3
        if args.out is None:
            raise WorkloadError("phase kineto needs --out TRACE.json")
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(out))
        rows = _module_rows(prof, module_paths(plain, model)) if tracing else None
        if rows is not None:
            mapped = {"modules": rows, "methods": model_methods(plain)}
            write_text_atomic(out.with_name(MODULE_MAP_NAME), json.dumps(mapped) + "\n")
        kernels = _count_kernels(out)
        result["kernels"] = kernels
        if device.startswith("cuda") and kernels == 0:
            raise WorkloadError(
                f"{path}: the measured iterations launched no CUDA kernels; get_model_and_inputs(device) "
                "must put the model and its inputs on `device`"
            )
    elif phase is HarnessPhase.REGION:
        if not device.startswith("cuda"):
            raise WorkloadError(f"{path}: phase region brackets CUDA work; it needs --device cuda")
        torch.cuda.profiler.start()
        try:
            with torch.autograd.profiler.emit_nvtx(record_shapes=True):
                inner = _record_start(events)
                for _ in range(args.iters):
                    guarded("the measured iterations")
                _record_end(events)
                sync()
                region_ms = (time.perf_counter() - inner) * 1e3
        finally:
            torch.cuda.profiler.stop()
        total_ms = (time.perf_counter() - start) * 1e3
    else:
        inner = _record_start(events)
        for _ in range(args.iters):
            t0 = time.perf_counter()
            guarded("the measured iterations")
            sync()
            iteration_ms.append((time.perf_counter() - t0) * 1e3)
        _record_end(events)
        sync()
        total_ms = (time.perf_counter() - start) * 1e3
        region_ms = (time.perf_counter() - inner) * 1e3
    result.update(measured_ms=total_ms, region_ms=region_ms, iteration_ms=iteration_ms,
                  device_info=_device_info(device), versions=_versions())
    if events is not None:  # under ncu the region is replayed: its gpu_ms says nothing there
        result["gpu_ms"] = events[0].elapsed_time(events[1])
    return result


def _region_events(device: str) -> tuple[Any, Any] | None:
    """Two timing CUDA events (start, end) for the measured region; None off CUDA."""
    if not device.startswith("cuda"):
        return None
    import torch

    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def _record_start(events: tuple[Any, Any] | None) -> float:
    """Start timing the iterations (inside the phase's profiler, once it runs): host clock and event."""
    if events is not None:
        events[0].record()
    return time.perf_counter()


def _record_end(events: tuple[Any, Any] | None) -> None:
    if events is not None:
        events[1].record()


def build_parser() -> argparse.ArgumentParser:
    """Arguments of one harness process (the parent builds them in capture.phases)."""
    parser = argparse.ArgumentParser(prog="python -m profiler_core.capture.harness",
                                     description="Run one capture phase of a workload.")
    parser.add_argument("--workload", help="workload .py defining get_model_and_inputs(device)")
    parser.add_argument("--phase", required=True, choices=[p.value for p in HarnessPhase])
    parser.add_argument("--compile-mode", default=CompileMode.DEFAULT.value,
                        choices=[m.value for m in CompileMode])
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--iters", type=int, default=2)
    parser.add_argument("--out", help="kineto phase: where the trace goes ('{rank}' becomes the rank)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--provenance", action="store_true",
                        help="set Inductor's provenance_tracking_level=1 before compiling")
    parser.add_argument("--probe-seconds", type=float, default=5.0)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point: exit 0 with a result line, or 3 with one workload-error line on stderr."""
    args = build_parser().parse_args(argv)
    try:
        result = run(args)
    except WorkloadError as err:
        _leave_group()
        message = " ".join(str(err).split())  # one line, whatever the exception text held
        sys.stderr.write(f"{WORKLOAD_ERROR_PREFIX}{message}\n")
        sys.stderr.flush()
        return WORKLOAD_ERROR_EXIT
    _leave_group()
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


def _leave_group() -> None:
    """Destroy the process group if this rank joined one (a clean exit for torchrun)."""
    if "torch.distributed" not in sys.modules:
        return
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())

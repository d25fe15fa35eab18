"""The harness child on CPU: a bad workload exits 3 with one line; a good one reports its run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from profiler_core.capture import harness

TINY = """
import torch

def get_model_and_inputs(device="cuda"):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    return model.to(device), (torch.randn(4, 8, device=device),)
"""


def _workload(tmp_path: Path, text: str, name: str = "wl.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.slow  # a fresh interpreter importing torch: a few seconds
def test_missing_entry_point_exits_3_with_one_line(tmp_path: Path) -> None:
    path = _workload(tmp_path, "import torch\nMODEL = None\n", "no_entry.py")
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "profiler_core.capture.harness",
            "--workload",
            str(path),
            "--phase",
            "plain",
            "--device",
            "cpu",
            "--compile-mode",
            "eager",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == harness.WORKLOAD_ERROR_EXIT
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(harness.WORKLOAD_ERROR_PREFIX)
    message = harness.workload_error_line(done.stderr)
    assert str(path) in message and "get_model_and_inputs(device)" in message and "add one" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("MODEL = None\n", "defines no get_model_and_inputs(device) function; add one"),
        ("import not_a_real_package_xyz\n", "import failed"),
        (
            TINY + "\ndef step(model, inputs):\n    raise ValueError('bad shape')\n",
            "step() raised ValueError during warmup: bad shape (at wl.py:",
        ),
        ("def get_model_and_inputs(device='cuda'):\n    return 3\n", "must return (model, inputs)"),
    ],
    ids=["missing-entry-point", "import-error", "step-raises", "wrong-return"],
)
def test_workload_faults_become_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    path = _workload(tmp_path, text)
    code = harness.main(
        ["--workload", str(path), "--phase", "plain", "--device", "cpu", "--compile-mode", "eager"]
    )
    out, err = capsys.readouterr()
    assert code == 3 and out == ""
    assert err.count("\n") == 1 and expected in harness.workload_error_line(err)


def test_plain_phase_on_cpu_reports_the_measured_iterations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _workload(tmp_path, TINY)
    code = harness.main(
        [
            "--workload",
            str(path),
            "--phase",
            "plain",
            "--device",
            "cpu",
            "--compile-mode",
            "eager",
            "--warmup",
            "1",
            "--iters",
            "3",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    result = harness.parse_result(out)
    assert result is not None and json.loads(out.strip().splitlines()[-1]) == result
    assert (result["phase"], result["warmup"], result["iters"]) == ("plain", 1, 3)
    assert len(result["iteration_ms"]) == 3 and result["measured_ms"] >= sum(result["iteration_ms"]) * 0.5
    # the iterations alone (region_ms) lie within the region; no CUDA events off the GPU
    assert sum(result["iteration_ms"]) <= result["region_ms"] <= result["measured_ms"]
    assert "gpu_ms" not in result
    assert result["versions"]["torch"] and result["device_info"] == {"device": "cpu"}


@pytest.mark.slow  # torch.profiler start-up: a few seconds
def test_kineto_phase_on_cpu_writes_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _workload(tmp_path, TINY)
    out_trace = tmp_path / "run" / "kineto.json"
    code = harness.main(
        [
            "--workload",
            str(path),
            "--phase",
            "kineto",
            "--device",
            "cpu",
            "--compile-mode",
            "eager",
            "--out",
            str(out_trace),
        ]
    )
    result = harness.parse_result(capsys.readouterr().out)
    assert code == 0 and result["kernels"] == 0  # CPU: no kernels, and no error for it
    events = json.loads(out_trace.read_text())["traceEvents"]
    assert any(e.get("name") == "aten::linear" for e in events)


def test_region_phase_needs_cuda(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = harness.main(
        [
            "--workload",
            str(_workload(tmp_path, TINY)),
            "--phase",
            "region",
            "--device",
            "cpu",
            "--compile-mode",
            "eager",
        ]
    )
    assert code == 3 and "needs --device cuda" in capsys.readouterr().err


def test_cuda_asked_without_cuda_is_a_workload_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    code = harness.main(
        ["--workload", str(_workload(tmp_path, TINY)), "--phase", "plain", "--device", "cuda"]
    )
    assert code == 3 and "CUDA is not available" in capsys.readouterr().err


def test_result_line_is_found_after_tool_chatter() -> None:
    text = (
        'workload print\n{"oprof_harness": 1, "phase": "region"}\n==PROF== Disconnected from process 797\n'
        '{"not": "ours"}\n'
    )
    assert harness.parse_result(text) == {"oprof_harness": 1, "phase": "region"}
    assert harness.parse_result("nothing here\n") is None


def test_workload_error_line_survives_tool_prefixes() -> None:
    text = "==PROF== x\n[nsys] oprof-workload-error: w.py: raised KeyError\n"
    assert harness.workload_error_line(text) == "w.py: raised KeyError"
    assert harness.workload_error_line("clean\n") is None


BREAKS = """
import torch
from torch import nn

class Break(nn.Module):
    @torch._dynamo.disable  # Dynamo breaks the graph here and runs the call eagerly, as for an LSTM
    def forward(self, x):
        return torch.relu(x)

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.gate, self.c = nn.Linear(8, 8), nn.Linear(8, 8), Break(), nn.Linear(8, 8)
    def forward(self, x):
        return self.c(self.gate(self.b(self.a(x))))

    def run(self, x):  # a generate()-like entry point: calls the plain module, never the compiled one
        return self(x)

def get_model_and_inputs(device="cuda"):
    torch.manual_seed(0)
    return Model().to(device).eval(), (torch.randn(4, 8, device=device),)
"""


def _kineto_child(tmp_path: Path, text: str, name: str, warmup: int = 1) -> tuple[list[dict], dict | None]:
    """The kineto phase, compile mode default, in a fresh interpreter (Dynamo's counters are
    per process): the trace's module spans and the module map, if written."""
    path = _workload(tmp_path, text, name)
    out = tmp_path / name.removesuffix(".py") / "kineto.json"
    done = subprocess.run([sys.executable, "-m", "profiler_core.capture.harness", "--workload", str(path),
                           "--phase", "kineto", "--device", "cpu", "--compile-mode", "default",
                           "--warmup", str(warmup), "--iters", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    events = json.loads(out.read_text())["traceEvents"]
    spans = [e for e in events if str(e.get("name", "")).startswith("nn.Module: ")]
    mapped = out.with_name("modules.json")
    return spans, json.loads(mapped.read_text()) if mapped.exists() else None


@pytest.mark.slow  # three fresh interpreters compiling a model: ~30 s
def test_compiled_runs_trace_the_modules_that_run_eagerly(tmp_path: Path) -> None:
    from profiler_core.attribution.modules import ModuleSpans, read_module_map
    from profiler_core.ingest import read_kineto

    # a graph break: the Python tracer on, no hook; the map names every module the tracer saw by the
    # called module's identity, the compiled wrapper as the model
    spans, mapped = _kineto_child(tmp_path, BREAKS, "breaks.py")
    assert mapped is not None
    labels = {s["name"].removeprefix("nn.Module: ") for s in spans}
    assert {f"{cls}_{index}" for cls, index, _ in mapped["modules"]} == labels
    assert ["Break", 0, "gate"] in mapped["modules"] and ["OptimizedModule", 0, ""] in mapped["modules"]
    assert ["run"] == [name for _, name in mapped["methods"]]
    run = tmp_path / "breaks"
    events = read_kineto(run / "kineto.json", launches_only=True)  # a CPU trace: no kernel to check
    tracer = ModuleSpans(events.module_spans, read_module_map(run / "modules.json"))
    relu = [op for op in events.cpu_ops if op.name == "aten::relu"]
    assert relu and {tracer.op_path(op) for op in relu} == {"gate"}  # the eager op between the graphs

    # a step that never calls the compiled module: eager in fact, so the eager map (every module)
    eager = BREAKS + "\n\ndef step(model, inputs):\n    return model.run(*inputs)\n"
    spans, mapped = _kineto_child(tmp_path, eager, "uncompiled.py")
    assert mapped is not None and ["Linear", 2, "c"] in mapped["modules"]
    assert "nn.Module: Linear_2" in {s["name"] for s in spans}

    # whole graphs: Inductor's provenance places every kernel, no tracer
    whole = BREAKS.replace("@torch._dynamo.disable", "")
    spans, mapped = _kineto_child(tmp_path, whole, "whole.py")
    assert spans == [] and mapped is None



@pytest.mark.slow  # two fresh interpreters compiling a model: ~25 s
def test_a_compiled_step_that_also_calls_the_model_eagerly_is_traced(tmp_path: Path) -> None:
    from profiler_core.attribution.modules import ModuleSpans, read_module_map
    from profiler_core.ingest import read_kineto

    whole = BREAKS.replace("@torch._dynamo.disable", "")
    # whole graphs, and the last warm-up iteration probed under the Python tracer: nothing eager, no tracer
    spans, mapped = _kineto_child(tmp_path, whole, "whole2.py", warmup=2)
    assert spans == [] and mapped is None
    # the same graphs, and the plain model called too (a prefill run eagerly beside a compiled decode
    # step): Dynamo's counters show only whole graphs, the probe sees the modules run as Python
    mixed = whole + "\n\ndef step(model, inputs):\n    model._orig_mod(*inputs)\n    return model(*inputs)\n"
    spans, mapped = _kineto_child(tmp_path, mixed, "mixed.py", warmup=2)
    assert mapped is not None and ["Linear", 2, "c"] in mapped["modules"]
    run = tmp_path / "mixed"
    events = read_kineto(run / "kineto.json", launches_only=True)  # a CPU trace: no kernel to check
    tracer = ModuleSpans(events.module_spans, read_module_map(run / "modules.json"))
    eager = [op for op in events.cpu_ops if op.name == "aten::relu"]
    assert eager and {tracer.op_path(op) for op in eager} == {"gate"}

DECODE = """
import torch
from torch import nn

class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
    def forward(self, x):
        return self.proj(x)

    @torch.no_grad()
    def generate(self, x, steps=3):  # a generate()-like loop: token choice outside every module call
        for _ in range(steps):
            x = torch.nn.functional.one_hot(self(x).argmax(-1), 8).float()
        return x

def get_model_and_inputs(device="cuda"):
    torch.manual_seed(0)
    return Decoder().to(device).eval(), (torch.randn(4, 8, device=device),)

def step(model, inputs):
    return model.generate(*inputs)
"""


@pytest.mark.slow  # torch.profiler start-up: a few seconds
def test_work_in_the_models_own_methods_outside_its_modules_is_the_models(tmp_path: Path) -> None:
    from profiler_core.attribution.modules import ModuleSpans, model_calls, read_module_map, read_module_methods
    from profiler_core.ingest import read_kineto

    path = _workload(tmp_path, DECODE)
    out = tmp_path / "run" / "kineto.json"
    assert harness.main(["--workload", str(path), "--phase", "kineto", "--device", "cpu", "--compile-mode",
                         "eager", "--warmup", "1", "--iters", "1", "--out", str(out)]) == 0
    methods = read_module_methods(out.with_name("modules.json"))
    assert (str(path), "generate") in methods and not any(name == "forward" for _, name in methods)
    # a CPU trace has no kernels: read as a recording's trace is, without its kernel checks
    found = read_kineto(out, python_functions=frozenset(name for _, name in methods), launches_only=True)
    assert found.python_calls and all(c.name.endswith("): generate") for c in found.python_calls)
    spans = ModuleSpans(found.module_spans, read_module_map(out.with_name("modules.json")),
                        model_calls(found.python_calls, methods))
    where = {op.name: spans.op_path(op) for op in found.cpu_ops if op.name in ("aten::argmax", "aten::linear")}
    assert where == {"aten::argmax": "", "aten::linear": "proj"}
    without = ModuleSpans(found.module_spans, read_module_map(out.with_name("modules.json")))
    assert {without.op_path(op) for op in found.cpu_ops if op.name == "aten::argmax"} == {None}


def test_a_model_the_workload_compiled_itself_lists_its_original_modules_methods(tmp_path: Path) -> None:
    # an optimized plan's workload hands the harness torch.compile's wrapper, whose classes are all
    # torch's: the methods (generate()) are those of the module it wraps
    import importlib.util

    import torch

    path = _workload(tmp_path, DECODE, "decode_methods.py")
    spec = importlib.util.spec_from_file_location("decode_methods", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plain, _ = module.get_model_and_inputs("cpu")
    wrapped = harness.model_methods(torch.compile(plain))
    assert wrapped == harness.model_methods(plain)
    assert [str(path), "generate"] in wrapped and not any(name == "forward" for _, name in wrapped)


def test_the_module_map_follows_each_calls_module_not_the_order_modules_were_declared() -> None:
    # the tracer numbers a class's instances in first-call order: here c, then a, then b; a module
    # outside the model is named as such, never given a path of the model's
    import torch
    from torch import nn
    from torch.profiler import ProfilerActivity, profile

    class Reversed(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.b(self.a(self.c(x)))

    model, stranger = Reversed(), nn.Linear(4, 4)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        stranger(model(torch.randn(2, 4)))
    rows = harness.traced_module_map(prof, harness.module_paths(model, model))
    assert rows == [["Linear", 0, "c"], ["Linear", 1, "a"], ["Linear", 2, "b"],
                    ["Linear", 3, "<unnamed Linear>"], ["Reversed", 0, ""]]


def test_a_profiler_without_the_module_record_leaves_the_map_out_and_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    class Old:  # a profiler result whose events carry no module record
        class profiler:  # noqa: N801 - the attribute path torch.profiler.profile has
            class kineto_results:  # noqa: N801
                @staticmethod
                def experimental_event_tree() -> list:
                    raise AttributeError("'_ProfilerEvent' object has no attribute 'extra_fields'")

    assert harness._module_rows(Old(), {}) is None
    assert "no module map" in capsys.readouterr().err


def test_a_model_the_workload_compiled_itself_keeps_its_own_paths() -> None:
    # workload_optimized.py compiles its model: the wrapper is the model, its modules keep their paths
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    compiled = torch.compile(model)
    paths = harness.module_paths(compiled, compiled)
    assert paths[id(model[0])] == "0" and paths[id(compiled)] == "" and paths[id(model)] == ""
    assert not any(name.startswith("_orig_mod") for name in paths.values())


FUNCTION = """
import torch

def get_model_and_inputs(device="cuda"):
    return (lambda x: torch.relu(x) * 2), (torch.randn(4, 8, device=device),)
"""


@pytest.mark.slow  # a fresh interpreter compiling a function: ~10 s
def test_a_compiled_function_is_captured_without_a_module_map(tmp_path: Path) -> None:
    spans, mapped = _kineto_child(tmp_path, FUNCTION, "function.py", warmup=2)
    assert spans == [] and mapped is None

"""The yardstick: the recipe a user writes instead of running the loop, timed beside the loop's plan.

A user who does not run the loop writes two lines: ``torch.autocast("cuda", torch.bfloat16)`` and
``torch.compile(model, mode="reduce-overhead")``. Every optimize run times those recipes in the
same conditions as its own wall times (a fresh interpreter per recipe, CUDA events, the same
iterations and warm-up: :mod:`profiler_core.optimize.walltime`) and reports plan vs recipe:

    compile                        torch.compile(model)
    bf16_compile                   autocast(bfloat16) + torch.compile(model)
    bf16_compile_reduce_overhead   autocast(bfloat16) + torch.compile(model, mode="reduce-overhead")

A model in train mode compiles the step function (forward, backward and the optimizer's update)
instead of the model. Before it is timed, each recipe's step is validated against the plain
model's by the rule the passes meet (outputs; for training, gradients and updated parameters),
at the bfloat16 tolerance under autocast; a recipe that crashes or fails validation is reported
as such and not timed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from profiler_core.errors import ProfilerError, WorkloadError

if TYPE_CHECKING:
    from profiler_core.workload import Workload

CUDA_GRAPH_RUNS = 3  # warm-up, record, replay: check the replayed graph's outputs (as the planner does)


@dataclass(frozen=True)
class Recipe:
    """One recipe: what the user writes, as an autocast flag and a torch.compile mode."""

    name: str
    code: str  # what the user writes, for the report
    autocast_bf16: bool
    mode: str  # torch.compile mode

    @property
    def precision(self) -> str:
        """The precision validation holds the recipe to."""
        return "bfloat16" if self.autocast_bf16 else "float32"


RECIPES: tuple[Recipe, ...] = (
    Recipe("compile", "torch.compile(model)", False, "default"),
    Recipe("bf16_compile", "autocast(bfloat16) + torch.compile(model)", True, "default"),
    Recipe("bf16_compile_reduce_overhead", 'autocast(bfloat16) + torch.compile(model, mode="reduce-overhead")',
           True, "reduce-overhead"),
)


def recipe_named(name: str) -> Recipe:
    """The recipe called ``name``; WorkloadError naming the known ones otherwise."""
    for r in RECIPES:
        if r.name == name:
            return r
    raise WorkloadError(f"unknown recipe '{name}'; use one of {', '.join(r.name for r in RECIPES)}")


class RecipeResult(BaseModel):
    """One recipe's outcome: timed (with its figures), or why not."""

    model_config = ConfigDict(extra="forbid")
    recipe: str
    code: str
    outcome: Literal["timed", "rejected_validation", "crashed"]
    reason: str = ""
    median_ms: float | None = None
    wall_time: dict[str, float | int] = Field(default_factory=dict)  # as walltime.json's entries
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    verdict: str = ""  # the validation's verdict line: reference, worst output, numbers


class Yardstick(BaseModel):
    """The recipes beside the plan: each recipe's outcome, the best one, and the verdict."""

    model_config = ConfigDict(extra="forbid")
    recipes: list[RecipeResult] = Field(default_factory=list)
    plan_ms: float | None = None  # end-to-end median of what the loop ends with (kept plan, else baseline)
    best_recipe: str | None = None
    best_recipe_ms: float | None = None
    plan_vs_recipe: float | None = None  # best recipe's median / the plan's: above 1, the loop is ahead
    within_noise: bool | None = None  # the plan's and the best recipe's p10-p90 ranges overlap (None: not known)
    verdict: str = ""
    # set by `oprof yardstick` (optimize/remeasure.py), which times baseline, plan and recipes again side by
    # side and leaves the loop's own wall_time as the loop measured it: when, where, and the figures
    remeasured: str = ""
    baseline_wall_time: dict[str, float | int] = Field(default_factory=dict)
    plan_wall_time: dict[str, float | int] = Field(default_factory=dict)


# ------------------------------------------------------------------ in the timing process


def _cast_back(outputs: Any) -> Any:
    """Floating tensors autocast left in 16 bits, as float32 (what the plain model returns)."""
    import torch
    from torch.utils import _pytree as pytree

    def cast(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and v.dtype in (torch.bfloat16, torch.float16):
            return v.float()
        return v

    return pytree.tree_map(cast, outputs)


class RecipeStep:
    """A workload's step as the recipe writes it: autocast around a compiled model, or a compiled step.

    ``cast_back``: return float32 where autocast left 16-bit outputs (for validation only: the
    timed step returns what the user's recipe returns).
    """

    def __init__(self, wl: Workload, recipe: Recipe, *, device: str, backend: str = "inductor") -> None:
        import torch

        options: dict[str, Any] = {"backend": backend}
        if backend == "inductor" and recipe.mode != "default":
            options = {"mode": recipe.mode}
        self.training = bool(getattr(wl.model, "training", False))
        # a training step (forward, backward, the optimizer's update) is what a user compiles whole
        self.inner: Callable[[Any, tuple[Any, ...]], Any] = (
            torch.compile(wl.step, **options) if self.training else wl.step)
        self.options, self.recipe = options, recipe
        self.device, self.device_type = device, torch.device(device).type
        self.cast_back = False

    def target(self, model: Any) -> Any:
        """What the step is called with: the model compiled (inference), or the model itself (training)."""
        import torch

        return model if self.training else torch.compile(model, **self.options)

    def __call__(self, model: Any, inputs: tuple[Any, ...]) -> Any:
        import torch

        if not self.recipe.autocast_bf16:
            return self.inner(model, inputs)
        with torch.autocast(self.device_type, dtype=torch.bfloat16):
            out = self.inner(model, inputs)
        return _cast_back(out) if self.cast_back else out


def validate_recipe(wl: Workload, step: RecipeStep, target: Any, inputs: tuple[Any, ...]) -> dict[str, Any]:
    """The recipe's step against the plain model's, from identical state, judged as the loop's plans
    are (the validation policy's verdict against a float64 reference): the validation's summary.

    ``target`` and ``inputs``: what the recipe runs on (for training, a copy of the workload's state,
    left where the validated step put it, so timing goes on from there).
    """
    from profiler_core.passes.builds import initial_state
    from profiler_core.passes.planner import experts_per_token, original_reference
    from profiler_core.passes.policy import DEFAULT_POLICY
    from profiler_core.passes.step_run import StateSnapshot, copy_state, find_optimizers, run_step
    from profiler_core.passes.verdict import judge_steps

    base_model, base_inputs = copy_state(wl.model, wl.inputs) if step.training else (wl.model, wl.inputs)
    baseline = run_step(wl.step, base_model, base_inputs, seed=0)
    snapshot = StateSnapshot(target, find_optimizers(inputs)) if step.training else None
    step.cast_back = True
    try:
        for _ in range(CUDA_GRAPH_RUNS if step.recipe.mode == "reduce-overhead" else 1):
            if snapshot is not None:
                snapshot.restore()
            candidate = run_step(step, target, inputs, seed=0)
    finally:
        step.cast_back = False
    reference = original_reference(wl, initial_state(wl) if step.training else None, step.device)
    result = judge_steps(baseline, candidate, reference, DEFAULT_POLICY, step.recipe.precision,
                         router_top_k=experts_per_token(wl.model))
    return {"passed": result.passed, "max_abs_err": result.max_abs_err, "max_rel_err": result.max_rel_err,
            "reason": result.reason, "verdict": result.verdict or result.reason, "reference": result.reference}


# ------------------------------------------------------------------ in the loop's process


def measure_recipe(workload: Path, recipe: Recipe, *, iters: int, warmup: int, device: str, python: str,
                   backend: str = "inductor") -> RecipeResult:
    """Validate and time one recipe in a fresh interpreter; a crash or a failed validation is an outcome."""
    from profiler_core.optimize import walltime

    result = RecipeResult(recipe=recipe.name, code=recipe.code, outcome="crashed")
    try:
        data = walltime.run_child(workload, iters=iters, warmup=warmup, compile_mode="eager", device=device,
                                  python=python, extra=["--recipe", recipe.name, "--backend", backend])
    except ProfilerError as err:
        result.reason = str(err)
        return result
    check = data.get("validation") or {}
    result.max_abs_err, result.max_rel_err = check.get("max_abs_err"), check.get("max_rel_err")
    result.verdict = str(check.get("verdict") or "")
    if not check.get("passed"):
        result.outcome = "rejected_validation"
        result.reason = str(check.get("reason") or "validation did not pass")
        return result
    try:
        figures = walltime.WallTime(tuple(float(x) for x in data["iterations_ms"]))
    except (KeyError, TypeError, ValueError) as err:
        result.reason = f"the timing run printed no timings ({type(err).__name__}: {err})"
        return result
    result.outcome, result.median_ms, result.wall_time = "timed", figures.median_ms, figures.as_dict()
    return result


def _overlap(plan: Mapping[str, float | int] | None, recipe: Mapping[str, float | int]) -> str | None:
    """The two p10-p90 ranges when they overlap (the medians' gap is then within the run-to-run
    spread), else None; None too when either side lacks them."""
    keys = ("p10_ms", "p90_ms")
    if not plan or not all(isinstance(plan.get(k), int | float) and isinstance(recipe.get(k), int | float)
                           for k in keys):
        return None
    a10, a90 = (float(plan[k]) for k in keys)
    b10, b90 = (float(recipe[k]) for k in keys)
    if a10 > b90 or b10 > a90:
        return None
    return f"{a10:.3f}-{a90:.3f} vs {b10:.3f}-{b90:.3f} ms"


def judge(recipes: list[RecipeResult], plan_ms: float | None, plan_label: str, *,
          nothing_kept: bool = False, plan_wall: Mapping[str, float | int] | None = None) -> Yardstick:
    """The yardstick's verdict: whether the loop's plan beat the best timed recipe, and by how much
    (``nothing_kept``: the plan is the workload as written, and no plan is credited). ``plan_wall``:
    the plan's figures (walltime.json's entry); where its p10-p90 range overlaps the best recipe's,
    the verdict says the gap is within noise."""
    stick = Yardstick(recipes=recipes, plan_ms=plan_ms)
    timed = [r for r in recipes if r.outcome == "timed" and r.median_ms]
    if not timed:
        stick.verdict = "no recipe ran and validated: nothing to measure the loop against"
        return stick
    best = min(timed, key=lambda r: r.median_ms or float("inf"))
    stick.best_recipe, stick.best_recipe_ms = best.recipe, best.median_ms
    if plan_ms is None or best.median_ms is None:
        stick.verdict = f"best recipe {best.code}: {best.median_ms:.3f} ms; the plan was not timed"
        return stick
    ratio = best.median_ms / plan_ms
    stick.plan_vs_recipe = ratio
    figures = f"{plan_label} {plan_ms:.3f} ms vs {best.code} {best.median_ms:.3f} ms"
    ranges = _overlap(plan_wall, best.wall_time)
    stick.within_noise = None if plan_wall is None else ranges is not None
    noise = f"; within noise: the p10-p90 ranges overlap ({ranges})" if ranges else ""
    if nothing_kept:
        faster = f"{ratio:.2f}x faster than" if ratio >= 1.0 else f"{1 / ratio:.2f}x slower than"
        stick.verdict = (f"the loop kept nothing; the workload as written is {faster} the best recipe "
                         f"that validated ({figures}){noise}")
        return stick
    if ratio >= 1.0:
        stick.verdict = f"the loop beat the best recipe by {ratio:.2f}x ({figures}){noise}"
    else:
        stick.verdict = f"the loop is behind the best recipe by {1 / ratio:.2f}x ({figures}){noise}"
    return stick

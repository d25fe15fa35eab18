"""The training view of an optimization run: kernel time per phase of the step, before and after each kept pass.

A training step has three phases (forward, backward, the optimizer's step; attribution/step_phase.py
says how each kernel gets one). The view lays the baseline and the capture after each kept
pass side by side, and says which phase each pass moved most::

    | step                          | forward  | backward | optimizer | no phase | moved            |
    | baseline                      | 3.10 ms  | 6.00 ms  | 0.60 ms   | 0.00 ms  |                  |
    | + fused_optimizer             | 3.10 ms  | 6.00 ms  | 0.12 ms   | 0.00 ms  | optimizer -0.48 ms |

Kernels replayed from a CUDA graph carry no launch of their own, so a graphed step's time
lands under "no phase".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from profiler_core.analysis.profile_view import ProfileView
from profiler_core.errors import ProfilerError
from profiler_core.profile_io import read_profile
from profiler_core.rundir import PROFILE_NAME
from profiler_core.rundir.layout import BASELINE_DIR, OPTIMIZE_NAME, TRIAL_CAPTURE_DIR
from profiler_core.schema import Profile

PHASES = ("forward", "backward", "optimizer")
NO_PHASE = "no phase"


def phase_kernel_ns(profile: Profile) -> dict[str, int]:
    """Kernel time (ns) of each phase of the step, and of kernels with none; empty for an inference profile."""
    view = ProfileView.of(profile)
    by_phase: Counter[str] = Counter()
    # each operator's phase and kernel time, off the view's columns
    for phase, duration in zip(view.op_column("phase"), view.op_durations.tolist(), strict=True):
        by_phase[phase or NO_PHASE] += duration
    if not any(by_phase[p] for p in PHASES[1:]):
        return {}  # no backward, no optimizer: not a training step
    return {p: by_phase[p] for p in (*PHASES, NO_PHASE)}


@dataclass(frozen=True)
class PhaseRow:
    """One capture of the step: the baseline, or the capture after a kept pass."""

    label: str  # "baseline", or the pass kept at this point
    phase_ns: dict[str, int]
    moved: str = ""  # the phase whose time changed most from the row before, with the change


@dataclass
class TrainingView:
    """The baseline and one row per kept pass."""

    rows: list[PhaseRow] = field(default_factory=list)


def _moved(before: dict[str, int], after: dict[str, int]) -> str:
    deltas = {p: after.get(p, 0) - before.get(p, 0) for p in (*PHASES, NO_PHASE)}
    phase = max(deltas, key=lambda p: abs(deltas[p]))
    return f"{phase} {deltas[phase] / 1e6:+.2f} ms" if deltas[phase] else "none"


def build_training_view(baseline: Profile, kept: list[tuple[str, Profile]]) -> TrainingView | None:
    """The view from the baseline's profile and (pass, profile) for each kept pass in order; None if not training."""
    first = phase_kernel_ns(baseline)
    if not first:
        return None
    view = TrainingView([PhaseRow("baseline", first)])
    for name, profile in kept:
        now = phase_kernel_ns(profile) or {NO_PHASE: ProfileView.of(profile).total_ns}
        view.rows.append(PhaseRow(f"+ {name}", now, _moved(view.rows[-1].phase_ns, now)))
    return view


def kept_profiles(trials: list[dict]) -> list[tuple[str, Profile]]:
    """(pass, profile of its capture) for each kept trial of optimize.json's ``trials``, in order."""
    return [(t["transformation"], read_profile(Path(t["run_dir"]) / TRIAL_CAPTURE_DIR / PROFILE_NAME))
            for t in trials if t.get("outcome") == "kept" and t.get("run_dir")]


def read_training_view(run_dir: str | Path) -> TrainingView | None:
    """The view of an ``oprof optimize`` run directory (optimize.json, baseline/ and its trials' captures)."""
    out = Path(run_dir)
    try:
        result = orjson.loads((out / OPTIMIZE_NAME).read_bytes())
        baseline = read_profile(out / BASELINE_DIR / PROFILE_NAME)
        kept = kept_profiles(result.get("trials", []))
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ProfilerError) as err:
        raise ProfilerError(f"{out}: not a readable optimization run ({err}); pass the directory "
                            "'oprof optimize' wrote") from err
    return build_training_view(baseline, kept)


def training_view_html(view: TrainingView) -> str:
    """The view as the report's section: kernel time per phase, per kept pass."""
    from html import escape

    head = "".join(f"<th>{escape(h)}</th>" for h in ("step", *PHASES, NO_PHASE, "moved"))
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in (
            row.label, *(f"{row.phase_ns.get(p, 0) / 1e6:.2f} ms" for p in (*PHASES, NO_PHASE)), row.moved))
        + "</tr>" for row in view.rows)
    return ('<section id="training"><h2>Training step: kernel time per phase</h2><p>Forward, backward and the '
            "optimizer's update, before and after each kept pass; kernels replayed from a CUDA graph carry no "
            f"launch of their own and land under \"{NO_PHASE}\".</p><table><thead><tr>{head}</tr></thead>"
            f"<tbody>{rows}</tbody></table></section>")


def training_view_markdown(view: TrainingView) -> list[str]:
    """The view as a markdown table, one line per row."""
    header = ["step", *PHASES, NO_PHASE, "moved"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in view.rows:
        cells = [row.label, *(f"{row.phase_ns.get(p, 0) / 1e6:.2f} ms" for p in (*PHASES, NO_PHASE)), row.moved]
        lines.append("| " + " | ".join(cells) + " |")
    return lines

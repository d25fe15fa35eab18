"""Pydantic models of the tools' structured outputs (their output schemas).

Sized for a model's context: summaries and headline figures, with the path of the full
file for anything larger; every capped list comes with a ``showing`` field ("10 of 44
operators ...") so the reader knows what was left out and how to ask for more.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- capture jobs -------------------------------------------------------------------------


class ProgressLine(_Out):
    phase: str
    step: int
    total: int
    message: str
    elapsed_s: float = Field(description="Seconds since the job started.")


class CaptureJobStatus(_Out):
    job_id: str
    state: str = Field(description="running | cancelling | succeeded | failed | cancelled")
    workload: str
    run_dir: str | None = Field(description="The run directory the capture writes.")
    started_at: str
    elapsed_s: float
    progress: ProgressLine | None = Field(description="The latest progress report, if any.")
    recent: list[ProgressLine] = Field(description="The last few progress reports, oldest first.")
    cancel_requested: bool
    error: str | None = None
    next_step: str


class PhaseSummary(_Out):
    name: str
    status: str
    duration_s: float | None = None
    note: str | None = None


class RunSummary(_Out):
    run_dir: str
    status: str | None = Field(description=(
        "complete | running | failed | cancelled (from manifest.json); "
        "'attributed' when only profile.json exists"))
    workload: str | None = None
    created_at: str | None = None
    gpu: str | None = None
    compile_mode: str | None = None
    warmup_iterations: int | None = None
    measured_iterations: int | None = None
    counter_mode: str | None = None
    timeline_source: str | None = None
    total_duration_s: float | None = None
    profile: str | None = Field(default=None, description="Path of profile.json, once attributed.")
    artifacts: dict[str, str] = Field(default_factory=dict, description="Artifact kind -> absolute path.")
    warning_count: int = 0
    error: str | None = None


class CaptureResultOut(_Out):
    job_id: str
    run: RunSummary
    manifest: str = Field(description="Path of manifest.json (phases, versions, clocks, environment).")
    phases: list[PhaseSummary]
    warnings: list[str]
    warnings_showing: str


class ListRunsResult(_Out):
    searched: list[str] = Field(description="Directories searched.")
    runs: list[RunSummary] = Field(description="Newest first.")
    showing: str


# --- attribution --------------------------------------------------------------------------


class TierShare(_Out):
    tier: str
    kernel_count: int
    time_pct: float = Field(description="Share of total kernel time attributed by this tier.")


class CoverageSummary(_Out):
    kernel_count: int
    kernel_time_us: float
    attributed_time_pct: float = Field(description="Kernel time attributed at high or medium confidence.")
    unattributed_time_pct: float
    by_tier: list[TierShare]
    counters_measured_kernels: int
    counters_inherited_kernels: int
    counters_missing_kernels: int
    tier_overlaps: int
    tier_disagreements: int


class OperatorRow(_Out):
    key: str = Field(description="Operator key, '<name>#<call index>'; get_operator takes it.")
    name: str
    op_class: str
    execution_context: str
    kernel_count: int
    time_us: float
    share_pct: float
    confidence: str
    headline: dict[str, float | None] = Field(
        description="Tensor Core, occupancy, DRAM and SM throughput (% of peak); null when not measured.")


class RankRow(_Out):
    rank: int
    profile: str = Field(description="Path of this rank's profile.json.")
    kernel_count: int
    kernel_time_us: float
    communication_us: float = Field(description="Kernel time of communication (NCCL) operators.")
    attributed_time_pct: float


class AttributeResult(_Out):
    profile: str = Field(description="Path of the profile.json written (a multi-rank run: rank 0's).")
    kernel_count: int
    operator_count: int
    coverage: CoverageSummary
    top_operators: list[OperatorRow]
    showing: str
    warnings: list[str]
    warnings_showing: str
    ranks: list[RankRow] | None = Field(
        default=None, description="A multi-rank run: every rank's profile and totals (the rest is rank 0's).")
    merged: str | None = Field(default=None, description="A multi-rank run: ranks.json, the view across ranks.")


class EvidenceRow(_Out):
    tier: str
    operator: str | None
    detail: str | None = None


class KernelDetail(_Out):
    id: int
    name: str
    duration_us: float
    stream: int
    grid: list[int] | None = None
    block: list[int] | None = None
    registers_per_thread: int | None = None
    library: str | None = None
    tier: str
    confidence: str
    tiers_agree: bool | None = None
    evidence: list[EvidenceRow]
    reason: str | None = None
    fused_with: list[str]
    counter_source: str = Field(description="measured | inherited | missing")
    counters: dict[str, float | None]


class OperatorDetail(_Out):
    key: str
    name: str
    call_index: int
    op_class: str
    execution_context: str
    is_fused: bool
    fused_with: list[str]
    source_nodes: list[str]
    input_shapes: list[Any] | None = None
    kernel_count: int
    time_us: float
    share_pct: float = Field(description="Share of the profile's total kernel time.")
    confidence: str
    library: str | None = None
    layer_role: str | None = None
    inherited_from: str | None = None
    metrics: dict[str, float | None] = Field(description="Counters aggregated over the operator's kernels.")
    metric_null_reasons: dict[str, str]


class GetOperatorResult(_Out):
    profile: str
    operator: OperatorDetail
    kernels: list[KernelDetail]
    showing: str


# --- analysis -----------------------------------------------------------------------------


class FindingRow(_Out):
    rule_id: str
    title: str
    kind: str = Field(description="optimization | structural | note")
    licenses: str = Field(description="The transformation (a pass name), or 'structural' / 'note'.")
    alternatives: list[str]
    confidence: str = Field(description="Weakest attribution confidence among the finding's kernels.")
    gain_bound_pct: float = Field(description="Upper bound on the time saved if the affected time vanished.")
    max_speedup: float | None
    share_pct: float = Field(description="Share of profiled kernel time the finding covers.")
    symptom: str
    bottleneck: str
    operators: list[str] = Field(description="Operator keys (at most 5; operator_count says how many).")
    operator_count: int
    facts: list[str] = Field(description="Checkable sentences behind the finding (at most 3).")
    expected_shifts: dict[str, str] = Field(description="Counter -> 'up' | 'down' once the fix works.")


class DiagnoseResult(_Out):
    profile: str
    findings_file: str = Field(description="Path of the full findings JSON (every field, every operator).")
    attributed_pct: float
    unattributed_pct: float
    findings: list[FindingRow] = Field(description="Largest gain bound first.")
    showing: str
    warnings: list[str]


class CheckRow(_Out):
    name: str
    status: str = Field(description="ok | mismatch | unknown")
    required: bool
    base: str | None = None
    opt: str | None = None
    detail: str = ""


class ClassDeltaRow(_Out):
    op_class: str
    base_us: float
    opt_us: float
    delta_pct: float | None
    base_share_pct: float
    opt_share_pct: float
    counters: list[str] = Field(description="Counter shifts beyond noise, as sentences (at most 4).")


class OperatorDeltaRow(_Out):
    label: str
    op_class: str
    method: str = Field(description="How the operators were matched: key | sequence | class_position ...")
    base_us: float
    opt_us: float
    delta_us: float
    delta_pct: float | None
    base_keys: list[str]
    opt_keys: list[str]


class OverheadDeltaRow(_Out):
    kind: str
    kernel_count: int
    time_us: float
    share_of_opt_pct: float
    kernel_names: list[str]


class ShiftRow(_Out):
    rule_id: str
    field: str
    expected: str
    observed: str
    as_predicted: bool | None
    text: str


class EndToEndOut(_Out):
    """The verdict a user would see: wall time per step first, profiled kernel time second."""

    verdict: str = Field(description="faster | slower | unchanged, by wall time per step when both sides "
                                     "were timed (verdict_basis), else by profiled kernel time.")
    verdict_basis: str = Field(description="wall_time | kernel_time: what verdict and speedup measure.")
    speedup: float | None = Field(description="Baseline over optimized, on verdict_basis.")
    headline: str = Field(description="The verdict in one sentence, end to end first.")
    base_wall_ms: float | None = Field(description="Median wall time per step of the baseline (ms).")
    opt_wall_ms: float | None = Field(description="Median wall time per step of the optimized run (ms).")
    wall_speedup: float | None
    kernel_verdict: str = Field(description="faster | slower | unchanged on profiled kernel time.")
    kernel_speedup: float | None
    agree: bool = Field(description="False when kernel time and wall time disagree: the step's time is then "
                                    "outside its kernels (host-bound or launch-bound).")
    source: str | None = Field(description="Where the wall times were read (walltime.json / optimize.json).")


class GateOut(_Out):
    """The CI gate's outcome, as ``oprof compare --gate PCT`` judges it."""

    outcome: str = Field(description="faster | unchanged | slower | not_comparable")
    exit_code: int = Field(description="The status oprof compare --gate exits with: 0 faster, 1 slower, "
                                       "3 unchanged, 4 not comparable.")
    basis: str = Field(description="wall_time | kernel_time | none (not comparable): what was judged.")
    limit_pct: float
    delta_pct: float | None = Field(description="Optimized over baseline on basis, percent; negative is faster.")
    reason: str


class CompareResult(_Out):
    baseline: str
    optimized: str
    comparison_file: str = Field(description="Path of the full comparison JSON.")
    verdict: str = Field(description="faster | slower | unchanged")
    speedup: float | None
    base_total_us: float
    opt_total_us: float
    delta_pct: float
    per_iteration: bool = Field(description="Totals are per measured iteration (iteration counts differ).")
    comparable: bool = Field(description="Same GPU, iterations, clocks ...; the checks say which differ.")
    checks: list[CheckRow]
    classes: list[ClassDeltaRow]
    operators: list[OperatorDeltaRow] = Field(description="Largest absolute time change first.")
    operators_showing: str
    new_overhead: list[OverheadDeltaRow]
    new_overhead_us: float
    shift_checks: list[ShiftRow] = Field(description="Did the counters the findings predicted move that way?")
    warnings: list[str]
    end_to_end: EndToEndOut | None = Field(default=None, description=(
        "The verdict by wall time per step when the pair was timed (walltime.json), kernel time second; "
        "claim a speedup from this, not from speedup above (profiled kernel time)."))
    gate: GateOut | None = Field(default=None, description="The CI gate's outcome, when gate_pct was given.")


class ComparisonHeadline(_Out):
    baseline: str
    verdict: str
    speedup: float | None
    delta_pct: float
    comparable: bool
    end_to_end: EndToEndOut | None = Field(default=None, description=(
        "The verdict by wall time per step, kernel time second."))


class ReportResult(_Out):
    profile: str
    html: str = Field(description="Path of the self-contained HTML report.")
    findings_file: str | None = Field(description="Path of the findings JSON, when diagnosis was included.")
    comparison: ComparisonHeadline | None = None
    summary: dict[str, Any] = Field(description=(
        "Compact summary (at most a few KB): coverage, time by class, top operators with headline "
        "counters (tc, occ, dram, sm, spills) and bottleneck, findings."))


# --- passes -------------------------------------------------------------------------------


class PassInfo(_Out):
    name: str
    level: str = Field(description="dynamo_fx | post_grad | inductor_config (where in torch.compile it acts)")
    symptom: str = Field(description="What a profile shows when this pass is worth trying.")
    description: str = Field(description="What the pass changes.")
    structural: bool = Field(description="Changes the model's structure, not just its graph.")
    aliases: list[str] = Field(description="Other names findings may use for this transformation.")
    source: str = Field(description="'builtin', or the plugin entry point that registered it.")


class ListPassesResult(_Out):
    passes: list[PassInfo] = Field(description="In application order.")


class PassOutcome(_Out):
    name: str
    level: str
    status: str = Field(description="APPLIED | NOT APPLIED | PENDING")
    reason: str
    structural: bool
    requested_by: list[str] = Field(description="'argument', or the finding that licensed it.")
    nodes_before: int | None = None
    nodes_after: int | None = None
    ops_removed: dict[str, int]
    ops_added: dict[str, int]


class ValidationSummary(_Out):
    passed: bool
    max_abs_err: float | None
    max_rel_err: float | None
    compute_precision: str = Field(
        description="The lowest precision an applied pass computes in; it sets the tolerance.")
    outputs_compared: int
    reason: str
    verdict: str = Field(default="", description="The verdict in one line: the reference, the rule, the worst "
                                                 "output and its numbers (next-token agreement, experts rerouted).")
    reference: str = Field(default="", description="What outputs were judged against: a float64 run of the "
                                                   "original step, or why none could run.")
    rule: str = Field(default="", description="The rule each floating output was held to.")


class ApplyPassResult(_Out):
    workload: str
    status: str = Field(description="validated | rejected (outputs differ beyond tolerance)")
    plan_file: str = Field(description="Path of plan.json (every pass, every graph, the full validation).")
    optimized_workload: str | None = Field(
        description="The optimized workload file (same contract; capture it). None when rejected.")
    applied: list[str]
    passes: list[PassOutcome]
    compile_mode: str
    compiler: str
    compute_precision: str
    matmul_precision: str | None
    inductor_config: dict[str, Any]
    graphs_compiled: int
    compile_s: float | None
    validation: ValidationSummary | None
    notes: list[str]
    next_step: str

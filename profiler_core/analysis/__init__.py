"""Diagnose one profile, compare two: findings with evidence and bounds, deltas with a verdict.

    report = diagnose(profile)                 # FindingsReport, largest gain bound first
    comparison = compare(baseline, optimized)  # Comparison: speedup, per-class/operator deltas
"""

from profiler_core.analysis.alignment import AlignedGroup, Alignment, AlignMethod, align_operators
from profiler_core.analysis.comparability import Comparability, ComparabilityCheck, check_comparability
from profiler_core.analysis.compare import (
    ClassRow,
    Comparison,
    CounterDelta,
    KernelOnlyRow,
    OperatorRow,
    OperatorRows,
    OverheadRow,
    ShiftCheck,
    compare,
)
from profiler_core.analysis.diagnose import diagnose
from profiler_core.analysis.findings import (
    Finding,
    FindingEvidence,
    FindingKind,
    FindingsReport,
)
from profiler_core.analysis.profile_view import ProfileView
from profiler_core.analysis.rules import RULES, RuleContext, rule
from profiler_core.analysis.thresholds import DEFAULT_THRESHOLDS, Thresholds, threshold_docs
from profiler_core.attribution.operator_class import classify_operator, gemm_precision, overhead_kind
from profiler_core.transformations import Transformation

__all__ = [
    "DEFAULT_THRESHOLDS",
    "RULES",
    "AlignMethod",
    "AlignedGroup",
    "Alignment",
    "ClassRow",
    "Comparability",
    "ComparabilityCheck",
    "Comparison",
    "CounterDelta",
    "Finding",
    "FindingEvidence",
    "FindingKind",
    "FindingsReport",
    "KernelOnlyRow",
    "OperatorRow",
    "OperatorRows",
    "OverheadRow",
    "ProfileView",
    "RuleContext",
    "ShiftCheck",
    "Thresholds",
    "Transformation",
    "align_operators",
    "check_comparability",
    "classify_operator",
    "compare",
    "diagnose",
    "gemm_precision",
    "overhead_kind",
    "rule",
    "threshold_docs",
]

"""Read Nsight Compute results: a CSV export, or an ``.ncu-rep`` report through ``ncu_report``.

``read_ncu`` dispatches on the file name: ``.csv`` to the CSV reader (raw page or the details
page ncu prints on stdout), ``.ncu-rep`` / ``.ncu-rep.xz`` to NVIDIA's ``ncu_report`` module.
Either way the result is one ``CounterRow`` per kernel launch, in launch order, with metric
values in base units (``ns``, ``byte``) and the launch's NVTX push/pop stack when ncu ran with
``--nvtx``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from profiler_core.confinement import input_path
from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest.ncu_csv import EXPORT_HINT, read_ncu_csv, read_ncu_csv_columns
from profiler_core.record_columns import NcuColumns
from profiler_core.records import NcuReport

_REPORT_SUFFIXES = (".ncu-rep", ".ncu-repz", ".ncu-rep.xz")


def read_ncu(path: str | os.PathLike[str], *, requested: Iterable[str] | None = None) -> NcuReport:
    """Read an ncu CSV export or ``.ncu-rep`` (``.ncu-rep.xz``) report into rows in launch order.

    ``requested`` names the metrics the capture asked for: only those are kept, and since ncu
    silently drops names it does not know, ``metrics_returned`` says which came back with a value.
    """
    report_path, wanted = _checked(path, requested)
    if report_path.name.lower().endswith(".csv"):
        return read_ncu_csv(report_path, wanted)
    from profiler_core.ingest.ncu_rep import read_ncu_rep  # imports ncu_report lazily

    return read_ncu_rep(report_path, wanted)


def read_ncu_columns(path: str | os.PathLike[str], *, requested: Iterable[str] | None = None) -> NcuColumns:
    """``read_ncu`` as columns (``NcuColumns``): a raw-page CSV is read straight into them."""
    report_path, wanted = _checked(path, requested)
    if report_path.name.lower().endswith(".csv"):
        return read_ncu_csv_columns(report_path, wanted)
    from profiler_core.ingest.column_records import counter_columns
    from profiler_core.ingest.ncu_rep import read_ncu_rep

    return counter_columns(read_ncu_rep(report_path, wanted))


def _checked(path: str | os.PathLike[str], requested: Iterable[str] | None) -> tuple[Path, frozenset[str] | None]:
    report_path = Path(path)
    try:
        input_path(report_path, what="Nsight Compute result")
    except FileNotFoundError:
        raise ArtifactFormatError(f"{report_path}: no such Nsight Compute result file") from None
    if not report_path.name.lower().endswith((".csv", *_REPORT_SUFFIXES)):
        raise ArtifactFormatError(
            f"{report_path}: not an Nsight Compute result (expected .csv, .ncu-rep or .ncu-rep.xz); {EXPORT_HINT}"
        )
    return report_path, frozenset(requested) if requested is not None else None

"""Read an ``.ncu-rep`` report through NVIDIA's ``ncu_report`` Python module.

``ncu_report`` ships with Nsight Compute (``extras/python``) and as the optional
``operator-profiler[ncu]`` extra; without it the CSV export is the way in. An ``.ncu-rep.xz``
is decompressed to a temporary file first, since ``ncu_report`` only opens plain files.

The rows match the raw-page CSV export of the same report: launches in order (ranges, then
actions), the demangled kernel name, grid and block from the ``launch__*`` metrics, and the
push/pop NVTX stack of every domain, outermost first. Report values are already in base units.
"""

from __future__ import annotations

import lzma
import shutil
import tempfile
from pathlib import Path
from typing import Any

from profiler_core.confinement import input_path, open_input
from profiler_core.errors import ArtifactFormatError, ToolNotFoundError
from profiler_core.ingest.sanity import check_counter_rows
from profiler_core.records import CounterRow, Dim3, NcuReport

_INSTALL_HINT = (
    "install the optional extra `pip install operator-profiler[ncu]` or export a CSV with "
    "`ncu --import R.ncu-rep --csv --page raw --print-units base`"
)


def read_ncu_rep(path: Path, requested: frozenset[str] | None) -> NcuReport:
    """Rows of an ``.ncu-rep`` (or ``.ncu-rep.xz``) report, read with ``ncu_report``."""
    try:
        import ncu_report
    except ImportError as err:
        raise ToolNotFoundError(
            f"cannot read {path}: the ncu_report module is not importable; {_INSTALL_HINT}"
        ) from err
    if path.name.lower().endswith(".xz"):
        with tempfile.TemporaryDirectory(prefix="oprof-ncu-") as tmp:
            plain = Path(tmp) / path.name[: -len(".xz")]
            try:
                with open_input(path, what="Nsight Compute report") as raw, lzma.open(raw) as src, \
                        plain.open("wb") as dst:
                    shutil.copyfileobj(src, dst, length=1 << 20)
            except (lzma.LZMAError, EOFError) as err:
                raise ArtifactFormatError(
                    f"{path}: not a valid xz file ({err}); re-compress the report"
                ) from err
            return _read(ncu_report, plain, path, requested)
    return _read(ncu_report, input_path(path, what="Nsight Compute report"), path, requested)


def _read(ncu_report: Any, plain: Path, shown: Path, requested: frozenset[str] | None) -> NcuReport:
    try:
        context = ncu_report.load_report(str(plain))
    except (FileNotFoundError, RuntimeError, OSError) as err:
        raise ArtifactFormatError(f"{shown}: ncu_report cannot load it ({err}); {_INSTALL_HINT}") from err
    rows: list[CounterRow] = []
    units: dict[str, str] = {}
    string_kind = ncu_report.IMetric.ValueKind_STRING
    for range_index in range(context.num_ranges()):
        report_range = context.range_by_idx(range_index)
        for action_index in range(report_range.num_actions()):
            action = report_range.action_by_idx(action_index)
            names = requested if requested is not None else action.metric_names()
            metrics: dict[str, float | None] = {}
            for name in names:
                metric = action.metric_by_name(name)
                if metric is None or metric.kind() == string_kind:
                    continue
                units.setdefault(name, metric.unit())
                metrics[name] = float(metric.value()) if metric.has_value() else None
            rows.append(
                CounterRow(
                    ncu_id=len(rows),
                    name=action.name(action.NameBase_DEMANGLED),
                    grid=_dim3(action, "launch__grid_dim"),
                    block=_dim3(action, "launch__block_dim"),
                    stream=_int(action, "launch__stream_id"),
                    device=_int(action, "launch__device_id"),
                    metrics=metrics,
                    nvtx_stack=_nvtx_stack(action),
                    context=_int(action, "launch__context_id"),
                )
            )
    if not rows:
        raise ArtifactFormatError(
            f"{shown}: no profiled kernels in the report: not an Nsight Compute report, or ncu profiled "
            "nothing (check --kernel-name/--launch-skip filters and cudaProfilerStart in the workload)"
        )
    returned = frozenset(n for row in rows for n, v in row.metrics.items() if v is not None)
    check_counter_rows(shown, rows)
    return NcuReport(path=shown, rows=rows, metrics_returned=returned, source="ncu-rep", units=units)


def _int(action: Any, name: str) -> int | None:
    metric = action.metric_by_name(name)
    if metric is None or not metric.has_value():
        return None
    return int(metric.value())


def _dim3(action: Any, prefix: str) -> Dim3 | None:
    dims = [_int(action, f"{prefix}_{axis}") for axis in "xyz"]
    if dims[0] is None or dims[1] is None or dims[2] is None:
        return None
    return (dims[0], dims[1], dims[2])


def _nvtx_stack(action: Any) -> tuple[str, ...]:
    state = action.nvtx_state()
    if state is None:
        return ()
    stack: list[str] = []
    for domain_id in state.domains():
        domain = state.domain_by_id(domain_id)
        stack.extend(str(text) for text in domain.push_pop_ranges())
    return tuple(stack)

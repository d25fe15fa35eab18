"""What a profile.json must hold beyond its schema: ids that resolve, durations that add up.

The schema says each field's type; these checks say the document is one attribution's
output and not an edited, truncated or mixed-up one. ``read_profile`` runs them on every
read, so a profile with dangling kernel ids or durations that cannot be is refused with the
first problem named, instead of reaching a report as numbers nobody measured (counters no chip
could have measured too: profiler_core/physical_checks.py)::

    operators[3] 'aten::mm#0': duration_ns 912 is not the sum of its kernels' durations (830)
    -> SchemaError: profile.json: inconsistent profile, operators[3] ...; re-run 'oprof attribute' on its run
"""

from __future__ import annotations

import numpy as np

from profiler_core.physical_checks import dram_bytes_of, dram_problem
from profiler_core.schema import Profile

# A kernel or operator running longer than this (10^13 ns, about 2.8 hours) is a corrupt
# number, not a measurement: no capture window is that long.
MAX_DURATION_NS = 10**13


def profile_problem(profile: Profile) -> str | None:
    """The first inconsistency in ``profile``, in words; None when there is none.

    References (unique ids and keys, kernel ids and operator keys that resolve, kernels that
    end after they start) are :func:`profiler_core.profile_io.check_references`'s, which
    ``read_profile`` runs first; these are the figures that must add up.
    """
    if not profile.kernels:
        return "it holds no kernels (not the output of an attribution)"
    for index, k in enumerate(profile.kernels):
        where = f"kernels[{index}] (id {k.id})"
        if k.duration_ns < 0:
            return f"{where}: negative duration (start_ns {k.start_ns}, end_ns {k.end_ns}, " \
                   f"duration_ns {k.duration_ns})"
        if k.duration_ns > MAX_DURATION_NS:
            return f"{where}: duration_ns {k.duration_ns} is more than {MAX_DURATION_NS} (2.8 hours)"
        if k.end_ns - k.start_ns != k.duration_ns:
            return f"{where}: duration_ns {k.duration_ns} differs from end_ns - start_ns " \
                   f"({k.end_ns - k.start_ns})"
    durations = {k.id: k.duration_ns for k in profile.kernels}
    for index, op in enumerate(profile.operators):
        where = f"operators[{index}] {op.key!r}"
        total = sum(durations[i] for i in op.kernel_ids)
        if op.duration_ns != total:
            return f"{where}: duration_ns {op.duration_ns} is not the sum of its kernels' durations ({total})"
        if op.kernel_count != len(op.kernel_ids):
            return f"{where}: kernel_count {op.kernel_count} but {len(op.kernel_ids)} kernel ids"
    cov = profile.coverage
    if cov.kernel_count != len(profile.kernels) or cov.duration_ns != sum(durations.values()):
        return (f"coverage says {cov.kernel_count} kernels, {cov.duration_ns} ns, but the profile holds "
                f"{len(profile.kernels)} kernels, {sum(durations.values())} ns")
    dram = dram_bytes_of([k.counters for k in profile.kernels])
    return dram_problem(dram, np.array([k.duration_ns for k in profile.kernels], dtype=np.int64),
                        profile.capture.gpu_name)

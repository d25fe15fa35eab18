"""Join ncu rows to timeline kernels by invocation order, never by time.

The i-th launch of kernel K in the timeline is the i-th ncu row for K (ncu replays on
another clock, so timestamps mean nothing across the runs). Before anything is assigned,
per-name counts are compared and every matched pair's grid and block must agree: two
compiles of one model were seen to pick different launch configurations for the same
Triton kernel, and a name-only join would silently hand those launches another
configuration's counters.

Three shapes of counter run are recognised from the rows themselves:

- ``full``: one row per launch.
- ``per-config``: ncu ``--filter-mode per-launch-config --launch-count K``: the first K
  launches of each (kernel, grid, block) configuration are measured; every later launch
  inherits the first one's counters (``inherited``), and the spread across the K samples is
  reported.
- ``prefix``: only the first measured iteration was profiled and the timeline repeats it
  exactly; launch j inherits from launch ``j mod period``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from profiler_core.attribution.names import choose_name_key, kernel_base_name, template_arguments
from profiler_core.errors import DeterminismError
from profiler_core.records import CounterRow, LaunchDims, TimelineKernel
from profiler_core.schema import CounterSource

ConfigKey = tuple[str, tuple[int, int, int] | None, tuple[int, int, int] | None]


@dataclass
class CounterJoin:
    """Per timeline kernel (same order as the input): which ncu row gives its counters."""

    mode: str  # "full" | "per-config" | "prefix" | "none"
    row_index: list[int | None]
    source: list[CounterSource]
    inherited_from: list[int | None]  # kernel index of the measured representative
    holes: dict[int, str] = field(default_factory=dict)  # kernel index -> why no counters
    spread: dict[str, dict[str, float]] = field(default_factory=dict)  # config -> field -> max rel dev
    name_key: str = "join_key"  # or "base_name" when the full spelling did not join
    warnings: list[str] = field(default_factory=list)


def _ordinal(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _dims(d: tuple[int, int, int] | None) -> str:
    return "?" if d is None else f"({d[0]}, {d[1]}, {d[2]})"


def _choose_key(kernels: Sequence[TimelineKernel], rows: Sequence[CounterRow]) -> tuple[
    Callable[[str], str], str, list[str]
]:
    key, label = choose_name_key((k.name for k in kernels), (r.name for r in rows))
    return key, label, key_warnings(label)


def key_warnings(label: str) -> list[str]:
    """What a join on a looser spelling than the join key says about it (nothing for the join key)."""
    return [] if label == "join_key" else [
        f"kernel names joined on their {label.replace('_', ' ')} (the tools' demanglers spell them "
        "differently); order and grid/block checks still guard every pair"
    ]


def dims_agree(k: LaunchDims, r: LaunchDims) -> bool:
    """Whether two records of one launch ran the same grid and block (unknown dims agree)."""
    return (r.grid is None or k.grid is None or tuple(r.grid) == tuple(k.grid)) and (
        r.block is None or k.block is None or tuple(r.block) == tuple(k.block)
    )


def _first_divergence(kernels: Sequence[TimelineKernel], rows: Sequence[CounterRow],
                      key: Callable[[str], str]) -> str:
    seen_t: dict[str, int] = defaultdict(int)
    for i in range(max(len(kernels), len(rows))):
        if i >= len(kernels):
            extra = rows[i]
            return (f"the counter run has an extra launch #{i} '{extra.name}' (ncu ID {extra.ncu_id}) "
                    "the timeline lacks")
        k = kernels[i]
        if i >= len(rows):
            return f"the timeline's launch #{i} '{k.name}' has no ncu row (the counter run stopped at {len(rows)})"
        r = rows[i]
        kk = key(k.name)
        seen_t[kk] += 1
        if kk != key(r.name) or not dims_agree(k, r):
            return (
                f"launch #{i}: the timeline has '{k.name}' grid {_dims(k.grid)} block {_dims(k.block)} "
                f"({_ordinal(seen_t[kk])} launch of it), ncu ID {r.ncu_id} has '{r.name}' "
                f"grid {_dims(r.grid)} block {_dims(r.block)}"
            )
    return "per-kernel launch counts differ"


_FIX = ("re-capture all phases with one Inductor cache (oprof capture does), or pass --allow-partial "
        "to keep mismatched launches as explicit holes")


def _is_prefix(kernels: Sequence[TimelineKernel], rows: Sequence[CounterRow],
               key: Callable[[str], str]) -> bool:
    period = len(rows)
    if period == 0 or len(kernels) <= period or len(kernels) % period:
        return False
    for j in range(period):
        if key(kernels[j].name) != key(rows[j].name) or not dims_agree(kernels[j], rows[j]):
            return False
    return all(
        key(kernels[j].name) == key(kernels[j % period].name) and kernels[j].grid == kernels[j % period].grid
        for j in range(period, len(kernels))
    )


def _by_config(items: Sequence[TimelineKernel | CounterRow],
               key: Callable[[str], str]) -> dict[ConfigKey, list[int]]:
    """Indices of ``items`` per launch configuration, configurations in first-seen order."""
    out: dict[ConfigKey, list[int]] = defaultdict(list)
    for i, item in enumerate(items):
        out[_config(key, item.name, item.grid, item.block)].append(i)
    return out


def _uniform_samples(rows_by_cfg: dict[ConfigKey, list[int]], kernels_by_cfg: dict[ConfigKey, list[int]], *,
                     split: bool = False) -> bool:
    """True when every configuration has min(K, launches) rows for one K (a per-config run).

    ``split``: ncu's per-launch-config filter keys on more than name, grid and block (dynamic
    shared memory, for one), so it may measure a configuration of ours more than K times, as
    several of its own; such a configuration may then have more rows than K, never as many as it
    has launches. K is then the count most configurations were sampled with.
    """
    if not set(rows_by_cfg) <= set(kernels_by_cfg):
        return False
    if not split:
        k_samples = max(len(rs) for rs in rows_by_cfg.values())
        return all(len(rs) == min(k_samples, len(kernels_by_cfg[c])) for c, rs in rows_by_cfg.items())
    counts = Counter(len(rs) for rs in rows_by_cfg.values())
    k_samples = max(counts, key=lambda k: (counts[k], -k))
    return all(len(rs) == min(k_samples, len(kernels_by_cfg[c])) or k_samples < len(rs) < len(kernels_by_cfg[c])
               for c, rs in rows_by_cfg.items())


def _config(key: Callable[[str], str], name: str, grid: tuple | None, block: tuple | None) -> ConfigKey:
    return (key(name), tuple(grid) if grid else None, tuple(block) if block else None)


def join_counters(
    kernels: Sequence[TimelineKernel], rows: Sequence[CounterRow], *, allow_partial: bool = False
) -> CounterJoin:
    """Assign ncu rows to ``kernels`` (GPU kernels only, in launch order); see module docstring."""
    n = len(kernels)
    result = CounterJoin(
        mode="none", row_index=[None] * n, source=[CounterSource.MISSING] * n, inherited_from=[None] * n
    )
    if not rows:
        result.holes = dict.fromkeys(range(n), "no counter run")
        return result
    key, key_kind, warnings = _choose_key(kernels, rows)
    result.name_key, result.warnings = key_kind, warnings

    prefix = _is_prefix(kernels, rows, key)
    if len(rows) < n:
        rows_by_cfg, kernels_by_cfg = _by_config(rows, key), _by_config(kernels, key)
        if _uniform_samples(rows_by_cfg, kernels_by_cfg) or (
                not prefix and _uniform_samples(rows_by_cfg, kernels_by_cfg, split=True)):
            return _join_per_config(kernels, rows, rows_by_cfg, kernels_by_cfg, allow_partial, result)
    if prefix:
        result.mode = "prefix"
        period = len(rows)
        for j in range(n):
            result.row_index[j] = j % period
            if j < period:
                result.source[j] = CounterSource.MEASURED
            else:
                result.source[j] = CounterSource.INHERITED
                result.inherited_from[j] = j % period
        return result
    # one row per launch expected: counts are checked, holes only with allow_partial
    return _join_full(kernels, rows, key, allow_partial, result)


def _join_full(kernels: Sequence[TimelineKernel], rows: Sequence[CounterRow], key: Callable[[str], str],
               allow_partial: bool, result: CounterJoin) -> CounterJoin:
    result.mode = "full"
    rows_by_name: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        rows_by_name[key(r.name)].append(i)
    kernels_by_name: dict[str, list[int]] = defaultdict(list)
    for j, k in enumerate(kernels):
        kernels_by_name[key(k.name)].append(j)
    mismatch = {nm for nm in set(rows_by_name) | set(kernels_by_name)
                if len(rows_by_name.get(nm, ())) != len(kernels_by_name.get(nm, ()))}
    if mismatch and not allow_partial:
        raise DeterminismError(
            f"kernel launch counts differ between the timeline and the counter run "
            f"({len(mismatch)} kernel name(s)); first divergence: "
            f"{_first_divergence(kernels, rows, key)}; {_FIX}"
        )
    for nm, ks in kernels_by_name.items():
        rs = rows_by_name.get(nm, [])
        for nth, j in enumerate(ks):
            if nth >= len(rs):
                result.holes[j] = f"no ncu row for the {_ordinal(nth + 1)} launch of this kernel"
                continue
            r = rows[rs[nth]]
            if not dims_agree(kernels[j], r):
                if not allow_partial:
                    raise DeterminismError(
                        f"the {_ordinal(nth + 1)} launch of '{kernels[j].name}' (timeline launch #{j}) ran "
                        f"with grid {_dims(kernels[j].grid)} block {_dims(kernels[j].block)} in the timeline "
                        f"but grid {_dims(r.grid)} block {_dims(r.block)} under ncu (ID {r.ncu_id}); {_FIX}"
                    )
                result.holes[j] = (f"grid/block differ from ncu ID {r.ncu_id} "
                                   f"({_dims(r.grid)} {_dims(r.block)}); counters withheld")
                continue
            result.row_index[j] = rs[nth]
            result.source[j] = CounterSource.MEASURED
    return result


def _join_per_config(kernels: Sequence[TimelineKernel], rows: Sequence[CounterRow],
                     rows_by_cfg: dict[ConfigKey, list[int]], kernels_by_cfg: dict[ConfigKey, list[int]],
                     allow_partial: bool, result: CounterJoin) -> CounterJoin:
    result.mode = "per-config"
    for cfg, rs in rows_by_cfg.items():
        if cfg not in kernels_by_cfg or len(rs) > len(kernels_by_cfg[cfg]):
            r = rows[rs[0]]
            msg = (f"ncu ID {r.ncu_id} measured '{r.name}' grid {_dims(r.grid)} block {_dims(r.block)}, "
                   f"a launch configuration the timeline "
                   f"{'never ran' if cfg not in kernels_by_cfg else 'ran fewer times'}")
            if not allow_partial:
                raise DeterminismError(f"{msg}; {_FIX}")
            result.warnings.append(msg)
    for cfg, ks in kernels_by_cfg.items():
        rs = rows_by_cfg.get(cfg, [])
        if not rs:
            for j in ks:
                result.holes[j] = "its launch configuration was not measured by the counter run"
            continue
        for group_ks, group_rs in _by_instantiation(kernels, rows, ks, rs):
            if not group_rs:
                for j in group_ks:
                    result.holes[j] = _OTHER_INSTANTIATION
                continue
            rep = group_ks[0]
            for nth, j in enumerate(group_ks):
                if nth < len(group_rs):
                    result.row_index[j] = group_rs[nth]
                    result.source[j] = CounterSource.MEASURED
                else:
                    result.row_index[j] = group_rs[0]
                    result.source[j] = CounterSource.INHERITED
                    result.inherited_from[j] = rep
        if len(rs) > 1 and len({template_arguments(rows[i].name) for i in rs}) == 1:
            result.spread[f"{cfg[0]} grid={_dims(cfg[1])} block={_dims(cfg[2])}"] = _spread(
                [rows[i] for i in rs])
    # ncu's per-launch-config filter keys on the function, not the template instantiation:
    # a configuration whose function was sampled through another instantiation is a known,
    # explained hole (counters are never borrowed across instantiations)
    sampled_functions = {(kernel_base_name(rows[rs[0]].name), cfg[1], cfg[2]) for cfg, rs in rows_by_cfg.items()}
    missing_cfgs = []
    for cfg, ks in kernels_by_cfg.items():
        if cfg in rows_by_cfg:
            continue
        if (kernel_base_name(kernels[ks[0]].name), cfg[1], cfg[2]) in sampled_functions:
            for j in ks:
                result.holes[j] = _OTHER_INSTANTIATION
        else:
            missing_cfgs.append(cfg)
    if missing_cfgs and not allow_partial:
        j = kernels_by_cfg[missing_cfgs[0]][0]
        k = kernels[j]
        raise DeterminismError(
            f"the timeline's launch #{j} '{k.name}' grid {_dims(k.grid)} block {_dims(k.block)} has a launch "
            f"configuration the per-config counter run never measured ({len(missing_cfgs)} configuration(s) "
            f"missing); {_FIX}"
        )
    return result


_OTHER_INSTANTIATION = ("ncu's per-launch-config filter sampled another instantiation of this kernel with the same "
                        "launch configuration; counters are not borrowed across instantiations (use --counters "
                        "full to measure it)")


def _by_instantiation(kernels: Sequence[TimelineKernel], rows: Sequence[CounterRow], ks: list[int],
                      rs: list[int]) -> list[tuple[list[int], list[int]]]:
    """A configuration's launches and rows, paired per template instantiation: under a loose join key
    (the bare identifier, when one tool left a name mangled) two instantiations with one grid and
    block share a configuration, and a row of one must not be given to a launch of the other (an
    instantiation no row measured is a hole). Where the names give no instantiation, or the tools'
    spellings of it do not meet, launches and rows pair in launch order."""
    groups: dict[tuple[str, ...], tuple[list[int], list[int]]] = {}
    for j in ks:
        groups.setdefault(template_arguments(kernels[j].name), ([], []))[0].append(j)
    row_args = [template_arguments(rows[i].name) for i in rs]
    if len(groups) == 1 and len(set(row_args)) == 1:
        return [(ks, rs)]
    for i, args in zip(rs, row_args, strict=True):
        if args not in groups:
            return [(ks, rs)]  # the spellings do not meet: pair in launch order, as before
        groups[args][1].append(i)
    return list(groups.values())


def _spread(samples: list[CounterRow]) -> dict[str, float]:
    """Max relative deviation from the first sample, per metric, across a config's samples."""
    out: dict[str, float] = {}
    first = samples[0].metrics
    for name, base in first.items():
        if base is None:
            continue
        devs = [abs((s.metrics.get(name) or 0.0) - base) / abs(base) if base else 0.0 for s in samples[1:]]
        out[name] = max(devs, default=0.0)
    return out

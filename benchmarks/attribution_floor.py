"""The attribution floor: the engine's joins, tiers and aggregation as plain numpy and pyarrow.

What a hand-written columnar attribution of the same replicated capture costs, every input
already in numpy columns (the Kineto trace too, which the engine still takes as records):

1. nsys kernels in launch order (correlation id, then start); the GPU kernels among them;
2. their Kineto twins and their ncu rows, each by (kernel name, nth launch of it), the launch
   dimensions checked to agree;
3. the four tiers: the launching cpu_op by External id (tier 1), the op named by ncu's NVTX stack
   (tier 2), the innermost operator range of nsys's NVTX enclosing the launch on its thread
   (tier 3), Inductor's fusion record of the kernel name (tier 4); each parsed once per
   distinct name, stack or text;
4. the winner per kernel, operators as groups of (operator, op id), duration-weighted means
   of the 20 counters per operator (``np.bincount``);
5. a kernel table and an operator table written as Parquet.

It checks nothing and names no error: a floor, not an engine. ``bench_attribute.py --floor``
runs it beside the engine at each size, in a fresh process, inputs built before the clock.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

_OP = re.compile(r"^(?P<name>[^,]+), (?:seq = \d+, )?op_id = (?P<id>\d+)")


class _Codes:
    """One string dictionary for every name, stack and text."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}

    def __call__(self, value: Any) -> int:
        return self.index.setdefault(value, len(self.index))

    def of(self, values: list[Any]) -> np.ndarray:
        return np.array([self(v) for v in values], dtype=np.int64)


def _steps(capture: str) -> dict[str, int]:
    """The shifts ``bench_attribute.replicate`` gives each copy: periods and id steps."""
    from bench_attribute import replicate

    one = replicate(capture, 1)
    two = replicate(capture, 2)
    k1, k2, n1, n2 = one[0], two[0], one[1], two[1]
    return {
        "k_period": k2.kernels[len(k1.kernels)].start_ns - k1.kernels[0].start_ns,
        "k_corr": next(b.correlation_id - a.correlation_id for a, b in zip(k1.kernels, k2.kernels[len(k1.kernels):],
                                                                           strict=False) if a.correlation_id),
        "k_ext": next(b.external_id - a.external_id for a, b in zip(k1.cpu_ops, k2.cpu_ops[len(k1.cpu_ops):],
                                                                    strict=False) if a.external_id),
        "n_period": n2.kernels[len(n1.kernels)].start_ns - n1.kernels[0].start_ns,
        "n_corr": next(b.correlation_id - a.correlation_id for a, b in zip(n1.kernels, n2.kernels[len(n1.kernels):],
                                                                           strict=False) if a.correlation_id),
    }


def inputs(capture: str, copies: int) -> dict[str, Any]:
    """Every input of ``copies`` copies of the capture as numpy columns, shifted as replicate shifts them."""
    from bench_attribute import replicate

    kin, nsy, ncu, ind, _ = replicate(capture, 1)
    if len(ncu.rows) != len(nsy.kernels):
        raise SystemExit(f"the floor joins one ncu row per launch: capture {capture} measured per configuration")
    st = _steps(capture)
    codes = _Codes()
    copy = np.arange(copies, dtype=np.int64)

    def tile(values: list[Any], step: int = 0) -> np.ndarray:
        base = np.array([-1 if v is None else v for v in values], dtype=np.int64)
        out = np.tile(base, copies)
        if step:
            out += np.where(out >= 0, np.repeat(copy, len(base)) * step, 0)
        return out

    def dims(records: list[Any], attr: str) -> np.ndarray:
        return np.tile(np.array([getattr(r, attr) or (-1, -1, -1) for r in records], dtype=np.int64), (copies, 1))

    def kernel_names(records: list[Any]) -> np.ndarray:
        return np.tile(codes.of([r.name for r in records]), copies)

    metrics = sorted(ncu.rows[0].metrics)
    ncu_copies = copies
    return {
        "n_name": kernel_names(nsy.kernels), "n_kind": np.tile(codes.of([k.kind for k in nsy.kernels]), copies),
        "n_start": tile([k.start_ns for k in nsy.kernels], st["n_period"]),
        "n_end": tile([k.end_ns for k in nsy.kernels], st["n_period"]),
        "n_corr": tile([k.correlation_id for k in nsy.kernels], st["n_corr"]),
        "n_grid": dims(nsy.kernels, "grid"), "n_block": dims(nsy.kernels, "block"),
        "r_corr": tile([r.correlation_id for r in nsy.runtime_calls], st["n_corr"]),
        "r_tid": tile([r.tid for r in nsy.runtime_calls]),
        "r_start": tile([r.start_ns for r in nsy.runtime_calls], st["n_period"]),
        "v_text": np.tile(codes.of([r.text for r in nsy.nvtx_ranges]), copies),
        "v_tid": tile([r.tid for r in nsy.nvtx_ranges]),
        "v_start": tile([r.start_ns for r in nsy.nvtx_ranges], st["n_period"]),
        "v_end": tile([r.end_ns for r in nsy.nvtx_ranges], st["n_period"]),
        "k_name": kernel_names(kin.kernels), "k_kind": np.tile(codes.of([k.kind for k in kin.kernels]), copies),
        "k_start": tile([k.start_ns for k in kin.kernels], st["k_period"]),
        "k_corr": tile([k.correlation_id for k in kin.kernels], st["k_corr"]),
        "k_ext": tile([k.external_id for k in kin.kernels], st["k_ext"]),
        "k_grid": dims(kin.kernels, "grid"), "k_block": dims(kin.kernels, "block"),
        "o_name": np.tile(codes.of([o.name for o in kin.cpu_ops]), copies),
        "o_cat": np.tile(codes.of([o.category for o in kin.cpu_ops]), copies),
        "o_ext": tile([o.external_id for o in kin.cpu_ops], st["k_ext"]),
        "c_name": np.tile(codes.of([r.name for r in ncu.rows]), ncu_copies),
        "c_stack": np.tile(codes.of([tuple(r.nvtx_stack or ()) for r in ncu.rows]), ncu_copies),
        "c_grid": np.tile(np.array([r.grid for r in ncu.rows], dtype=np.int64), (ncu_copies, 1)),
        "c_block": np.tile(np.array([r.block for r in ncu.rows], dtype=np.int64), (ncu_copies, 1)),
        "c_metrics": np.tile(np.array([[np.nan if r.metrics[m] is None else r.metrics[m] for m in metrics]
                                       for r in ncu.rows], dtype=np.float64), (ncu_copies, 1)),
        "metric_names": metrics,
        "fusions": {codes(name): rec.aten_ops[0] for name, rec in ind.fusions.items() if rec.aten_ops},
        "strings": list(codes.index), "index": codes.index,
        "kernel_code": codes("kernel"), "cpu_op_code": codes("cpu_op"),
    }


def _nth(keys: np.ndarray) -> np.ndarray:
    order = np.argsort(keys, kind="stable")
    s = keys[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    out = np.empty(len(keys), dtype=np.int64)
    out[order] = np.arange(len(keys)) - np.repeat(starts, np.diff(np.r_[starts, len(keys)]))
    return out


def _pair(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """For each left key, the right position with the same (key, nth occurrence), -1 where none."""
    span = max(len(left), len(right)) + 1
    rk = right * span + _nth(right)
    order = np.argsort(rk, kind="stable")
    want = left * span + _nth(left)
    pos = np.minimum(np.searchsorted(rk[order], want), len(rk) - 1)
    return np.where(rk[order][pos] == want, order[pos], -1)


def _parsed(strings: list[Any], code: int, index: dict[Any, int]) -> tuple[int, int]:
    """(operator name's code, op id) a text or stack names (its innermost operator entry), or (-1, -1)."""
    value = strings[code]
    for entry in reversed(value if isinstance(value, tuple) else (value,)):
        m = _OP.match(entry)
        if m and (m["name"].startswith(("aten::", "triton_"))):
            return index.setdefault(m["name"], len(index)), int(m["id"])
    return -1, -1


def attribute_floor(d: dict[str, Any]) -> dict[str, np.ndarray]:
    """Steps 1-4 of the module docstring: kernel columns, operator groups and counters."""
    order = np.lexsort((d["n_start"], d["n_corr"]))
    gpu = order[d["n_kind"][order] == d["kernel_code"]]
    n = len(gpu)
    name, start, end, corr = d["n_name"][gpu], d["n_start"][gpu], d["n_end"][gpu], d["n_corr"][gpu]
    grid, block = d["n_grid"][gpu], d["n_block"][gpu]
    # Kineto twins and ncu rows
    korder = np.lexsort((d["k_start"], d["k_corr"]))
    korder = korder[d["k_kind"][korder] == d["kernel_code"]]
    twin = korder[_pair(name, d["k_name"][korder])]
    agree = (d["k_grid"][twin] == grid).all(axis=1) & (d["k_block"][twin] == block).all(axis=1)
    row = _pair(name, d["c_name"])
    agree &= (d["c_grid"][row] == grid).all(axis=1) & (d["c_block"][row] == block).all(axis=1)
    # tier 1: the cpu_op of the twin's External id
    ops = np.flatnonzero(d["o_cat"] == d["cpu_op_code"])
    op_order = ops[np.argsort(d["o_ext"][ops], kind="stable")]
    ext = d["k_ext"][twin]
    at = np.minimum(np.searchsorted(d["o_ext"][op_order], ext), len(op_order) - 1)
    hit1 = d["o_ext"][op_order[at]] == ext
    t1_op, t1_id = np.where(hit1, d["o_name"][op_order[at]], -1), np.where(hit1, ext, -1)
    # tier 2: ncu's NVTX stack, parsed once per distinct stack
    strings, index = d["strings"], dict(d["index"])
    stacks = np.unique(d["c_stack"])
    table2 = np.full((len(strings) + 1, 2), -1, dtype=np.int64)
    for s in stacks.tolist():
        table2[s] = _parsed(strings, s, index)
    t2 = table2[d["c_stack"][row]]
    # tier 3: the innermost operator range around the launch, on the launching thread
    rorder = np.argsort(d["r_corr"], kind="stable")
    li = np.minimum(np.searchsorted(d["r_corr"][rorder], corr), len(rorder) - 1)
    launch = rorder[li]
    q_tid, q_t = d["r_tid"][launch], d["r_start"][launch]
    texts = np.unique(d["v_text"])
    table3 = np.full((len(strings) + 1, 2), -1, dtype=np.int64)
    for s in texts.tolist():
        table3[s] = _parsed(strings, s, index)
    is_op = table3[d["v_text"], 0] >= 0
    t3 = np.full((n, 2), -1, dtype=np.int64)
    for tid in np.unique(d["v_tid"]).tolist():
        rs = np.flatnonzero(is_op & (d["v_tid"] == tid))
        rs = rs[np.argsort(d["v_start"][rs], kind="stable")]
        qi = np.flatnonzero(q_tid == tid)
        i = np.searchsorted(d["v_start"][rs], q_t[qi], side="right") - 1
        found = np.full(len(qi), -1, dtype=np.int64)
        for back in range(4):  # the innermost range still open at the launch
            k = np.maximum(i - back, 0)
            ok = (found < 0) & (i - back >= 0) & (d["v_end"][rs[k]] >= q_t[qi])
            found = np.where(ok, rs[k], found)
        t3[qi] = np.where(found[:, None] >= 0, table3[d["v_text"][np.maximum(found, 0)]], -1)
    # tier 4: Inductor's fusion record, once per distinct kernel name
    fused = np.full(len(strings) + 1, -1, dtype=np.int64)
    for code, op in d["fusions"].items():
        fused[code] = index.setdefault(op, len(index))
    t4 = fused[name]
    # the winner, operators and their counters
    op = np.where(t1_op >= 0, t1_op, np.where(t2[:, 0] >= 0, t2[:, 0], np.where(t3[:, 0] >= 0, t3[:, 0], t4)))
    op_id = np.where(t1_op >= 0, t1_id, np.where(t2[:, 0] >= 0, t2[:, 1], np.where(t3[:, 0] >= 0, t3[:, 1], -1)))
    tier = np.where(t1_op >= 0, 0, np.where(t2[:, 0] >= 0, 1, np.where(t3[:, 0] >= 0, 2, np.where(t4 >= 0, 3, 4))))
    key = op * (int(op_id.max(initial=0)) + 2) + (op_id + 1)  # one int64 per (operator, op id)
    _, first, group = np.unique(key, return_index=True, return_inverse=True)
    groups = len(first)
    dur = (end - start).astype(np.float64)
    values = d["c_metrics"][row]
    means = np.full((groups, values.shape[1]), np.nan)
    for m in range(values.shape[1]):
        v = values[:, m]
        have = ~np.isnan(v)
        weight = np.bincount(group, weights=np.where(have, dur, 0.0), minlength=groups)
        total = np.bincount(group, weights=np.where(have, v * dur, 0.0), minlength=groups)
        means[:, m] = np.where(weight > 0, total / np.maximum(weight, 1e-300), np.nan)
    return {"name": name, "start": start, "end": end, "grid": grid, "block": block, "tier": tier, "op": op,
            "op_id": op_id, "group": group, "agree": agree, "ncu_row": row, "counters": values,
            "op_first": first, "op_duration": np.bincount(group, weights=dur, minlength=groups),
            "op_counters": means, "op_kernels": np.bincount(group, minlength=groups)}


def write_floor(out: dict[str, np.ndarray], metric_names: list[str], folder: Path) -> int:
    """Step 5: the kernel and operator tables as Parquet; the bytes written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kernels = {k: pa.array(out[k]) for k in ("name", "start", "end", "tier", "op", "op_id", "group", "ncu_row")}
    for axis, label in enumerate("xyz"):
        kernels[f"grid_{label}"] = pa.array(out["grid"][:, axis])
        kernels[f"block_{label}"] = pa.array(out["block"][:, axis])
    for m, metric in enumerate(metric_names):
        kernels[f"counters.{metric}"] = pa.array(out["counters"][:, m], mask=np.isnan(out["counters"][:, m]))
    ops = {"first": pa.array(out["op_first"]), "duration_ns": pa.array(out["op_duration"]),
           "kernel_count": pa.array(out["op_kernels"])}
    for m, metric in enumerate(metric_names):
        ops[f"metrics.{metric}"] = pa.array(out["op_counters"][:, m], mask=np.isnan(out["op_counters"][:, m]))
    pq.write_table(pa.table(kernels), folder / "kernels.parquet")
    pq.write_table(pa.table(ops), folder / "operators.parquet")
    return sum(p.stat().st_size for p in folder.iterdir())


def run_floor(capture: str, size: int) -> dict[str, float]:
    """The floor at ``size`` kernels in this process: seconds (wall, CPU), kernels and operators."""
    from bench_attribute import replicate

    base = len(replicate(capture, 1)[0].kernels)
    d = inputs(capture, max(1, round(size / base)))
    import pandas  # noqa: F401  (pa.array of numpy imports it on first use: the engine's inputs have it)
    import pyarrow.parquet  # noqa: F401  (imported before the clock, as the engine's inputs have it)

    t0, c0 = time.perf_counter(), time.process_time()
    out = attribute_floor(d)
    with tempfile.TemporaryDirectory() as tmp:
        written = write_floor(out, d["metric_names"], Path(tmp))
    return {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0, "kernels": len(out["name"]),
            "operators": len(out["op_first"]), "written_mb": written / 1e6,
            "attributed": float((out["tier"] < 4).mean()), "joined": float(out["agree"].mean())}

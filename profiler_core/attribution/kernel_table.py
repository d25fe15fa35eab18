"""Every kernel of a profile as columns: what profile.json's ``kernels`` list holds, one array per field.

The engine fills a :class:`KernelTable`; a small capture turns it into the ``Kernel`` models of
today's profile.json (:meth:`KernelTable.models`), a large one writes it to Parquet
(profiler_core/columnar_profile.py). Reading it back gives the same table, each column decoded
when first read (:meth:`KernelTable.deferred`); as a ``Sequence[Kernel]`` it builds each model on
access, so the analysis commands iterate a million kernels without holding a million models. The
table is read-only through that view: change columns, not models.

Strings of every column share one dictionary (``strings``); ``-1`` is None in code and id
columns. A kernel's counters are a row of ``counter_values`` (``counter_row``; -1: none);
evidence is one set of columns per tier (``TIER_ORDER``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from profiler_core.attribution.columns import NONE, ArrowStrings, Interner, Positional, distinct_row_dicts, string_list
from profiler_core.attribution.profile_meta import TIER_CONFIDENCE, TIER_ORDER
from profiler_core.schema import Attribution, CounterSource, Evidence, Kernel, Tier, construct_trusted

TIERS = (*TIER_ORDER, Tier.UNATTRIBUTED)  # codes of the ``tier`` column
SOURCES = (CounterSource.MEASURED, CounterSource.INHERITED, CounterSource.MISSING)  # ``counter_source`` codes


@dataclass(frozen=True)
class EvidenceColumns:
    """What one tier said about each kernel."""

    has: np.ndarray  # bool
    operator: np.ndarray  # string codes
    op_id: np.ndarray  # -1: None
    detail: np.ndarray  # string codes


@dataclass(eq=False)
class KernelTable(Positional[Kernel]):
    """The kernels of one profile, column by column (see the module docstring)."""

    strings: Interner
    dims: list[tuple[int, int, int]]
    fused: list[tuple[str, ...]]
    operator_keys: Sequence[str]  # a list, or the ArrowStrings a Parquet table was read as
    counter_fields: tuple[str, ...]
    have_counters: bool  # a counter run was given: every kernel lists every field (None where missing)
    name: np.ndarray
    short_name: np.ndarray
    kind: np.ndarray
    stream: np.ndarray
    device: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    grid: np.ndarray
    block: np.ndarray
    registers_per_thread: np.ndarray
    static_smem_bytes: np.ndarray
    dynamic_smem_bytes: np.ndarray
    counter_values: np.ndarray  # rows x counter_fields, NaN: None
    counter_row: np.ndarray
    counter_source: np.ndarray
    ncu_id: np.ndarray
    inherited_from: np.ndarray
    operator: np.ndarray  # index into operator_keys
    tier: np.ndarray
    evidence: tuple[EvidenceColumns, ...]  # TIER_ORDER
    tiers_agree: np.ndarray  # -1 None, 0, 1
    reason: np.ndarray
    fused_with: np.ndarray  # index into fused
    graph_id: np.ndarray
    graph_id_known: np.ndarray
    library: np.ndarray
    module_path: np.ndarray  # string codes (None has one)

    @classmethod
    def deferred(cls, pending: dict[str, Callable[[], dict[str, Any]]], **values: Any) -> KernelTable:
        """A table whose fields in ``pending`` are worked out when first read, each by its function,
        which returns that field and the fields worked out with it (a table read from Parquet:
        columnar_profile.from_arrow). A command reads only the columns it uses."""
        unnamed = {f.name for f in fields(cls)} - values.keys() - pending.keys()
        if unnamed:
            raise TypeError(f"KernelTable.deferred: no value or function for {sorted(unnamed)}")
        table = cls.__new__(cls)
        table.__dict__.update(values, _pending=pending)
        return table

    if not TYPE_CHECKING:  # hidden from mypy, which would otherwise type every unknown attribute Any
        def __getattr__(self, name: str) -> Any:
            pending = self.__dict__.get("_pending")
            load = pending.get(name) if pending else None
            if load is None:
                raise AttributeError(f"'KernelTable' object has no attribute '{name}'")
            values = load()
            self.__dict__.update(values)
            for done in values:
                pending.pop(done, None)  # the functions (and the Arrow columns they hold) are released
            return values[name]

    def counter_column(self, c: int) -> np.ndarray:
        """Counter ``c`` of every counter row, ``counter_values[:, c]``; a table read from Parquet whose
        counters are not worked out yet reads the one column (``_counter_column``, from_arrow)."""
        read = self.__dict__.get("_counter_column")
        if read is not None and "counter_values" not in self.__dict__:
            return read(c)  # type: ignore[no-any-return]
        return self.counter_values[:, c]

    @property
    def duration_ns(self) -> np.ndarray:
        return self.end_ns - self.start_ns

    def __len__(self) -> int:
        return len(self.operator)

    def _at(self, j: int) -> Kernel:
        return self.model(j)

    def __iter__(self) -> Iterator[Kernel]:
        return (self.model(j) for j in range(len(self)))

    MODEL_BLOCK = 256  # kernels whose columns are turned into Python values at a time

    def models(self) -> list[Kernel]:
        """Every kernel as the ``Kernel`` model profile.json lists (what :meth:`model` builds, by blocks:
        each block's columns become Python values once, not one array access per field and kernel)."""
        return list(KernelModels(self, every=True))

    def lazy_models(self) -> KernelModels:
        """The models of :meth:`models`, each block built when one of its kernels is first asked for."""
        return KernelModels(self)

    def _model_block(self, lo: int, hi: int, shared: dict[tuple[Tier, int, int | None, int], Evidence],
                     counters_of_rows: tuple[list[dict[str, float | None]], Sequence[int] | dict[int, int]],
                     ) -> list[Kernel]:
        s, dims, fused = self.strings.values, self.dims, self.fused
        fields = self.counter_fields
        operators = self.operator[lo:hi].tolist()
        # the block's operator keys only (a table read from Parquet keeps its keys as Arrow)
        distinct = sorted(set(operators) - {NONE})
        keys = self.operator_keys
        key_of: dict[int, str | None] = dict(zip(distinct, keys.at(distinct) if isinstance(keys, ArrowStrings)
                                                 else [keys[c] for c in distinct], strict=True))
        key_of[NONE] = None

        def col(a: np.ndarray) -> list[Any]:
            return a[lo:hi].tolist()

        def opt(a: np.ndarray) -> list[int | None]:
            return [None if v == NONE else v for v in a[lo:hi].tolist()]

        rows = col(self.counter_row)
        distinct_counters, counter_codes = counters_of_rows
        starts, ends = col(self.start_ns), col(self.end_ns)
        evidence = [(t, col(ev.has), col(ev.operator), opt(ev.op_id), col(ev.detail))
                    for t, ev in zip(TIER_ORDER, self.evidence, strict=True)]
        graph_ids, known = col(self.graph_id), col(self.graph_id_known)

        def one_evidence(tier: Tier, op: int, op_id: int | None, detail: int) -> Evidence:
            key = (tier, op, op_id, detail)
            found = shared.get(key)
            if found is None:
                found = shared[key] = construct_trusted(Evidence, {"tier": tier, "operator": s[op], "op_id": op_id,
                                                                    "detail": s[detail]})
            return found

        out: list[Kernel] = []
        for i, (name, short, kind, stream, device, g, b, regs, smem, dsmem, source, ncu, inh, op, tier, agree,
                reason, fw, lib, mod) in enumerate(zip(
                    col(self.name), col(self.short_name), col(self.kind), col(self.stream), col(self.device),
                    col(self.grid), col(self.block), opt(self.registers_per_thread), opt(self.static_smem_bytes),
                    opt(self.dynamic_smem_bytes), col(self.counter_source), opt(self.ncu_id),
                    opt(self.inherited_from), operators, col(self.tier), col(self.tiers_agree),
                    col(self.reason), col(self.fused_with), col(self.library), col(self.module_path), strict=True)):
            ri = rows[i]
            if not self.have_counters:
                counters: dict[str, float | None] = {}
            elif ri == NONE:
                counters = dict.fromkeys(fields)
            else:
                counters = distinct_counters[counter_codes[ri]].copy()
            level = TIERS[tier]
            attribution = construct_trusted(Attribution, {
                "operator_key": key_of[op], "tier": level,
                "confidence": TIER_CONFIDENCE[level],
                "evidence": [one_evidence(t, ops[i], ids[i], details[i])
                             for t, has, ops, ids, details in evidence if has[i]],
                "tiers_agree": None if agree == NONE else bool(agree), "reason": s[reason]})
            out.append(construct_trusted(Kernel, {
                "id": lo + i, "name": s[name], "short_name": s[short], "kind": s[kind], "stream": stream,
                "device": device, "start_ns": starts[i], "end_ns": ends[i], "duration_ns": ends[i] - starts[i],
                "grid": None if g == NONE else dims[g], "block": None if b == NONE else dims[b],
                "registers_per_thread": regs, "static_smem_bytes": smem, "dynamic_smem_bytes": dsmem,
                "counters": counters, "counter_source": SOURCES[source], "ncu_id": ncu, "inherited_from": inh,
                "attribution": attribution, "fused_with": list(fused[fw]),
                "graph_id": graph_ids[i] if known[i] else None, "library": s[lib], "module_path": s[mod],
            }))
        return out

    def model(self, j: int) -> Kernel:
        """Kernel ``j`` as the model profile.json lists (built without validation: every value is typed)."""
        s = self.strings.values
        g, b = int(self.grid[j]), int(self.block[j])
        ri = int(self.counter_row[j])
        if not self.have_counters:
            counters: dict[str, float | None] = {}
        elif ri == NONE:
            counters = dict.fromkeys(self.counter_fields)
        else:
            counters = {f: (None if v != v else v) for f, v in zip(self.counter_fields,
                                                                  self.counter_values[ri].tolist(), strict=True)}
        return construct_trusted(Kernel, {
            "id": j, "name": s[self.name[j]], "short_name": s[self.short_name[j]], "kind": s[self.kind[j]],
            "stream": int(self.stream[j]), "device": int(self.device[j]), "start_ns": int(self.start_ns[j]),
            "end_ns": int(self.end_ns[j]), "duration_ns": int(self.end_ns[j] - self.start_ns[j]),
            "grid": None if g == NONE else self.dims[g], "block": None if b == NONE else self.dims[b],
            "registers_per_thread": _opt(self.registers_per_thread[j]),
            "static_smem_bytes": _opt(self.static_smem_bytes[j]),
            "dynamic_smem_bytes": _opt(self.dynamic_smem_bytes[j]),
            "counters": counters, "counter_source": SOURCES[self.counter_source[j]], "ncu_id": _opt(self.ncu_id[j]),
            "inherited_from": _opt(self.inherited_from[j]), "attribution": self.attribution(j),
            "fused_with": list(self.fused[self.fused_with[j]]),
            "graph_id": int(self.graph_id[j]) if self.graph_id_known[j] else None,
            "library": s[self.library[j]], "module_path": s[self.module_path[j]],
        })

    def attribution(self, j: int) -> Attribution:
        s = self.strings.values
        tier = TIERS[self.tier[j]]
        op = int(self.operator[j])
        agree = int(self.tiers_agree[j])
        evidence = [construct_trusted(Evidence, {"tier": t, "operator": s[ev.operator[j]], "op_id": _opt(ev.op_id[j]),
                                                 "detail": s[ev.detail[j]]})
                    for t, ev in zip(TIER_ORDER, self.evidence, strict=True) if ev.has[j]]
        return construct_trusted(Attribution, {
            "operator_key": None if op == NONE else self.operator_keys[op], "tier": tier,
            "confidence": TIER_CONFIDENCE[tier], "evidence": evidence,
            "tiers_agree": None if agree == NONE else bool(agree), "reason": s[self.reason[j]]})

    # fast paths for the analysis code: one column instead of a model per kernel
    def names(self) -> list[str]:
        return [self.strings.values[c] for c in self.name.tolist()]

    def operator_key_list(self) -> list[str | None]:
        keys = string_list(self.operator_keys)
        return [None if g == NONE else keys[g] for g in self.operator.tolist()]


class KernelModels(Positional[Kernel]):
    """A table's kernel models, built a block at a time when first asked for and then kept.

    Every caller asking for a position gets the same model (identity holds, as in a list); a reader
    of a few kernels builds their blocks only, and iterating builds them all, as :meth:`KernelTable.models`.
    """

    def __init__(self, table: KernelTable, *, every: bool = False) -> None:
        """``every``: every block will be built (every counter row is numbered at once)."""
        self.table = table
        self._n = len(table)
        self._size = table.MODEL_BLOCK
        self._blocks: list[list[Kernel] | None] = [None] * -(-self._n // self._size)
        # One Evidence per distinct (tier, operator, op id, detail): a tier's word on an operator is the
        # same for each of its kernels (100k kernels: 341k evidence entries, 77k distinct). Nothing
        # modifies a model's evidence, so the kernels share them.
        self._shared: dict[tuple[Tier, int, int | None, int], Evidence] = {}
        # Each distinct counter row (by its bits) becomes a dict once; every kernel gets its own copy.
        # Numbering every row of a long table costs as much as some hundred blocks: the first blocks
        # number their own rows only.
        self._counters: tuple[list[dict[str, float | None]], list[int]] | None = None
        self._built_blocks = self.LOCAL_BLOCKS if every else 0

    LOCAL_BLOCKS = 64  # blocks built with their own rows' dicts before every row is numbered at once

    def _block(self, b: int) -> list[Kernel]:
        block = self._blocks[b]
        if block is None:
            table = self.table
            lo = b * self._size
            hi = min(self._n, lo + self._size)
            counters: tuple[list[dict[str, float | None]], Sequence[int] | dict[int, int]]
            if self._counters is None and self._built_blocks < self.LOCAL_BLOCKS:
                rows = np.unique(table.counter_row[lo:hi])
                rows = rows[rows != NONE]
                dicts, codes = distinct_row_dicts(table.counter_values[rows], table.counter_fields)
                counters = dicts, dict(zip(rows.tolist(), codes, strict=True))
            else:
                if self._counters is None:
                    self._counters = distinct_row_dicts(table.counter_values, table.counter_fields)
                counters = self._counters
            block = self._blocks[b] = table._model_block(lo, hi, self._shared, counters)
            self._built_blocks += 1
        return block

    @property
    def built(self) -> int:
        """How many models have been built so far."""
        return sum(len(b) for b in self._blocks if b is not None)

    def __len__(self) -> int:
        return self._n

    def _at(self, j: int) -> Kernel:
        b, i = divmod(j, self._size)
        return self._block(b)[i]

    def __iter__(self) -> Iterator[Kernel]:
        for b in range(len(self._blocks)):
            yield from self._block(b)


def counter_matrix(rows: int, fields: int) -> np.ndarray:
    """A ``rows x fields`` counter matrix of NaN, laid out a field at a time with one more NaN row
    below it, so that :func:`padded_counters` of it is a view: aggregation and the Parquet writer
    read it a counter at a time, and the padding row stands for a kernel without counters."""
    return np.full((fields, rows + 1), np.nan)[:, :rows].T


def padded_counters(values: np.ndarray) -> np.ndarray:
    """``values`` with a last row of NaN: a view where ``values`` came from :func:`counter_matrix`
    (and its padding row is still NaN), else a copy."""
    base = values.base
    if (isinstance(base, np.ndarray) and base.ndim == 2 and base.flags.c_contiguous
            and base.shape == (values.shape[1], values.shape[0] + 1) and values.strides == base.T.strides
            and values.__array_interface__["data"][0] == base.__array_interface__["data"][0]
            and bool(np.isnan(base[:, -1]).all())):
        return base.T
    return np.vstack([values, np.full((1, values.shape[1]), np.nan)])


def _opt(value: Any) -> int | None:
    v = int(value)
    return None if v == NONE else v

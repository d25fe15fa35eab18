"""The view's one-pass counter aggregation gives exactly what one aggregation per set gives."""

from __future__ import annotations

import random
import re
from collections import Counter

from profiler_core.analysis.profile_view import ProfileView, kernel_counters
from tests.analysis.real_profiles import joinable_profile, pair_profile

FIELDS = ("achieved_occupancy_pct", "tensor_core_active_pct", "dram_bytes_read", "executed_instructions")


def test_every_operators_counters_match_a_per_operator_aggregation() -> None:
    for profile in (pair_profile("base"), joinable_profile()):
        view = ProfileView(profile)
        compared = 0
        for op in view.operators:
            ks = [k for k in view.kernels_of(op) if k.counters]
            if not ks:
                continue
            assert view.op_counters(op) == kernel_counters(ks), op.key
            compared += 1
        assert compared > 10


def test_one_counter_of_an_operator_is_what_its_counters_dict_holds() -> None:
    from profiler_core.analysis.rules import counter
    from profiler_core.attribution.aggregate import FIELDS as ALL

    for profile in (pair_profile("base"), joinable_profile()):
        view, fresh = ProfileView(profile), ProfileView(profile)
        seen = Counter[str]()
        for op in view.operators:
            for field in (*ALL, "not_a_counter"):
                got = view.op_counter(op, field)  # before any dict of this view is built
                assert got == counter(fresh.op_counters(op), field), (op.key, field)
                seen["value" if got is not None else "none"] += 1
        assert seen["value"] > 100 and seen["none"] > 10
        assert not view._counters_of  # read off the aggregate: no operator's dict was built


def test_counters_of_many_matches_counters_of_per_set() -> None:
    view = ProfileView(pair_profile("base"))
    rng = random.Random(0)
    sets = [rng.sample(view.kernels, rng.randint(1, 12)) for _ in range(100)] + [[]]
    many = view.counters_of_many(sets, FIELDS)
    assert len(many) == len(sets)
    for ks, got in zip(sets, many, strict=True):
        assert got == view.counters_of(ks, FIELDS)
    assert any(v is not None for got in many for v in got.values())


def test_shared_views_build_one_view_per_profile_and_only_while_active() -> None:
    from profiler_core.analysis.profile_view import shared_views

    base, opt = pair_profile("base"), pair_profile("opt")
    assert ProfileView.of(base) is not ProfileView.of(base)
    with shared_views():
        view = ProfileView.of(base)
        assert ProfileView.of(base) is view and ProfileView.of(opt) is not view
        with shared_views():  # nested: the same views
            assert ProfileView.of(base) is view
    assert ProfileView.of(base) is not view


def test_the_views_counter_matrix_gives_what_each_kernels_dict_gives() -> None:
    from profiler_core.analysis.profile_view import kernel_counters_many

    view = ProfileView(joinable_profile())
    rng = random.Random(1)
    sets = [rng.choices(view.kernels, k=rng.randint(1, 40)) for _ in range(60)]  # repeats included
    by_matrix = kernel_counters_many(sets, table=view.counter_rows)
    assert by_matrix == [kernel_counters(ks) for ks in sets]
    assert sum(bool(c) for c in by_matrix) > 30
    # a kernel that is not the view's own object (another profile's, a copy) is read from its dict
    mine = next(ks for ks in sets if sum(bool(k.counters) for k in ks) > 2)
    foreign = [k.model_copy(update={"counters": dict.fromkeys(k.counters, 1.0)}) for k in mine]
    assert kernel_counters(foreign) != kernel_counters(mine)
    assert view.counter_rows.rows(foreign) is None
    assert kernel_counters_many([foreign], table=view.counter_rows) == [kernel_counters(foreign)]


def test_a_columnar_profiles_counter_matrix_is_read_off_its_table_as_its_models_give_it(
        tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # the shipped GPT-2 capture written columnar at any size and read back: the view reads the
    # kernel table's counter columns as they are, and they hold what every kernel's dict holds
    import numpy as np

    from profiler_core.analysis.profile_view import CounterRows
    from profiler_core.attribution import attribute_run
    from profiler_core.profile_io import read_profile, write_profile
    from tests.conftest import REPO

    monkeypatch.setenv("OPROF_COLUMNAR_KERNELS", "0")
    write_profile(tmp_path / "profile.json", attribute_run(REPO / "examples/captures/h200/gpt2/baseline"))
    profile = read_profile(tmp_path / "profile.json")
    assert hasattr(profile.kernels, "counter_values")
    view = ProfileView(profile)
    fast, slow = view.counter_rows, CounterRows(view.kernels)
    assert [k.id for k in fast.kernels] == [k.id for k in slow.kernels] and len(fast.kernels) > 500
    assert np.array_equal(fast.kernel_matrix(), slow.kernel_matrix(), equal_nan=True)
    assert np.array_equal(fast.durations, slow.durations) and np.array_equal(fast.key_masks, slow.key_masks)
    assert not np.isnan(fast.kernel_matrix()).all()
    assert fast.matrix_rows is not None and slow.matrix_rows is None  # the table's rows, not a row per kernel
    # the kernels' time, names, tiers and confidence are read off the table as the models give them
    from dataclasses import replace

    from profiler_core.analysis.profile_view import _KernelColumns
    from profiler_core.attribution.kernel_table import TIERS

    table = profile.kernels
    # every tier code, so the tier and confidence codes are checked for each (the capture's are all CUPTI),
    # and the names' string codes reversed (the first kernel's name has the largest)
    used = np.unique(table.name)
    recode = np.zeros(int(used.max()) + 1, dtype=np.int64)
    recode[used] = used[::-1]
    every_tier = replace(table, tier=np.arange(len(table)) % len(TIERS), name=recode[table.name])
    for t in (table, every_tier):
        cols, of_models = _KernelColumns.of_table(t), _KernelColumns(t.models())
        for column in ("pos_at", "start", "duration", "name", "tier", "confidence", "weakness"):
            assert np.array_equal(getattr(cols, column), getattr(of_models, column)), column
        assert (cols.names, cols.tiers, cols.confidences) == (of_models.names, of_models.tiers,
                                                              of_models.confidences)
        assert len(cols.names) > 10
    assert len(set(cols.confidence.tolist())) > 2
    assert isinstance(view._columns, _KernelColumns) and view._columns.names == _KernelColumns(view.kernels).names
    # a kernel's counter row is its id, for the view's own models only
    some = [k for op in view.operators[:40] for k in view.kernels_of(op)]
    assert np.array_equal(fast.rows(some), slow.rows(some)) and len(some) > 20
    assert fast.rows([*some[:3], some[3].model_copy()]) is None
    compared = 0
    for op in view.operators:
        ks = [k for k in view.kernels_of(op) if k.counters]
        if ks:
            assert view.op_counters(op) == kernel_counters(ks), op.key
            compared += 1
    assert compared > 100


def test_evidence_read_off_the_views_arrays_is_what_the_models_give() -> None:
    # the view reads its own kernels' time, names, tiers and confidence off arrays by position;
    # copies of the same kernels (not the view's objects) are read model by model: both agree
    from profiler_core.attribution import attribute_run
    from tests.conftest import REPO

    tiers_seen = set()
    recorded = attribute_run(REPO / "tests/data/h200_step_graph_recorded")  # three tiers
    for profile in (pair_profile("base"), joinable_profile(), recorded):
        view = ProfileView(profile)
        rng = random.Random(2)
        sets = [rng.choices(view.kernels, k=rng.randint(1, 60)) for _ in range(40)]  # repeats included
        sets += [view.kernels, [k for k in view.kernels if view.is_unattributed(k)], []]
        for ks in sets:
            copies = [k.model_copy() for k in ks]
            assert view.positions(ks) is not None and (not ks or view.positions(copies) is None)
            mine, theirs = view.evidence(ks, counter_fields=FIELDS), view.evidence(copies, counter_fields=FIELDS)
            assert mine == theirs
            assert view.confidence_of(ks) is view.confidence_of(copies)
        whole = view.evidence(view.kernels)
        assert whole.duration_ns == view.total_ns and len(whole.kernel_names) == 5
        assert sum(whole.tiers.values()) == sum(whole.confidence.values()) == len(view.kernels)
        tiers_seen.add(len(whole.tiers))
    assert max(tiers_seen) == 3  # the recorded step graph's kernels come from three tiers


def test_evidence_names_the_heaviest_kernels_ties_in_first_seen_order() -> None:
    # Counter.most_common's order: largest summed time first, equal sums in the order first seen
    import numpy as np

    from profiler_core.analysis.profile_view import _counts_first_seen, _heaviest

    codes = np.array([3, 1, 2, 1, 3, 0, 2])
    weights = np.array([5, 2, 4, 3, 0, 9, 1])
    assert _heaviest(codes, weights, 3) == [0, 3, 1]  # 9, then three at 5 each, first seen: 3, 1, 2
    assert _heaviest(codes, weights, 10) == [0, 3, 1, 2]
    by_code: Counter[int] = Counter()
    for c, w in zip(codes.tolist(), weights.tolist(), strict=True):
        by_code[c] += w
    assert _heaviest(codes, weights, 3) == [c for c, _ in by_code.most_common(3)]
    assert _counts_first_seen(codes) == [(3, 2), (1, 2), (2, 2), (0, 1)] == list(Counter(codes.tolist()).items())
    assert _heaviest(codes[:0], weights[:0], 5) == [] and _counts_first_seen(codes[:0]) == []


def _ops_in_order_one_by_one(view: ProfileView) -> list:
    """Operators by first kernel start, a kernel-less one at the start of the operator listed before it."""
    keyed, last = [], -1
    for index, op in enumerate(view.operators):
        starts = [view.kernels_by_id[i].start_ns for i in op.kernel_ids if i in view.kernels_by_id]
        last = min(starts) if starts else last
        keyed.append((last, index, op))
    return [op for _, _, op in sorted(keyed, key=lambda t: (t[0], t[1]))]


def _thinned(profile, rng: random.Random):
    """``profile`` with a third of its kernels gone and its operators shuffled: operators whose kernels
    are partly or wholly absent, listed out of launch order."""
    kernels = [k for k in profile.kernels if rng.random() > 0.33]
    ops = list(profile.operators)
    rng.shuffle(ops)
    return profile.model_copy(update={"kernels": kernels, "operators": ops})


def test_operators_kernels_order_and_work_classes_all_at_once_are_what_one_by_one_gives() -> None:
    rng = random.Random(3)
    for base in (pair_profile("base"), joinable_profile()):
        for profile in (base, _thinned(base, rng)):
            view, fresh = ProfileView(profile), ProfileView(profile)
            assert [op.key for op in view.ops_in_order] == [op.key for op in _ops_in_order_one_by_one(fresh)]
            empty = 0
            for op in view.operators:
                ks = sorted((fresh.kernels_by_id[i] for i in op.kernel_ids if i in fresh.kernels_by_id),
                            key=lambda k: k.start_ns)
                assert [k.id for k in view.kernels_of(op)] == [k.id for k in ks], op.key
                assert all(a is view.kernels_by_id[a.id] for a in view.kernels_of(op))
                empty += not ks
            # the first work_class works out every operator's at once; the fresh view's one at a time
            classes = [view.work_class(op) for op in view.operators]
            assert classes == [fresh._work_class_of(op) for op in fresh.operators]
            assert len(view._work_class) == len({op.key for op in view.operators})
            if profile is not base:
                assert empty > 0  # some operator lost all its kernels
            assert len(set(classes)) > 2


def test_an_operator_not_the_views_gets_its_work_class_on_its_own() -> None:
    profile = pair_profile("base")
    view = ProfileView(profile)
    op = next(op for op in view.operators if op.kernel_ids)
    copy = op.model_copy()  # equal, but not the view's model
    assert view.work_class(copy) == ProfileView(profile)._work_class_of(op)
    assert list(view._work_class) == [op.key]  # only its own: not every operator's


def _kernels_of_ops_one_by_one(view: ProfileView, ops: list) -> list:
    """Every kernel of ``ops`` once (where first listed), in timeline order."""
    seen: dict[int, object] = {}
    for op in ops:
        for k in sorted((view.kernels_by_id[i] for i in op.kernel_ids if i in view.kernels_by_id),
                        key=lambda k: k.start_ns):
            seen.setdefault(k.id, k)
    return sorted(seen.values(), key=lambda k: k.start_ns)  # type: ignore[attr-defined]


def test_sets_of_operators_kernels_and_counters_by_position_are_what_the_models_give() -> None:
    from profiler_core.analysis.profile_view import kernel_counters_many

    rng = random.Random(5)
    for base in (pair_profile("base"), joinable_profile()):
        # coarse: start times on a 50 us grid, so kernels of different operators start together
        coarse = base.model_copy(update={"kernels": [k.model_copy(update={"start_ns": k.start_ns // 50_000 * 50_000})
                                                     for k in base.kernels]})
        for profile in (base, _thinned(base, rng), coarse):
            view = ProfileView(profile)
            ops = list(view.operators)
            # sets of one, of neighbours sharing kernels' start times, of repeats and of nothing
            sets = [[op] for op in ops[:40]] + [rng.sample(ops, rng.randint(2, 6)) for _ in range(60)]
            sets += [[ops[3], ops[3], ops[7]], [], ops, [ops[1]]]
            # one operator a set (each set's kernels in rising start already), with a repeat, out of order
            one_each = [[op] for op in ops]
            for listed in (one_each, [*one_each, [ops[3], ops[3]]], [*one_each, [ops[9], ops[2]]]):
                at, n = view.kernel_positions_of_ops(listed)  # type: ignore[misc]
                bounds = [0, *n.cumsum().tolist()]
                cuts = zip(bounds[:-1], bounds[1:], strict=True)
                got = [[view.kernels[p].id for p in at[lo:hi].tolist()] for lo, hi in cuts]
                assert got == [[k.id for k in _kernels_of_ops_one_by_one(view, s)] for s in listed]
            found = view.kernel_positions_of_ops(sets)
            assert found is not None
            positions, sizes = found
            assert sizes.sum() == len(positions) and len(sizes) == len(sets)
            bounds = [0, *sizes.cumsum().tolist()]
            expected = [_kernels_of_ops_one_by_one(view, s) for s in sets]
            for i, ks in enumerate(expected):
                got = [view.kernels[p] for p in positions[bounds[i]:bounds[i + 1]].tolist()]
                assert [k.id for k in got] == [k.id for k in ks], i
                assert [k.id for k in view.kernels_of_ops(sets[i])] == [k.id for k in ks], i
                alone = view.kernel_positions_of_ops([sets[i]])  # one set (repeats, ties of start)
                assert alone is not None and [view.kernels[p].id for p in alone[0].tolist()] == [k.id for k in ks], i
                assert alone[1].tolist() == [len(ks)]
            each = view.counters_of_positions(positions, sizes)
            assert each == kernel_counters_many(expected, table=view.counter_rows)
            # the distinct aggregates, numbered: the same dicts, to the bit (0.0 and -0.0 apart)
            distinct, codes = view.distinct_counters_of_positions(positions, sizes)
            assert len(codes) == len(sets) and codes.max() < len(distinct)
            assert [repr(distinct[c]) for c in codes.tolist()] == [repr(d) for d in each]
            assert len(distinct) == len({repr(d) for d in each}) < len(sets)
            assert any(len(ks) > 1 for ks in expected) and any(not ks for ks in expected)
            assert view.kernel_positions_of_ops([[ops[0].model_copy()]]) is None  # not the view's own
            fields = ["achieved_occupancy_pct", "dram_throughput_pct", "tensor_core_active_pct"]
            assert view.counters_of_op_sets(sets, fields) == view.counters_of_many(expected, fields)
            alien = [*sets[:5], [ops[0].model_copy()]]  # one set not the view's own: read from the models
            assert view.counters_of_op_sets(alien, fields) == view.counters_of_many(
                [_kernels_of_ops_one_by_one(view, s) for s in alien], fields)


def _relisted(profile, rng: random.Random):
    """``profile`` with kernels listed by two operators (the later one owns them), kernels no operator
    lists (their attribution's operator, or none, decides) and an attribution naming no operator."""
    ops = list(profile.operators)
    with_kernels = [g for g, op in enumerate(ops) if op.kernel_ids]
    for g in rng.sample(with_kernels, 6):  # a kernel of g listed again by a later operator
        h = rng.randrange(g, len(ops))
        ops[h] = ops[h].model_copy(update={"kernel_ids": [*ops[h].kernel_ids, ops[g].kernel_ids[0]]})
    for g in rng.sample(with_kernels, 6):  # the first kernel of g listed by no operator
        ops[g] = ops[g].model_copy(update={"kernel_ids": ops[g].kernel_ids[1:]})
    kernels = list(profile.kernels)
    for p in rng.sample(range(len(kernels)), 4):
        k = kernels[p]
        kernels[p] = k.model_copy(update={"attribution": k.attribution.model_copy(update={"operator_key": "nope#0"})})
    return profile.model_copy(update={"kernels": kernels, "operators": ops})


def _check_digest_shares(view: ProfileView) -> None:
    """The report's time by class and by tier, and its top operators, as the models give them one by one."""
    from collections import defaultdict

    from profiler_core.report.digest import coverage_by_tier, time_by_class, top_operators
    from profiler_core.schema import Tier

    by_class: dict = defaultdict(int)
    by_tier: dict = defaultdict(int)
    for k in view.kernels:
        by_class[view.kernel_class(k)] += k.duration_ns
        by_tier[Tier.UNATTRIBUTED.value if view.is_unattributed(k) else k.attribution.tier.value] += k.duration_ns
    shares = sorted(((c.value, ns) for c, ns in by_class.items()), key=lambda s: -s[1])
    assert [(s.label, s.duration_ns) for s in time_by_class(view)] == shares and len(shares) > 2
    tiers = [(t.value, by_tier[t.value]) for t in Tier if by_tier.get(t.value)]
    assert [(s.label, s.duration_ns) for s in coverage_by_tier(view)] == tiers
    top = sorted(view.operators, key=lambda op: -view.op_duration_ns(op))[:10]
    assert [line.key for line in top_operators(view, 10)] == [op.key for op in top]


def test_every_kernels_class_at_once_is_what_kernel_class_gives() -> None:
    from profiler_core.schema import OperatorClass

    rng = random.Random(11)
    every = list(OperatorClass)
    for base in (pair_profile("base"), pair_profile("opt"), joinable_profile()):
        relisted = _relisted(base, rng)
        for profile in (base, _thinned(base, rng), relisted):
            view = ProfileView(profile)
            got = [every[c] for c in view.kernel_class_codes.tolist()]
            expected = [view.kernel_class(k) for k in view.kernels]
            assert got == expected
            owners = [view.operators[g] if g >= 0 else None for g in view.kernel_owner_rows.tolist()]
            assert all(a is b for a, b in zip(owners, [view.kernel_operator.get(k.id) for k in view.kernels],
                                              strict=True))
            assert view.unattributed_mask.tolist() == [view.is_unattributed(k) for k in view.kernels]
            assert view.op_durations.tolist() == [view.op_duration_ns(op) for op in view.operators]
            _check_digest_shares(view)
            if profile is relisted:  # kernels no operator lists, owned by their attribution's operator
                listed = {i for op in view.operators for i in op.kernel_ids}
                assert any(o is not None and k.id not in listed for k, o in zip(view.kernels, owners, strict=True))
            assert len(set(expected)) > 2


def _uncounted(profile, rng: random.Random):
    """``profile`` with half its kernels' counters gone (operators whose kernels carry none read their
    stored metrics) and an operator repeating another's key with other kernels."""
    kernels = [k.model_copy(update={"counters": {}}) if rng.random() < 0.5 else k for k in profile.kernels]
    ops = list(profile.operators)
    with_kernels = [op for op in ops if len(op.kernel_ids) > 1]
    ops.append(with_kernels[0].model_copy(update={"kernel_ids": with_kernels[1].kernel_ids}))
    return profile.model_copy(update={"kernels": kernels, "operators": ops})


def test_every_operators_work_class_counter_and_kernel_count_at_once_are_what_one_by_one_gives() -> None:
    import math

    import numpy as np

    from profiler_core.schema import OperatorClass

    rng = random.Random(5)
    every = list(OperatorClass)
    for base in (pair_profile("base"), pair_profile("opt"), joinable_profile()):
        for kind, profile in (("base", base), ("thinned", _thinned(base, rng)), ("uncounted", _uncounted(base, rng))):
            view, fresh = ProfileView(profile), ProfileView(profile)
            # some operators' counter dicts worked out before the arrays are asked for
            for op in rng.sample(view.operators, 5):
                view.op_counters(op)
            assert [every[c] for c in view.work_class_codes.tolist()] == [fresh.work_class(op)
                                                                           for op in fresh.operators]
            assert view.op_kernel_counts.tolist() == [len(fresh.kernels_of(op)) for op in fresh.operators]
            assert all(view.ops_in_order[i] is view.operators[g] for i, g in enumerate(view.op_order.tolist()))
            for field in (*FIELDS, "not_a_counter"):
                got = view.op_counter_values(field).tolist()
                expected = [fresh.op_counter(op, field) for op in fresh.operators]
                assert [None if math.isnan(v) else v for v in got] == expected, field
            assert not np.isnan(view.op_counter_values("tensor_core_active_pct")).all()
            if kind == "uncounted":  # operators none of whose kernels carry counters read their stored metrics
                assert any(op.key not in view._op_aggregate.group for op in view.operators)


def test_a_findings_kernels_read_off_its_operators_give_what_their_models_give() -> None:
    from profiler_core.analysis.findings import FindingKind
    from profiler_core.analysis.rules import RuleContext
    from profiler_core.analysis.thresholds import DEFAULT_THRESHOLDS

    def finding(view: ProfileView, ops: list, kernels: list | None = None):  # type: ignore[no-untyped-def]
        return RuleContext(view=view, thresholds=DEFAULT_THRESHOLDS).finding(
            "tensor_core_idle", title="t", kind=FindingKind.NOTE, symptom="s", bottleneck="b", ops=ops,
            kernels=kernels, counter_fields=FIELDS)

    checked = 0
    for profile in (joinable_profile(), pair_profile("base"), pair_profile("opt")):
        view = ProfileView(profile)
        ops = [op for op in view.ops_in_order if view.kernels_of(op)]
        for chosen in (ops[:3], ops[:20], ops[len(ops) // 2:], ops[::-1], [*ops[:20], ops[0].model_copy()]):
            got = finding(view, chosen)
            # the same kernels as copies, not the view's models: read one by one off the models
            copies = [k.model_copy() for k in ProfileView(profile).kernels_of_ops(chosen)]
            expected = finding(ProfileView(profile), chosen, copies)
            assert got.evidence == expected.evidence and got.confidence == expected.confidence
            assert got.evidence.kernel_count == len(copies) > 0
            checked += len(chosen) >= 16
    assert checked >= 4


def _launch_gaps_one_by_one(kernels: list, max_gap_ns: int) -> int:
    """Each stream's kernels by start (ties in list order): the gaps from the latest end so far."""
    by_stream: dict = {}
    for k in kernels:
        by_stream.setdefault((k.device, k.stream), []).append(k)
    total = 0
    for ks in by_stream.values():
        ks.sort(key=lambda k: k.start_ns)
        end = ks[0].end_ns
        for k in ks[1:]:
            gap = k.start_ns - end
            if 0 < gap <= max_gap_ns:
                total += gap
            end = max(end, k.end_ns)
    return total


def _restreamed(profile, rng: random.Random):
    """``profile`` with its kernels spread over two devices (stream 7 on both, 13 on one), some shifted
    into their neighbours and some lasting past the next ones."""
    kernels = []
    for k in profile.kernels:
        shift = rng.choice([0, 0, -k.duration_ns // 2, 3000])
        longer = rng.choice([0, 0, 0, 0, 40_000])
        device = rng.choice([0, 1])
        kernels.append(k.model_copy(update={"stream": 7 if device == 0 else rng.choice([7, 13]), "device": device,
                                            "start_ns": k.start_ns + shift, "end_ns": k.end_ns + shift + longer,
                                            "duration_ns": k.duration_ns + longer}))
    return profile.model_copy(update={"kernels": kernels})


def test_launch_gaps_and_kernel_columns_read_at_once_are_what_the_models_give() -> None:
    import numpy as np

    rng = random.Random(9)
    for base in (pair_profile("base"), pair_profile("opt"), joinable_profile()):
        for profile in (base, _thinned(base, rng), _restreamed(base, rng)):
            view = ProfileView(profile)
            cols = view.kernel_columns
            assert cols.is_kernel.tolist() == [k.kind == "kernel" for k in view.kernels]
            for pattern in (re.compile(r"gemm|nvjet", re.I), re.compile(r"^triton_"), re.compile("nothing")):
                matched = view.name_matches(pattern)[view.kernel_name_codes].tolist()
                assert matched == [pattern.search(k.name) is not None for k in view.kernels]
                assert any(matched) or pattern.pattern == "nothing"
            assert cols.in_graph.tolist() == [k.graph_id is not None for k in view.kernels]
            kernels = np.flatnonzero(cols.is_kernel)
            for max_gap in (0, 2_000, 10_000, 10**12):
                some = kernels[::2]
                assert view.launch_gaps_ns(some, max_gap) == _launch_gaps_one_by_one(
                    [view.kernels[p] for p in some.tolist()], max_gap)
                expected = _launch_gaps_one_by_one([view.kernels[p] for p in kernels.tolist()], max_gap)
                assert view.launch_gaps_ns(kernels, max_gap) == expected
            assert expected > 0


def test_work_classes_at_once_decide_heavy_names_epilogues_and_ties_as_one_by_one() -> None:
    from profiler_core.schema import OperatorClass
    from tests.analysis.profile_builder import ProfileBuilder, k

    gemm, attention = "ampere_sgemm_128x64_nn", "flash_fwd_kernel<Flash_fwd_kernel_traits>"
    pointwise, cast = "triton_poi_fused_add_0", "void at::native::unrolled_elementwise_kernel<copy>"
    b = ProfileBuilder()
    b.op("aten::addmm", k(pointwise, 5))  # a GEMM operator whose kernel is its bias epilogue
    b.op("aten::addmm", k(pointwise, 3), k(cast, 3))  # two lighter classes tied on time: the first named
    b.op("aten::addmm", k(cast, 3), k(pointwise, 3))
    b.op("aten::addmm", k(pointwise, 2), k(cast, 4))  # the one of most time
    b.op("aten::mm", k(attention, 4), k(gemm, 9))  # two heavy names: attention comes first in the order
    b.op("aten::add", k(gemm, 4))  # a light operator running a GEMM kernel works as GEMM
    b.op("aten::addmm", k("mystery_kernel", 4))  # only a name no class claims: as classed
    b.op("aten::relu", k(pointwise, 4))
    view, fresh = ProfileView(b.build()), ProfileView(b.build())
    got = [view.work_class(op) for op in view.operators]
    assert got == [fresh._work_class_of(op) for op in fresh.operators]
    e, c = OperatorClass.ELEMENTWISE, OperatorClass.CAST_COPY
    assert [fresh.kernel_name_class(kern) for kern in fresh.kernels_of(fresh.operators[1])] == [e, c]
    assert got == [e, e, c, c, OperatorClass.ATTENTION, OperatorClass.GEMM, OperatorClass.GEMM, e]


def test_work_class_codes_keep_a_class_worked_out_before_every_operators() -> None:
    from profiler_core.schema import OperatorClass

    every = list(OperatorClass)
    view, fresh = ProfileView(pair_profile("base")), ProfileView(pair_profile("base"))
    op = next(op for op in view.operators if fresh.op_class(op) is OperatorClass.GEMM and fresh.kernels_of(op))
    # a model of the operator that is not the view's own, worked out first: its class is remembered by key
    alien = op.model_copy(update={"op_class": OperatorClass.REDUCTION, "kernel_ids": []})
    assert view.work_class(alien) is OperatorClass.REDUCTION
    codes = [every[c] for c in view.work_class_codes.tolist()]
    assert codes == [view.work_class(o) for o in view.operators]
    assert codes[view.operators.index(op)] is OperatorClass.REDUCTION
    assert codes.count(OperatorClass.GEMM) > 0


def test_attention_calls_read_at_once_leave_out_attention_without_kernels() -> None:
    from profiler_core.analysis.decode_loop import attention_calls
    from tests.analysis.profile_builder import ProfileBuilder, k

    flash = "flash_fwd_kernel<Flash_fwd_kernel_traits>"
    b = ProfileBuilder()
    q, kv = [8, 8, 1, 64], [8, 8, 65, 64]
    b.op("aten::_scaled_dot_product_flash_attention", k(flash, 4), shapes=[q, kv, kv])
    b.op("aten::_scaled_dot_product_flash_attention", shapes=[q, kv, kv])  # no kernel of its own
    b.op("aten::_scaled_dot_product_flash_attention", k(flash, 4), shapes=[q, kv, kv])
    view = ProfileView(b.build())
    at_once = attention_calls(view, view.ops_in_order)
    assert at_once == attention_calls(view, list(view.ops_in_order))
    assert [c.op.key for c in at_once] == ["aten::_scaled_dot_product_flash_attention#0",
                                           "aten::_scaled_dot_product_flash_attention#2"]

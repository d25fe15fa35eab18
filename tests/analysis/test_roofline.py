"""The per-operator roofline on the shipped H200 GPT-2 capture (FP32, B=4 T=128 d=768, 12 layers)."""

from __future__ import annotations

import json

import pytest

from profiler_core.analysis.roofline import roofline
from profiler_core.attribution import attribute_run
from profiler_core.metrics.catalog import FLOP_FIELDS
from profiler_core.schema import Profile
from tests.conftest import REPO

GPT2 = REPO / "examples" / "captures" / "h200" / "gpt2" / "baseline"
B, T, D, V, LAYERS = 4, 128, 768, 50257, 12


@pytest.fixture(scope="module")
def gpt2() -> Profile:
    return attribute_run(GPT2)


def test_gemm_flops_match_the_hand_computed_count_for_gpt2(gpt2: Profile) -> None:
    rows = roofline(gpt2).operators
    gemm = [r for r in rows if r.op_class == "gemm" and r.flops]
    m = B * T
    per_layer = 4 * 2 * m * D * D + 2 * 2 * m * D * 4 * D + 2 * 2 * (B * 12) * T * T * (D // 12)
    per_iteration = LAYERS * per_layer + 2 * m * D * V  # blocks + tied LM head
    assert sum(r.flops for r in gemm) == pytest.approx(2 * per_iteration)  # two measured iterations
    q_proj = next(r for r in gemm if r.name == "aten::mm")
    assert q_proj.flops == 2 * m * D * D and q_proj.flop_source == "modelled"
    assert q_proj.flop_formula == "2*M*N*K, M=512 N=768 K=768"


def test_fp32_gemms_sit_under_the_cuda_core_roof_and_say_how_far(gpt2: Profile) -> None:
    r = roofline(gpt2)
    assert r.chip is not None and r.chip.key == "h200_sxm"
    mm = [o for o in r.operators if o.name == "aten::mm"]
    assert all(o.roof == "fp32" and o.bound == "compute" for o in mm)  # SIMT SGEMM: FFMA, no tensor cores
    for o in mm:
        seconds = o.duration_ns * 1e-9
        assert o.achieved_flops_per_s == pytest.approx(o.flops / seconds)
        assert o.roofline_time_ns == pytest.approx(o.flops / 67e12 * 1e9)  # published FP32 peak
        assert o.fraction_of_roofline == pytest.approx(o.roofline_time_ns / o.duration_ns)
        assert o.headroom_ns == pytest.approx(o.duration_ns - o.roofline_time_ns)
        assert o.arithmetic_intensity == pytest.approx(o.flops / o.dram_bytes)
        assert 0.05 < o.fraction_of_roofline < 1
    # Inductor's generated kernels carry their own arguments as shapes: no FLOPs are modelled for them
    softmax = next(o for o in r.operators if o.name == "aten::_softmax")
    assert softmax.flops is None and softmax.bound == "memory" and softmax.dram_bytes


def test_classes_sum_their_operators(gpt2: Profile) -> None:
    r = roofline(gpt2)
    gemm = next(c for c in r.classes if c.op_class == "gemm")
    members = [o for o in r.operators if o.op_class == "gemm"]
    assert gemm.operators == len(members) and gemm.duration_ns == sum(o.duration_ns for o in members)
    assert gemm.arithmetic_intensity == pytest.approx(gemm.flops / gemm.dram_bytes)
    assert r.classes[0].op_class == "gemm"  # largest time first


def test_measured_roofs_are_tighter_on_the_h200(gpt2: Profile) -> None:
    published = roofline(gpt2).by_key()
    measured = roofline(gpt2, measured_roofs=True).by_key()
    softmax = next(k for k in published if k.startswith("aten::_softmax"))
    # memory-bound: 4.3 TB/s measured against 4.8 published -> a longer floor, less headroom
    assert measured[softmax].roofline_time_ns == pytest.approx(published[softmax].roofline_time_ns * 4.8 / 4.3)


def test_the_shapes_count_wins_and_a_disagreement_is_flagged(gpt2: Profile) -> None:
    # the shipped capture predates the FLOP counters: give one GEMM the counts its FFMA SGEMM
    # would report (M*N*K FMAs), then twice that: the shapes' count (the useful work) is used
    # either way, the counters give the roof, and the disagreement is flagged with both figures
    profile = gpt2.model_copy(deep=True)
    op = next(o for o in profile.operators if o.name == "aten::mm")
    zeros = dict.fromkeys(FLOP_FIELDS, 0.0)
    op.metrics.update(zeros, inst_ffma=512.0 * 768 * 768)
    row = roofline(profile).by_key()[op.key]
    assert row.flop_source == "modelled" and row.flops == row.flops_modelled == row.flops_measured
    assert row.disagreement is None and row.flops_by_roof == {"fp32": row.flops}
    op.metrics.update(inst_ffma=2 * 512.0 * 768 * 768)
    r = roofline(profile)
    row = r.by_key()[op.key]
    assert row.flops == row.flops_modelled == row.flops_measured / 2 and row.flops_by_roof == {"fp32": row.flops}
    assert row.disagreement == pytest.approx(1.0) and any("the counters read" in n for n in row.notes)
    assert any("differ from the shape model" in w for w in r.warnings)


def test_useful_flops_on_real_h200_training_steps() -> None:
    # figures from the workloads' own configurations, not from the code under test
    captures = REPO / "examples" / "captures" / "h200"
    # GPT-2 (B=8, T=256, 12 heads of 64), FP32 memory-efficient attention: the counters read 3x the
    # useful work (3xTF32 emulation); the roofline uses the useful work
    attention = 2.0 * 8 * 12 * 256 * 256 * (64 + 64)
    rows = [o for o in roofline(attribute_run(captures / "hf_gpt2_train" / "baseline")).operators
            if o.name == "aten::_efficient_attention_forward"]
    assert rows and all(o.flops == attention and o.flop_source == "modelled" for o in rows)
    assert all(o.flops_measured / attention == pytest.approx(3.0, rel=0.05) for o in rows)
    assert all(any("3xTF32" in n for n in o.notes) for o in rows)
    assert all(o.achieved_flops_per_s == pytest.approx(attention / (o.duration_ns * 1e-9)) for o in rows)
    # the same step in bf16: cuDNN attention is counted (it had no FLOPs before) on the fp16/bf16 roof
    cudnn = [o for o in roofline(attribute_run(captures / "hf_gpt2_train_step_graph" / "bf16_trial")).operators
             if o.name == "aten::_cudnn_attention_forward"]
    assert cudnn and all(o.flops == attention and o.fraction_of_roofline for o in cudnn)
    # BERT (B=16, T=128, hidden 512, FFN 2048) in bf16: the down projection's tensor counters read a
    # quarter of 2*M*N*K; the roofline uses 2*M*N*K, both figures in the note
    down = 2.0 * (16 * 128) * 512 * 2048
    rows = [o for o in roofline(attribute_run(captures / "hf_bert_train" / "optimized")).operators
            if o.flops_modelled == down and o.disagreement is not None]
    assert rows and all(o.flops == down and o.flops_measured == pytest.approx(down / 4, rel=0.05) for o in rows)
    assert all(o.roof == "bf16_tensor" and any("the counters read" in n for n in o.notes) for o in rows)


def test_diagnose_caps_the_bf16_bound_by_the_bf16_roofline(gpt2: Profile) -> None:
    from profiler_core.analysis import diagnose

    plain = diagnose(gpt2, roofline=False).by_rule("tensor_core_idle")[0]
    capped = diagnose(gpt2).by_rule("tensor_core_idle")[0]  # the roofline is part of every diagnosis
    assert capped.operators == plain.operators
    assert 0 < capped.gain_bound_ns < plain.gain_bound_ns  # a GEMM in bf16 still takes its roofline time
    assert any("bound tightened by the bf16_tensor roofline" in fact for fact in capped.evidence.facts)


def test_diagnose_flags_operators_far_below_both_roofs() -> None:
    from profiler_core.analysis import diagnose

    optimized = attribute_run(REPO / "examples" / "captures" / "h200" / "gpt2" / "optimized")
    report = diagnose(optimized)
    (f,) = report.by_rule("far_below_roofline")
    rows = roofline(optimized, measured_roofs=True).by_key()
    assert f.operators and all(rows[k].fraction_of_roofline < 0.1 for k in f.operators)
    assert f.gain_bound_ns == int(sum(rows[k].headroom_ns for k in f.operators))  # the headroom, not the time
    assert f.gain_bound_ns < f.evidence.duration_ns
    plain = diagnose(optimized, roofline=False)
    assert "far_below_roofline" in report.rules_run and "far_below_roofline" not in plain.rules_run
    assert not plain.by_rule("far_below_roofline")


GPT2_MEASURED = REPO / "examples" / "captures" / "h200" / "gpt2" / "roofline"


def test_measured_gemm_flops_on_the_h200_recapture_match_the_shapes() -> None:
    """The FLOP counters of a real H200 capture (FP32 SGEMM: FFMA) against 2*M*N*K per GEMM."""
    r = roofline(attribute_run(GPT2_MEASURED))
    gemm = [o for o in r.operators if o.op_class == "gemm" and o.flops_modelled]
    assert len(gemm) >= 2 * LAYERS * 6  # every projection and attention bmm of both iterations
    for o in gemm:
        assert o.flop_source == "modelled" and o.disagreement is None, o.key  # the counters agree
        assert o.flops_measured == pytest.approx(o.flops_modelled, rel=0.02), o.key
    m = B * T
    lm_head = [o for o in gemm if o.flops_modelled == 2 * m * D * V]
    assert len(lm_head) == 2 and all(o.roof == "fp32" for o in lm_head)


@pytest.mark.slow
def test_oprof_diagnose_no_roofline_flag_leaves_the_roofline_out() -> None:
    from typer.testing import CliRunner

    from profiler_core.cli import load_commands

    optimized = str(REPO / "examples" / "captures" / "h200" / "gpt2" / "optimized")
    runner = CliRunner()
    default = runner.invoke(load_commands(), ["diagnose", "--json", optimized])
    with_roof = runner.invoke(load_commands(), ["diagnose", "--json", "--roofline", optimized])
    plain = runner.invoke(load_commands(), ["diagnose", "--json", "--no-roofline", optimized])
    assert default.exit_code == 0 and with_roof.exit_code == 0 and plain.exit_code == 0, plain.output
    assert json.loads(default.stdout) == json.loads(with_roof.stdout)
    assert "far_below_roofline" in {f["rule_id"] for f in json.loads(default.stdout)["findings"]}
    assert "far_below_roofline" not in {f["rule_id"] for f in json.loads(plain.stdout)["findings"]}


def test_fp32_memory_efficient_attention_is_counted_and_roofed_as_tf32() -> None:
    """sdpa_attention/tf32: B=8, 512 tokens, 8 heads of 64, FP32 inputs; PyTorch's cutlassF_f32 kernel
    runs its MMAs on the tensor cores (tensor pipes 28% active), as TF32."""
    prof = attribute_run(REPO / "examples" / "captures" / "h200" / "sdpa_attention" / "tf32")
    rows = [r for r in roofline(prof, measured_roofs=True).operators if r.name == "aten::_efficient_attention_forward"]
    assert len(rows) == 2  # one per measured iteration
    for r in rows:
        assert r.flops == 4 * 8 * 8 * 512 * 512 * 64 and r.flop_source == "modelled"
        assert r.flops_by_roof == {"tf32_tensor": r.flops} and r.bound == "compute"
        assert r.roofline_time_ns == pytest.approx(r.flops / 494.5e12 * 1e9)  # the published TF32 peak


def test_a_rule_subset_runs_the_roofline_note_only_when_named() -> None:
    from profiler_core.analysis import diagnose
    from profiler_core.errors import ProfilerError

    optimized = attribute_run(REPO / "examples" / "captures" / "h200" / "gpt2" / "optimized")
    assert not diagnose(optimized, rules=["launch_bound"]).by_rule("far_below_roofline")
    named = diagnose(optimized, rules=["launch_bound", "far_below_roofline"])
    assert named.rules_run == ["launch_bound", "far_below_roofline"] and named.by_rule("far_below_roofline")
    with pytest.raises(ProfilerError, match="far_below_roofline needs the roofline"):
        diagnose(optimized, rules=["far_below_roofline"], roofline=False)


def test_rows_shared_by_repeated_calls_are_each_operators_own(gpt2: Profile) -> None:
    # roofline() works out each distinct call (name, shapes, kernels, counters) once: every row must
    # still be the one the operator alone gives, also for calls that differ in one input only
    from profiler_core.analysis.roofline import _operator, _work
    from profiler_core.attribution.names import is_generated_kernel_name
    from profiler_core.metrics.peaks import peaks_for_gpu

    ops = list(gpt2.operators)
    mm = [op for op in ops if op.name == "aten::mm" and op.metrics.get("dram_bytes_read")][:4]
    generated = next(op for op in ops if op.kernel_ids and all(
        is_generated_kernel_name(gpt2.kernels[i].name) for i in op.kernel_ids))
    assert mm
    variants = []
    for n, op in enumerate(mm):
        metrics = dict(op.metrics)
        variants += [
            op.model_copy(update={"key": f"{op.key}~shapes", "input_shapes": [[2 * d for d in s] for s in
                                                                              op.input_shapes]}),
            op.model_copy(update={"key": f"{op.key}~dram", "metrics": {**metrics, "dram_bytes_read":
                                                                       2 * metrics["dram_bytes_read"]}}),
            op.model_copy(update={"key": f"{op.key}~time", "duration_ns": op.duration_ns + 1000 * (n + 1)}),
            op.model_copy(update={"key": f"{op.key}~kernels", "kernel_ids": generated.kernel_ids}),
        ]
    peaks = peaks_for_gpu(gpt2.capture.gpu_name)
    for measured in (False, True):
        rows = roofline(gpt2, measured_roofs=measured, operators=ops + variants).operators
        alone = [_operator(op, _work(op, [gpt2.kernels[i].name for i in op.kernel_ids if i < len(gpt2.kernels)],
                                     peaks, measured))
                 for op in ops + variants if op.duration_ns > 0]
        assert rows == alone
        by_key = {r.key: r for r in rows}
        for r in rows[-len(variants):]:
            original = by_key[r.key.rsplit("~", 1)[0]]
            assert (r.flops, r.dram_bytes, r.fraction_of_roofline, r.flop_formula) != \
                   (original.flops, original.dram_bytes, original.fraction_of_roofline, original.flop_formula)
        assert len({(r.name, r.flops, r.dram_bytes) for r in rows}) < len(rows) / 2  # calls repeat: rows shared
        assert len({id(r.flops_by_roof) for r in rows}) == len(rows)  # each row's split its own dict


def test_rows_built_without_the_dataclass_init_are_what_it_builds(gpt2: Profile) -> None:
    # roofline() fills each row's slots directly: every field must be set (an unset slot raises on
    # reading), and the row must equal (and hash, print and replace as) the one OperatorRoofline(...) builds
    import dataclasses

    from profiler_core.analysis.roofline import OperatorRoofline

    names = [f.name for f in dataclasses.fields(OperatorRoofline)]
    rows = roofline(gpt2).operators
    assert rows and any(r.notes for r in rows)
    for r in rows:
        assert not hasattr(r, "__dict__")  # a row holds its fields in slots, no dict per operator
        built = OperatorRoofline(**{n: getattr(r, n) for n in names})
        assert r == built and repr(r) == repr(built)
        assert dataclasses.replace(r, duration_ns=r.duration_ns + 1) == dataclasses.replace(
            built, duration_ns=built.duration_ns + 1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            r.duration_ns = 0  # type: ignore[misc]


def test_exact_key_tells_apart_values_equal_only_as_numbers() -> None:
    from profiler_core.analysis.roofline import exact_key

    assert exact_key((1, None, 2.5)) == exact_key([1, None, 2.5])
    for a, b in ((1,), (1.0,)), ((0.0,), (-0.0,)), ((True,), (1,)), ((None, 0), (None, 0.0)):
        assert a == b and exact_key(a) != exact_key(b)


@pytest.mark.parametrize("gathered", [1, 32])
def test_a_columnar_profiles_calls_are_told_apart_on_its_columns_as_on_its_models(
        tmp_path, monkeypatch, gathered: int) -> None:  # type: ignore[no-untyped-def]
    # the shipped GPT-2 capture written columnar and read back: roofline() numbers each operator's
    # distinct call off the tables' columns; the rows must be those of the same operators as models
    # (``gathered``: the kernel-name sequences compared as a matrix up to this length, longer ones one
    # by one; at 1 both ways run)
    import copy

    import numpy as np

    from profiler_core.analysis import roofline as roofline_module
    from profiler_core.analysis.roofline import _READ_FIELDS, _call_codes, _shapes_key, exact_key
    from profiler_core.profile_io import read_profile, write_profile

    monkeypatch.setenv("OPROF_COLUMNAR_KERNELS", "0")
    monkeypatch.setattr(roofline_module, "_GATHERED_LENGTH", gathered)
    write_profile(tmp_path / "profile.json", attribute_run(GPT2))
    profile = read_profile(tmp_path / "profile.json")
    table = copy.copy(profile.operators)
    assert hasattr(table, "members") and hasattr(profile.kernels, "counter_values")
    # calls the capture does not have: one operator's DRAM bytes doubled, another's counter -0.0
    # where its twin reads 0.0
    table.metrics = table.metrics.copy()
    dram = table.metric_fields.index("dram_bytes_read")
    mm = [g for g in range(len(table)) if table.name[g] == "aten::mm"]
    table.metrics[mm[0], dram] *= 2
    read = [table.metric_fields.index(f) for f in _READ_FIELDS if f in table.metric_fields]
    g, c = next((g, c) for c in read for g in range(len(table)) if table.metrics[g, c] == 0)
    table.metrics[g, c] = -0.0
    kernels = list(profile.kernels)

    def keys_of(operators: list) -> list[tuple[object, ...]]:  # type: ignore[type-arg]
        shape_keys: dict[int, tuple[object, str]] = {}
        return [(op.name, _shapes_key(op.input_shapes, shape_keys),
                 tuple(kernels[i].name for i in op.kernel_ids),
                 exact_key(map(op.metrics.get, _READ_FIELDS))) for op in operators]

    # pairs of twin calls, one of each pair changed: other shapes, another kernel, another name
    twins: dict[tuple[object, ...], list[int]] = {}
    for g, key in enumerate(keys_of(list(copy.copy(table)))):  # a copy: table's models are built after
        twins.setdefault(key, []).append(g)
    (a, b), (c, d), (e, f), (h, i) = [group[:2] for key, group in twins.items() if len(group) > 1 and key[2]][:4]
    # and a pair of twins of several kernels each, the last kernel of one changed
    j, m = next(group[:2] for key, group in twins.items() if len(group) > 1 and len(key[2]) > 1
                and not {a, b, c, d, e, f, h, i} & set(group[:2]))
    table.name = copy.copy(table.name)
    table.name.codes = table.name.codes.copy()
    table.name.codes[f] = next(s for s in range(len(table.name.values)) if table.name.values[s] != table.name[e])
    # and twins missing a counter, one as NaN, one as a NaN of another bit pattern: still one call
    table.metrics[h, read[0]] = np.nan
    table.metrics[i, read[0]] = np.frombuffer(np.uint64(0x7FF8_0000_0000_0001).tobytes(), dtype=np.float64)[0]
    table.shapes = copy.copy(table.shapes)
    table.shapes.codes = table.shapes.codes.copy()
    table.shapes.codes[b] = next(s for s in range(len(table.shapes.values))
                                 if table.shapes.values[s] != table.shapes[a])
    table.members = table.members.copy()
    table.members[table.offsets[d]] = next(k for k in range(len(kernels))
                                           if kernels[k].name != kernels[table.members[table.offsets[c]]].name)
    table.members[table.offsets[m + 1] - 1] = next(
        k for k in range(len(kernels)) if kernels[k].name != kernels[table.members[table.offsets[j + 1] - 1]].name)
    # an operator without time has no row: the first of a call may be one (another then leads it), or
    # the only one of its call (renamed f: no row makes that call)
    table.duration_ns = table.duration_ns.copy()
    table.duration_ns[[a, f]] = 0
    tabled = profile.model_copy(update={"operators": table})
    models = tabled.model_copy(update={"operators": list(table), "kernels": kernels})
    codes = _call_codes(tabled, len(table))
    assert codes is not None and _call_codes(models, len(table)) is None
    # the same grouping as the models' exact keys give, each changed twin a call of its own
    keys = keys_of(models.operators)
    assert keys[a] != keys[b] and keys[c] != keys[d] and keys[e] != keys[f] and keys[h] == keys[i]
    assert keys[j] != keys[m] and keys[j][2][0] == keys[m][2][0]
    assert len(set(codes)) == len(set(keys)) < len(table)
    assert len(set(zip(codes.tolist(), keys, strict=True))) == len(set(keys))
    assert list(dict.fromkeys(codes.tolist())) == list(range(len(set(keys))))  # numbered by first appearance
    assert max(np.diff(table.offsets[:len(table) + 1]).tolist()) > 1  # sequences of more than one kernel
    for measured in (False, True):
        assert roofline(tabled, measured_roofs=measured) == roofline(models, measured_roofs=measured)

"""Rules for CNNs, eager models and training steps, on synthetic profiles and on a real model's op sequence.

The op sequence test runs transformers' ResNet on the CPU under torch.profiler and lays one
kernel per operator it launched, with kernel names and counters of the kinds an H200 shows
(cuDNN FP32 convolutions writing NCHW, layout conversions, BatchNorm kernels); the structure,
not the numbers, is the model's own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler_core.analysis import Transformation, diagnose
from profiler_core.schema import ExecutionContext, Profile
from tests.analysis.profile_builder import ProfileBuilder, k

CONV = "sm90_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x32_execute_kernel"
CONV_BF16 = "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_execute"
BN = "void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, true, 1>"
TO_NHWC = "void nchwToNhwcKernel<float, float, float, true, false, (cudnnKernelDataType_t)2>"
EW = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"
EAGER = ExecutionContext.EAGER


def _conv(tc: float = 12.8, name: str = CONV) -> object:
    return k(name, 80, tensor_core_active_pct=tc, sm_throughput_pct=40, dram_throughput_pct=30,
             achieved_occupancy_pct=20)


def resnet_like(*, conv: str = CONV, tc: float = 12.8, layout: bool = True, bn: bool = True) -> Profile:
    b = ProfileBuilder(compile_mode="eager")
    for _ in range(6):
        if layout:
            b.op("aten::copy_", k(TO_NHWC, 15, dram_throughput_pct=85), context=EAGER)
        b.op("aten::cudnn_convolution", _conv(tc, conv), context=EAGER)
        if bn:
            b.op("aten::cudnn_batch_norm", k(BN, 40, dram_throughput_pct=83, sm_throughput_pct=20), context=EAGER)
        b.op("aten::relu_", k(EW, 10, dram_throughput_pct=80), context=EAGER)
    return b.build()


def _rules(profile: Profile) -> dict[str, object]:
    return {f.rule_id: f for f in diagnose(profile).findings}


def test_a_resnet_like_profile_licenses_the_cnn_passes() -> None:
    found = _rules(resnet_like())
    assert found["conv_batchnorm"].transformation == Transformation.CONV_BN_FOLDING
    assert found["conv_batchnorm"].alternatives == [Transformation.FREEZING]
    assert len(found["conv_batchnorm"].operators) == 6
    assert found["layout_transposition"].transformation == Transformation.CHANNELS_LAST
    assert found["conv_tensor_core_low"].transformation == Transformation.BF16_PROMOTION
    assert found["conv_tensor_core_low"].alternatives == [Transformation.TF32]


@pytest.mark.parametrize(("kwargs", "silent"), [
    ({"bn": False}, "conv_batchnorm"),
    ({"layout": False, "conv": CONV_BF16, "tc": 70.0}, "layout_transposition"),
    ({"tc": 60.0}, "conv_tensor_core_low"),
    ({"conv": CONV_BF16, "tc": 10.0}, "conv_tensor_core_low"),
], ids=["no-batchnorm", "nhwc-no-transposes", "busy-tensor-cores", "already-bf16"])
def test_cnn_rules_stay_silent_without_their_symptom(kwargs: dict, silent: str) -> None:
    assert silent not in _rules(resnet_like(**kwargs))


def _eager_elementwise(n: int, compile_mode: str = "eager", us: float = 6.0) -> Profile:
    b = ProfileBuilder(compile_mode=compile_mode)
    for i in range(n):
        b.op("aten::mul" if i % 2 else "aten::add", k(EW, us, dram_throughput_pct=40, sm_throughput_pct=10),
             context=EAGER)
    return b.build()


def test_many_small_eager_kernels_license_compiling() -> None:
    found = _rules(_eager_elementwise(30))
    assert found["eager_small_kernels"].transformation == Transformation.INDUCTOR_COMPILE
    assert "eager_small_kernels" not in _rules(_eager_elementwise(10))
    assert "eager_small_kernels" not in _rules(_eager_elementwise(30, compile_mode="default"))
    assert "eager_small_kernels" not in _rules(_eager_elementwise(30, us=200.0))


def _training(optimizer_ops: int, name: str = "aten::mul_", measured: int = 2) -> Profile:
    b = ProfileBuilder(measured=measured)
    phases = {}
    for _ in range(measured):
        phases[b.op("aten::mm", k("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n", 300))] = "forward"
        phases[b.op("aten::mm", k("sm90_xmma_gemm_f32f32_f32f32_f32_nt_n", 500))] = "backward"
        for _ in range(optimizer_ops):
            phases[b.op(name, k(EW, 4))] = "optimizer"
    profile = b.build()
    for op in profile.operators:
        op.phase = phases[op.key]  # type: ignore[assignment]
    return profile


def test_many_small_optimizer_kernels_license_the_fused_optimizer() -> None:
    found = _rules(_training(40))
    assert found["optimizer_small_kernels"].transformation == Transformation.FUSED_OPTIMIZER
    assert found["optimizer_small_kernels"].alternatives == [Transformation.COMPILED_OPTIMIZER_STEP]
    assert "40 kernels of at most 20 us per optimizer step" in found["optimizer_small_kernels"].symptom
    assert "optimizer_small_kernels" not in _rules(_training(5))
    assert "optimizer_small_kernels" not in _rules(_training(40, name="aten::_fused_adamw_"))


def _short_kernels_by_phase(phases: tuple[str, ...]) -> Profile:
    b = ProfileBuilder(gap_us=5.0)
    keys = {}
    for i in range(30):
        keys[b.op(f"triton_poi_fused_{i}", k(f"triton_poi_fused_{i}", 2.0, achieved_occupancy_pct=30.0,
                                              sm_throughput_pct=5.0))] = phases[i % len(phases)]
    profile = b.build()
    for op in profile.operators:
        op.phase = keys[op.key]  # type: ignore[assignment]
    return profile


def test_launch_gaps_in_every_phase_license_graphing_the_whole_step() -> None:
    whole = _rules(_short_kernels_by_phase(("forward", "backward", "optimizer")))["launch_bound"]
    assert whole.transformation == Transformation.WHOLE_STEP_CUDA_GRAPHS
    assert whole.alternatives == [Transformation.CUDA_GRAPHS]
    assert any("forward, backward and the optimizer" in f for f in whole.evidence.facts)
    model_only = _rules(_short_kernels_by_phase(("forward", "backward")))["launch_bound"]
    assert model_only.transformation == Transformation.CUDA_GRAPHS and model_only.alternatives == []


def test_fp32_gemms_of_a_training_step_license_bf16_autocast_first() -> None:
    b = ProfileBuilder()
    keys = {}
    for phase in ("forward", "backward"):
        keys[b.op("aten::mm", k("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n", 300, tensor_core_active_pct=0.0,
                                sm_throughput_pct=60))] = phase
    profile = b.build()
    for op in profile.operators:
        op.phase = keys[op.key]  # type: ignore[assignment]
    found = _rules(profile)["tensor_core_idle"]
    assert found.transformation == Transformation.BF16_AUTOCAST
    assert found.alternatives == [Transformation.BF16_PROMOTION, Transformation.TF32]


def test_training_phases_are_reported_as_a_note() -> None:
    note = _rules(_training(40))["training_step_phases"]
    assert note.transformation is None and note.gain_bound_pct == 0
    assert "forward 0.60 ms" in note.symptom and "backward 1.00 ms" in note.symptom
    assert "optimizer 0.32 ms" in note.symptom
    assert "training_step_phases" not in _rules(resnet_like())  # inference: no phases


def _real_op_sequence() -> list[str]:
    transformers = pytest.importorskip("transformers")
    import torch
    from torch.profiler import ProfilerActivity, profile

    config = transformers.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], num_labels=5)
    model = transformers.ResNetForImageClassification(config).eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        model(x)
    top = []
    for ev in sorted(prof.events(), key=lambda e: e.time_range.start):
        if ev.name in ("aten::conv2d", "aten::batch_norm", "aten::relu", "aten::relu_", "aten::add", "aten::add_",
                       "aten::max_pool2d", "aten::adaptive_avg_pool2d", "aten::linear"):
            top.append(ev.name)
    return top


def test_findings_from_a_real_resnet_op_sequence_license_the_cnn_passes() -> None:
    ops = _real_op_sequence()
    assert ops.count("aten::conv2d") == ops.count("aten::batch_norm") >= 7
    b = ProfileBuilder(compile_mode="eager")
    for name in ops:
        if name == "aten::conv2d":
            b.op("aten::copy_", k(TO_NHWC, 15, dram_throughput_pct=85), context=EAGER)
            b.op(name, _conv(), context=EAGER)
        elif name == "aten::batch_norm":
            b.op(name, k(BN, 40, dram_throughput_pct=83, sm_throughput_pct=20), context=EAGER)
        else:
            b.op(name, k(EW, 12, dram_throughput_pct=70), context=EAGER)
    found = _rules(b.build())
    licensed = {f.transformation for f in found.values() if f.transformation is not None}
    assert {Transformation.CONV_BN_FOLDING, Transformation.CHANNELS_LAST, Transformation.BF16_PROMOTION} <= licensed
    assert len(found["conv_batchnorm"].operators) == ops.count("aten::batch_norm")


# (rule, profile builder, fires) for test_rules' check that every rule has both cases
CASES = [
    ("conv_batchnorm", resnet_like, True),
    ("conv_batchnorm", lambda: resnet_like(bn=False), False),
    ("layout_transposition", resnet_like, True),
    ("layout_transposition", lambda: resnet_like(layout=False, conv=CONV_BF16, tc=70.0), False),
    ("conv_tensor_core_low", resnet_like, True),
    ("conv_tensor_core_low", lambda: resnet_like(tc=60.0), False),
    ("eager_small_kernels", lambda: _eager_elementwise(30), True),
    ("eager_small_kernels", lambda: _eager_elementwise(10), False),
    ("optimizer_small_kernels", lambda: _training(40), True),
    ("optimizer_small_kernels", lambda: _training(5), False),
    ("training_step_phases", lambda: _training(5), True),
    ("training_step_phases", resnet_like, False),
]


@pytest.mark.parametrize(("rule_id", "build", "fires"), CASES, ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(CASES)])
def test_model_rule_fires_or_not(rule_id: str, build: object, fires: bool) -> None:
    report = diagnose(build(), rules=[rule_id])  # type: ignore[operator]
    assert bool(report.by_rule(rule_id)) is fires, [f.symptom for f in report.findings]


SHIPPED_RESNET18 = Path(__file__).parent.parent.parent / "examples" / "captures" / "h200" / "tv_resnet18" / "baseline"


def test_a_plain_compiled_resnet_licenses_bf16_channels_last_and_the_fold() -> None:
    # torchvision ResNet-18 compiled by Inductor: its convolutions already run NHWC inside the graph, so
    # no nchwToNhwc kernel shows; the layout work is cuDNN's convertTensor and Inductor's copies of each
    # convolution's operands into NHWC, which a channels_last model and input do not need
    from profiler_core.attribution import attribute_run

    profile = attribute_run(SHIPPED_RESNET18)
    found = {f.rule_id: f for f in diagnose(profile).findings}
    assert found["conv_tensor_core_low"].transformation == Transformation.BF16_PROMOTION
    assert found["conv_batchnorm"].transformation == Transformation.CONV_BN_FOLDING
    layout = found["layout_transposition"]
    assert layout.transformation == Transformation.CHANNELS_LAST
    names = layout.evidence.kernel_names
    assert any("convertTensor_kernel" in n for n in names)
    assert any(n.startswith("triton_poi_fused_convolution_") for n in names)
    assert not any("fused__native_batch_norm" in n for n in names)  # a fused conv epilogue is no layout copy
    assert layout.evidence.kernel_count == 22 and 5.0 < layout.evidence.share_pct < 6.0


@pytest.mark.parametrize(("name", "layout"), [
    ("triton_poi_fused_convolution_4", True),
    ("void cudnn::engines_precompiled::convertTensor_kernel<float, float, float, (cudnnKernelDataType_t)0>", True),
    ("triton_poi_fused__native_batch_norm_legit_no_training_convolution_relu_9", False),
    ("triton_poi_fused_convolution_relu_3", False),
])
def test_layout_kernel_names(name: str, layout: bool) -> None:
    from profiler_core.analysis.rules_models import _LAYOUT

    assert bool(_LAYOUT.search(name)) is layout

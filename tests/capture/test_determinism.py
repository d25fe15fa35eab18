"""The cross-phase determinism check, on the real H200 phases and on deliberately broken copies."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from profiler_core.attribution.names import kernel_base_name, mangled_base_name
from profiler_core.attribution.sources import attribute_files
from profiler_core.capture.determinism import (
    PhaseLaunches,
    check_configs_covered,
    check_phases,
    check_same_launches,
    kernel_name_normalizer,
    launches,
    load_phase_launches,
)
from profiler_core.errors import DeterminismError
from profiler_core.ingest import read_kineto, read_ncu, read_nsys
from profiler_core.records import CounterRow, TimelineKernel


@pytest.fixture(scope="module")
def real(joinable: Path) -> dict[str, list]:
    """The real H200 phases, as the ingest readers give them to the capture's check."""
    return {
        "kineto": list(read_kineto(joinable / "kineto.json").kernels),
        "nsys": list(read_nsys(joinable / "nsys.sqlite").kernels),
        "full": list(read_ncu(joinable / "ncu_full_raw.csv").rows),
        "per_config": list(read_ncu(joinable / "ncu_per_config_raw.csv").rows),
    }


def test_real_phases_agree(real: dict[str, list]) -> None:
    found = PhaseLaunches(
        kineto=launches(real["kineto"]), nsys=launches(real["nsys"]), ncu=launches(real["full"])
    )
    assert len(found.kineto) == 44
    assert check_phases(found, counter_mode="full") == ["nsys", "ncu"]


def test_real_per_config_rows_cover_every_configuration(real: dict[str, list]) -> None:
    kin = launches(real["kineto"])
    sampled = launches(real["per_config"])
    assert len(sampled) < len(kin)
    assert len({launch.config for launch in sampled}) == len({launch.config for launch in kin})
    assert check_phases(PhaseLaunches(kineto=kin, ncu=sampled), counter_mode="per-config") == ["ncu"]


def test_dedup_compares_ncu_with_the_first_iteration(real: dict[str, list]) -> None:
    first_iteration = real["full"][:22]
    found = PhaseLaunches(kineto=launches(real["kineto"]), ncu=launches(first_iteration))
    assert check_phases(found, counter_mode="full", kernels_per_iteration=22) == ["ncu"]
    with pytest.raises(DeterminismError, match="launched 44 kernels but the ncu report 22"):
        check_phases(found, counter_mode="full")


def test_changed_grid_is_named_with_its_index(real: dict[str, list]) -> None:
    nsys = list(real["nsys"])
    victim = sorted(nsys, key=lambda k: k.correlation_id)[7]
    nsys[nsys.index(victim)] = dataclasses.replace(victim, grid=(victim.grid[0] * 2, 1, 1))
    with pytest.raises(DeterminismError) as err:
        check_same_launches(
            launches(real["kineto"]),
            launches(nsys),
            reference_label="the Kineto trace",
            other_label="the nsys timeline",
        )
    message = str(err.value)
    assert "launch #7" in message and victim.name[:40] in message
    assert f"grid {victim.grid}" in message and f"grid {(victim.grid[0] * 2, 1, 1)}" in message


def test_missing_kernel_names_the_first_divergence_and_both_indexes(real: dict[str, list]) -> None:
    ncu = list(real["full"])
    dropped = ncu.pop(5)
    with pytest.raises(DeterminismError) as err:
        check_same_launches(
            launches(real["kineto"]),
            launches(ncu),
            reference_label="the Kineto trace",
            other_label="the ncu report",
        )
    message = str(err.value)
    assert "the ncu report diverges from the Kineto trace at launch #5" in message
    assert dropped.name[:40] in message
    # its next launch of the same kernel shows where it went (or that it is absent)
    assert "that launch is #" in message or "launches that kernel only" in message


def test_extra_trailing_launch_is_reported() -> None:
    k = TimelineKernel(
        name="triton_poi_fused_add_0",
        start_ns=0,
        end_ns=1,
        stream=7,
        device=0,
        grid=(4, 1, 1),
        block=(128, 1, 1),
    )
    extra = dataclasses.replace(k, name="triton_red_fused_sum_1", start_ns=2, end_ns=3)
    with pytest.raises(
        DeterminismError, match="'triton_red_fused_sum_1'.* is launch #1 in B and absent from A"
    ):
        check_same_launches(launches([k]), launches([k, extra]), reference_label="A", other_label="B")


def test_unsampled_configuration_is_an_error(real: dict[str, list]) -> None:
    kin = launches(real["kineto"])
    sampled = launches(real["per_config"])[1:]
    with pytest.raises(DeterminismError, match="measured no launch of"):
        check_configs_covered(
            kin, sampled, reference_label="the Kineto trace", sampled_label="the ncu report"
        )


def test_sampled_configuration_never_launched_is_an_error() -> None:
    kernel = TimelineKernel(
        name="k", start_ns=0, end_ns=1, stream=7, device=0, grid=(1, 1, 1), block=(32, 1, 1)
    )
    row = CounterRow(ncu_id=0, name="k", grid=(2, 1, 1), block=(32, 1, 1), stream=7, device=0, metrics={})
    with pytest.raises(DeterminismError, match="row #0 measured 'k' grid \\(2, 1, 1\\)"):
        check_configs_covered(launches([kernel]), launches([row]), reference_label="K", sampled_label="N")


def test_memcpy_and_order_by_correlation() -> None:
    a = TimelineKernel(name="a", start_ns=50, end_ns=60, stream=8, device=0, correlation_id=1)
    b = TimelineKernel(name="b", start_ns=10, end_ns=20, stream=7, device=0, correlation_id=2)
    copy = TimelineKernel(
        name="Memcpy HtoD", start_ns=0, end_ns=5, stream=7, device=0, kind="memcpy", correlation_id=0
    )
    assert [launch.name for launch in launches([b, copy, a])] == ["a", "b"]  # launch order, not GPU start


@pytest.mark.parametrize(
    ("left", "right"),
    [
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
            "void at::vectorized_elementwise_kernel<4, at::CUDAFunctor_add<float>, std::array<char*, 3ul>>",
        ),
        (
            "elemWiseRNNcell<float, float, float, (cudnnRNNMode_t)3, (cudnnRNNBiasMode_t)2>",
            "elemWiseRNNcell<float, float, float, 3, 2>",
        ),
        ("triton_poi_fused_addmm_relu_0", "triton_poi_fused_addmm_relu_0"),
    ],
    ids=["at-native-and-params", "enum-casts", "triton"],
)
def test_normaliser_matches_spellings_seen_on_real_exports(left: str, right: str) -> None:
    norm = kernel_name_normalizer()
    assert norm(left) == norm(right)


def test_normaliser_keeps_distinct_kernels_distinct() -> None:
    norm = kernel_name_normalizer()
    assert norm("triton_poi_fused_add_0") != norm("triton_poi_fused_add_1")


def test_run_directory_check_with_the_ingest_readers(joinable: Path, tmp_path: Path) -> None:
    for name, target in (
        ("kineto.json", "kineto.json"),
        ("nsys.sqlite", "timeline.sqlite"),
        ("ncu_full_raw.csv", "counters.csv"),
    ):
        (tmp_path / target).write_bytes((joinable / name).read_bytes())
    found = load_phase_launches(
        tmp_path, kineto="kineto.json", timeline="timeline.sqlite", counters_csv="counters.csv"
    )
    assert check_phases(found, counter_mode="full") == ["nsys", "ncu"]
    assert len(found.kineto) == len(found.nsys) == len(found.ncu) == 44


GROUPED_EXPERTS = Path(__file__).resolve().parents[1] / "data" / "h200_moe_grouped_experts"


def test_mangled_kineto_name_meets_the_name_ncu_demangled() -> None:
    """CUPTI left the CUTLASS grouped GEMM mangled in Kineto; ncu printed it demangled (real H200 phases).

    The capture of moe_grouped_experts' trial was refused as "phases ran differently compiled
    code" before: no spelling covered both, so the join fell back to exact keys.
    """
    found = load_phase_launches(GROUPED_EXPERTS, kineto="kineto.json.gz", timeline=None,
                                counters_csv="counters.csv")
    mangled = {x.raw_name for x in found.kineto if x.raw_name.startswith("_Z")}
    demangled = {x.raw_name for x in found.ncu if "cutlass::device_kernel<" in x.raw_name}
    assert mangled and demangled
    assert {kernel_base_name(n) for n in mangled} == {kernel_base_name(n) for n in demangled} == {"device_kernel"}
    assert check_phases(found, counter_mode="per-config") == ["ncu"]


def test_grouped_gemm_kernels_get_their_counters() -> None:
    profile = attribute_files(kineto=GROUPED_EXPERTS / "kineto.json.gz", ncu=GROUPED_EXPERTS / "counters.csv",
                              inductor_optional=True)
    grouped = [k for k in profile.kernels if k.name.startswith("_ZN7cutlass13device_kernel")]
    assert len(grouped) == 16  # 4 layers x 2 grouped GEMMs x 2 measured iterations
    assert all(k.counters.get("dram_bytes_read") is not None for k in grouped)
    assert {k.counter_source.value for k in grouped} == {"measured", "inherited"}


@pytest.mark.parametrize(
    ("mangled", "base"),
    [("_ZN12_GLOBAL__N_16kernelEv", "kernel"), ("_Z10add_kernelPfS_", "add_kernel"), ("_ZL3fooi", "foo"),
     ("_ZNSt3foo3barEv", "bar"), ("_Z", None), ("_ZN99abc", None), ("triton_poi_fused_0", None)],
)
def test_mangled_base_name(mangled: str, base: str | None) -> None:
    assert mangled_base_name(mangled) == base


GRAPHED_COPIES = Path(__file__).resolve().parents[1] / "data" / "h200_moe_graphed_copies"


def test_graph_copy_nodes_run_as_driver_kernels_are_copies() -> None:
    """A CUDA graph's copy nodes reach Kineto as kernels named memcpy32_post, which ncu never profiles.

    Read as kernels, the capture of the MoE's cuda_graphs trial was refused ("the ncu report
    measured no launch of 'memcpy32_post'"); read as copies, the phases agree.
    """
    from profiler_core.ingest import read_kineto

    kernels = read_kineto(GRAPHED_COPIES / "kineto.json.gz").kernels
    driver = [k for k in kernels if k.name == "memcpy32_post"]
    assert len(driver) == 24 and {k.kind for k in driver} == {"memcpy"}
    found = load_phase_launches(GRAPHED_COPIES, kineto="kineto.json.gz", timeline=None,
                                counters_csv="counters.csv")
    assert "memcpy32_post" not in {x.raw_name for x in found.kineto}
    assert len(found.kineto) == 392 - 24
    assert check_phases(found, counter_mode="per-config") == ["ncu"]


@pytest.mark.parametrize(
    ("name", "kind"),
    [("memcpy32_post", "memcpy"), ("memset32", "memset"), ("memset32_aligned1D", "memset"),
     ("void memset_kernel<float>(float*, int)", None), ("triton_poi_fused_memset_0", None),
     ("memcpyish", None)],
)
def test_driver_copy_kernel_names(name: str, kind: str | None) -> None:
    from profiler_core.ingest.driver_copies import driver_copy_kind

    assert driver_copy_kind(name) == kind

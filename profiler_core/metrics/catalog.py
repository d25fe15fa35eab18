"""The 20 counters every profile carries, with per-chip ncu names and aggregation rules.

Field names are the profile's own (stable across chips); ``ncu_name`` is the Ampere /
Hopper / datacenter-Blackwell spelling and ``ncu_name_gb20x`` the consumer-Blackwell
(sm_120) one where NVIDIA renamed it. Aggregation rules say how an operator's kernels
combine (see docs/metrics.md): rates are duration-weighted, additive counts summed,
per-launch constants take the maximum.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Aggregation(StrEnum):
    SUM = "sum"
    DURATION_WEIGHTED = "duration_weighted"
    INSTRUCTION_WEIGHTED = "instruction_weighted"
    ACTIVE_CYCLE_WEIGHTED = "active_cycle_weighted"
    MAX = "max"


@dataclass(frozen=True, slots=True)
class CounterSpec:
    field: str
    ncu_name: str
    unit: str
    aggregation: Aggregation
    description: str
    ncu_name_gb20x: str | None = None
    # (chip, name) pairs for counters NVIDIA spells differently per chip (tensor-op paths)
    ncu_names_by_chip: tuple[tuple[str, str], ...] = ()

    def ncu_name_for(self, chip: str | None) -> str:
        """The ncu metric name on ``chip`` (e.g. ``gh100``, ``gb202``)."""
        if chip:
            chip = chip.lower()
            for chip_name, name in self.ncu_names_by_chip:
                if chip == chip_name:
                    return name
            if chip.startswith("gb20") and self.ncu_name_gb20x:
                return self.ncu_name_gb20x
        return self.ncu_name

    @property
    def ncu_names(self) -> tuple[str, ...]:
        """Every spelling of this counter, on any chip."""
        names = [self.ncu_name, self.ncu_name_gb20x, *(name for _, name in self.ncu_names_by_chip)]
        return tuple(dict.fromkeys(n for n in names if n))


_A = Aggregation
CATALOG: tuple[CounterSpec, ...] = (
    CounterSpec("gpu_time_duration_ns", "gpu__time_duration.sum", "ns", _A.SUM,
                "kernel duration under ncu replay (never used for speedups)"),
    CounterSpec("dram_bytes_read", "dram__bytes_read.sum", "byte", _A.SUM,
                "bytes read from DRAM", "dram__bytes_op_read.sum"),
    CounterSpec("dram_bytes_written", "dram__bytes_write.sum", "byte", _A.SUM,
                "bytes written to DRAM", "dram__bytes_op_write.sum"),
    CounterSpec("memory_throughput_pct",
                "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%",
                _A.DURATION_WEIGHTED, "memory throughput, % of peak"),
    CounterSpec("dram_throughput_pct", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%",
                _A.DURATION_WEIGHTED, "DRAM throughput, % of peak"),
    CounterSpec("l1_throughput_pct", "l1tex__throughput.avg.pct_of_peak_sustained_active", "%",
                _A.DURATION_WEIGHTED, "L1/TEX throughput (memory busy), % of peak"),
    CounterSpec("l1_hit_rate", "l1tex__t_sector_hit_rate.pct", "%", _A.DURATION_WEIGHTED,
                "L1/TEX sector hit rate"),
    CounterSpec("l2_hit_rate", "lts__t_sector_hit_rate.pct", "%", _A.DURATION_WEIGHTED,
                "L2 sector hit rate"),
    CounterSpec("sm_throughput_pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%",
                _A.DURATION_WEIGHTED, "SM throughput, % of peak"),
    CounterSpec("tensor_core_active_pct",
                "smsp__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "%",
                _A.DURATION_WEIGHTED, "Tensor Core pipe active, % of active cycles"),
    CounterSpec("sm_active_cycles", "sm__cycles_active.sum", "cycle", _A.SUM,
                "cycles with at least one warp active, summed over SMs"),
    CounterSpec("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active", "%",
                _A.DURATION_WEIGHTED, "achieved occupancy"),
    CounterSpec("warp_cycles_per_instruction", "smsp__average_warp_latency_per_inst_issued.ratio",
                "cycle", _A.INSTRUCTION_WEIGHTED, "average warp latency per issued instruction"),
    CounterSpec("issue_active_pct", "smsp__issue_active.avg.pct_of_peak_sustained_active", "%",
                _A.DURATION_WEIGHTED, "cycles with an instruction issued"),
    CounterSpec("executed_instructions", "smsp__inst_executed.sum", "inst", _A.SUM,
                "warp instructions executed"),
    CounterSpec("ipc_active", "sm__inst_executed.avg.per_cycle_active", "inst/cycle",
                _A.ACTIVE_CYCLE_WEIGHTED, "instructions per active cycle"),
    CounterSpec("avg_threads_per_warp",
                "smsp__average_thread_inst_executed_per_inst_executed.ratio", "thread",
                _A.INSTRUCTION_WEIGHTED, "active threads per executed instruction"),
    CounterSpec("registers_per_thread", "launch__registers_per_thread", "register/thread", _A.MAX,
                "registers allocated per thread"),
    CounterSpec("local_memory_wavefronts", "l1tex__t_output_wavefronts_pipe_lsu_mem_local.sum",
                "wavefront", _A.SUM, "local-memory (spill) wavefronts"),
    CounterSpec("dynamic_smem_per_block", "launch__shared_mem_per_block_dynamic", "byte/block",
                _A.MAX, "dynamic shared memory per block"),
)

COUNTER_FIELDS: tuple[str, ...] = tuple(spec.field for spec in CATALOG)
# The four that say which resource an operator waits on (Tensor Cores, occupancy, DRAM, SM):
# what every summary shows first (reports, the MCP views, the Perfetto args, the module roll-up).
HEADLINE_COUNTERS: tuple[str, ...] = (
    "tensor_core_active_pct", "achieved_occupancy_pct", "dram_throughput_pct", "sm_throughput_pct",
)



def _sass(op: str, what: str) -> CounterSpec:
    return CounterSpec(f"inst_{op}", f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum", "inst", _A.SUM,
                       f"{what} thread instructions executed, predicate on")


def _tensor(field: str, name: str, what: str, by_chip: tuple[tuple[str, str], ...] = ()) -> CounterSpec:
    return CounterSpec(field, f"sm__ops_path_tensor_src_{name}.sum", "op", _A.SUM,
                       f"tensor-core math ops, {what}", ncu_names_by_chip=by_chip)


# Floating-point work (docs/roofline.md). Non-tensor FLOPs come from SASS thread-instruction counts
# (an FMA is 2 FLOPs), which ncu collects by instrumenting the kernel's SASS; tensor-core work comes
# from the tensor-path op counters, one math op per FLOP. ncu spells the fp16 and fp8 paths per chip
# (checked against ``ncu --query-metrics`` for ga100, gh100, gb100, ad102 and gb202): gh100 counts both
# fp16 accumulators in one counter, and has fp8 in one; ga100 has no fp8 path (null with the reason).
FLOP_CATALOG: tuple[CounterSpec, ...] = (
    _sass("ffma", "FP32 FMA"), _sass("fadd", "FP32 add"), _sass("fmul", "FP32 multiply"),
    _sass("hfma", "FP16 FMA"), _sass("hadd", "FP16 add"), _sass("hmul", "FP16 multiply"),
    _sass("dfma", "FP64 FMA"), _sass("dadd", "FP64 add"), _sass("dmul", "FP64 multiply"),
    CounterSpec("tensor_inst", "sm__inst_executed_pipe_tensor.sum", "inst", _A.SUM,
                "warp instructions executed by the tensor pipe (any precision)"),
    _tensor("tensor_ops_fp16", "fp16_dst_fp32", "fp16 inputs, fp32 accumulate (gh100: either accumulator)",
            (("gh100", "sm__ops_path_tensor_src_fp16.sum"),)),
    _tensor("tensor_ops_fp16_acc16", "fp16_dst_fp16", "fp16 inputs, fp16 accumulate (gh100: in tensor_ops_fp16)"),
    _tensor("tensor_ops_bf16", "bf16_dst_fp32", "bf16 inputs"),
    _tensor("tensor_ops_tf32", "tf32_dst_fp32", "tf32 inputs"),
    _tensor("tensor_ops_fp64", "fp64", "fp64 inputs"),
    _tensor("tensor_ops_fp8", "fp8", "fp8 inputs (Blackwell: fp32 accumulate)", (
        ("gb202", "sm__ops_path_tensor_src_fp8_dst_fp32.sum"),
        ("gb100", "sm__ops_path_tensor_src_fp4_fp6_fp8_dst_fp32.sum"))),
    _tensor("tensor_ops_fp8_acc16", "fp8_dst_fp16", "fp8 inputs, fp16 accumulate (Blackwell only)", (
        ("gb100", "sm__ops_path_tensor_src_fp4_fp6_fp8_dst_fp16.sum"),)),
)
FLOP_FIELDS: tuple[str, ...] = tuple(spec.field for spec in FLOP_CATALOG)
ALL_SPECS: tuple[CounterSpec, ...] = CATALOG + FLOP_CATALOG  # the 20, then the FLOP counters
_BY_FIELD = {spec.field: spec for spec in ALL_SPECS}
_BY_NCU = {name: spec for spec in ALL_SPECS for name in spec.ncu_names}


def spec_for_field(field: str) -> CounterSpec:
    return _BY_FIELD[field]


def field_for_ncu_name(ncu_name: str) -> str | None:
    """The profile field for an ncu metric name (any chip's spelling), or None."""
    spec = _BY_NCU.get(ncu_name)
    return spec.field if spec else None


def ncu_names_for_chip(chip: str | None, *, flop_counters: bool = False) -> dict[str, str]:
    """Profile field -> ncu metric name on ``chip`` (the 20; with the FLOP counters if asked)."""
    specs = ALL_SPECS if flop_counters else CATALOG
    return {spec.field: spec.ncu_name_for(chip) for spec in specs}

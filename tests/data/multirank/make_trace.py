"""Writes allreduce_kineto.json: a hand-built Kineto trace of one DDP-like step on one rank.

Stream 7 runs a GEMM (aten::mm) and an elementwise kernel; stream 20 runs two NCCL
allreduce kernels, one launched under the dispatcher op ``c10d::allreduce_`` (cpu_op),
one under ProcessGroupNCCL's ``nccl:all_reduce`` range (user_annotation, as DDP's reducer
does). Times (us, relative to ts 1000):

    stream 7   gemm      [0, 100)     add  [150, 200)
    stream 20  nccl #1   [60, 160)    nccl #2 [300, 340)

NCCL time 140 us; the part that runs while compute runs on stream 7 is [60, 100) + [150, 160)
= 50 us -> overlap share 50/140.
"""

import json
from pathlib import Path

BASE = 1000.0


def x(cat, name, ts, dur, args, pid=100, tid=100):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": BASE + ts, "dur": dur,
            "args": args}


def kernel(name, ts, dur, stream, ext, corr):
    return x("kernel", name, ts, dur, {"External id": ext, "device": 0, "context": 1, "stream": stream,
                                       "correlation": corr, "grid": [1, 1, 1], "block": [128, 1, 1],
                                       "registers per thread": 32, "shared memory": 0}, pid=0, tid=stream)


def launch(ts, ext, corr):
    return x("cuda_runtime", "cudaLaunchKernel", ts, 2.0, {"External id": ext, "correlation": corr})


events = [
    x("cpu_op", "aten::mm", -20, 10, {"External id": 1, "Input Dims": [[64, 64], [64, 64]]}),
    launch(-18, 1, 11),
    x("cpu_op", "c10d::allreduce_", -8, 6, {"External id": 2}),
    launch(-6, 2, 12),
    x("cpu_op", "aten::add", 0, 5, {"External id": 3}),
    launch(1, 3, 13),
    x("user_annotation", "nccl:all_reduce", 10, 4, {"External id": 4}),
    launch(11, 4, 14),
    kernel("sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x64x8_warpgroupsize1x1x1_execute_segment_k_off_"
           "kernel__5x_cublas", 0, 100, 7, 1, 11),
    kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 60, 100, 20, 2, 12),
    kernel("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", 150, 50,
           7, 3, 13),
    kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 300, 40, 20, 4, 14),
]
trace = {"schemaVersion": 1, "baseTimeNanoseconds": 1700000000000000000,
         "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2}, "traceEvents": events}
Path(__file__).with_name("allreduce_kineto.json").write_text(json.dumps(trace, indent=1) + "\n")

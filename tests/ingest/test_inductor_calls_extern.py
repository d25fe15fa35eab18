"""Inductor's call() on a real H200 ResNet-18 capture: convolutions assigned from extern_kernels."""

from __future__ import annotations

from profiler_core.attribution.evidence import extern_classes_of
from profiler_core.attribution.operator_class import classify_operator
from profiler_core.ingest import read_inductor
from profiler_core.schema import OperatorClass
from tests.conftest import REPO

RESNET = REPO / "examples" / "captures" / "h200" / "tv_resnet18" / "baseline" / "inductor"


def test_assigned_extern_convolutions_are_library_calls() -> None:
    # ``buf2 = extern_kernels.convolution(...)``: cuDNN ran the convolution, so a Triton kernel that
    # names it beside a batch norm holds the batch norm, not the convolution
    (calls,) = read_inductor(RESNET).call_sequences
    extern = [c for c in calls if c.kind == "extern"]
    assert sum(c.name == "aten::convolution" for c in extern) == 20  # ResNet-18's 20 convolutions
    assert OperatorClass.CONVOLUTION in extern_classes_of(calls)
    assert all(classify_operator(c.name) in (OperatorClass.CONVOLUTION, OperatorClass.GEMM) for c in extern)


def test_call_sites_of_a_real_backward_graph() -> None:
    """The BERT step's backward call(): each call with the graph inputs and buffers it names; a
    fallback's outputs (``buf37 = torch.ops.aten...``, ``buf38 = buf37[0]``) read under its name."""
    import gzip

    from profiler_core.ingest.inductor_calls import parse_call_sites

    bert = REPO / "examples" / "captures" / "h200" / "hf_bert_train" / "baseline" / "inductor" / "output_code.log"
    lines = bert.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if "def call(self, args)" in line]
    assert len(starts) == 2  # forward, backward
    inputs, sites = parse_call_sites(lines[starts[1] - 1:])
    assert {"primals_4", "view_132", "tangents_1"} <= inputs
    handles = [h for h, _ in sites]
    assert handles[0].startswith("triton_red_fused__log_softmax") and handles[0].endswith(":1")
    assert handles[1] == "extern_kernels.mm:2"
    # extern_kernels.mm(reinterpret_tensor(buf1, ...), primals_4, out=buf2)
    assert sites[1][1] == ("buf1", "primals_4", "buf2")
    gpt2 = REPO / "examples" / "captures" / "h200" / "hf_gpt2_train" / "optimized" / "inductor" / "output_code.log.gz"
    text = gzip.decompress(gpt2.read_bytes()).decode().splitlines()
    _, sites = parse_call_sites(text[text.index(next(t for t in text if "[4/0_1]" in t and "def partition_0" in t)):])
    attention = [reads for h, reads in sites if "cudnn_attention_backward" in h]
    assert attention and all(reads[0].startswith("buf") for reads in attention)  # the output it assigns
    first = next(i for i, (h, _) in enumerate(sites) if "cudnn_attention_backward" in h)
    assert attention[0][0] in sites[first + 1][1]  # the next call reads buf38 = buf37[0] as buf37

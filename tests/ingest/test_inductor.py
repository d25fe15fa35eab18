"""read_inductor on the real H200 compile artifacts (TORCH_TRACE, output-code log) and broken ones."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest import read_inductor, read_ncu
from profiler_core.ingest.inductor_output_code import parse_output_code, strip_log_prefix
from profiler_core.ingest.torch_trace import parse_torch_trace, record_key


def _trace_log(tgz: Path, into: Path) -> Path:
    with tarfile.open(tgz) as archive:
        archive.extractall(into, filter="data")
    logs = sorted(into.rglob("*.log"))
    assert len(logs) == 1
    return logs[0]


def _triton_kernels_measured(joinable: Path) -> set[str]:
    rows = read_ncu(joinable / "ncu_full_raw.csv").rows
    return {row.name for row in rows if row.name.startswith("triton_")}


def test_trace_archive_maps_every_measured_triton_kernel(joinable: Path) -> None:
    artifacts = read_inductor(joinable / "torch_trace.tgz")
    assert artifacts.source == "both"
    measured = _triton_kernels_measured(joinable)
    assert len(measured) == 8
    for kernel in measured:
        record = artifacts.fusions[kernel]
        assert record.source == "both"
        assert record.aten_ops and all(op.startswith("aten::") for op in record.aten_ops)
        assert record.source_nodes and record.post_grad_nodes and record.stack_traces
    relu = artifacts.fusions["triton_poi_fused_addmm_relu_view_6"]
    assert {"aten::addmm", "aten::relu"} <= set(relu.aten_ops)
    layer_norm = artifacts.fusions["triton_per_fused_native_layer_norm_0"]
    assert layer_norm.aten_ops == ("aten::native_layer_norm",)
    assert any("y = self.ln(x)" in trace for trace in layer_norm.stack_traces)


def test_extern_calls_keep_their_handle_and_post_grad_op(joinable: Path) -> None:
    fusions = read_inductor(joinable / "torch_trace.tgz").fusions
    externs = [key for key in fusions if key.startswith("extern_kernels.")]
    assert externs == [
        "extern_kernels.mm:2", "extern_kernels.mm:3", "extern_kernels.bmm:6", "extern_kernels.mm:8",
        "extern_kernels.bmm:10", "extern_kernels.mm:12", "extern_kernels.mm:14", "extern_kernels.mm:16",
    ]
    assert fusions["extern_kernels.mm:2"].aten_ops == ("aten::mm",)
    assert fusions["extern_kernels.mm:2"].source_nodes == ("linear",)
    assert fusions["extern_kernels.bmm:6"].aten_ops == ("aten::bmm",)
    assert all(fusions[key].source == "provenance" for key in externs)


def test_provenance_and_output_code_agree_where_both_speak(joinable: Path, tmp_path: Path) -> None:
    log = _trace_log(joinable / "torch_trace.tgz", tmp_path)
    with log.open() as fh:
        provenance = parse_torch_trace(fh, str(log)).provenance
    with (joinable / "output_code.log").open() as fh:
        written = parse_output_code(fh)
    both = set(provenance) & set(written)
    assert both == _triton_kernels_measured(joinable)
    for kernel in both:
        # A kernel's definition comment describes its first call site; provenance covers all of them.
        assert set(written[kernel].post_grad_nodes) <= set(provenance[kernel].post_grad_nodes), kernel
        assert set(written[kernel].source_nodes) <= set(provenance[kernel].source_nodes), kernel
    # Kernels called once: the two sources name exactly the same nodes.
    once = "triton_poi_fused_addmm_relu_view_6"
    assert set(written[once].post_grad_nodes) == set(provenance[once].post_grad_nodes) == {
        "relu", "view_19", "add_tensor_1"}
    assert set(written[once].source_nodes) == set(provenance[once].source_nodes) == {"linear_4", "relu"}


@pytest.mark.parametrize(
    "form", ["tgz", "directory", "single-log"], ids=["tgz", "directory", "single-log"]
)
def test_every_trace_form_reads_alike(joinable: Path, tmp_path: Path, form: str) -> None:
    tgz = joinable / "torch_trace.tgz"
    log = _trace_log(tgz, tmp_path)
    path = {"tgz": tgz, "directory": tmp_path, "single-log": log}[form]
    assert read_inductor(path).fusions == read_inductor(tgz).fusions


def test_output_code_log_alone(joinable: Path) -> None:
    artifacts = read_inductor(joinable / "output_code.log")
    assert artifacts.source == "output_code"
    assert set(artifacts.fusions) == _triton_kernels_measured(joinable)
    record = artifacts.fusions["triton_poi_fused_addmm_clone_transpose_view_1"]
    assert record.aten_ops == ("aten::addmm", "aten::view", "aten::transpose", "aten::clone")
    assert record.source_nodes == ("linear", "view", "q", "matmul")  # the empty source name dropped
    assert record.source == "output_code"


def test_gzipped_output_code_log_reads_like_the_log(joinable: Path, tmp_path: Path) -> None:
    import gzip
    import shutil

    plain = read_inductor(joinable / "output_code.log")
    (tmp_path / "inductor").mkdir()
    packed = tmp_path / "inductor" / "output_code.log.gz"
    with (joinable / "output_code.log").open("rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    for path in (packed, tmp_path / "inductor"):  # the file itself, or the directory holding it
        artifacts = read_inductor(path)
        assert artifacts.fusions == plain.fusions and artifacts.call_sequences == plain.call_sequences


def test_output_code_py_file_reads_like_the_log(joinable: Path, tmp_path: Path) -> None:
    code = [strip_log_prefix(line) for line in (joinable / "output_code.log").read_text().splitlines(True)]
    assert not any("[__output_code]" in line for line in code)
    target = tmp_path / "output_code.py"
    target.write_text("".join(code))
    assert read_inductor(target).fusions == read_inductor(joinable / "output_code.log").fusions


def test_tiny_mlp_artifacts(tiny: Path) -> None:
    written = read_inductor(tiny / "inductor_output_code_mlp_ln.log").fusions
    assert written["triton_poi_fused_addmm_relu_0"].aten_ops == ("aten::addmm", "aten::relu")
    assert written["triton_poi_fused_addmm_relu_0"].source_nodes == ("input_1", "input_2")
    traced = read_inductor(tiny / "torch_trace_provenance_mlp_ln.tgz")
    assert traced.source == "both"
    assert traced.fusions["extern_kernels.addmm:3"].aten_ops == ("aten::addmm",)
    assert traced.fusions["triton_per_fused_native_layer_norm_1"].aten_ops == ("aten::native_layer_norm",)


@pytest.mark.parametrize(
    ("handle", "key"),
    [("triton_poi_fused_relu_0:7", "triton_poi_fused_relu_0"), ("extern_kernels.mm:2", "extern_kernels.mm:2"),
     ("cpp_fused_add_0:1", "cpp_fused_add_0"), ("triton_poi_fused_relu_0", "triton_poi_fused_relu_0")],
    ids=["triton", "extern", "cpp", "no-handle"],
)
def test_record_key(handle: str, key: str) -> None:
    assert record_key(handle) == key


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("output_code_no_kernels.log", r"no Inductor kernels.*TORCH_LOGS=output_code.*INDUCTOR_CACHE_DIR"),
        ("not_a_trace.tgz", r"holds no \*\.log.*provenance_tracking_level=1"),
        ("log_without_trace.tgz", r"no Inductor kernels"),
        ("not_gzip.tgz", r"damaged or non-tar archive"),
        ("provenance_truncated.log", r"inductor_provenance_tracking_node_mappings record is not valid JSON"),
        ("ncu_empty.csv", r"no Inductor kernels"),
        ("missing_dir", r"no such Inductor artifact"),
    ],
    ids=["no-kernels", "tgz-not-a-trace", "tgz-log-not-a-trace", "not-gzip", "truncated-json", "empty",
         "missing"],
)
def test_broken_inputs_raise_the_named_error(data_dir: Path, name: str, message: str) -> None:
    with pytest.raises(ArtifactFormatError, match=message):
        read_inductor(data_dir / "broken" / name)


def test_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(ArtifactFormatError, match="holds no"):
        read_inductor(tmp_path)


def test_combo_kernels_of_a_compiled_optimizer_are_read() -> None:
    # torch.compile of AdamW's step on the H200: the foreach update runs as combo kernels
    # (triton_for_fused_*), headed "# Unsorted Source Nodes: [], Original ATen: []"
    import gzip

    log = Path(__file__).parents[2] / "examples" / "captures" / "h200" / "hf_gpt2_train" / "optimized" / \
        "inductor" / "output_code.log.gz"
    with gzip.open(log, "rt") as fh:
        lines = fh.readlines()
    assert any("# Unsorted Source Nodes: [], Original ATen: []" in line for line in lines)
    fusions = parse_output_code(lines)
    combo = {name: rec for name, rec in fusions.items() if name.startswith("triton_for_fused_")}
    assert len(combo) >= 4 and all(rec.aten_ops == () and rec.source_nodes == () for rec in combo.values())
    # the headed kernels keep their operators
    assert any(rec.aten_ops for name, rec in fusions.items() if name.startswith("triton_poi_"))

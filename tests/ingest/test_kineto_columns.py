"""The Kineto reader's columns: the same records as the event-by-event reader, and an engine that never
builds them."""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path

import pytest

from profiler_core.attribution import attribute
from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest import read_inductor, read_kineto, read_ncu, read_nsys
from profiler_core.record_columns import CPU_OP_COLUMNS, KINETO_KERNEL_COLUMNS, KINETO_RUNTIME_COLUMNS, TableRecords
from tests.conftest import DATA, REPO

DIGESTS = json.loads((DATA / "kineto_record_digests.json").read_text())["traces"]
LISTS = ("kernels", "cpu_ops", "runtime_calls", "module_spans", "python_calls")
GPT2 = REPO / "examples" / "captures" / "h200" / "gpt2" / "baseline_nsys"


@pytest.mark.parametrize("trace", sorted(DIGESTS))
def test_records_from_the_columns_are_the_event_readers(trace: str) -> None:
    expected = DIGESTS[trace]
    read = read_kineto(REPO / trace, launches_only=expected["launches_only"])
    for name in LISTS:
        records = list(getattr(read, name))
        assert [len(records), hashlib.sha256(repr(records).encode()).hexdigest()[:16]] == expected[name], name


def test_the_reader_hands_on_columns() -> None:
    trace = read_kineto(GPT2 / "kineto.json.gz")
    for records, columns in ((trace.kernels, KINETO_KERNEL_COLUMNS), (trace.cpu_ops, CPU_OP_COLUMNS),
                             (trace.runtime_calls, KINETO_RUNTIME_COLUMNS)):
        assert isinstance(records, TableRecords) and tuple(records.column_names) == columns
    starts = trace.kernels.column("start_ns").to_pylist()  # type: ignore[attr-defined]
    assert starts == sorted(starts)
    again = pickle.loads(pickle.dumps(trace))
    assert again.cpu_ops[:50] == trace.cpu_ops[:50] and again.kernels == trace.kernels


@pytest.mark.parametrize("with_nsys", [True, False], ids=["kineto+nsys+ncu", "kineto-only"])
def test_attribution_reads_the_trace_without_building_a_record(with_nsys: bool) -> None:
    trace = read_kineto(GPT2 / "kineto.json.gz")
    nsys = read_nsys(GPT2 / "timeline.sqlite") if with_nsys else None
    ncu = read_ncu(GPT2 / "counters.csv") if with_nsys else None
    profile = attribute(kineto=trace, nsys=nsys, ncu=ncu, inductor=read_inductor(GPT2 / "inductor"))
    assert profile.coverage.attributed_time_pct > 90
    for records in (trace.kernels, trace.cpu_ops, trace.runtime_calls):
        assert records._records is None  # type: ignore[attr-defined]  # no engine path read them one by one
    # and the records, once read, give the same profile
    listed = attribute(kineto=type(trace)(path=trace.path, kernels=list(trace.kernels), cpu_ops=list(trace.cpu_ops),
                                          runtime_calls=list(trace.runtime_calls), metadata=trace.metadata),
                       nsys=nsys, ncu=ncu, inductor=read_inductor(GPT2 / "inductor"))
    assert listed.model_dump(exclude={"capture": {"created_at"}}) == \
        profile.model_dump(exclude={"capture": {"created_at"}})


def test_a_cpu_op_value_beyond_int64_is_named(tmp_path: Path) -> None:
    doc = json.loads((DATA / "h200_joinable" / "kineto.json").read_text())
    op = next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op")
    op["args"]["Sequence number"] = 2**63 + 5  # an unsigned 64-bit integer to orjson
    bad = tmp_path / "kineto.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(ArtifactFormatError, match=r"cpu_op event's sequence_number is 9223372036854775813, "
                                                  r"beyond any 64-bit integer"):
        read_kineto(bad)

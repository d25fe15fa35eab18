"""``--json`` documents: indented, UTF-8, the values ``json.dumps`` would give."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from profiler_core.cli import emit_json
from profiler_core.json_output import json_document, json_pieces


def test_document_holds_the_values_json_dumps_gives() -> None:
    payload = {"a": [1, 2.5, 1e-05, -0.0, None, True], "name": "ampere_sgemm_é", "nested": {"e": [], "p": Path("x")},
               "big": 2**63, "f": 0.30000000000000004}
    doc = json_document(payload)
    assert doc.endswith(b"\n") and doc.startswith(b"{\n \"a\": [\n  1,")
    back = json.loads(doc)
    assert back == json.loads(json.dumps(payload, default=str))
    assert "ampere_sgemm_é".encode() in doc  # UTF-8, not \u escapes


def test_document_of_a_model_is_its_json_dump() -> None:
    from profiler_core.analysis.findings import FindingEvidence

    ev = FindingEvidence(duration_ns=5, share_pct=1.5, kernel_count=1, operator_count=1, counters={"x": 0.1},
                         tiers={}, confidence={}, kernel_names=["k"], facts=[])
    assert json.loads(json_document(ev)) == ev.model_dump(mode="json")
    assert json_document(ev).decode() == json.dumps(ev.model_dump(mode="json"), indent=1) + "\n"


@pytest.mark.parametrize("with_buffer", [True, False])
def test_emit_writes_the_document_on_stdout(monkeypatch: pytest.MonkeyPatch, with_buffer: bool) -> None:
    raw = io.BytesIO()
    text = io.StringIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8") if with_buffer else text
    monkeypatch.setattr(sys, "stdout", stream)
    emit_json({"k": "é", "v": [1, 2]})
    got = raw.getvalue().decode() if with_buffer else text.getvalue()
    assert json.loads(got) == {"k": "é", "v": [1, 2]} and got.endswith("\n")


class _ShortWrites(io.BytesIO):
    """A stream whose every write takes at most ``limit`` bytes and says how many (as stdout does past
    2 GiB: 0x7ffff000 bytes a call), or none at all."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit, self.calls = limit, 0

    def write(self, data) -> int:  # type: ignore[no-untyped-def, override]
        self.calls += 1
        return super().write(bytes(data)[:self.limit])


def test_a_document_written_in_short_writes_is_written_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    from profiler_core import json_output as cli

    monkeypatch.setattr(cli, "_CHUNK", 1000)  # pieces of 1000 bytes, each taken 300 at a time
    payload = {"rows": [{"label": f"aten::mm#{i}", "delta_ns": i} for i in range(400)]}
    data = json_document(payload)
    assert len(data) > 10_000
    stream = _ShortWrites(300)
    cli.write_all(stream, data)
    assert stream.getvalue() == data and stream.calls >= len(data) // 300
    with pytest.raises(OSError, match="took none of the JSON document's bytes"):
        cli.write_all(_ShortWrites(0), data)


@pytest.mark.parametrize("rows", [0, 1, 5, 23])
@pytest.mark.parametrize("batch", [1, 4, 50])
def test_a_listing_written_in_batches_is_the_document(rows: int, batch: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A list written a batch at a time gives the very bytes of the whole document: any number of
    items (none too), the key anywhere among others, strings holding quotes, brackets and escapes."""
    items = [{"label": f'aten::mm#{i} "q" [x]\n', "n": [i, {"deep": [i] * (i % 3)}], "e": "é"} for i in range(rows)]
    payload = {"a": 1, "operators": None, "nested": {"operators": []}, "z": ["]"]}
    want = json_document({**payload, "operators": items})
    assert b"".join(json_pieces(payload, "operators", iter(items), batch)) == want
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8"))
    emit_json(payload, listed="operators", items=items)
    assert raw.getvalue() == want

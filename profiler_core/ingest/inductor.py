"""Read what Inductor says each generated kernel computes: kernel name -> ATen ops.

Accepts a TORCH_TRACE directory, a ``.tgz`` / ``.tar.gz`` of one, a single trace log, a
``TORCH_LOGS=output_code`` log, or an ``output_code.py``. Two sources can speak for a kernel:

* provenance tracking (TORCH_TRACE with ``provenance_tracking_level=1``): which post-grad nodes
  each kernel call holds, their pre-grad source nodes and user stack traces. Preferred for the
  node mapping, since it covers every call site and extern kernels too;
* the output code's ``Original ATen`` comments: the operators *before* decomposition
  (``aten::addmm`` rather than the ``aten::mm`` + ``aten::add`` it became). Preferred for
  ``aten_ops`` because those are the names an eager profile shows; provenance alone can only give
  the post-grad operators.

A TORCH_TRACE log embeds the output code, so a trace directory usually yields both (``source``
is ``"both"``). Records for extern calls (``extern_kernels.mm:2``) come from provenance only:
the output-code comments above call sites are not reliable enough to attribute them.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import os
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from profiler_core.errors import ArtifactFormatError
from profiler_core.ingest.inductor_calls import parse_call_sequences
from profiler_core.ingest.inductor_output_code import parse_output_code, union_fusion_records
from profiler_core.ingest.torch_trace import TraceContents, is_trace_line, parse_torch_trace
from profiler_core.records import FusionRecord, InductorArtifacts

_HOW_TO_PRODUCE = (
    "produce them with TORCH_LOGS=output_code (the log), or TORCH_TRACE=<dir> with "
    "torch._inductor.config.trace.provenance_tracking_level=1, in a run with a fresh "
    "TORCHINDUCTOR_CACHE_DIR (or TORCHINDUCTOR_FORCE_DISABLE_CACHES=1): a warm FX graph cache "
    "skips code generation and logs nothing"
)
_SNIFF_LINES = 200
_TAR_SUFFIXES = (".tgz", ".tar.gz", ".tar")


def read_inductor(path: str | os.PathLike[str]) -> InductorArtifacts:
    """Kernel name -> fusion record from a TORCH_TRACE dir/archive, an output-code log or file."""
    source_path = Path(path)
    if not source_path.exists():
        raise ArtifactFormatError(
            f"{source_path}: no such Inductor artifact (file or TORCH_TRACE directory)"
        )
    contents = TraceContents()
    try:
        for origin, text in _texts(source_path):
            _parse_text(origin, text, contents)
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
        # Archives fail lazily: a damaged gzip stream surfaces while its lines are read.
        first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ArtifactFormatError(
            f"{source_path}: cannot read it ({first_line.rstrip(':')}): a damaged or non-tar archive; "
            f"{_HOW_TO_PRODUCE}"
        ) from err
    if not contents.provenance and not contents.output_code:
        found = "a trace without kernel records" if contents.envelopes else "no Inductor kernels"
        raise ArtifactFormatError(f"{source_path}: {found}; {_HOW_TO_PRODUCE}")
    merged = _merge(source_path, contents)
    sequences: list = []
    for _origin, text in _texts(source_path):  # a second, cheap pass: the launch order of call()
        sequences.extend(parse_call_sequences(text))
    return dataclasses.replace(merged, call_sequences=tuple(dict.fromkeys(sequences)),
                               call_modules=tuple(contents.call_modules))


def _parse_text(origin: str, text: io.TextIOBase, contents: TraceContents) -> None:
    head: list[str] = []
    for line in text:
        head.append(line)
        if len(head) >= _SNIFF_LINES:
            break
    lines = _chain(head, text)
    if any(is_trace_line(line) for line in head):
        parse_torch_trace(lines, origin, into=contents)
        return
    for name, record in parse_output_code(lines).items():
        contents.output_code[name] = union_fusion_records(contents.output_code.get(name), record)


def _chain(head: list[str], rest: Iterator[str] | io.TextIOBase) -> Iterator[str]:
    yield from head
    yield from rest


def _texts(path: Path) -> Iterator[tuple[str, io.TextIOBase]]:
    """Every text the input holds, as (name for messages, line stream)."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and _is_candidate(p.name))
        if not files:
            raise ArtifactFormatError(
                f"{path}: the directory holds no *.log or output_code.py; {_HOW_TO_PRODUCE}"
            )
        for file in files:
            with _open_text(file) as fh:
                yield str(file), fh
        return
    if path.name.lower().endswith(_TAR_SUFFIXES):
        yield from _tar_texts(path)
        return
    with _open_text(path) as fh:
        yield str(path), fh


def _open_text(path: Path) -> io.TextIOBase:
    """A text stream over a file, gunzipped when its name ends in .gz (a compressed log)."""
    if path.name.lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")  # type: ignore[return-value]
    return path.open(encoding="utf-8", errors="replace")  # type: ignore[return-value]


def _tar_texts(path: Path) -> Iterator[tuple[str, io.TextIOBase]]:
    with tarfile.open(path, "r:*") as archive:
        members = [m for m in archive.getmembers() if m.isfile() and _is_candidate(m.name)]
        if not members:
            raise ArtifactFormatError(
                f"{path}: the archive holds no *.log or output_code.py: not a TORCH_TRACE directory; "
                f"{_HOW_TO_PRODUCE}"
            )
        for member in members:
            raw = archive.extractfile(member)
            if raw is not None:
                with io.TextIOWrapper(raw, encoding="utf-8", errors="replace") as fh:
                    yield f"{path}:{member.name}", fh


def _is_candidate(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.endswith((".log", ".log.gz")) or base == "output_code.py"


def _merge(path: Path, contents: TraceContents) -> InductorArtifacts:
    provenance, output_code = contents.provenance, contents.output_code
    fusions: dict[str, FusionRecord] = {}
    for key, record in provenance.items():
        written = output_code.get(key)
        if written is None:
            fusions[key] = record
            continue
        fusions[key] = FusionRecord(
            kernel_name=key,
            aten_ops=written.aten_ops or record.aten_ops,
            source_nodes=record.source_nodes or written.source_nodes,
            source="both",
            post_grad_nodes=record.post_grad_nodes or written.post_grad_nodes,
            stack_traces=record.stack_traces,
        )
    for key, record in output_code.items():
        fusions.setdefault(key, record)
    if provenance and output_code:
        source = "both"
    else:
        source = "provenance" if provenance else "output_code"
    return InductorArtifacts(path=path, fusions=fusions, source=source)

"""Writing a command's output files: atomically, and with a one-line error when the path is unusable."""

from __future__ import annotations

from pathlib import Path

from profiler_core.atomic_write import write_text_atomic
from profiler_core.errors import ProfilerError


def write_output(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically; an OS error becomes a ProfilerError naming the path."""
    try:
        return write_text_atomic(path, text)
    except OSError as err:
        raise ProfilerError(f"{path}: cannot write ({err.strerror or err}); choose a writable path") from err

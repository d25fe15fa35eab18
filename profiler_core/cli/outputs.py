"""Writing a command's output files: atomically, and with a one-line error when the path is unusable."""

from __future__ import annotations

from pathlib import Path

from profiler_core.atomic_write import write_text_atomic
from profiler_core.errors import ProfilerError


def write_output(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically; an OS error becomes a ProfilerError naming the path.

    Missing parent folders are created, and said so on stderr (a typo in a path shows at once).
    """
    missing = next((p for p in reversed(path.parents) if not p.exists()), None)
    try:
        written = write_text_atomic(path, text)
        if missing is not None:
            from profiler_core.cli import err_console

            err_console.print(f"note: created the folder {missing} for {path}", markup=False, soft_wrap=True)
        return written
    except OSError as err:
        raise ProfilerError(f"{path}: cannot write ({err.strerror or err}); choose a writable path") from err


PROFILE_HELP = "A profile.json written by 'oprof attribute', or a capture's run directory."

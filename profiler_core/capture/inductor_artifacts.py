"""Pack Inductor's structured trace (TORCH_TRACE folder) into one ``torch_trace.tgz``.

The trace folder holds one log per process with the provenance artifacts
(``inductor_provenance_tracking_node_mappings`` ...); packing it keeps the run directory
small and movable. The archive is written beside its target and renamed into place.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path


def pack_torch_trace(trace_dir: Path, archive: Path, *, remove: bool = True) -> bool:
    """Tar+gzip ``trace_dir`` as ``archive`` (member root ``torch_trace/``); False if there was nothing."""
    if not trace_dir.is_dir() or not any(p.is_file() for p in trace_dir.rglob("*")):
        if remove:
            shutil.rmtree(trace_dir, ignore_errors=True)
        return False
    archive.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{archive.name}.", suffix=".tmp", dir=archive.parent)
    os.close(fd)
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            tar.add(trace_dir, arcname="torch_trace")
        os.replace(tmp, archive)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if remove:
        shutil.rmtree(trace_dir, ignore_errors=True)
    return True

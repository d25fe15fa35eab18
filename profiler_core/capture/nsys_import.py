"""Why nsys recorded but wrote no report: a system library its importer cannot load.

``nsys profile`` records into a ``.qdstrm`` stream, then runs ``QdstrmImporter`` to turn it
into the ``.nsys-rep``. The importer is a separate binary with its own system dependencies;
the nsys that ships inside Nsight Compute needs ``libdw.so.1`` (elfutils), which a minimal
image lacks. Then the report never appears and the only trace is a loader error in nsys's
output::

    QdstrmImporter: error while loading shared libraries: libdw.so.1: cannot open shared object file

:func:`import_failure_hint` turns that (or, failing that, ``ldd`` on the importer) into one
sentence naming the library and the package that provides it.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from profiler_core.capture.runner import tail_lines

__all__ = ["LIBRARY_PACKAGES", "import_failure_hint", "importer_of", "missing_libraries"]

# Debian/Ubuntu package and RHEL/Fedora package providing a library the importer needs.
LIBRARY_PACKAGES: dict[str, tuple[str, str]] = {
    "libdw.so.1": ("libdw1", "elfutils-libs"),
    "libelf.so.1": ("libelf1", "elfutils-libelf"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig"),
    "libGL.so.1": ("libgl1", "mesa-libGL"),
    "libnss3.so": ("libnss3", "nss"),
}
_LOADER_ERROR = re.compile(r"error while loading shared libraries: ([\w.+-]+\.so[\w.]*)")
_NOT_FOUND = re.compile(r"^\s*([\w.+-]+\.so[\w.]*)\s+=>\s+not found", re.MULTILINE)


def importer_of(nsys: Path) -> Path | None:
    """The ``QdstrmImporter`` that ``nsys`` runs, where its layout puts it.

    Inside Nsight Compute: ``host/target-linux-x64/nsys`` -> ``host/linux-desktop-*/QdstrmImporter``;
    in Nsight Systems: ``target-linux-x64/nsys`` or ``bin/nsys`` -> ``host-linux-x64/QdstrmImporter``.
    """
    real = nsys.resolve()
    for base in (real.parent.parent, real.parent.parent.parent):
        for pattern in ("linux-desktop-*/QdstrmImporter", "host-linux-x64/QdstrmImporter",
                        "host/linux-desktop-*/QdstrmImporter"):
            hits = sorted(base.glob(pattern))
            if hits:
                return hits[0]
    return None


def missing_libraries(binary: Path, timeout_s: float = 20.0) -> list[str]:
    """Shared libraries ``ldd`` reports as ``not found`` for ``binary`` (empty when it cannot tell)."""
    try:
        done = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=timeout_s,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return list(dict.fromkeys(_NOT_FOUND.findall(done.stdout)))


def _how_to_install(library: str) -> str:
    packages = LIBRARY_PACKAGES.get(library)
    if packages is None:
        return f"install the system package that provides {library}"
    deb, rpm = packages
    return f"apt-get install {deb} (Debian/Ubuntu) or dnf install {rpm} (RHEL/Fedora)"


def import_failure_hint(logs: Iterable[Path], nsys: Path | None) -> str | None:
    """One sentence naming the library nsys's importer lacks and how to get it; None when none is missing."""
    text = "\n".join(line for log in logs for line in tail_lines(log, 200))
    libraries = list(dict.fromkeys(_LOADER_ERROR.findall(text)))
    if not libraries and nsys is not None:
        importer = importer_of(nsys)
        libraries = missing_libraries(importer) if importer is not None else []
    if not libraries:
        return None
    library = libraries[0]
    return (f"nsys recorded, but its report importer cannot load the system library {library}; "
            f"{_how_to_install(library)}, or put the folder holding {library} on LD_LIBRARY_PATH, "
            "then capture again")

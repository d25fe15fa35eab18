"""Find the NVIDIA command-line tools a capture drives (ncu, nsys, nvidia-smi) and their versions.

Each tool is looked up in order: its environment variable (``OPROF_NCU``, ``OPROF_NSYS``,
``OPROF_NVIDIA_SMI``), then ``PATH``, then the places NVIDIA installs it. nsys is also
looked for inside Nsight Compute's own folder, which ships a copy at
``<root>/host/target-linux-x64/nsys`` beside ``<root>/ncu``. The ``ncu`` on PATH is often
not Nsight Compute itself but the CUDA toolkit's launcher script (``/usr/local/cuda/bin/ncu``
-> ``/usr/local/cuda-13.0/bin/ncu``, which runs the newest ``/opt/nvidia/nsight-compute/<ver>/ncu``),
so the folder is found by resolving links, then by the install folders the script names,
then by NVIDIA's install locations::

    /usr/local/cuda/bin/ncu                        launcher script (on PATH)
    /opt/nvidia/nsight-compute/2025.3.1/ncu        Nsight Compute
    /opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys

A tool that cannot be found raises :class:`~profiler_core.errors.ToolNotFoundError` saying
how to provide it.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from profiler_core.errors import ToolNotFoundError

ENV_NCU = "OPROF_NCU"
ENV_NSYS = "OPROF_NSYS"
ENV_NVIDIA_SMI = "OPROF_NVIDIA_SMI"

# Where NVIDIA's installers put the tools when they are not on PATH (newest version wins).
DEFAULT_NCU_GLOBS: tuple[str, ...] = (
    "/usr/local/cuda/bin/ncu",
    "/opt/nvidia/nsight-compute/*/ncu",
    "/usr/local/cuda/nsight-compute-*/ncu",
)
DEFAULT_NSYS_GLOBS: tuple[str, ...] = (
    "/usr/local/cuda/bin/nsys",
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
    "/usr/local/cuda*/nsight-systems-*/bin/nsys",
)
# Nsight Compute's install folders (each holds ncu and host/), searched for the nsys it ships.
NCU_INSTALL_GLOBS: tuple[str, ...] = (
    "/opt/nvidia/nsight-compute/*",
    "/opt/nvidia/nsight-compute",
    "/usr/local/cuda*/nsight-compute-*",
)
# Relative to the folder holding the real ncu binary.
NSYS_INSIDE_NCU = Path("host") / "target-linux-x64" / "nsys"

_VERSION = re.compile(r"\d+\.\d+(?:\.\d+)*")
_NUMBER = re.compile(r"\d+")
# An absolute path in a launcher script that names an Nsight Compute folder (may hold * or $VAR).
_NCU_PATH_IN_SCRIPT = re.compile(r"/[^\s\"'`;|&()<>]*nsight-compute[^\s\"'`;|&()<>]*", re.IGNORECASE)
_SCRIPT_MAX_BYTES = 256 * 1024


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _from_env(var: str, env: Mapping[str, str], what: str) -> Path | None:
    value = env.get(var)
    if not value:
        return None
    path = Path(value).expanduser()
    if not _is_executable(path):
        raise ToolNotFoundError(
            f"{var}={value}: no executable {what} there; point {var} at the {what} binary or unset it"
        )
    return path


def _version_key(path: str) -> tuple[int, ...]:
    """Sort key that orders version folders numerically (2025.10 after 2025.3)."""
    return tuple(int(n) for n in _NUMBER.findall(path))


def _newest_first(pattern: str) -> list[str]:
    return sorted(glob.glob(pattern), key=_version_key, reverse=True)


def _from_globs(patterns: Sequence[str]) -> Path | None:
    for pattern in patterns:
        for hit in _newest_first(pattern):  # newest version folder first
            if _is_executable(Path(hit)):
                return Path(hit)
    return None


def _which(name: str, env: Mapping[str, str]) -> Path | None:
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    return Path(found) if found else None


def find_ncu(env: Mapping[str, str] | None = None, search_globs: Sequence[str] | None = None) -> Path:
    """Nsight Compute's ``ncu``: $OPROF_NCU, PATH, then the default install folders."""
    env = os.environ if env is None else env
    globs = DEFAULT_NCU_GLOBS if search_globs is None else search_globs
    path = _from_env(ENV_NCU, env, "ncu") or _which("ncu", env) or _from_globs(globs)
    if path is None:
        raise ToolNotFoundError(
            f"ncu (Nsight Compute) not found on PATH, in ${ENV_NCU} or in the default install folders; "
            f"install Nsight Compute (it ships with the CUDA toolkit) and put ncu on PATH, "
            f"set {ENV_NCU}=/path/to/ncu, or capture without counters (--counters none)"
        )
    return path


def _folders_named_in_script(script: Path) -> list[Path]:
    """Nsight Compute folders a launcher script names (``/opt/nvidia/nsight-compute/*``), newest first."""
    try:
        with script.open("rb") as f:
            head = f.read(_SCRIPT_MAX_BYTES)
    except OSError:
        return []
    if not head.startswith(b"#!"):
        return []  # a binary: nothing to read
    found: list[Path] = []
    for token in _NCU_PATH_IN_SCRIPT.findall(head.decode("utf-8", "replace")):
        # keep the part before any shell expansion: "/opt/nvidia/nsight-compute/${VER}/ncu" -> ".../*"
        parts = token.split("/")
        cut = next((i for i, part in enumerate(parts) if "$" in part), None)
        pattern = "/".join(parts[:cut] + ["*"]) if cut is not None else token
        for hit in _newest_first(pattern.rstrip("/")):
            folder = Path(hit)
            folder = folder.parent if folder.name == "ncu" else folder
            if folder.is_dir():
                found.append(folder)
    return found


def nsight_compute_folders(ncu: Path, install_globs: Sequence[str] | None = None) -> list[Path]:
    """Folders that may hold the Nsight Compute ``ncu`` runs, most likely first.

    The real binary's folder (links resolved); the folders a launcher script names; the CUDA
    toolkit's own ``nsight-compute-*`` beside its ``bin/``; NVIDIA's install folders.
    """
    real = Path(os.path.realpath(ncu))
    candidates = [real.parent, *_folders_named_in_script(real)]
    candidates += [Path(p) for p in _newest_first(str(real.parent.parent / "nsight-compute-*"))]
    for pattern in NCU_INSTALL_GLOBS if install_globs is None else install_globs:
        candidates += [Path(p) for p in _newest_first(pattern)]
    unique: list[Path] = []
    for folder in candidates:
        if folder.is_dir() and folder not in unique:
            unique.append(folder)
    return unique


def nsys_inside_ncu(ncu: Path, install_globs: Sequence[str] | None = None) -> Path | None:
    """The nsys that ships inside the folder of the Nsight Compute ``ncu`` runs, if there is one."""
    for folder in nsight_compute_folders(ncu, install_globs):
        candidate = folder / NSYS_INSIDE_NCU
        if _is_executable(candidate):
            return candidate
    return None


def find_nsys(env: Mapping[str, str] | None = None, *, ncu: Path | None = None,
              search_globs: Sequence[str] | None = None, ncu_install_globs: Sequence[str] | None = None) -> Path:
    """Nsight Systems' ``nsys``: $OPROF_NSYS, PATH, inside Nsight Compute, then install folders."""
    env = os.environ if env is None else env
    path = _from_env(ENV_NSYS, env, "nsys") or _which("nsys", env)
    if path is None and ncu is not None:
        path = nsys_inside_ncu(ncu, ncu_install_globs)
    if path is None:
        path = _from_globs(DEFAULT_NSYS_GLOBS if search_globs is None else search_globs)
    if path is None:
        looked = ", ".join(str(f) for f in nsight_compute_folders(ncu, ncu_install_globs)) if ncu else ""
        raise ToolNotFoundError(
            f"nsys (Nsight Systems) not found on PATH, in ${ENV_NSYS}, inside Nsight Compute's folder"
            f"{f' ({looked})' if looked else ''} or in Nsight Systems' install folders; "
            f"install Nsight Systems and put nsys on PATH or set {ENV_NSYS}=/path/to/nsys "
            f"(without it the Kineto trace serves as the timeline)"
        )
    return path


def find_nvidia_smi(env: Mapping[str, str] | None = None) -> Path:
    """``nvidia-smi``: $OPROF_NVIDIA_SMI, then PATH."""
    env = os.environ if env is None else env
    path = _from_env(ENV_NVIDIA_SMI, env, "nvidia-smi") or _which("nvidia-smi", env)
    if path is None:
        raise ToolNotFoundError(
            f"nvidia-smi not found on PATH or in ${ENV_NVIDIA_SMI}; it comes with the NVIDIA driver. "
            f"Install the driver utilities, set {ENV_NVIDIA_SMI}, or use --clocks observe"
        )
    return path


def parse_version(text: str) -> str | None:
    """The version number in a tool's ``--version`` output (the line that says "version")."""
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        if "version" in line.lower():
            match = _VERSION.search(line)
            if match:
                return match.group(0)
    for line in lines:
        match = _VERSION.search(line)
        if match:
            return match.group(0)
    return None


def tool_version(exe: Path, env: Mapping[str, str] | None = None, timeout_s: float = 60.0) -> str | None:
    """Run ``exe --version`` and return its version number, or None when it cannot tell."""
    try:
        done = subprocess.run([str(exe), "--version"], capture_output=True, text=True,
                              timeout=timeout_s, env=None if env is None else dict(env), check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(done.stdout + "\n" + done.stderr)

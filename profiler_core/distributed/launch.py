"""Command lines of a multi-rank capture: pure functions, no side effects.

Every rank is started by PyTorch's own launcher, never a home-made one::

    kineto    python -m torch.distributed.run --nproc-per-node N --standalone -m <harness> --phase kineto ...
    timeline  python -m torch.distributed.run ... --no-python nsys profile ... -o timeline_rank%q{RANK} \
                  python -m <harness> --phase region ...
    counters  python -m torch.distributed.run ... --no-python ncu --target-processes all ... \
                  -o counters_rank%q{RANK} python -m <harness> --phase region ...

nsys and ncu run once per rank, inside the launcher, so each writes its own report and
``%q{RANK}`` (both tools expand ``%q{NAME}`` to that environment variable) names it by the
rank torchrun gave that process. ncu keeps ``--target-processes all`` because under a
launcher the work of a rank can sit in a child process of the one ncu started.
Every launched process gets ``NCCL_NVLS_ENABLE=0``: NVLink SHARP multicast needs fabric
support the capture cannot assume, and its setup differs between the phases' runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

ENV_NVLS = "NCCL_NVLS_ENABLE"
RANK_MACRO = "%q{RANK}"
TORCHRUN_MODULE = "torch.distributed.run"
DISTRIBUTED_ENV_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


def torchrun_prefix(python: str, nproc_per_node: int, *, no_python: bool = False) -> list[str]:
    """``python -m torch.distributed.run --nproc-per-node N --standalone [--no-python]``."""
    if nproc_per_node < 1:
        raise ValueError(f"nproc_per_node={nproc_per_node}: need at least one process")
    cmd = [python, "-m", TORCHRUN_MODULE, "--nproc-per-node", str(nproc_per_node), "--standalone"]
    if no_python:
        cmd.append("--no-python")
    return cmd


def torchrun_command(harness: Sequence[str], nproc_per_node: int, args: Sequence[str]) -> list[str]:
    """The harness (``python -m module`` or ``python script.py``) started once per rank by torchrun.

    torchrun runs its own interpreter for ``-m module`` and ``script.py``; any other harness
    command is launched as given, with ``--no-python``.
    """
    harness = list(harness)
    if len(harness) >= 3 and harness[1] == "-m":
        return [*torchrun_prefix(harness[0], nproc_per_node), "-m", *harness[2:], *args]
    if len(harness) >= 2 and harness[1].endswith(".py"):
        return [*torchrun_prefix(harness[0], nproc_per_node), *harness[1:], *args]
    return [*torchrun_prefix(_python_of(harness), nproc_per_node, no_python=True), *harness, *args]


def wrapped_per_rank(python: str, nproc_per_node: int, tool_command: Sequence[str]) -> list[str]:
    """A profiler command (``nsys profile ... <harness>``) run once per rank under torchrun."""
    return [*torchrun_prefix(python, nproc_per_node, no_python=True), *tool_command]


def rank_report_base(run_dir: Path, stem: str) -> Path:
    """``<run>/<stem>_rank%q{RANK}``: the tool expands the macro in each rank's process."""
    return run_dir / f"{stem}_rank{RANK_MACRO}"


def rank_report_path(run_dir: Path, stem: str, rank: int, suffix: str) -> Path:
    """Where a rank's report landed once the tool expanded ``%q{RANK}``."""
    return run_dir / f"{stem}_rank{rank}{suffix}"


def ncu_all_processes(command: Sequence[str]) -> list[str]:
    """An ncu command with ``--target-processes all`` instead of ``application-only``."""
    cmd = list(command)
    try:
        at = cmd.index("--target-processes")
    except ValueError:
        return [cmd[0], "--target-processes", "all", *cmd[1:]]
    cmd[at + 1] = "all"
    return cmd


def distributed_env(base: Mapping[str, str]) -> dict[str, str]:
    """A phase environment for torchrun: NVLS off, no inherited rank variables."""
    env = {k: v for k, v in base.items() if k not in DISTRIBUTED_ENV_KEYS}
    env[ENV_NVLS] = "0"
    return env


def _python_of(harness: Sequence[str]) -> str:
    first = Path(harness[0]).name
    return harness[0] if first.startswith("python") else "python"

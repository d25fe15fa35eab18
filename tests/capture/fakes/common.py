"""Shared by the fake tools: where the real artifacts are, and an invocation log."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data"
JOINABLE = DATA / "h200_joinable"
METRICS = DATA / "ncu_metrics"


def log(tool: str, **extra: object) -> None:
    """Append this invocation (argv, selected env) to $FAKE_LOG as one JSON line."""
    path = os.environ.get("FAKE_LOG")
    if not path:
        return
    entry = {
        "tool": tool,
        "argv": sys.argv[1:],
        "cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
        "torch_trace": os.environ.get("TORCH_TRACE"),
        **extra,
    }
    with open(path, "a") as handle:
        handle.write(json.dumps(entry) + "\n")


def split_app(argv: list[str], with_value: set[str]) -> tuple[dict[str, str], list[str]]:
    """Options before the application command, and the command itself."""
    options: dict[str, str] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-"):
            break
        if "=" in arg:
            key, value = arg.split("=", 1)
            options[key] = value
        elif arg in with_value:
            options[arg] = argv[i + 1]
            i += 1
        else:
            options[arg] = ""
        i += 1
    return options, argv[i:]

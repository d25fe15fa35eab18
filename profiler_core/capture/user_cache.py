"""The per-user cache folder (``~/.cache/operator-profiler/``) for facts worth probing once.

Holds ncu metric lists per chip and ncu version, and probed lock clocks per GPU.
``OPROF_CACHE_DIR`` overrides the location; ``XDG_CACHE_HOME`` is honoured.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from profiler_core.atomic_write import write_text_atomic

ENV_CACHE_DIR = "OPROF_CACHE_DIR"
APP_NAME = "operator-profiler"


def user_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The cache folder (not created)."""
    env = os.environ if env is None else env
    if env.get(ENV_CACHE_DIR):
        return Path(env[ENV_CACHE_DIR]).expanduser()
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / APP_NAME


def read_json(path: Path) -> dict[str, Any]:
    """A cached JSON object, or {} when absent or unreadable (a cache is never authoritative)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write a cache entry atomically; a read-only cache folder is not an error."""
    try:
        write_text_atomic(path, json.dumps(data, indent=1, sort_keys=True))
    except OSError:
        pass

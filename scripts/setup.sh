#!/usr/bin/env bash
# Creates .venv (if missing) and installs operator-profiler with its dev tools into it.
# Without an NVIDIA GPU it installs the CPU build of torch first (about 1.3 GB instead of 5.7 GB
# for the CUDA build, which such a machine cannot use). Progress and notes go to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Where the CPU build of torch comes from; set OPROF_TORCH_INDEX to use a mirror.
CPU_INDEX=${OPROF_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}

has_nvidia_gpu() {
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
    return 0
  fi
  [ -e /proc/driver/nvidia/version ]
}

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import profiler_core, mcp, torch, pytest, hypothesis, pyarrow, adbc_driver_sqlite" >/dev/null 2>&1; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
    if has_nvidia_gpu; then
      echo "setup: NVIDIA GPU found: installing torch with CUDA" >&2
      .venv/bin/python -m pip install -q torch
    else
      echo "setup: no NVIDIA GPU: installing the CPU build of torch from $CPU_INDEX" >&2
      if ! .venv/bin/python -m pip install -q --timeout 30 --retries 1 --index-url "$CPU_INDEX" torch; then
        echo "setup: $CPU_INDEX could not be used; installing torch from the default index" >&2
        .venv/bin/python -m pip install -q torch
      fi
    fi
  fi
  echo "setup: installing operator-profiler and its dev tools into .venv" >&2
  .venv/bin/python -m pip install -q -e ".[dev]"
fi

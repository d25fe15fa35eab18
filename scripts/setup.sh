#!/usr/bin/env bash
# Creates .venv (if missing) and installs operator-profiler with its dev tools into it.
# Without an NVIDIA GPU it installs the CPU build of torch first (about 1.3 GB instead of 5.7 GB
# for the CUDA build, which such a machine cannot use). Progress and notes go to stderr.
# With --for-tests it also installs what only the tests use: the Claude Code CLI (through npm,
# where npm exists) that the plugin tests run. scripts/test.sh and CI both pass it, so the
# README's test command and CI run the same tests.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Where the CPU build of torch comes from; set OPROF_TORCH_INDEX to use a mirror.
CPU_INDEX=${OPROF_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
FOR_TESTS=0
[ "${1:-}" = "--for-tests" ] && FOR_TESTS=1

has_nvidia_gpu() {
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU"; then
    return 0
  fi
  [ -e /proc/driver/nvidia/version ]
}

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
# Every import the suite needs: a .venv missing any of them is brought up to date.
if ! .venv/bin/python -c "import profiler_core, mcp, torch, pytest, hypothesis, pyarrow, adbc_driver_sqlite, transformers" >/dev/null 2>&1; then
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
  echo "setup: installing operator-profiler and its dev tools (pytest, transformers, ruff, mypy) into .venv" >&2
  .venv/bin/python -m pip install -q -e ".[dev]"
fi
if [ "$FOR_TESTS" = 1 ] && [ ! -x node_modules/.bin/claude ]; then
  if command -v npm >/dev/null 2>&1; then
    echo "setup: installing the Claude Code CLI (npm) for the plugin tests" >&2
    npm install --no-audit --no-fund --silent @anthropic-ai/claude-code@2 >/dev/null 2>&1 \
      || echo "setup: could not install @anthropic-ai/claude-code; the plugin CLI checks will skip" >&2
  else
    echo "setup: npm is absent; the Claude Code plugin checks will skip" >&2
  fi
fi

#!/usr/bin/env bash
# Creates .venv (if missing) and installs operator-profiler with its dev tools into it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import profiler_core, mcp, torch, pytest, hypothesis" >/dev/null 2>&1; then
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[dev]"
fi
# The tests on real model outputs use transformers (see .ci/run for why torchvision is left out).
if ! .venv/bin/python -c "import transformers" >/dev/null 2>&1; then
  .venv/bin/python -m pip install -q "transformers>=4.56"
fi

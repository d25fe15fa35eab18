#!/usr/bin/env bash
# Runs the test suite (GPU tests skip themselves where there is no NVIDIA GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest "$@"

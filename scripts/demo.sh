#!/usr/bin/env bash
# The main job: live on an NVIDIA GPU, or on the real H200 captures shipped in examples/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/oprof demo "$@"

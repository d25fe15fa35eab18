#!/usr/bin/env bash
# Runs the test suite (GPU tests skip themselves where there is no NVIDIA GPU).
# By default the tests marked `slow` (real subprocesses, servers, end-to-end runs) are left out,
# which keeps the run to a few minutes on a 2-core machine; `--all` runs them too, as CI does.
# Any other arguments go to pytest (a `-m` of your own replaces the default selection).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --for-tests
select=(-m "not slow")
if [ "${1:-}" = "--all" ]; then
  shift
  select=()
fi
for arg in "$@"; do
  case "$arg" in -m|-m*) select=() ;; esac
done
exec .venv/bin/python -m pytest ${select[@]+"${select[@]}"} "$@"

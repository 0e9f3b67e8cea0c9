#!/bin/sh
# Runs the nccl backend's GPU check (tests/distributed/nccl_check.cpp) from an
# existing build; builds nothing. Without a CUDA device the check prints
# "skipped: no CUDA device" and exits 0; without NCCL at configure time
# there is no program to run, which is also a skip.
#
#   tests/distributed/gpu_check.sh [build-folder]     (default: build)
set -eu
build="${1:-build}"
exe="$build/tests/dtr_nccl_check"
if [ ! -x "$exe" ]; then
  if grep -q '^DTR_NCCL_LIBRARY:.*-NOTFOUND' "$build/CMakeCache.txt" 2>/dev/null ||
     ! grep -q '^DTR_NCCL_LIBRARY:' "$build/CMakeCache.txt" 2>/dev/null; then
    echo "skipped: the nccl backend was not built (no NCCL found when $build was configured)"
    exit 0
  fi
  echo "gpu_check: $exe is missing: build it first (cmake --build $build --target dtr_nccl_check)" >&2
  exit 1
fi
exec "$exe"

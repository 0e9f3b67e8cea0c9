#!/usr/bin/env bash
# Runs the four example programs of BUILD_DIR at their CI sizes, the MNIST
# ones on the Fashion-MNIST files in DATA_ROOT, and prints each program's
# verdict line; exits nonzero when one fails (a program exits nonzero when
# its loss did not fall or a check failed).
# Usage: run.sh BUILD_DIR DATA_ROOT
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR DATA_ROOT}
data=${2:?usage: run.sh BUILD_DIR DATA_ROOT}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
run() {
  local name=$1
  shift
  local start=$SECONDS
  if "$build/$name" "$@" >"$work/$name.log" 2>&1; then
    printf '%-10s ok   %3d s  %s\n' "$name" $((SECONDS - start)) "$(tail -n 1 "$work/$name.log")"
  else
    printf '%-10s FAIL %3d s\n' "$name" $((SECONDS - start))
    cat "$work/$name.log"
    failed=1
  fi
}
run regression 1000
run autograd 100
# 60 training batches of 64, 2 test batches of 1000.
run mnist "$data" 60 2
# 30 steps of batches of 64; the generator's checkpoint goes to the work folder.
run dcgan "$data" 30 "$work/dcgan-generator.pt"
exit $failed

#!/usr/bin/env bash
# Runs the libFuzzer targets of a DTR_BUILD_FUZZERS build for a bounded time.
#   tests/fuzz/run.sh [BUILD_DIR] [SECONDS] [TARGET...]
# BUILD_DIR defaults to build-asan (the sanitizer build), SECONDS (per target) to 60, the targets
# to every tests/fuzz/fuzz_* program built there. The targets run side by
# side (one process each), each starting from its checked-in seed corpus
# tests/fuzz/corpus/<target>/ (read, never written: new inputs go to a
# scratch folder). Exits non-zero when any target finds a crash, a sanitizer
# report, a leak, a timeout (-timeout seconds per input) or an out-of-memory
# (-rss_limit_mb); the input that caused it is kept as
# BUILD_DIR/fuzz-artifacts/<target>/crash-* (or leak-, timeout-, oom-) and
# replays with `BUILD_DIR/tests/fuzz/<target> <file>`.
#
# Each target also stops after DTR_FUZZ_RUNS inputs (default 20000; -1 = no
# limit). DTR_FUZZ_SEED (default 1) is libFuzzer's -seed and the kernels run
# on one thread, so with a run limit the inputs tried are the same every
# time (a CI run is repeatable; a slower machine tries a prefix of them);
# DTR_FUZZ_SEED=0 DTR_FUZZ_RUNS=-1 explores with a new seed for SECONDS.
#
# To grow a seed corpus with what a longer local run found:
#   BUILD_DIR/tests/fuzz/<target> -merge=1 tests/fuzz/corpus/<target> <scratch folder>
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

build=${1:-build-asan}
seconds=${2:-60}
shift $(( $# < 2 ? $# : 2 ))
targets=("$@")
if ((${#targets[@]} == 0)); then
  for exe in "$build"/tests/fuzz/fuzz_*; do
    [[ -x $exe ]] && targets+=("$(basename "$exe")")
  done
fi
if ((${#targets[@]} == 0)); then
  echo "tests/fuzz/run.sh: no fuzz targets in $build/tests/fuzz (configure with -DDTR_BUILD_FUZZERS=ON)" >&2
  exit 1
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export DTR_LOG=${DTR_LOG:-off}  # the library's warnings would flood the log
export OMP_NUM_THREADS=1       # one kernel thread: coverage, so the inputs tried, repeat

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
pids=()
for t in "${targets[@]}"; do
  mkdir -p "$scratch/$t" "$build/fuzz-artifacts/$t" "tests/fuzz/corpus/$t"
  "$build/tests/fuzz/$t" "$scratch/$t" "tests/fuzz/corpus/$t" \
    -max_total_time="$seconds" -seed="${DTR_FUZZ_SEED:-1}" -runs="${DTR_FUZZ_RUNS:-20000}" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -print_final_stats=1 -artifact_prefix="$build/fuzz-artifacts/$t/" \
    >"$scratch/$t.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  if wait "${pids[$i]}"; then
    echo "== $t: no findings ($(grep -h -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$t.log" | grep -o '[0-9]*$' || echo '?') runs)"
  else
    status=1
    echo "== $t: FOUND A PROBLEM; the log's end:" >&2
    tail -n 60 "$scratch/$t.log" >&2
  fi
done
exit $status

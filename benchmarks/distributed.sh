#!/usr/bin/env bash
# Data-parallel benchmark for the closing note of data-parallel training:
# the zoo's gpt on 1 and 2 ranks (one kernel thread per rank, the same
# global batch of 8: 2 ranks take 4 each), scaling efficiency, the share of
# the gradient all-reduce time DistributedDataParallel hides behind
# backward, peak memory with and without optimizer-state sharding (--zero),
# and the smallest feasible per-rank budget of the zoo's chain on 2 ranks
# with and without it (bisected; the chain is 75% parameters, gradients and
# optimizer state). Writes benchmarks/results/distributed.csv (one row per
# run) and benchmarks/results/distributed.md (the figures).
#
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDTR_BUILD_BENCHMARKS=ON
#   cmake --build build -j --target bench_distributed
#   benchmarks/distributed.sh [build]          # on a quiet machine, >= 2 cores
#
# Environment: STEPS (measured steps per run, default 10), WARMUP (2),
# REPEATS (runs per timing configuration, the median is kept; default 3),
# TOLERANCE (bisection stops when the bracket is this fraction of the
# unbudgeted peak; 0.01), TRIAL_TIMEOUT (seconds per run, 300: a budget
# probe past it, thrashing near the floor, counts as infeasible; near the
# floor one chain step can take minutes, so the bisections dominate the
# run: expect well over half an hour), MPIRUN (default: mpirun with the
# options ctest uses), QUICK=1 (one step, one repeat, 5% tolerance: checks
# that the script works, gives no figures), SUMMARY_ONLY=1 (no runs: writes
# distributed.md from an existing distributed.csv), PARTS (comma-separated
# timing, memory, budget; default all three; rows of earlier parts in the
# CSV are kept, so the timing can run later, alone on a quiet machine).
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${1:-build}
BIN="$BUILD/benchmarks/distributed"
[[ -x "$BIN" ]] || { echo "distributed.sh: $BIN not built (cmake --build $BUILD --target bench_distributed)" >&2; exit 2; }
MPIRUN=${MPIRUN:-"mpirun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader"}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-2}
REPEATS=${REPEATS:-3}
TOLERANCE=${TOLERANCE:-0.01}
TRIAL_TIMEOUT=${TRIAL_TIMEOUT:-300}
if [[ "${QUICK:-0}" == 1 ]]; then STEPS=1; WARMUP=1; REPEATS=1; TOLERANCE=0.05; fi
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 DTR_COLLECTIVE_TIMEOUT=${DTR_COLLECTIVE_TIMEOUT:-120}
unset DTR_MEMORY_BUDGET

OUT=benchmarks/results
mkdir -p "$OUT"
CSV="$OUT/distributed.csv"
LOG="$OUT/distributed.log"
if [[ "${SUMMARY_ONLY:-0}" != 1 ]]; then
[[ "${PARTS:-}" != "" ]] || : > "$LOG"
PARTS=${PARTS:-timing,memory,budget}
part() { [[ ",$PARTS," == *",$1,"* ]]; }
[[ -f "$CSV" && "$PARTS" != "timing,memory,budget" ]] ||
  echo "experiment,model,world,comm,zero,budget_bytes,steps,step_ms,backward_ms,comm_ms,peak_bytes,state_bytes,evictions,loss,exit" > "$CSV"

# run EXPERIMENT NP ARGS...: one run; appends its row to the CSV; prints the row.
run() {
  local experiment=$1 np=$2
  shift 2
  local line code=0
  line=$(timeout "$TRIAL_TIMEOUT" $MPIRUN -np "$np" "$BIN" --steps "$STEPS" --warmup "$WARMUP" "$@" 2>>"$LOG" |
         grep '^result ') || code=$?
  echo "$experiment np=$np $* -> ${line:-no result} (exit $code)" >> "$LOG"
  if [[ -z "$line" ]]; then
    echo "$experiment,,$np,,,,,,,,,,,,fail" >> "$CSV"
    return 1
  fi
  python3 - "$experiment" "$line" >> "$CSV" <<'PY'
import sys
exp, line = sys.argv[1], sys.argv[2]
kv = dict(f.split("=", 1) for f in line.split()[1:])
keys = "model world comm zero budget_bytes steps step_ms backward_ms comm_ms peak_bytes state_bytes evictions loss".split()
print(",".join([exp] + [kv[k] for k in keys] + ["0"]))
PY
}

if part timing; then
echo "== timing: gpt, 1 rank (batch 8) and 2 ranks (batch 4 each), $REPEATS x"
for r in $(seq "$REPEATS"); do
  run time_1rank 1 --model gpt --comm none
  run time_2rank_none 2 --model gpt --comm none
  run time_2rank_sync 2 --model gpt --comm sync
  run time_2rank_ddp 2 --model gpt --comm ddp
done
fi
if part memory; then
echo "== memory: gpt on 2 ranks with and without --zero"
run mem_2rank 2 --model gpt --comm ddp
run mem_2rank_zero 2 --model gpt --comm ddp --zero
run mem_1rank 1 --model gpt --comm none
fi

# feasible ZERO BUDGET: whether the chain trains on 2 ranks under BUDGET bytes per rank.
feasible() {
  local extra=()
  [[ "$1" == 1 ]] && extra=(--zero)
  run "budget_zero$1" 2 --model chain --comm ddp --steps 1 --budget "$2" "${extra[@]}" >/dev/null 2>&1
}

if part budget; then
echo "== smallest feasible budget: chain on 2 ranks"
run chain_peak 2 --model chain --comm ddp --steps 1
run chain_peak_zero 2 --model chain --comm ddp --steps 1 --zero
PEAK=$(awk -F, '$1=="chain_peak"{print $11}' "$CSV" | tail -1)
for zero in 0 1; do
  hi=$PEAK
  lo=$(python3 -c "print(int($PEAK * ${LOW_FRACTION:-0.05}))")
  while python3 -c "import sys; sys.exit(0 if ($hi - $lo) > $TOLERANCE * $PEAK else 1)"; do
    mid=$(( (lo + hi) / 2 ))
    if feasible "$zero" "$mid"; then hi=$mid; else lo=$mid; fi
    echo "  zero=$zero: bracket [$lo, $hi]"
  done
  echo "smallest_zero$zero,chain,2,ddp,$zero,$hi,,,,,,,,,0" >> "$CSV"
done
fi
fi  # SUMMARY_ONLY

python3 - "$CSV" "$OUT/distributed.md" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def get(exp, key):
    vals = [float(r[key]) for r in rows if r["experiment"] == exp and r["exit"] == "0" and r[key] != ""]
    return statistics.median(vals) if vals else float("nan")
t1, t2n, t2s, t2d = (get(e, "step_ms") for e in ("time_1rank", "time_2rank_none", "time_2rank_sync", "time_2rank_ddp"))
b2n, b2d = get("time_2rank_none", "backward_ms"), get("time_2rank_ddp", "backward_ms")
c2s = get("time_2rank_sync", "comm_ms")
exposed = max(0.0, b2d - b2n)
hidden = max(0.0, min(1.0, 1 - exposed / c2s)) if c2s > 0 else float("nan")
mib = lambda b: b / 2**20
peak_chain = get("chain_peak", "peak_bytes")
small = {z: get(f"smallest_zero{z}", "budget_bytes") for z in (0, 1)}
out = open(sys.argv[2], "w")
w = out.write
w("# Data-parallel training: the zoo's gpt on 1 and 2 ranks, ZeRO stage 1\n\n")
w("MPI (OpenMPI, shared memory), one kernel thread per rank, the same global batch (gpt: 8; 2 ranks take 4 each); "
  "medians over the measured steps, the slowest rank, the median of the repeats. "
  "Produced by `benchmarks/distributed.sh` (rows in `distributed.csv`).\n\n")
w("| gpt | step (ms) | backward (ms) | all-reduce (ms) |\n|---|---:|---:|---:|\n")
w(f"| 1 rank | {t1:.1f} | {get('time_1rank','backward_ms'):.1f} | - |\n")
w(f"| 2 ranks, no gradient sync (compute only) | {t2n:.1f} | {b2n:.1f} | - |\n")
w(f"| 2 ranks, all-reduce after backward (blocking, 25 MiB buckets) | {t2s:.1f} | {get('time_2rank_sync','backward_ms'):.1f} | {c2s:.1f} |\n")
w(f"| 2 ranks, DistributedDataParallel (overlapped) | {t2d:.1f} | {b2d:.1f} | {exposed:.1f} exposed |\n\n")
w(f"- Speed-up on 2 ranks (DDP): {t1 / t2d:.2f}x; scaling efficiency {t1 / (2 * t2d):.0%} "
  f"(blocking all-reduce: {t1 / (2 * t2s):.0%}).\n")
w(f"- All-reduce hidden behind backward: {hidden:.0%} (exposed = DDP's backward − the compute-only backward "
  f"= {exposed:.1f} ms, of {c2s:.1f} ms for the same all-reduces run blocking).\n\n")
w("| gpt peak per rank | peak (MiB) | optimizer state (MiB) |\n|---|---:|---:|\n")
for exp, name in (("mem_1rank", "1 rank"), ("mem_2rank", "2 ranks"), ("mem_2rank_zero", "2 ranks, --zero")):
    w(f"| {name} | {mib(get(exp,'peak_bytes')):.1f} | {mib(get(exp,'state_bytes')):.1f} |\n")
w("\n| chain on 2 ranks | unbudgeted peak (MiB) | smallest feasible budget (MiB) | ratio to the unsharded peak |\n|---|---:|---:|---:|\n")
for z, name in ((0, "replicated optimizer state"), (1, "ZeRO stage 1 (--zero)")):
    p = get("chain_peak_zero" if z else "chain_peak", "peak_bytes")
    w(f"| {name} | {mib(p):.1f} | {mib(small[z]):.1f} | {small[z] / peak_chain:.3f} |\n")
out.close()
print(open(sys.argv[2]).read())
PY

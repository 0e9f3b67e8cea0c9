#!/usr/bin/env bash
# The CUDA backend's checks on a GPU machine (DESIGN.md "The CUDA backend").
#
# A GPU machine may reach no package registry and have none of Debian's
# libraries, so the programs are built elsewhere: `./dtr.sh gpu-bundle` builds
# them with the CUDA backend and packs them, with the shared libraries they
# need that a CUDA machine lacks (Abseil, spdlog, fmt, OpenBLAS, GoogleTest,
# ...), the golden values and train_gpt's text, into build-gpu/bundle.tar.xz
# (under 64 MiB). This script unpacks it, finds the CUDA libraries (the
# toolkit's, and cuDNN and cuBLAS from Python's nvidia-* packages, which
# PyTorch installs), and runs, printing every figure:
#   1. the CUDA tests and the conformance harness on cuda:0 against PyTorch's
#      values (golden, gradcheck, bitwise under a budget on the device);
#   2. cuBLAS GEMM through dtr against torch.matmul on the same device;
#   3. train_gpt --device cuda at budget fractions 1.0 and 0.5;
#   4. the zoo's gpt and resnet on cuda:0, unbudgeted and at 0.5 and 0.3 of
#      their peak, and PyTorch's step on the same models as the peer.
# Without a device it says so and exits 0. Usage: scripts/gpu-check.sh
# [--quick] [BUNDLE] (default build-gpu/bundle.tar.xz, or an unpacked
# build-gpu/bundle); --quick runs checks 1 and 2 alone.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

quick=0
if [[ ${1:-} == --quick ]]; then
  quick=1
  shift
fi
bundle=${1:-build-gpu/bundle.tar.xz}
start=$SECONDS
say() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - start)); }
failures=0
run() {  # run NAME TIMEOUT CMD...: one check, its exit status recorded
  local name=$1 limit=$2
  shift 2
  say "$name"
  timeout "$limit" "$@"
  local rc=$?
  if ((rc != 0)); then
    echo "gpu-check: $name failed (exit $rc)"
    failures=$((failures + 1))
  fi
  return 0
}

if [[ -f $bundle ]]; then
  dir=$(mktemp -d)
  tar -xJf "$bundle" -C "$dir"
  root=$dir/bundle
elif [[ -d $bundle ]]; then
  root=$bundle
else
  echo "gpu-check: no bundle at $bundle (build one with ./dtr.sh gpu-bundle)" >&2
  exit 2
fi

# The CUDA libraries: the toolkit's, then the nvidia-* Python packages'.
python=${PYTHON:-python3}
libs=$root/lib
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do [[ -d $d ]] && libs=$libs:$d; done
if command -v "$python" >/dev/null; then
  extra=$("$python" - <<'EOF' 2>/dev/null
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
dirs = []
for r in roots:
    # nvidia/<package>/lib, or nvidia/cu13/lib in CUDA 13's wheels.
    for lib in sorted(glob.glob(os.path.join(r, "nvidia", "**", "lib*.so*"), recursive=True)):
        d = os.path.dirname(lib)
        if d not in dirs:
            dirs.append(d)
print(":".join(dirs))
EOF
)
  [[ -n $extra ]] && libs=$libs:$extra
fi
libs=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
echo "gpu-check: the bundle's programs run with LD_LIBRARY_PATH=$libs"
# Only dtr's programs see the bundle's libraries: PyTorch keeps its own.
dtr() { LD_LIBRARY_PATH=$libs "$@"; }
if dtr ldd "$root/bin/dtr_tests" | grep "not found"; then
  echo "gpu-check: the bundle's programs miss the libraries above" >&2
  exit 1
fi

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-check: skipped: no CUDA device (nvidia-smi finds none); the bundle's programs load"
  exit 0
fi
nvidia-smi -L

export DTR_GOLDEN_FILE=$root/golden/golden.txt OMP_NUM_THREADS=1

# 1. Tests: the CUDA suite and every conformance case on cuda:0.
run "CUDA tests and conformance on cuda:0" 240 \
  env LD_LIBRARY_PATH="$libs" "$root/bin/dtr_tests" --gtest_brief=1 '--gtest_filter=Cuda*:*cuda_0*:CachingAllocator.*:CheapestWindow.*'

# 2. GEMM: dtr (cuBLAS) against torch.matmul.
run "GEMM TFLOP/s, dtr and torch" 90 env LD_LIBRARY_PATH="$libs" "$root/bin/cuda_gemm"
if "$python" -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  "$python" - <<'EOF'
import time, torch
torch.backends.cuda.matmul.allow_tf32 = False
for n in (1024, 4096, 8192):
    a = torch.randn(n, n, device="cuda"); b = torch.randn(n, n, device="cuda")
    for _ in range(3): a @ b
    torch.cuda.synchronize(); t = time.perf_counter(); reps = 10
    for _ in range(reps): a @ b
    torch.cuda.synchronize(); s = (time.perf_counter() - t) / reps
    print(f"torch float32 {n}x{n}x{n}: {2 * n**3 / s / 1e12:.1f} TFLOP/s")
EOF
fi

if ((quick)); then
  say "done (--quick): $failures check(s) failed"
  exit $((failures != 0))
fi

# 3. train_gpt on the GPU at H200-sized settings.
for f in 1.0 0.5; do
  run "train_gpt --device cuda --budget-fraction $f" 120 env LD_LIBRARY_PATH="$libs" "$root/bin/train_gpt" --device cuda \
    --data "$root/data/fortunes" --steps 30 --batch-size 64 --seq-len 256 --layers 6 --n-embd 384 \
    --heads 6 --budget-fraction "$f" --sample-bytes 0 --eval-interval 1000
done

# 4. The zoo on cuda:0, and PyTorch's step on the same models.
for m in gpt resnet; do
  line=$(dtr timeout 120 "$root/bin/zoo_step" --model "$m" --device cuda --steps 5 --warmup 1)
  echo "$line"
  peak=$(sed -n 's/.*"peak_bytes": \([0-9]*\).*/\1/p' <<<"$line")
  for r in 0.5 0.3; do
    [[ -n $peak ]] || break
    b=$("$python" -c "print(int($peak * $r))")
    run "zoo $m at $r of its peak ($b bytes)" 180 env LD_LIBRARY_PATH="$libs" "$root/bin/zoo_step" --model "$m" --device cuda \
      --steps 5 --warmup 1 --budget "$b"
  done
  if [[ -f $root/benchmarks/pytorch_zoo.py ]]; then
    run "PyTorch $m on cuda" 180 "$python" "$root/benchmarks/pytorch_zoo.py" --child "$m" --device cuda \
      --mode plain --steps 5 --warmup 1
  fi
done

say "done: $failures check(s) failed"
((failures == 0))

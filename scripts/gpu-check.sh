#!/usr/bin/env bash
# The CUDA backend's checks on a GPU machine (DESIGN.md "The CUDA backend").
#
# A GPU machine may reach no package registry and have none of Debian's
# libraries, so the programs are built elsewhere: `./dtr.sh gpu-bundle` builds
# them with the CUDA backend and packs them, with the shared libraries they
# need that a CUDA machine lacks (Abseil, spdlog, fmt, OpenBLAS, ...), the
# golden values and train_gpt's text, into build-gpu/bundle.tar.xz (under
# 64 MiB), with the newest glibc it needs in bundle/GLIBC_REQUIRED. This
# script unpacks it, finds the CUDA libraries (the toolkit's, and cuDNN and
# cuBLAS from Python's nvidia-* packages, which PyTorch installs), and, printing
# every figure:
#   0. prints the machine (GPU, driver, compute capability, glibc, CUDA,
#      compute-sanitizer, Python, PyTorch) and the bundle, then stops with a
#      failure when the machine's glibc is older than the bundle needs, when
#      a packed program misses a library, when nvidia-smi is missing or finds
#      no GPU, when the driver is older than the bundle's CUDA runtime needs,
#      or when dtr itself sees no CUDA device (cuda_gemm on one small product);
#   1. runs the CUDA tests (suites Cuda*, less the host-emulation ones and the
#      one no-device test) and the conformance harness on cuda:0 (every case
#      *cuda_0*: golden values, gradcheck, bitwise under a budget), each
#      gtest run read from its JSON report by scripts/gtest_summary.py: a
#      failed or skipped test, or a filter that matched nothing, fails it;
#   2. runs CudaGpu.* under compute-sanitizer's memcheck and one test under
#      racecheck (a sanitizer error fails it);
#   3. GEMM: dtr (cuBLAS, values checked against float64 on the CPU) and
#      torch.matmul, float32 (TF32 off) and bfloat16, in TFLOP/s;
#   4. train_gpt --device cuda at budget fractions 1.0 and 0.5, whose losses
#      must be equal (scripts/train_gpt_losses.py);
#   5. the zoo's gpt and resnet on cuda:0 through dtr, unbudgeted and at 0.5
#      of their peak (same loss, scripts/zoo_compare.py), and PyTorch eager on
#      the same models.
# Every step runs under its own time limit (T_* below: they sum to under the
# 8 minutes a GPU machine gives the whole script) and counts as a failure
# when it fails or runs out of time. Exit status: 0 when every step passed,
# 1 when any failed (a summary lists them), 2 for bad arguments or no bundle.
# Logs and reports stay in the folder printed at the start.
#
# Usage: scripts/gpu-check.sh [--quick] [BUNDLE] (default
# build-gpu/bundle.tar.xz, or an unpacked build-gpu/bundle); --quick runs
# steps 0 to 3 alone. PYTHON names the Python with PyTorch (default python3).
set -uo pipefail
usage() { echo "usage: scripts/gpu-check.sh [--quick] [BUNDLE]" >&2; }
quick=0
if [[ ${1:-} == --quick ]]; then
  quick=1
  shift
fi
if (($# > 1)) || [[ ${1:-} == -* ]]; then
  usage
  exit 2
fi
# A bundle path given is the caller's (relative to where the script was run
# from); the default is the repository's.
if (($# == 1)); then
  bundle=$(realpath -m -- "$1")
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
repo=$PWD
bundle=${bundle:-$repo/build-gpu/bundle.tar.xz}
python=${PYTHON:-python3}

# Time limits of the steps, seconds. With a second of grace each (timeout
# -k 1), the 5 s of each checker (T_CHECK) and ~10 s of set-up (unpacking,
# ldd, nvidia-smi) they sum to under the 8 minutes a GPU machine gives the
# whole script; the start says by how much.
T_ENV=15 T_PROBE=20 T_TESTS=30 T_CONFORMANCE=70 T_MEMCHECK=30 T_RACECHECK=20 T_GEMM=30 T_TORCH_GEMM=20
T_TRAIN=30 T_TRAIN_BUDGET=30 T_ZOO=15 T_ZOO_BUDGET=20 T_ZOO_TORCH=15 T_CHECK=5
limits_quick=$((T_ENV + T_PROBE + T_TESTS + T_CONFORMANCE + T_MEMCHECK + T_RACECHECK + T_GEMM + T_TORCH_GEMM
  + 4 * T_CHECK + 12))
limits_all=$((limits_quick + T_TRAIN + T_TRAIN_BUDGET + T_CHECK + 2 * (T_ZOO + T_ZOO_BUDGET + T_ZOO_TORCH + T_CHECK)
  + 11))

# The gtest filters. CudaEmulation.* runs only with DTR_TEST_DEVICE_KERNELS=cuda
# (ctest's cuda.emulated, on any machine) and the no-device test skips on a
# GPU, so both are left out: every test selected here must run.
CUDA_TESTS='Cuda*:CachingAllocator.*:CheapestWindow.*-CudaEmulation.*:CudaBackend.WithoutADeviceToCudaIsADeviceErrorAndTheCpuWorks'
CONFORMANCE_TESTS='*cuda_0*'
# Less the test whose child process faults on purpose (memcheck would report it).
MEMCHECK_TESTS='CudaGpu.*-CudaGpu.AnIllegalAddressLosesTheDeviceWithOneClearError'
RACECHECK_TESTS='CudaGpu.AModelTrainsAcrossToCudaAsOnTheCpu'

start=$SECONDS
say() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - start)); }
failed_steps=()
passed_steps=()
summary() {
  say "summary"
  local s
  for s in "${passed_steps[@]}"; do echo "  passed: $s"; done
  for s in "${failed_steps[@]}"; do echo "  FAILED: $s"; done
  echo "gpu-check: ${#passed_steps[@]} step(s) passed, ${#failed_steps[@]} failed, $((SECONDS - start)) s; logs in $work"
}
# die MESSAGE: a failure that leaves nothing further worth running.
die() {
  echo "gpu-check: FAILED: $*"
  failed_steps+=("$1")
  summary
  exit 1
}
slug() { tr -c 'A-Za-z0-9.\n' '_' <<<"$1" | cut -c1-60; }
# step NAME LIMIT CMD...: one counted step under a time limit; its output
# goes to the terminal and to $work/<name>.log ($log names it afterwards).
step() {
  local name=$1 limit=$2
  shift 2
  say "$name (limit ${limit}s)"
  log=$work/$(slug "$name").log
  local t0=$SECONDS
  timeout -k 1 "$limit" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local took=$((SECONDS - t0))
  if ((rc == 124 || rc == 137)); then
    echo "gpu-check: FAILED: $name: ran out of its ${limit}s"
    failed_steps+=("$name (out of time after ${took}s)")
  elif ((rc != 0)); then
    echo "gpu-check: FAILED: $name (exit $rc)"
    failed_steps+=("$name (exit $rc, ${took}s)")
  else
    passed_steps+=("$name (${took}s)")
  fi
  return "$rc"
}
# gtest_step NAME LIMIT FILTER [PREFIX...]: dtr_tests on FILTER (run through
# PREFIX, a sanitizer), passed only when the program passes and its JSON
# report shows every selected test run and none skipped.
gtest_step() {
  local name=$1 limit=$2 filter=$3
  shift 3
  local report
  report=$work/$(slug "$name").json
  step "$name" "$limit" "$@" env LD_LIBRARY_PATH="$libs" "$root/bin/dtr_tests" --gtest_brief=1 \
    "--gtest_filter=$filter" "--gtest_output=json:$report"
  step "$name: every selected test ran, none skipped" "$T_CHECK" "$python" "$repo/scripts/gtest_summary.py" \
    --name "$name" "$report"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
echo "gpu-check: logs and reports in $work; the steps' limits sum to ${limits_all}s (--quick: ${limits_quick}s)"
if [[ -f $bundle ]]; then
  # The unpacked 100+ MiB go at exit, whatever the tarball held; the logs stay.
  mkdir -p "$work/unpacked"
  trap 'rm -rf "$work/unpacked"' EXIT
  tar -xJf "$bundle" -C "$work/unpacked" || { echo "gpu-check: cannot unpack $bundle" >&2; exit 2; }
  root=$work/unpacked/bundle
elif [[ -d $bundle ]]; then
  root=$(cd "$bundle" && pwd)
else
  echo "gpu-check: no bundle at $bundle (build one with ./dtr.sh gpu-bundle)" >&2
  rmdir "$work"
  exit 2
fi

# ---- 0. the machine and the bundle
say "environment"
echo "host: $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) memory"
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
[[ -n $glibc ]] || glibc=$(ldd --version 2>/dev/null | head -1 | grep -o '[0-9][0-9.]*$')
echo "glibc: ${glibc:-unknown} ($(ldd --version 2>/dev/null | head -1))"
have_smi=0
if command -v nvidia-smi >/dev/null; then
  have_smi=1
  nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total,pci.bus_id --format=csv 2>&1 |
    sed 's/^/nvidia-smi: /'
else
  echo "nvidia-smi: not installed"
fi
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[[ -x $nvcc_bin ]] && echo "nvcc: $("$nvcc_bin" --version | sed -n 's/.*release \([0-9.]*\), \(V[0-9.]*\).*/\1 (\2)/p') ($nvcc_bin)"
sanitizer=$(command -v compute-sanitizer || true)
for s in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
  [[ -z $sanitizer && -x $s ]] && sanitizer=$s
done
echo "compute-sanitizer: ${sanitizer:-not found}${sanitizer:+ ($("$sanitizer" --version 2>/dev/null | grep -o 'Version [^ ]*' | head -1))}"
echo "bundle: $bundle"
sed 's/^/bundle: /' "$root/BUILD_INFO" 2>/dev/null
echo "bundle: needs glibc $(cat "$root/GLIBC_REQUIRED" 2>/dev/null || echo '(not recorded)')"
timeout -k 1 "$T_ENV" "$python" - <<'EOF' 2>&1 | sed 's/^/python: /'
import platform, sys
print(f"Python {platform.python_version()} ({sys.executable})")
try:
    import torch
except Exception as e:
    print(f"no PyTorch: {e}")
    raise SystemExit(0)
print(f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
if torch.cuda.is_available():
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        print(f"cuda:{i} {p.name}, compute capability {p.major}.{p.minor}, {p.total_memory / 2**30:.1f} GiB, "
              f"{p.multi_processor_count} SMs")
else:
    print("PyTorch sees no CUDA device")
EOF

# The glibc the bundle needs, before anything of it runs.
required=$(cat "$root/GLIBC_REQUIRED" 2>/dev/null)
if [[ -z $required ]]; then
  die "bundle: no GLIBC_REQUIRED in $root (an old bundle: rebuild it with ./dtr.sh gpu-bundle)"
elif [[ -z $glibc ]]; then
  die "glibc: cannot tell this machine's glibc version (getconf GNU_LIBC_VERSION, ldd --version); the bundle needs $required"
elif [[ $(printf '%s\n%s\n' "$required" "$glibc" | sort -V | head -1) != "$required" ]]; then
  echo "gpu-check: the files that need more than glibc $glibc:"
  grep -v '^none ' "$root/GLIBC_BY_FILE" | while read -r v f; do
    [[ $(printf '%s\n%s\n' "$v" "$glibc" | sort -V | tail -1) != "$glibc" ]] && echo "  $f needs glibc $v"
  done
  die "glibc: the bundle needs glibc >= $required and this machine has $glibc: build the bundle on a system whose glibc is at most $glibc"
fi
echo "gpu-check: glibc $glibc >= $required, which the bundle needs"

# The CUDA libraries: the toolkit's, then the nvidia-* Python packages'.
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
export LD_LIBRARY_PATH=$libs
missing=$(ldd "$root"/bin/* "$root"/tests/* "$root"/lib/* 2>&1 | grep 'not found' | sort -u)
if [[ -n $missing ]]; then
  echo "$missing"
  die "libraries: the bundle's programs miss the libraries above"
fi
unset LD_LIBRARY_PATH

# A device: nvidia-smi's GPUs, a driver new enough for the CUDA runtime the
# bundle links (libcudart.so.13: 580 or later), and dtr's own view.
if ((!have_smi)); then
  die "no CUDA device found: nvidia-smi is not installed (no NVIDIA driver on this machine)"
fi
if ! gpus=$(nvidia-smi -L 2>&1) || [[ $gpus != *"GPU "[0-9]* ]]; then
  die "no CUDA device found: nvidia-smi lists no GPU (${gpus:-no output})"
fi
echo "$gpus"
cudart=$(sed -n 's/.*libcudart\.so\.\([0-9]*\).*/\1/p' "$root/BUILD_INFO" 2>/dev/null)
case ${cudart:-13} in
  12) driver_min=525 ;;
  *) driver_min=580 ;;
esac
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
if [[ ! ${driver%%.*} =~ ^[0-9]+$ ]]; then
  die "no usable CUDA device: nvidia-smi reports driver '${driver:-}' (not a version)"
fi
if ((${driver%%.*} < driver_min)); then
  die "no usable CUDA device: driver ${driver:-unknown} is older than $driver_min, which the bundle's CUDA ${cudart:-13} runtime needs"
fi
export DTR_GOLDEN_FILE=$root/golden/golden.txt OMP_NUM_THREADS=1
step "dtr finds cuda:0 (one checked 256x256 product)" "$T_PROBE" \
  env LD_LIBRARY_PATH="$libs" "$root/bin/cuda_gemm" --sizes 256 --dtypes float32 || {
  echo "gpu-check: FAILED: no CUDA device found by dtr (see above); nothing else can run"
  summary
  exit 1
}

# ---- 1. the tests
gtest_step "CUDA tests on cuda:0" "$T_TESTS" "$CUDA_TESTS"
gtest_step "conformance on cuda:0" "$T_CONFORMANCE" "$CONFORMANCE_TESTS"

# ---- 2. compute-sanitizer
if [[ -n $sanitizer ]]; then
  gtest_step "memcheck: $MEMCHECK_TESTS" "$T_MEMCHECK" "$MEMCHECK_TESTS" \
    "$sanitizer" --tool memcheck --error-exitcode 99 --print-limit 20
  gtest_step "racecheck: $RACECHECK_TESTS" "$T_RACECHECK" "$RACECHECK_TESTS" \
    "$sanitizer" --tool racecheck --error-exitcode 99 --print-limit 20
else
  echo "gpu-check: FAILED: compute-sanitizer not found (PATH, /usr/local/cuda/bin)"
  failed_steps+=("memcheck and racecheck: compute-sanitizer not found")
fi

# ---- 3. GEMM: dtr against torch.matmul on the same device
step "GEMM through dtr, values checked" "$T_GEMM" env LD_LIBRARY_PATH="$libs" "$root/bin/cuda_gemm"
step "GEMM through torch.matmul" "$T_TORCH_GEMM" "$python" - <<'EOF'
import time, torch
torch.backends.cuda.matmul.allow_tf32 = False  # as dtr: true FP32
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False  # as dtr: FP32 sums
for dtype in (torch.float32, torch.bfloat16):
    for n in (1024, 4096, 8192):
        a = torch.randn(n, n, device="cuda").to(dtype); b = torch.randn(n, n, device="cuda").to(dtype)
        for _ in range(3): a @ b
        torch.cuda.synchronize(); t = time.perf_counter(); reps = 10
        for _ in range(reps): a @ b
        torch.cuda.synchronize(); s = (time.perf_counter() - t) / reps
        name = str(dtype).replace("torch.", "")
        print(f"torch {name} {n}x{n}x{n}: {2 * n**3 / s / 1e12:.1f} TFLOP/s ({s * 1e3:.3f} ms)")
EOF

if ((quick)); then
  summary
  ((${#failed_steps[@]} == 0))
  exit
fi

# ---- 4. train_gpt on the GPU: the losses under half the peak are the unbudgeted ones
train=("$root/bin/train_gpt" --device cuda --data "$root/data/fortunes" --steps 20 --batch-size 64 --seq-len 256
  --layers 6 --n-embd 384 --heads 6 --sample-bytes 0 --log-interval 1 --eval-interval 1000 --eval-batches 4)
step "train_gpt --device cuda --budget-fraction 1.0" "$T_TRAIN" \
  env LD_LIBRARY_PATH="$libs" "${train[@]}" --budget-fraction 1.0
train_full=$log
step "train_gpt --device cuda --budget-fraction 0.5" "$T_TRAIN_BUDGET" \
  env LD_LIBRARY_PATH="$libs" "${train[@]}" --budget-fraction 0.5
train_half=$log
step "train_gpt: the losses at 0.5 are those at 1.0" "$T_CHECK" \
  "$python" "$repo/scripts/train_gpt_losses.py" --labels 1.0,0.5 "$train_full" "$train_half"

# ---- 5. the zoo through dtr, unbudgeted and at 0.5 of its peak, and PyTorch eager
peer=$root/benchmarks/pytorch_zoo.py  # the models of the bundle's commit
[[ -f $peer ]] || peer=$repo/benchmarks/pytorch_zoo.py
for m in gpt resnet; do
  zoo=(env LD_LIBRARY_PATH="$libs" "$root/bin/zoo_step" --model "$m" --device cuda --steps 5 --warmup 1)
  step "zoo $m through dtr, no budget" "$T_ZOO" "${zoo[@]}"
  plain=$log
  peak=$(grep '^{' "$plain" | tail -1 | sed -n 's/.*"peak_bytes": \([0-9]*\).*/\1/p')
  if [[ -n $peak ]]; then
    step "zoo $m through dtr at 0.5 of its peak ($((peak / 2)) bytes)" "$T_ZOO_BUDGET" "${zoo[@]}" --budget $((peak / 2))
  else
    echo "gpu-check: FAILED: zoo $m at 0.5: no peak_bytes from the unbudgeted run"
    failed_steps+=("zoo $m through dtr at 0.5 of its peak (no unbudgeted peak)")
    log=/dev/null
  fi
  half=$log
  step "zoo $m through PyTorch eager" "$T_ZOO_TORCH" "$python" "$peer" --child "$m" \
    --device cuda --mode plain --steps 5 --warmup 1
  step "zoo $m: dtr at 0.5 is dtr unbudgeted; dtr against PyTorch" "$T_CHECK" \
    "$python" "$repo/scripts/zoo_compare.py" --model "$m" "$plain" "$half" "$log"
done

summary
((${#failed_steps[@]} == 0))

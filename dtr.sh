#!/usr/bin/env bash
# Developer entry point.
#   ./dtr.sh setup   install missing system packages (Debian/Ubuntu, apt) and
#                    the venv of the Python package (build/venv, nanobind)
#   ./dtr.sh build   configure and build Release in build/
#   ./dtr.sh test    setup, build, run the test suite and the Python tests
#                    (pytest); then the C++ suite under AddressSanitizer +
#                    UBSan in build-asan/ (clang; the fuzzers' build too)
#   ./dtr.sh run     setup, build, then the main job: train a GPT on real text
#                    under half its peak memory (examples/train_gpt, ~3 min)
#   ./dtr.sh bench   setup, build, run every benchmark in build/benchmarks/
#   ./dtr.sh golden [--check]  install Debian's PyTorch (python3-torch) and
#                    regenerate tests/golden/golden.txt (--check: fail if stale)
#   ./dtr.sh fuzz [SECONDS [TARGET...]]  the libFuzzer targets of the
#                    sanitizer build (build-asan/), each run SECONDS (default 60)
#   ./dtr.sh bench-env  install PyTorch 2 (CPU use; PyPI) and numpy into
#                    build/venv-bench for the PyTorch comparison
#   ./dtr.sh bench-sweep [--quick]  setup, build, bench-env, then the
#                    full sweep (benchmarks/sweep.py --full: every heuristic
#                    and budget and PyTorch's variants, one process per
#                    point), the planner's smallest feasible budgets, and
#                    the plot and tables in benchmarks/results/ (about 50
#                    minutes on two cores);
#                    --quick: the headline cells alone, one process per
#                    point, dtr and PyTorch alternated, into
#                    benchmarks/results/quick/ (7–9 minutes). Nothing
#                    else may run on the machine meanwhile.
#   ./dtr.sh smoke [TARGET...]  setup, configure as build does, build
#                    TARGETs (default: examples/train_mlp alone) and train
#                    train_mlp 20 steps under half its peak: a quick proof
#                    that an install works
#   ./dtr.sh fresh-check [--mirror URL]...  run `./dtr.sh smoke all` in a
#                    clean clone of HEAD inside a brand-new minimal Debian 12 root
#                    (mmdebstrap; chroot, so as root): a package the build
#                    needs that setup does not install fails it. The base
#                    root, apt's downloads and a ccache are kept in
#                    $DTR_FRESH_CACHE (default /var/tmp/dtr-fresh-check);
#                    with no --mirror the root gets this machine's apt
#                    sources and Acquire options, and its CA bundle and pip
#                    configuration
#   ./dtr.sh gpu-bundle  build the CUDA programs in build-gpu/ and pack them
#                    with what a bare GPU machine lacks into
#                    build-gpu/bundle.tar.xz for scripts/gpu-check.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"

JOBS=$(nproc 2>/dev/null || echo 2)
# Everything the README's commands need on a minimal Debian 12 root
# (`./dtr.sh fresh-check` proves it): make is only recommended by cmake, and
# setup installs without recommends; ccache makes rebuilds cost what changed.
PACKAGES=(
  cmake make ccache g++ libabsl-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libdnnl-dev zlib1g-dev libexpat1-dev python3 fortunes dataset-fashion-mnist
  python3-dev python3-venv python3-numpy python3-pytest
  openmpi-bin libopenmpi-dev
)
# The Python package is built for and tested with Debian's python3 through a
# venv that sees its packages (numpy, pytest, torch) and adds nanobind.
VENV=build/venv
NANOBIND_REQUIREMENT='nanobind>=2.0,<4'
# The PyTorch of the model-zoo comparison (benchmarks/pytorch_zoo.py): 2.4 or
# later for selective activation checkpointing, in a venv of its own so that
# the tests keep Debian's python3-torch.
BENCH_VENV=build/venv-bench
BENCH_TORCH_REQUIREMENT='torch>=2.4,<3'

# Each line says how long this command has run, so a slow stage shows.
log() { printf '== [%d s] %s\n' "$SECONDS" "$*" >&2; }

# setup [extra packages...]
setup() {
  local missing=()
  for pkg in "${PACKAGES[@]}" "$@"; do
    if ! dpkg -s "$pkg" >/dev/null 2>&1; then missing+=("$pkg"); fi
  done
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  log "installing: ${missing[*]}"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null; then
      echo "dtr.sh: these packages are missing and installing them needs root: ${missing[*]}" >&2
      echo "dtr.sh: run './dtr.sh setup' as root (or install sudo), or install them with apt-get" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
}

# The venv of the Python package (build/venv): Debian's python3 with its
# packages, plus nanobind from PyPI (the one step of setup that needs the network).
python_env() {
  if [[ ! -x $VENV/bin/python ]]; then
    log "creating $VENV (python3 -m venv --system-site-packages)"
    /usr/bin/python3 -m venv --system-site-packages "$VENV"
  fi
  if ! "$VENV/bin/python" -m nanobind --cmake_dir >/dev/null 2>&1; then
    log "installing $NANOBIND_REQUIREMENT into $VENV"
    "$VENV/bin/python" -m pip install --quiet "$NANOBIND_REQUIREMENT" ||
      log "warning: could not install nanobind; the Python package will not be built"
  fi
}

# configure_and_build DIR [cmake args...] [-- targets...] (default: all)
configure_and_build() {
  local dir=$1
  shift
  local args=() targets=()
  while (($#)); do
    if [[ $1 == -- ]]; then
      shift
      targets=(--target "$@")
      break
    fi
    args+=("$1")
    shift
  done
  local launcher=()
  # ccache, where installed, for C++ and CUDA alike (a rebuild after a small
  # change then costs what the change costs). Paths under the checkout are
  # hashed relative to it, so another clone (CI's) hits the same cache.
  if command -v ccache >/dev/null; then
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "${args[@]}"
  cmake --build "$dir" -j"$JOBS" "${targets[@]}"
}

# The one sanitizer build, build-asan/: clang with AddressSanitizer, UBSan
# and libFuzzer's coverage instrumentation (DTR_BUILD_FUZZERS), so the same
# objects serve the sanitized test suite (`test`) and the fuzz targets
# (`fuzz`). Without the CUDA backend: its host code is the Release build's
# (tested there, kernels under host emulation), and nvcc's objects are not
# instrumented anyway. sanitizer_build [targets...] (default: all).
sanitizer_build() {
  setup clang libfuzzer-14-dev
  log "sanitizer build (clang, ASan + UBSan + fuzzer coverage) in build-asan/"
  CC=clang CXX=clang++ configure_and_build build-asan -DDTR_BUILD_FUZZERS=ON -DDTR_BUILD_TESTS=ON -DDTR_CUDA=OFF \
    -DDTR_BUILD_BENCHMARKS=OFF -DDTR_BUILD_EXAMPLES=OFF -DDTR_BUILD_PYTHON=OFF -- "${@:-all}"
}

build() {
  log "build (Release) in build/"
  python_env
  configure_and_build build -DPython_EXECUTABLE="$PWD/$VENV/bin/python"
}

# The pytest suite (tests/python) against the package built in build/python.
# A package that was not built, or no tests collected (pytest's exit code 5),
# fails the run.
python_tests() {
  if ! compgen -G "build/python/dtr/_C*.so" >/dev/null; then
    echo "dtr.sh: the Python package was not built in build/python (see the configure output)" >&2
    exit 1
  fi
  local rc=0
  PYTHONPATH="$PWD/build/python" "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/python || rc=$?
  if ((rc == 5)); then echo "dtr.sh: pytest collected no tests" >&2; fi
  if ((rc != 0)); then exit "$rc"; fi
}

run_tests() {
  local dir=$1
  ctest --test-dir "$dir" --output-on-failure -j"$JOBS"
}

test_all() {
  # PyTorch 1.13 for reference values; libtorch-dev (its C++ API) so that CI
  # builds tests/libtorch_examples against real libtorch as well as dtr.
  setup python3-torch libtorch-dev
  build
  log "tests (Release)"
  run_tests build
  log "Python tests (pytest)"
  python_tests
  sanitizer_build
  log "tests (AddressSanitizer + UBSan)"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    run_tests build-asan
}

run_main() {
  setup
  build
  # The main job: train_gpt on the fortunes text under half the peak memory
  # of an unbudgeted step. Extra arguments are passed on (later flags win).
  local job=build/examples/train_gpt
  if [[ ! -x $job ]]; then
    echo "dtr.sh run: $job was not built (configure with -DDTR_BUILD_EXAMPLES=ON)" >&2
    exit 1
  fi
  log "running $job --budget-fraction 0.5 $*"
  exec "$job" --budget-fraction 0.5 "$@"
}

bench() {
  setup
  build
  local found=0 b
  for b in build/benchmarks/*; do
    [[ -f $b && -x $b ]] || continue
    # The zoo programs need arguments and run for long; bench-sweep runs them.
    case ${b##*/} in budget_sweep | zoo_step) continue ;; esac
    found=1
    log "$b"
    "$b" "$@"
  done
  if ((found == 0)); then echo "dtr.sh bench: no benchmarks built" >&2; fi
}

# bench_env: creates $BENCH_VENV with PyTorch 2 and numpy from PyPI and sets
# BENCH_PYTHON to its python. Where that cannot be installed, BENCH_PYTHON is
# Debian's python3 with python3-torch 1.13 and BENCH_MODES drops the variants
# that need PyTorch 2.
bench_env() {
  BENCH_PYTHON=$BENCH_VENV/bin/python
  BENCH_MODES=plain,checkpoint,sac,compile_0.5,compile_0.3
  if [[ ! -x $BENCH_PYTHON ]]; then
    log "creating $BENCH_VENV (python3 -m venv)"
    /usr/bin/python3 -m venv "$BENCH_VENV"
  fi
  if ! "$BENCH_PYTHON" -c 'import sys, torch, numpy; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null; then
    log "installing '$BENCH_TORCH_REQUIREMENT' numpy into $BENCH_VENV (PyPI; a few GB with its CUDA libraries)"
    if ! "$BENCH_PYTHON" -m pip install --quiet "$BENCH_TORCH_REQUIREMENT" numpy; then
      log "warning: PyTorch 2 could not be installed; the comparison runs with Debian's python3-torch 1.13 (plain and checkpoint only)"
      setup python3-torch
      BENCH_PYTHON=/usr/bin/python3
      BENCH_MODES=plain,checkpoint
    fi
  fi
  log "PyTorch for the comparison: $("$BENCH_PYTHON" -c 'import torch; print(torch.__version__)') ($BENCH_PYTHON)"
}

bench_sweep() {
  if [[ $# -gt 1 || ( $# -eq 1 && $1 != --quick ) ]]; then
    echo "dtr.sh bench-sweep: unexpected argument(s) $* (expected nothing or --quick)" >&2
    exit 2
  fi
  setup python3-matplotlib
  build
  bench_env
  local out=benchmarks/results
  if [[ ${1:-} == --quick ]]; then
    log "headline cells (benchmarks/sweep.py --quick) -> $out/quick/"
    /usr/bin/python3 benchmarks/sweep.py --quick --torch-python "$BENCH_PYTHON" --out "$out/quick"
    return
  fi
  mkdir -p "$out"
  log "smallest feasible ratios (budget planner, counts) -> $out/min_feasible.csv"
  build/benchmarks/budget_sweep --predict-only --models chain,gpt,resnet,unet,lstm,chain_b2048 --heuristics dtr_eq \
    --ratios 0.5 --steps 1 --warmup 1 --threads 1 --out "$out/min_feasible.csv" 2>"$out/min_feasible.log"
  log "full sweep, one process per point, dtr and PyTorch ($BENCH_MODES) alternated -> $out/points.csv"
  /usr/bin/python3 benchmarks/sweep.py --full --torch-python "$BENCH_PYTHON" --variants "$BENCH_MODES" --out "$out" \
    2>"$out/sweep.log"
  /usr/bin/python3 benchmarks/plot_sweep.py --results "$out"
}

# gpu-bundle: the programs scripts/gpu-check.sh runs on a GPU machine that
# has the CUDA libraries but none of Debian's, built here with the CUDA
# backend (no MPI, no NCCL, no Python) in build-gpu/ and packed with the
# shared libraries they need beyond the C library and CUDA's own, the
# golden values, train_gpt's text and the PyTorch peer into
# build-gpu/bundle.tar.xz, which must stay under 64 MiB. The programs and
# libdtr carry their own C++ runtime (-static-libstdc++ -static-libgcc) and
# name only the libraries they use (--as-needed); Debian's C++ libraries
# they link (Abseil, fmt, spdlog, oneDNN) still load libstdc++.so.6 and
# libgcc_s, which go along. The newest glibc symbol version any packed file
# needs goes into bundle/GLIBC_REQUIRED (each file's into GLIBC_BY_FILE),
# which gpu-check.sh compares with the GPU machine's glibc before anything
# runs: 2.36 on Debian 12 (arc4random, which libexpat and libstdc++'s
# std::random_device call, the copy linked into libdtr included).
gpu_bundle() {
  setup fortunes patchelf
  local link='-static-libstdc++ -static-libgcc -Wl,--as-needed'
  configure_and_build build-gpu -DDTR_CUDA=ON -DDTR_MPI=OFF -DDTR_NCCL=OFF -DDTR_BUILD_PYTHON=OFF \
    "-DCMAKE_EXE_LINKER_FLAGS=$link" "-DCMAKE_SHARED_LINKER_FLAGS=$link" \
    -- dtr_tests bench_zoo_step bench_cuda_gemm train_gpt
  local b=build-gpu/bundle
  rm -rf "$b" && mkdir -p "$b/bin" "$b/tests" "$b/lib" "$b/golden" "$b/data" "$b/benchmarks"
  cp build-gpu/tests/dtr_tests build-gpu/benchmarks/zoo_step build-gpu/benchmarks/cuda_gemm \
    build-gpu/examples/train_gpt "$b/bin/"
  # The tests' child programs (a fault that loses the device runs in its
  # own process): dtr_tests finds them in ../tests beside bin/.
  cp build-gpu/tests/dtr_*_child "$b/tests/"
  cp -L build-gpu/libdtr.so.0 "$b/lib/"
  # Left out: the C library (the loader must match it) and CUDA's own (the
  # toolkit's or PyTorch's nvidia-* packages on the GPU machine). Everything
  # else the programs load, directly or through another library, goes along.
  local keep='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libcud|libcublas|libnccl|libnv)'
  local lib
  for lib in $(ldd "$b"/bin/* "$b"/tests/* build-gpu/libdtr.so.0 | awk '/=> \//{print $1 " " $3}' | sort -u | awk '{print $2}'); do
    [[ $(basename "$lib") =~ $keep ]] && continue
    cp -Ln "$lib" "$b/lib/" 2>/dev/null || true
  done
  # The packed copies search only LD_LIBRARY_PATH (gpu-check sets it to the
  # bundle's lib/ and CUDA's): no RUNPATH into this build tree or /usr/local/cuda.
  for f in "$b"/bin/* "$b"/tests/* "$b"/lib/*; do
    chmod u+w "$f"
    patchelf --remove-rpath "$f"
    strip --strip-unneeded "$f"
  done
  # Every library a packed file loads resolves to the bundle's lib/ or is one
  # deliberately left out: a library found anywhere else on this machine
  # (the system's, the build tree's) would be missing on the GPU machine.
  local stray
  stray=$(LD_LIBRARY_PATH=$PWD/$b/lib ldd "$b"/bin/* "$b"/tests/* "$b"/lib/* 2>/dev/null |
    awk '/=>/ {print $1, $3}' | sort -u | while read -r name path; do
      [[ $name =~ $keep || $path == "$PWD/$b/lib/"* ]] || echo "  $name => $path"
    done)
  if [[ -n $stray ]]; then
    printf '%s\n' "$stray" >&2
    echo "dtr.sh: the bundle misses the libraries above (found outside $b/lib or not at all)" >&2
    exit 1
  fi
  # The glibc the bundle needs: the newest GLIBC_x.y symbol version of any
  # packed program or library.
  local f v
  for f in "$b"/bin/* "$b"/tests/* "$b"/lib/*; do
    v=$(objdump -T "$f" | { grep -o 'GLIBC_[0-9][0-9.]*' || true; } | sed 's/^GLIBC_//' | sort -Vu | tail -1)
    printf '%s %s\n' "${v:-none}" "${f#"$b"/}"
  done | sort -V -k1,1 -k2 >"$b/GLIBC_BY_FILE"
  awk '$1 != "none" {v = $1} END {print v}' "$b/GLIBC_BY_FILE" >"$b/GLIBC_REQUIRED"
  {
    echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(getconf GNU_LIBC_VERSION)"
    echo "nvcc $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')," \
      "code for $(grep -o 'sm_[0-9]*' build-gpu/CMakeFiles/dtr.dir/flags.make | sort -u | xargs)," \
      "$(objdump -p build-gpu/libdtr.so.0 | awk '/NEEDED/ && /libcudart/ {print $2}')"
  } >"$b/BUILD_INFO"
  cp tests/golden/golden.txt "$b/golden/"
  cp -r /usr/share/games/fortunes "$b/data/fortunes"
  cp benchmarks/pytorch_zoo.py "$b/benchmarks/"
  XZ_OPT=${XZ_OPT:--T0} tar -cJf build-gpu/bundle.tar.xz -C build-gpu bundle
  local size
  size=$(stat -c %s build-gpu/bundle.tar.xz)
  log "packed libraries: $(cd "$b/lib" && echo *)"
  log "glibc needed: $(cat "$b/GLIBC_REQUIRED") (by $(awk -v v="$(cat "$b/GLIBC_REQUIRED")" '$1 == v {printf "%s%s", s, $2; s = ", "}' "$b/GLIBC_BY_FILE"))"
  log "build-gpu/bundle.tar.xz: $(awk -v s="$size" 'BEGIN {printf "%.1f", s / 1048576}') MiB" \
    "($(du -sm "$b" | cut -f1) MiB unpacked, $(ls "$b/lib" | wc -l) libraries)"
  if ((size > 64 * 1048576)); then
    echo "dtr.sh: the bundle is over 64 MiB" >&2
    exit 1
  fi
}

# fuzz [SECONDS [TARGET...]]: tests/fuzz/ (libFuzzer, clang only).
fuzz() {
  local targets=(tests/fuzz/fuzz_*.cpp)
  targets=("${targets[@]##*/}")
  sanitizer_build "${targets[@]%.cpp}"
  tests/fuzz/run.sh build-asan "${1:-60}" "${@:2}"
}

# smoke [TARGET...]: the shortest proof that set-up, configure, compile, link
# and run work: the configure of `build` (the Python package required, so a
# missing header or nanobind fails here too), TARGETs built (default
# train_mlp; fresh-check builds all), train_mlp trained for 20 steps under
# half its peak (evictions and rematerializations happen).
smoke() {
  setup
  python_env
  local targets=("${@:-train_mlp}")
  [[ " ${targets[*]} " == *" all "* || " ${targets[*]} " == *" train_mlp "* ]] || targets+=(train_mlp)
  configure_and_build build -DPython_EXECUTABLE="$PWD/$VENV/bin/python" -DDTR_BUILD_PYTHON=ON -- "${targets[@]}"
  log "smoke test: build/examples/train_mlp --steps 20 --budget-fraction 0.5"
  build/examples/train_mlp --steps 20 --budget-fraction 0.5
}

# fresh-check [--mirror URL]...: `./dtr.sh smoke all` (every target of the
# README's configure, the tests included, then the smoke test) as a new user
# on a new machine would run it. The root has no CUDA toolkit (not a Debian
# package), so a CUDA header included outside `#if DTR_HAVE_CUDA` fails it. The base root (mmdebstrap --variant=apt: apt and the
# Essential packages, nothing else) is made once and copied for each run;
# apt's downloaded .debs and a ccache live beside it and are bind-mounted in,
# which saves the downloads and compiles but never an install: a package
# only this machine has is still missing in the root.
FRESH_CACHE=${DTR_FRESH_CACHE:-/var/tmp/dtr-fresh-check}
fresh_check() {
  local mirrors=()
  while (($#)); do
    case $1 in
      --mirror)
        [[ $# -ge 2 ]] || { echo "dtr.sh fresh-check: --mirror needs a URL" >&2; exit 2; }
        mirrors+=("$2")
        shift 2
        ;;
      *) echo "dtr.sh fresh-check: unexpected argument '$1' (expected --mirror URL)" >&2; exit 2 ;;
    esac
  done
  if [[ $(id -u) -ne 0 ]]; then
    echo "dtr.sh fresh-check: needs root (mmdebstrap, chroot and bind mounts); run it with sudo" >&2
    exit 2
  fi
  if ! command -v git >/dev/null || ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "dtr.sh fresh-check: needs git and a git checkout (it clones HEAD into the root)" >&2
    exit 2
  fi
  if ! command -v mmdebstrap >/dev/null; then
    log "installing mmdebstrap"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >/dev/null
  fi
  local start=$SECONDS
  local base=$FRESH_CACHE/base-bookworm
  mkdir -p "$FRESH_CACHE/apt-archives/partial" "$FRESH_CACHE/ccache" "$FRESH_CACHE/pip"
  if [[ ! -f $base/.dtr-complete ]]; then
    local sources=() aptopts=() f
    if ((${#mirrors[@]} == 0)); then
      # This machine's apt sources (one-line or deb822 files are pasted in as
      # they are) and its Acquire options (proxies, validity checks).
      for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [[ -f $f ]] && grep -qE '^[[:space:]]*(deb|URIs:)' "$f" && sources+=("$f")
      done
      for f in /etc/apt/apt.conf.d/*; do
        [[ -f $f ]] && grep -q '^[[:space:]]*Acquire' "$f" && aptopts+=("--aptopt=$f")
      done
    fi
    log "fresh-check: making a minimal Debian 12 root in $base (once; ${mirrors[*]:-${sources[*]:-deb.debian.org}})"
    rm -rf "$base" "$base.tmp"
    mmdebstrap --quiet --variant=apt "${aptopts[@]}" bookworm "$base.tmp" "${mirrors[@]}" "${sources[@]}"
    touch "$base.tmp/.dtr-complete"
    mv "$base.tmp" "$base"
    log "fresh-check: base root made in $((SECONDS - start)) s"
  fi
  local work
  work=$(mktemp -d "$FRESH_CACHE/run.XXXXXX")
  local root=$work/root
  # Unmount before removing, and never cross into a mount while removing.
  # shellcheck disable=SC2064
  trap "umount '$root/proc' '$root/var/cache/apt/archives' '$root/root/.cache/ccache' '$root/root/.cache/pip' 2>/dev/null; rm -rf --one-file-system '$work'" EXIT
  cp -a "$base" "$root"
  if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then cp /etc/ssl/certs/ca-certificates.crt "$root/etc/dtr-host-ca.crt"; fi
  if [[ -f /etc/pip.conf ]]; then cp /etc/pip.conf "$root/etc/pip.conf"; fi
  git clone --quiet --no-hardlinks "$PWD" "$root/src"
  mkdir -p "$root/root/.cache/ccache" "$root/root/.cache/pip"
  mount -t proc proc "$root/proc"
  mount --bind "$FRESH_CACHE/apt-archives" "$root/var/cache/apt/archives"
  mount --bind "$FRESH_CACHE/ccache" "$root/root/.cache/ccache"
  mount --bind "$FRESH_CACHE/pip" "$root/root/.cache/pip"
  log "fresh-check: ./dtr.sh smoke all in a clean Debian 12 root, clone of $(git rev-parse --short HEAD)"
  local ca=()
  [[ -f $root/etc/dtr-host-ca.crt ]] && ca=(PIP_CERT=/etc/dtr-host-ca.crt SSL_CERT_FILE=/etc/dtr-host-ca.crt)
  local rc=0
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CCACHE_DIR=/root/.cache/ccache PIP_CACHE_DIR=/root/.cache/pip "${ca[@]}" \
    /bin/bash -c 'cd /src && ./dtr.sh smoke all' || rc=$?
  log "fresh-check: exit $rc after $((SECONDS - start)) s"
  return $rc
}

# The conformance harness's reference values (tests/golden/gen_golden.py).
golden() {
  setup python3-torch
  /usr/bin/python3 tests/golden/gen_golden.py "$@"
}

usage() {
  sed -n '2,/^set -euo pipefail/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'
}

cmd=${1:-}
if [[ $# -gt 0 ]]; then shift; fi
no_arguments() {
  if [[ $# -gt 0 ]]; then
    echo "dtr.sh $cmd: unexpected argument(s) $* (see ./dtr.sh --help)" >&2
    exit 2
  fi
}
case $cmd in
  setup) no_arguments "$@" && setup && python_env ;;
  build) no_arguments "$@" && build ;;
  test) no_arguments "$@" && test_all ;;
  run) run_main "$@" ;;
  bench) bench "$@" ;;
  bench-env) setup && bench_env ;;
  bench-sweep) bench_sweep "$@" ;;
  fuzz) fuzz "$@" ;;
  smoke) smoke "$@" ;;
  fresh-check) fresh_check "$@" ;;
  gpu-bundle) no_arguments "$@" && gpu_bundle ;;
  golden) golden "$@" ;;
  -h | --help | help) usage ;;
  "")
    usage >&2
    exit 2
    ;;
  *)
    echo "dtr.sh: unknown command '$cmd'; the commands are:" >&2
    usage >&2
    exit 2
    ;;
esac

#!/bin/sh
# test.sh: from a fresh Debian machine with the CUDA toolkit to every test suite that can run here.
#   1. installs missing Debian packages (when root), 2. configures and builds every CUDA target,
#   3. runs the unit, mpi and gpu suites (gpu skips, saying so, without a GPU),
#   4. builds the host code again under AddressSanitizer + UndefinedBehaviorSanitizer and runs the unit suite there,
#      less the tests of scripts/ (suite scripts: python and shell, nothing the sanitizers see; run once in step 3).
set -eu
cd "$(dirname "$0")/.."
ROOT=$(pwd)

PKGS="meson ninja-build pkg-config libcjson-dev libopenmpi-dev openmpi-bin python3-matplotlib"
missing=""
for p in $PKGS; do dpkg -s "$p" > /dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "== installing:$missing"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
  else
    echo "test.sh: missing packages:$missing (run as root to install them)" >&2
    exit 1
  fi
fi
command -v nvcc > /dev/null || export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc > /dev/null || { echo "test.sh: nvcc not found (CUDA 13 toolkit needed)" >&2; exit 1; }

echo "== build (all CUDA targets)"
[ -f build/build.ninja ] || meson setup build
ninja -C build
echo "== tests: unit, mpi, gpu"
meson test -C build --suite unit --suite mpi --suite gpu --print-errorlogs
if ! nvidia-smi -L 2> /dev/null | grep -q GPU; then
  echo "!! gpu suite SKIPPED: no GPU on this machine. GPU tests (symmetric memory, every implementation with"
  echo "!! its check) must be run on a GPU machine: meson test -C build --suite gpu"
fi

echo "== host code under ASan + UBSan: unit suite"
[ -f build-san/build.ninja ] || meson setup build-san -Dbuildtype=debug -Db_sanitize=address,undefined -Dgpu_archs=90a
ninja -C build-san
LSAN_OPTIONS="suppressions=$ROOT/tests/lsan.supp:fast_unwind_on_malloc=0" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
  meson test -C build-san --suite unit --no-suite scripts --print-errorlogs
echo "== test.sh: all suites passed"

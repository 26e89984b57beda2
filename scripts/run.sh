#!/bin/sh
# run.sh CONFIG [mok-bench options]: builds if needed (a MOK_BUILD directory of prebuilt binaries without
#   build.ninja, or any where ninja is missing, has its mok-bench run as built: a GPU node, scripts/device), then
#   runs mok-bench with one MPI rank per visible GPU.
#   GPUs: the entries of CUDA_VISIBLE_DEVICES when it is set, else the "GPU n:" lines of nvidia-smi -L;
#   NP=N (or NGPUS=N) sets the rank count instead. One GPU is -np 1 with the same flags as several: Open MPI needs
#   nothing else for one rank. Without a GPU (or without mpirun) it stops before building, saying why.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 is passed to every rank): it can take shared GPUs down.
set -eu
[ $# -ge 1 ] || { echo "usage: [NP=N] scripts/run.sh CONFIG.json [mok-bench options]" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${MOK_BUILD:-$ROOT/build} # the build directory (default build/)

gpu_count() {
  if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c '[^[:space:]]' || true
  else
    nvidia-smi -L 2> /dev/null | grep -c '^GPU [0-9]' || true
  fi
}
NP=${NP:-${NGPUS:-}}
if [ -z "$NP" ]; then
  NP=$(gpu_count)
  if [ "$NP" -lt 1 ]; then
    if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
      echo "run.sh: no GPU: CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES' names none" >&2
    elif command -v nvidia-smi > /dev/null 2>&1; then
      echo "run.sh: no GPU: nvidia-smi -L lists none" >&2
    else
      echo "run.sh: no GPU: nvidia-smi not found (no NVIDIA driver here?)" >&2
    fi
    echo "run.sh: mok-bench needs one GPU per rank; without one, 'build/mok-bench --dry-run CONFIG' shows the plan" >&2
    exit 1
  fi
fi
case $NP in
  '' | *[!0-9]* | 0*) echo "run.sh: NP='$NP': want a whole number of ranks >= 1" >&2; exit 2;;
esac
command -v mpirun > /dev/null 2>&1 || { echo "run.sh: mpirun not found (Debian: openmpi-bin)" >&2; exit 1; }

command -v nvcc > /dev/null || export PATH="/usr/local/cuda/bin:$PATH"
if [ -f "$BUILD/build.ninja" ] && command -v ninja > /dev/null 2>&1; then
  ninja -C "$BUILD" mok-bench > /dev/null # a no-op when up to date
elif [ -x "$BUILD/mok-bench" ]; then
  # binaries built elsewhere (a GPU node: scripts/device/stage.sh; MOK_BUILD names their directory), or no ninja
  echo "run.sh: $BUILD is no build directory or ninja is missing: running its mok-bench as built" >&2
elif command -v ninja > /dev/null 2>&1 && command -v meson > /dev/null 2>&1; then
  meson setup "$BUILD" "$ROOT"
  ninja -C "$BUILD" mok-bench > /dev/null
else
  echo "run.sh: no meson/ninja here and no $BUILD/mok-bench to run (Debian: meson ninja-build; or MOK_BUILD=DIR)" >&2
  exit 1
fi

export NCCL_NVLS_ENABLE=0
set -- -np "$NP" --bind-to none -x NCCL_NVLS_ENABLE=0 -x PATH "$BUILD/mok-bench" "$@"
# -x of an unset variable makes Open MPI warn: LD_LIBRARY_PATH travels only when set
[ -n "${LD_LIBRARY_PATH:-}" ] && set -- -x LD_LIBRARY_PATH "$@"
[ "$(id -u)" = 0 ] && set -- --allow-run-as-root "$@"
exec mpirun "$@"

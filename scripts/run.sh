#!/bin/sh
# run.sh CONFIG [mok-bench options]: builds if needed, then one MPI rank per local GPU.
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 is passed to every rank): it can take shared GPUs down.
set -eu
[ $# -ge 1 ] || { echo "usage: scripts/run.sh CONFIG.json [mok-bench options]" >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
command -v nvcc > /dev/null || export PATH="/usr/local/cuda/bin:$PATH"
[ -f "$ROOT/build/build.ninja" ] || meson setup "$ROOT/build" "$ROOT"
ninja -C "$ROOT/build" mok-bench > /dev/null # a no-op when up to date
NGPUS=${NGPUS:-$(nvidia-smi -L 2> /dev/null | grep -c GPU || true)}
[ "$NGPUS" -ge 1 ] || { echo "run.sh: no GPU found (nvidia-smi -L)" >&2; exit 1; }
export NCCL_NVLS_ENABLE=0
ROOTFLAGS=""
[ "$(id -u)" = 0 ] && ROOTFLAGS="--allow-run-as-root"
exec mpirun $ROOTFLAGS -np "$NGPUS" --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH -x PATH \
  "$ROOT/build/mok-bench" "$@"

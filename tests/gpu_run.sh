#!/bin/sh
# gpu: runs a GPU test program on every local GPU (one rank each, at least 2 for peer tests); skips (77) loudly
# without a GPU.
set -u
BIN=$1
. "$(dirname "$0")/common.sh"
if ! have_gpu; then echo "SKIP: no GPU on this machine (gpu suite needs one)"; exit 77; fi
n=$(gpu_count); [ "$n" -ge 2 ] || n=1
exec $MPIRUN -np "$n" "$BIN"

#!/bin/sh
# stage.sh: copies the binaries built here (build/) and the shared libraries the GPU machines lack (cJSON) into
# .dev/, which the device tool carries. The GPU machines have CUDA 13 and Open MPI but no cJSON, and their
# system NCCL (2.28.3) differs from the 2.28.9 we build against, so run there with the python wheel's NCCL.
set -eu
cd "$(dirname "$0")/../.."
# rebuild first so the commit label baked into the binary (vcs_tag) is the tree's current state. Meson does
# not track the headers nvcc includes (no depfiles for CUDA here): recompile every .cu when a kernel header is
# newer than the kernels library, or a stale object reads a struct with the old layout.
lib=build/libmokkernels.a
if [ -f "$lib" ] && [ -n "$(find kernels -name '*.h' -newer "$lib" -o -name '*.cuh' -newer "$lib")" ]; then
  touch kernels/*.cu
fi
ninja -C build > /dev/null
git status --porcelain --untracked-files=no | grep -q . && echo "stage.sh: warning: uncommitted changes; reports will say -dirty" >&2
rm -rf .dev && mkdir -p .dev/bin .dev/lib
cp build/mok-bench build/tests/test_gpu_symmem build/tests/test_gpu_lsa build/tests/test_gpu_gemm build/tests/test_gpu_fill \
  build/tests/test_libmok .dev/bin/
cp -L /usr/lib/x86_64-linux-gnu/libcjson.so.1 .dev/lib/
# the carried tree (tracked files + .dev) is limited to 64 MiB and the fat binaries are ~10 MB each: gzip them
# (scripts/device/env.sh unpacks them on the GPU machine)
gzip -9 .dev/bin/*
git rev-parse --short=12 HEAD > .dev/commit
git status --porcelain | grep -q . && echo dirty >> .dev/commit || true
du -sh .dev

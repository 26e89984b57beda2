#!/bin/sh
# stage.sh: puts what a bare GPU node needs to run the tests and benchmarks into .dev/ (or $MOK_DEV), beside the
# repository tree that goes to the node with it: the binaries built here, the shared libraries the node lacks, and
# the commit they were built from. scripts/device/node.sh runs them there.
#   STAGE_BINS="build/mok-bench ..."   binaries (default: mok-bench and the gpu test binaries); mok-bench must exist
#   STAGE_LIBS="libcjson.so.1 ..."      sonames to ship (default libcjson.so.1: the nodes used so far have CUDA and
#                                       Open MPI but no cJSON); node.sh's step "libs" lists what a node lacks
#   STAGE_LIMIT_MB=64                   warn when the staged tree is larger (what a carried tree may hold)
# NCCL is not shipped (a few hundred MB): node.sh takes the node's python wheel NCCL, or MOK_NCCL_LIB (env.sh).
set -eu
cd "$(dirname "$0")/../.."
DEV=${MOK_DEV:-.dev}
BINS=${STAGE_BINS:-"build/mok-bench build/tests/test_gpu_symmem build/tests/test_gpu_lsa build/tests/test_gpu_gemm
  build/tests/test_gpu_fill build/tests/test_gpu_quant build/tests/test_gpu_ref_bwd build/tests/test_gpu_ref_fp8 build/tests/test_gpu_mxfp8
  build/tests/test_gpu_cublaslt_fp8 build/tests/test_libmok build/tests/test_gpu_gemm_bwd
  build/tests/test_libmok_bwd build/tests/test_libmok_fp8"}
LIBS=${STAGE_LIBS:-libcjson.so.1}
# rebuild first so the commit label baked into the binary (vcs_tag) is the tree's current state. Meson does
# not track the headers nvcc includes (no depfiles for CUDA here): recompile every .cu when a kernel header is
# newer than the kernels library, or a stale object reads a struct with the old layout.
lib=build/libmokkernels.a
if [ -f "$lib" ] && [ -n "$(find kernels -name '*.h' -newer "$lib" -o -name '*.cuh' -newer "$lib")" ]; then
  find kernels -name '*.cu' -exec touch {} +
fi
ninja -C build > /dev/null
git status --porcelain --untracked-files=no | grep -q . && echo "stage.sh: warning: uncommitted changes; reports will say -dirty" >&2
# the binaries and libraries are replaced; anything else under $DEV (a call's configs, its scripts) stays
rm -rf "$DEV/bin" "$DEV/lib" "$DEV/commit" && mkdir -p "$DEV/bin" "$DEV/lib"
[ -x build/mok-bench ] || { echo "stage.sh: build/mok-bench missing after the build" >&2; exit 1; }
for b in $BINS; do
  if [ -x "$b" ]; then cp "$b" "$DEV/bin/"; else echo "stage.sh: warning: $b not built; not staged" >&2; fi
done
# each soname from the loader's view of the staged binaries, else from the loader cache
for so in $LIBS; do
  path=$(ldd "$DEV"/bin/* 2> /dev/null | awk -v so="$so" '$1 == so && $3 ~ /^\// { print $3; exit }')
  [ -n "$path" ] || path=$(ldconfig -p | awk -v so="$so" '$1 == so { print $NF; exit }')
  [ -n "$path" ] || { echo "stage.sh: $so: not found here (STAGE_LIBS)" >&2; exit 1; }
  cp -L "$path" "$DEV/lib/$so"
done
# the fat binaries are ~10 MB each: gzip them (scripts/device/env.sh unpacks them on the node)
gzip -9 "$DEV"/bin/*
git rev-parse --short=12 HEAD > "$DEV/commit"
git status --porcelain | grep -q . && echo dirty >> "$DEV/commit" || true
size_kb=$(du -sk "$DEV" | cut -f1)
echo "stage.sh: $DEV: $((size_kb / 1024)) MiB: $(ls "$DEV/bin" | tr '\n' ' ')+ $(ls "$DEV/lib" | tr '\n' ' ')"
[ "$size_kb" -le $((${STAGE_LIMIT_MB:-64} * 1024)) ] ||
  echo "stage.sh: warning: larger than STAGE_LIMIT_MB=${STAGE_LIMIT_MB:-64} (with the tracked files it is carried)" >&2

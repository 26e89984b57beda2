#!/bin/sh
# kernel_resources: the Hopper GEMM compiled for sm_90a must use the tensor cores (wgmma in the PTX, HGMMA in the
# SASS when a disassembler is available) and no kernel of the hot paths may spill to local memory.
set -u
SRC=$1; SCRATCH=$2
. "$SRC/tests/common.sh"
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
for path in gemm/sm90_grouped gemm/sm90_wgrad gemm/portable comm/lsa_transfer comm/lsa_combine_overlap \
  comm/lsa_route_sum comm/lsa_schedule megakernel/forward megakernel/backward; do
  cu=$(echo "$path" | tr / _)
  "$NVCC" -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I"$SRC/kernels" -Xptxas -v -c \
    "$SRC/kernels/$path.cu" -o "$SCRATCH/$cu.o" > "$SCRATCH/$cu.log" 2>&1 || { cat "$SCRATCH/$cu.log"; fail "$cu does not compile"; }
  # No kernel may spill, but for the fused backward's 12 bytes (3 words outside its wgmma loops by
  # scripts/sass_spills.py; 32 in its instance with the shared experts' units, below). Until c14a2d4 most did: the
  # megakernel's instances 24-304 bytes, the backward 272, the grouped GEMM's fp8_block 128-column instance 52, and
  # the allowances here grew with each. The cause was __trap() in the wait timeouts' failure path: reachable where a
  # warpgroup's wgmma accumulators are live, it makes ptxas spill them; the failure path now ends the kernel with a
  # misaligned store instead (sm90_ptx.cuh mok_sm90_abort), and all of those compile without a spill (CUDA 13.0). A
  # trap (or anything else) that brings spills back shows here. The fp8_block forward's two wide instances spill 56
  # bytes each (ptxas -v; none within 64 instructions of a wgmma run by scripts/sass_spills.py): their products are 128
  # columns wide, which made the layer 7.5-10% faster than 64-column products without a spill (results/h200x1/
  # 2026-12-05-lsa-fix-fp8-products), and their scales are loaded a k block ahead (0cecdb8, 1.7-2.7% faster:
  # results/h100x1/2026-12-06-promote-order; before it 72 bytes with send=1, none with send=0). The mxfp8 mx_scheme 3
  # instances with send=0 spill 16 bytes (ptxas -v at 90d0f47). The fused backward's instance with the shared
  # experts' units (kShared) spills 16 bytes (32 reloaded), none near a wgmma run either; its routed-only instance's
  # machine code is unchanged by them.
  limit=0; [ "$cu" = megakernel_backward ] && limit=12; [ "$cu" = megakernel_forward ] && limit=56
  bad=$(awk -v l=$limit '/Function properties for/ {k = $0}
    /bytes spill stores/ {m = (k ~ /megakernel_bwd_kernelILb1E/) ? 32 : l; if ($5 > m || $9 > m) print k ": " $0}' \
    "$SCRATCH/$cu.log")
  [ -z "$bad" ] || { grep -B2 "spill" "$SCRATCH/$cu.log"; fail "$cu: a kernel spills to local memory beyond $limit bytes"; }
  extra=""; [ "$cu" = megakernel_backward ] && extra=" (32 with the shared experts' units)"
  echo "$cu: $(grep -c 'Compiling entry' "$SCRATCH/$cu.log") kernels, spills at most $limit bytes$extra"
done
"$NVCC" -std=c++17 -O3 -arch=sm_90a -I"$SRC/kernels" -ptx "$SRC/kernels/gemm/sm90_grouped.cu" -o "$SCRATCH/gemm_sm90_grouped.ptx" ||
  fail "no PTX"
# setmaxnreg hands registers from the producer warpgroup (dec 40) to the two consumers (inc 232): that balances only
# if every warp starts with 168 (168 x 384 threads = 128 x 40 + 256 x 232; mxfp8 scheme (b)'s 72 / 216 the same sum).
# With fewer at launch the consumers' setmaxnreg.inc would wait forever for registers that do not exist.
# The lean instances (fp8_block's 128 x 256 with lean 1: gemm_sm90_kernel<128, 256, 64 | 128, 0, 0, 0, 1>, 256
# threads, no setmaxnreg) may hold up to 255 (two warps per SM quarter).
bad=$(awk '/Compiling entry/ {k=$0} /Used [0-9]+ registers/ && k ~ /gemm_sm90/ {
    lean = (k ~ /gemm_sm90_kernelILi128ELi256ELi(64|128)ELb0ELb0ELb0ELb1E/)
    if ((!lean && $5 != 168) || (lean && $5 > 255)) print k ": " $5}' "$SCRATCH/gemm_sm90_grouped.log")
[ -z "$bad" ] || fail "gemm_sm90: a kernel starts without the registers its layout assumes (168; lean <= 255): $bad"
echo "gemm/sm90_grouped: every kernel starts with 168 registers (setmaxnreg 40/232 balances), the lean ones <= 255"
bad=$(awk '/Compiling entry/ {k=$0} /Used [0-9]+ registers/ && k ~ /megakernel/ {if ($5 != 168) print k ": " $5}' \
  "$SCRATCH/megakernel_forward.log")
[ -z "$bad" ] || fail "megakernel_fwd: does not start with the 168 registers its compute blocks' setmaxnreg assumes: $bad"
echo "megakernel/forward: starts with 168 registers"
# a call (printf, a non-inlined function) anywhere in a kernel makes ptxas serialize all of its wgmmas, and so does
# a wgmma under a branch ptxas takes for divergent (C7520: sm90_wgrad reads its consumer warpgroup index through a
# shuffle so that ptxas knows it warp-uniform)
for cu in gemm_sm90_grouped gemm_sm90_wgrad megakernel_forward; do
  ! grep -q "serialized" "$SCRATCH/$cu.log" || { grep "serialized" "$SCRATCH/$cu.log"; fail "$cu: ptxas serializes wgmma"; }
done
echo "gemm/sm90_grouped, gemm/sm90_wgrad, megakernel/forward: wgmma not serialized"
bad=$(awk '/Compiling entry/ {k=$0} /Used [0-9]+ registers/ && k ~ /wgrad_sm90/ {if ($5 != 168) print k ": " $5}' \
  "$SCRATCH/gemm_sm90_wgrad.log")
[ -z "$bad" ] || fail "wgrad_sm90: a kernel does not start with the 168 registers setmaxnreg 40/232 assumes: $bad"
n=$(grep -c "wgmma.mma_async" "$SCRATCH/gemm_sm90_grouped.ptx")
[ "$n" -gt 0 ] || fail "gemm_sm90: no wgmma.mma_async in the sm_90a PTX"
echo "gemm_sm90: $n wgmma.mma_async in the PTX"
if command -v cuobjdump > /dev/null 2>&1; then
  h=$(cuobjdump --dump-sass "$SCRATCH/gemm_sm90_grouped.o" | grep -c HGMMA)
  [ "$h" -gt 0 ] || fail "gemm_sm90: no HGMMA in the sm_90a SASS"
  echo "gemm_sm90: $h HGMMA instructions in the SASS"
else
  echo "note: no cuobjdump here; the SASS check (HGMMA) runs where the toolkit has it"
fi
echo "kernel_resources: all passed"

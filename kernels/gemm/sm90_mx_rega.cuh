/* gemm/sm90_mx_rega.cuh: mxfp8 mx_scheme 3 (issue 22), the consumer side of the grouped GEMM's kMxRegA instances
 * (sm90_grouped_kernel.cuh): A's e4m3 rows land in the slot by TMA (64 bytes a row per 64-K block, 64B-swizzled, as
 * scheme (b)'s landing rows) beside B in bf16 (the weights' MX values, expanded once at setup with K permuted within
 * each 64-K block: mok_expand_mxfp8_bf16_k64perm), and each consumer thread expands its own A fragment into registers
 * for wgmma's register operand (mok_wgmma_m64n256k16_rs). A's bf16 never touches shared memory: no expansion stores,
 * no wgmma reads of A; the producer is the bf16 instance's one TMA thread.
 *
 * Why: scheme (b) is bound by its shared-memory traffic first (results/h100x1/2026-12-05-mx-hands sections 4, 5: a
 * build without the slot stores took 4.83 ms against 8.4), and mx_scheme 2 still expands A into shared memory. Per
 * 64-K block of a 128 x 256 tile here: TMA 8 KB of A codes + 32 KB of B, the consumers' 16-byte loads of A (8 KB), the
 * wgmmas' B reads (64 KB): ~112 KB against the bf16 instance's ~128 KB.
 *
 * The fragment: wgmma's register A is mma.m16n8k16's, per k16 step thread (lane) holds rows lane / 4 and + 8 of its
 * warp's 16, K pairs {2q, 2q + 1} and {2q + 8, 2q + 9} (q = lane % 4). Thread q reads chunk q of each of its two rows
 * (natural K [16 q, 16 q + 16): one k32 scale, q / 2), and word kk of the chunk (natural 16 q + 4 kk .. + 3) gives
 * step kk its pairs (mok_mx_k64_pos in gemm/mx_expand.h; B is stored in that order). So 2 loads, 16 pair
 * conversions (3 integer ops and 1 bf16 multiply each: mok_mx_expand4_f) per thread per k block, between the
 * asynchronous wgmmas.
 *
 * Pipeline per consumer warpgroup, k blocks in pairs (k_blocks is even: mxfp8's k is a multiple of 128) with two
 * fragment buffers: expand block kb into buffer kb % 2 while block kb - 1's wgmmas run, issue kb's, then wait until
 * only kb's are in flight and give block kb - 1's slot back (the bf16 consume_tile's order). Buffer kb % 2 was last
 * read by block kb - 2's wgmmas, complete by then; a register fence on the other buffer after each wait keeps its
 * values (the in-flight wgmma's operands) live until then, so they are not reused for the next fragment. Measured
 * (results/h100x1/2026-12-05-mx-weights-bf16): 1.35-1.50x faster than scheme (b), its GEMMs faster than the bf16
 * instance's under ncu at Qwen3-235B-local 4096 (1.19 / 0.63 ms against 1.26 / 0.67). */
#pragma once
#include <stdint.h>

#include "common/sm90_ptx.cuh"
#include "gemm/mx_expand.h"
#include "gemm/sm90_core.cuh"
#include "gemm/sm90_mx_expand.cuh"

namespace mok_sm90 {

constexpr int kMxRegASlotBytes = kTileM * kMxLandRowBytes; /* A's codes of one k block in a slot: 8 KiB */

#if MOK_SM90_DEVICE
__device__ __forceinline__ void mx_reg_fence(uint32_t &r) { asm volatile("" : "+r"(r)::"memory"); }

/* This thread's A fragment of one k block from the slot's A codes (slot_a: shared-window address; off0 / off1: its
 * two rows' chunk q), under the rows' scale bytes s0 / s1 of that chunk's k32 block. kTwo: a scale of the warp's rows
 * above 134 (two multiplies, mok_mx_factor_two). */
template <bool kTwo>
__device__ __forceinline__ void mx_rega_fragment(uint32_t (&a)[4][4], uint32_t slot_a, uint32_t off0, uint32_t off1,
                                                 uint32_t s0, uint32_t s1)
{
    const uint4 c0 = mx_lds128(slot_a + off0), c1 = mx_lds128(slot_a + off1);
    const uint32_t f0 = mok_mx_factor(s0), f1 = mok_mx_factor(s1);
    const uint32_t g0 = kTwo ? mok_mx_factor_two(s0) : 0u, g1 = kTwo ? mok_mx_factor_two(s1) : 0u;
    const uint32_t w0[4] = {c0.x, c0.y, c0.z, c0.w}, w1[4] = {c1.x, c1.y, c1.z, c1.w};
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        const struct mok_mx_pair p0 = mok_mx_expand4_f(w0[kk], f0, g0, kTwo);
        const struct mok_mx_pair p1 = mok_mx_expand4_f(w1[kk], f1, g1, kTwo);
        a[kk][0] = p0.lo, a[kk][1] = p1.lo, a[kk][2] = p0.hi, a[kk][3] = p1.hi;
    }
}

/* Where a consumer thread works and what it has to hand: its rows' chunk offsets in a slot's A codes, its rows' scale
 * bytes of chunk q (sa0 / sa1: row + q / 2, two per k block). */
struct MxRegA {
    uint32_t off0, off1;
    const uint8_t *sa0, *sa1;
};

/* A scale byte of this thread's rows: kL2 through L2 (__ldcg: the megakernel writes them while it runs), else
 * through the read-only cache. */
template <bool kL2> __device__ __forceinline__ uint32_t mx_rega_scale(const uint8_t *p)
{
    return kL2 ? __ldcg(p) : __ldg(p);
}

/* One k block kb: the fragment into cur (the other buffer, prev, holds block kb - 1's, read by its wgmmas still in
 * flight) under its rows' scale bytes s0 / s1, its 4 wgmmas, then the wait for block kb - 1's and its slot given
 * back. kSlotA: the A slots' stride (the megakernel keeps bf16's 16 KiB for its shared experts' tiles). */
template <int TILE_N, int kSlotA = kMxRegASlotBytes>
__device__ __forceinline__ void mx_rega_block(RingPos &r, int &prev_slot, int stages, uint64_t *full,
                                              uint64_t *empty, float (&acc)[TILE_N / 2], uint32_t (&cur)[4][4],
                                              uint32_t (&prev)[4][4], int kb, uint32_t s0, uint32_t s1,
                                              uint8_t *smem_a, uint8_t *smem_b, const MxRegA &t, int lane,
                                              struct mok_sm90_diag *diag, int role, int tile)
{
    constexpr int kAcc = TILE_N / 2;
    mok_sm90_wait(&full[r.slot], r.phase, diag, role, r.slot, tile, kb);
    const uint32_t slot_a = mok_smem_addr(smem_a + (size_t)r.slot * kSlotA);
    if (__any_sync(0xFFFFFFFFu, s0 > 134u || s1 > 134u))
        mx_rega_fragment<true>(cur, slot_a, t.off0, t.off1, s0, s1);
    else
        mx_rega_fragment<false>(cur, slot_a, t.off0, t.off1, s0, s1);
    mok_fence_proxy_async_shared(); /* the codes read (generic) before the producer's next TMA into the slot */
#pragma unroll
    for (int i = 0; i < kAcc; i++)
        mok_reg_fence(acc[i]);
    mok_wgmma_fence(); /* the fragment's registers and the accumulators before the wgmmas that read them */
    const uint64_t db = KMajor::desc(smem_b + (size_t)r.slot * TILE_N * kRowBytes);
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
        if constexpr (TILE_N == 256)
            mok_wgmma_m64n256k16_rs(acc, cur[kk][0], cur[kk][1], cur[kk][2], cur[kk][3],
                                    db + (KMajor::kK16Step >> 4) * kk);
        else
            mok_wgmma_m64n128k16_rs(acc, cur[kk][0], cur[kk][1], cur[kk][2], cur[kk][3],
                                    db + (KMajor::kK16Step >> 4) * kk);
    mok_wgmma_commit();
#pragma unroll
    for (int i = 0; i < kAcc; i++)
        mok_reg_fence(acc[i]);
    if (kb > 0) {
        mok_wgmma_wait<1>(); /* block kb - 1's wgmmas are done: its slot and prev are free */
#pragma unroll
        for (int kk = 0; kk < 4; kk++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                mx_reg_fence(prev[kk][i]);
        release_slot(&empty[prev_slot], 1, lane, 0);
    }
    prev_slot = r.slot;
    r.advance(stages);
}

/* One consumer warpgroup's k loop over a 128 x TILE_N tile (TILE_N / 2 accumulators a thread), k_blocks even (kL2:
 * mx_rega_scale's, kSlotA: mx_rega_block's). The scale bytes of a pair of k blocks are loaded while the pair before
 * runs: through L2 (the megakernel's rows are written while it runs) a load issued just before its use stalled
 * the fragment behind the L2's latency every k block. */
template <int TILE_N, bool kL2 = false, int kSlotA = kMxRegASlotBytes>
__device__ __forceinline__ void consume_tile_mx_rega(RingPos &r, int stages, uint64_t *full, uint64_t *empty,
                                                     float (&acc)[TILE_N / 2], int k_blocks, uint8_t *smem_a,
                                                     uint8_t *smem_b, const MxRegA &t, int lane,
                                                     struct mok_sm90_diag *diag, int role, int tile)
{
    constexpr int kAcc = TILE_N / 2;
#pragma unroll
    for (int i = 0; i < kAcc; i++)
        acc[i] = 0.0f;
    uint32_t a0[4][4], a1[4][4];
    int prev_slot = 0;
    /* block kb's bytes: sa0 / sa1 + 2 kb; the next pair's (the last pair loads its own again: no branch) */
    uint32_t n00 = mx_rega_scale<kL2>(t.sa0), n01 = mx_rega_scale<kL2>(t.sa1);
    uint32_t n10 = mx_rega_scale<kL2>(t.sa0 + 2), n11 = mx_rega_scale<kL2>(t.sa1 + 2);
    for (int kb = 0; kb < k_blocks; kb += 2) {
        const uint32_t s00 = n00, s01 = n01, s10 = n10, s11 = n11;
        const int nk = kb + 2 < k_blocks ? kb + 2 : kb;
        n00 = mx_rega_scale<kL2>(t.sa0 + 2 * nk), n01 = mx_rega_scale<kL2>(t.sa1 + 2 * nk);
        n10 = mx_rega_scale<kL2>(t.sa0 + 2 * nk + 2), n11 = mx_rega_scale<kL2>(t.sa1 + 2 * nk + 2);
        mx_rega_block<TILE_N, kSlotA>(r, prev_slot, stages, full, empty, acc, a0, a1, kb, s00, s01, smem_a, smem_b,
                                      t, lane, diag, role, tile);
        mx_rega_block<TILE_N, kSlotA>(r, prev_slot, stages, full, empty, acc, a1, a0, kb + 1, s10, s11, smem_a,
                                      smem_b, t, lane, diag, role, tile);
    }
    mok_wgmma_wait<0>();
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            mx_reg_fence(a1[kk][i]);
#pragma unroll
    for (int i = 0; i < kAcc; i++)
        mok_reg_fence(acc[i]); /* no accumulator read may move above the wait */
    release_slot(&empty[prev_slot], 1, lane, 0);
}
#endif

} // namespace mok_sm90

/* gemm/sm90_mx_expand.cuh: mxfp8 scheme (b) (issue 22), the producer side of the grouped GEMM's kMxExpand instances
 * (sm90_grouped_kernel.cuh): the e4m3 operands are expanded to bf16 in shared memory, e4m3 x 2^scale, and the
 * consumers run the bf16 instance's k loop and epilogues unchanged (consume_tile over 128B-swizzled boxes of 64 K).
 * bf16 wgmma, FP8 bytes in memory; exact (gemm/mx_expand.h says where bf16 rounds: values below 2^-133).
 *
 * Per 64-K block of a 128 x TILE_N tile:
 *   landing   thread 0 of the producer warpgroup loads, by TMA, the e4m3 A rows (128 x 64 bytes), B rows (TILE_N x 64)
 *             and B's scales for the k block into a landing stage of its own small ring (land_stages of them, a full
 *             mbarrier each: arrive.expect_tx + bytes), land_stages blocks ahead of the expansion. Rows of 64 bytes,
 *             64B-swizzled (16-byte chunk c of row r at c ^ ((r / 2) % 4)): the expansion's 16-byte loads, lanes on 32
 *             consecutive rows at one chunk, then hit 8 distinct bank groups per 8 lanes (r % 2 picks the half of a
 *             128-byte line, (r / 2) % 4 the chunk within it): no conflict.
 *   expansion all 128 threads of the producer warpgroup: thread p owns A row p and B rows p + 128 j, and per row its
 *             4 chunks of 16 codes (one scale each: chunks 0, 1 take K [0, 32), 2, 3 take [32, 64)) -> 2 x 16 bytes of
 *             bf16 each, into the row's chunks 2c, 2c + 1 of the bf16 slot at the 128B swizzle TMA would have written
 *             (chunk q of row r at q ^ (r % 8)): lanes on consecutive rows, so 8 lanes store into 8 distinct bank
 *             groups. Then each thread fences its generic writes for the async proxy (wgmma reads the slot) and
 *             arrives on the slot's full barrier (128 arrivals for this instance, no transaction bytes); the empty
 *             barriers are the bf16 instance's. A named barrier of the warpgroup then says the landing stage is read,
 *             and thread 0 loads the k block land_stages on into it.
 *   scales    A's e8m0 bytes per row per 32 K from global memory ([rows][k / 32], the quantizer's layout, as scheme
 *             (a) reads them: a 2-byte load per row per k block, issued before the waits and used after the B rows,
 *             so its latency hides). B's from its tile layout (mok_mxfp8_scale_tiles, scheme (a)'s b_mx_scale) by TMA
 *             beside the data, one box of 128 bytes (this k block's two k32 steps) per 64-row block: 512 bytes for
 *             TILE_N 256, 2% of the stage. Not the plain [n][k / 32] layout by __ldg: 256 rows x a 32-byte sector of L2
 *             traffic per 2 scale bytes would add ~25% to B's bytes (the tile layout's boxes carry only scales), and a
 *             tensor map over the plain layout cannot be built for k / 32 not a multiple of 16 (TMA's row stride).
 *
 * Cost per k block, 128 x 256 tiles (A 128 x 64 + B 256 x 64 = 24K values, 12K bf16 pairs; ~1,024 cycles of tensor
 * work at the bf16 rate: 4.2 MFLOP at ~4K per cycle per SM), counted in this instance's PTX (sm_90a, CUDA 13.0; the
 * SASS may differ) and estimated, not measured:
 *   integer   3 ops per pair for the bits (prmt, shift, and: mok_mx_e4m3x4_bits) and ~0.9 for addresses, scale
 *             bytes and factors: ~375 per thread, ~48K per SM, ~750 cycles at 64 per cycle per SM (16 per
 *             sub-partition, where each producer warp runs: 2 cycles per warp instruction); ptxas moves the shifts
 *             to the FMA pipe (IMAD.SHL in the SASS), which lowers it;
 *   bf16 FMA  1 per pair (2 in blocks of scale above 2^7, s > 134): 96 per thread, ~100 cycles at 128 per SM;
 *   shared    12 16-byte loads and 24 16-byte stores per thread: 72 KB moved by the threads, plus the TMA's 24.5 KB
 *             into the landing ring, against the bf16 instance's 48 KB of TMA: +48 KB per k block beside the
 *             consumers' wgmma operand reads (a bound not estimated here: the first thing to measure);
 *   issue     ~580 instructions per producer thread before 3df25cf (~580 of the ~1,024 issue cycles of each
 *             sub-partition); ncu counted 15% fewer executed since (one branch per block, 3 ops per pair).
 * So the integer pipe would set the pace at ~0.75 of the tensor time: on 128 x 256 tiles the expansion would keep
 * up with the bf16 wgmma if shared memory bandwidth allows. 128 x 128 tiles (2 rows per thread, ~512 cycles of
 * tensor work) need ~500 cycles of integer work: bound by the expansion near the bf16 time; built because it costs
 * one more instance.
 * Measured (one H100, 3df25cf, results/h100x1/2026-12-05-mx-expand): 1.48-1.55x the bf16 GEMMs' time at 128 x 256;
 * the producer warps issue in 29% of their sampled cycles and wait on fixed-latency dependencies (19%), barriers
 * (~24%) and shared-memory loads (12%). More hands did not help (results/h100x1/2026-12-05-mx-hands): the consumer
 * warpgroups expanding their own A rows between their wgmmas (3189c03, reverted) was 3-7.5% slower, and 128 x 128
 * tiles (a third more codes per FLOP) take 1.36-1.43x the time of 128 x 256 whatever the ring and landing depths:
 * the time follows the codes expanded per FLOP, whichever warps expand them, so a resource the SM's warps share
 * sets the pace, not one warp's latency (NOTES.md, issue 22). */
#pragma once
#include <stdint.h>

#include "common/sm90_ptx.cuh"
#include "gemm/mx_expand.h"
#include "gemm/sm90_core.cuh"

namespace mok_sm90 {

/* The landing ring's depth, land_stages (mok_gemm_sm90_config.land_stages, mok_mega_args.land_stages): k block
 * i + land_stages is loaded once block i is expanded, so its TMA has the time of land_stages - 1 expansion steps to
 * land. One step is ~840 cycles of integer work at 128 x 256 (above), under a microsecond, while 24.5 KiB of e4m3
 * from DRAM takes about a microsecond of latency plus its share of the bandwidth (~0.7 us per SM with all SMs
 * streaming): two stages likely leave the expansion waiting on the TMA every step, so the default (0) takes as
 * many as fit, up to kMxLandMax, beside a bf16 ring of two (the expansion needs no lead there, only a slot the
 * consumers are not reading). Not measured. */
constexpr int kMxLandMin = 2, kMxLandMax = 4;
constexpr int kMxLandRowBytes = 64;  /* e4m3 of one 64-K block per row */
constexpr int kMxLandScaleRow = 128; /* B scale bytes per 64-row block per k block (two k32 steps of 64 bytes) */
constexpr int kMxProducerBarrier = 6; /* named barrier of the producer warpgroup (1, 2: the consumers' epilogues) */
/* setmaxnreg of these instances: 128 x 72 + 256 x 216 = 384 x 168, the sum the 384-thread layout starts with
 * (sm90_core.cuh). The producer's 40 made ptxas spill the expansion (60 bytes at 128 x 256), 56 still 28; the bf16
 * consumers of 128 x 256 tiles fit 216 without a spill (ptxas -v, CUDA 13.0). */
constexpr int kMxProducerRegs = 72, kMxConsumerRegs = 216;

/* One landing stage: A rows, B rows, B's scale boxes; stages 512-aligned, the 64B swizzle's atom (8 rows of 64
 * bytes), not 1024: with 1024 the 128 x 256 SwiGLU instance fits one bf16 slot fewer (its third slot misses by
 * 64 + 4 (groups + 1) bytes; with 512 it fits up to 239 groups). The megakernel's expand instances (megakernel/
 * mx_expand.cuh) keep 32 KiB of staging for both GEMMs and some static shared memory: three bf16 stages there up to
 * ~207 local experts without send, ~139 with, else two. */
__host__ __device__ constexpr int mx_land_scales_at(int tile_n) { return (kTileM + tile_n) * kMxLandRowBytes; }
__host__ __device__ constexpr int mx_land_stage_bytes(int tile_n)
{
    return (mx_land_scales_at(tile_n) + tile_n / 64 * kMxLandScaleRow + 511) / 512 * 512;
}

#if MOK_SM90_DEVICE
/* 16-byte shared-memory accesses at 32-bit shared-window addresses: the expansion forms its swizzled addresses by
 * XOR on them (one op each). */
__device__ __forceinline__ uint4 mx_lds128(uint32_t a)
{
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a)
                 : "memory");
    return v;
}
__device__ __forceinline__ void mx_sts128(uint32_t a, uint32_t x, uint32_t y, uint32_t z, uint32_t w)
{
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
}

/* 16 codes of one row (a landing chunk, already loaded into v) into two bf16 chunks of the slot, at sa and sa ^ 16
 * (the row's chunks 2c and 2c + 1: 2c's swizzled place XOR 1), under one scale's factors: f = mok_mx_factor(s), and
 * with kTwo (a block with some scale above 134) a second multiply by f2 = mok_mx_factor_two(s) (1.0 where s <= 134:
 * the same bits) on every pair. No branch inside a block: a branch per chunk cut the row into basic blocks that
 * ptxas could not interleave (the producer warp is alone on its scheduler and lives on that interleaving). */
template <bool kTwo>
__device__ __forceinline__ void mx_expand_chunk(const uint4 &v, uint32_t sa, uint32_t f, uint32_t f2)
{
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t o[8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const struct mok_mx_pair b = mok_mx_expand4_f(w[i], f, f2, kTwo);
        o[2 * i] = b.lo;
        o[2 * i + 1] = b.hi;
    }
    mx_sts128(sa, o[0], o[1], o[2], o[3]);
    mx_sts128(sa ^ 16, o[4], o[5], o[6], o[7]);
}

/* One k32 half h of row r of a landing region (l_row: the row's shared-window address, 64-byte aligned) into
 * registers: landing chunks 2h (at its 64B-swizzled place (2h ^ (r / 2 % 4))) and 2h + 1 (that XOR 1). */
__device__ __forceinline__ void mx_load_half(uint4 (&v)[2], uint32_t l_row, int r, uint32_t h)
{
    const uint32_t la = l_row + (((2 * h) ^ ((r >> 1) & 3)) << 4);
    v[0] = mx_lds128(la);
    v[1] = mx_lds128(la ^ 16);
}

/* A loaded half h into row r of a slot region (s_row, 128-byte aligned): slot chunks 4h .. 4h + 3 (4h's
 * 128B-swizzled place (4h ^ (r % 8)), then XOR 1, 2, 3), under the half's scale s. */
template <bool kTwo>
__device__ __forceinline__ void mx_convert_half(const uint4 (&v)[2], uint32_t s_row, int r, uint32_t h, uint32_t s)
{
    const uint32_t f = mok_mx_factor(s), f2 = kTwo ? mok_mx_factor_two(s) : 0u;
    const uint32_t sa = s_row + (((4 * h) ^ (r & 7)) << 4);
    mx_expand_chunk<kTwo>(v[0], sa, f, f2);
    mx_expand_chunk<kTwo>(v[1], sa ^ 32, f, f2);
}

/* One k block's landing stage by TMA (thread 0 of the producer warpgroup): the e4m3 A rows [row0, +128) and B rows
 * (b_row.., with SwiGLU the gate rows then the matching up rows n_out further on: the slot's order) at K byte kc, and
 * B's scales: the tile's TILE_N / 64 scale blocks from bs_block on, adjacent in the tile layout (with SwiGLU gate
 * block j at 2j and up block j at 2j + 1, so the tile's gate and up blocks interleave), k block kb's two k32 steps
 * at bytes 128 kb of each block's row. */
template <int TILE_N>
__device__ __forceinline__ void mx_load_block(uint8_t *dst, uint64_t *bar, const CUtensorMap *map_a,
                                              const CUtensorMap *map_b, const CUtensorMap *map_bs, int kb, int row0,
                                              int b_row, int bs_block, int swiglu, int n_out)
{
    mok_mbar_expect_tx(bar, (uint32_t)(mx_land_scales_at(TILE_N) + TILE_N / 64 * kMxLandScaleRow));
    const int kc = kb * kBlockK; /* one byte per code */
    mok_tma_load_2d(dst, map_a, kc, row0, bar);
    uint8_t *b_dst = dst + kTileM * kMxLandRowBytes;
    if (swiglu) {
        mok_tma_load_2d(b_dst, map_b, kc, b_row, bar);
        mok_tma_load_2d(b_dst + (TILE_N / 2) * kMxLandRowBytes, map_b, kc, b_row + n_out, bar);
    } else {
        mok_tma_load_2d(b_dst, map_b, kc, b_row, bar);
    }
    mok_tma_load_2d(dst + mx_land_scales_at(TILE_N), map_bs, kb * kMxLandScaleRow, bs_block, bar);
}

/* Where producer thread pt's B rows (pt + 128 j) find their scale bytes in a landing stage: the tile layout puts a
 * 64-row block's row 8c + 2q + p at byte q 16 + 2c + p of each 64-byte k32 step; box row b is the tile's b-th scale
 * block (mx_load_block), the slot holding the gate rows first. The second k32 step is 64 bytes on. */
template <int TILE_N>
__device__ __forceinline__ void mx_scale_places(int pt, int swiglu, int (&bs_at)[TILE_N / 128])
{
#pragma unroll
    for (int j = 0; j < TILE_N / 128; j++) {
        const int r = pt + 128 * j, i = r & 63, half = TILE_N / 2;
        const int box = swiglu ? (r % half) / 64 * 2 + r / half : r / 64;
        bs_at[j] = mx_land_scales_at(TILE_N) + box * kMxLandScaleRow + ((i >> 1) & 3) * 16 + 2 * (i >> 3) + (i & 1);
    }
}

/* This thread's rows of one k block, B's rows pt + 128 j first (scale bytes: byte 2j + half of sb), then A's row
 * pt (the A scales sa2, K [0, 32) in the low byte, were loaded before: the B rows hide that load), one k32 half at
 * a time, each half's two loads issued before the previous half is converted: the loads and stores are volatile and
 * ordered, so a load placed after a half's stores would wait for them and then for shared memory's latency, which
 * the producer warp, alone on its scheduler, has nothing else to hide it with. Two halves in flight: one row's
 * registers (a whole row ahead spilled at kMxProducerRegs); in blocks with a scale above 134 (kTwo) one. */
template <int TILE_N, bool kTwo>
__device__ __forceinline__ void mx_expand_rows(uint32_t l_at, uint8_t *slot_a, uint8_t *slot_b, int pt,
                                               uint32_t sb, uint32_t sa2)
{
    constexpr int kRows = TILE_N / 128 + 1, kHalves = 2 * kRows;
    /* row j: B row pt + 128 j (landing row kTileM + that) for j < kRows - 1, then A row pt (landing row pt) */
    auto r_of = [&](int j) { return j < kRows - 1 ? pt + 128 * j : pt; };
    auto land_row = [&](int j) { return l_at + (j < kRows - 1 ? kTileM + pt + 128 * j : pt) * kMxLandRowBytes; };
    uint4 v[2][2];
    mx_load_half(v[0], land_row(0), r_of(0), 0);
#pragma unroll
    for (int i = 0; i < kHalves; i++) {
        const int j = i >> 1;
        const uint32_t h = i & 1;
        if (i + 1 < kHalves && !kTwo) /* kTwo: its second factor takes the registers, so no half ahead */
            mx_load_half(v[(i + 1) & 1], land_row((i + 1) >> 1), r_of((i + 1) >> 1), (i + 1) & 1);
        if (kTwo && i > 0)
            mx_load_half(v[i & 1], land_row(j), r_of(j), h);
        if (j < kRows - 1)
            mx_convert_half<kTwo>(v[i & 1], mok_smem_addr(slot_b) + r_of(j) * kRowBytes, r_of(j), h,
                                  (sb >> (8 * (2 * j + h))) & 0xFFu);
        else
            mx_convert_half<kTwo>(v[i & 1], mok_smem_addr(slot_a) + pt * kRowBytes, pt, h, h ? sa2 >> 8 : sa2 & 0xFFu);
    }
}

/* The expansion of one k block, by every thread of the producer warpgroup, once its landing stage lnd holds the
 * bytes and the bf16 slot is free: this thread's rows (mx_expand_rows) with one multiply per pair, or two where a
 * scale of the warp's rows in this block exceeds 134 (a warp vote: one branch per block, the warp's path uniform);
 * its generic accesses (the slot writes, the landing reads) fenced for the async proxy (the wgmmas reading the
 * slot, the next TMA into the stage); an arrive on the slot's full barrier (full once all 128 have); then the
 * warpgroup's named barrier: after it the landing stage may be loaded again. */
template <int TILE_N>
__device__ __forceinline__ void mx_expand_block(const uint8_t *lnd, uint8_t *slot_a, uint8_t *slot_b,
                                                uint64_t *full_bar, int pt, const int (&bs_at)[TILE_N / 128],
                                                uint32_t sa2)
{
    const uint32_t l_at = mok_smem_addr(lnd);
    uint32_t sb = 0, top = (sa2 & 0xFFu) > (sa2 >> 8) ? (sa2 & 0xFFu) : (sa2 >> 8);
#pragma unroll
    for (int j = 0; j < TILE_N / 128; j++) {
        const uint32_t lo = lnd[bs_at[j]], hi = lnd[bs_at[j] + 64];
        sb |= (lo | hi << 8) << (16 * j);
        top = max(top, max(lo, hi));
    }
    if (__any_sync(0xFFFFFFFFu, top > 134u))
        mx_expand_rows<TILE_N, true>(l_at, slot_a, slot_b, pt, sb, sa2);
    else
        mx_expand_rows<TILE_N, false>(l_at, slot_a, slot_b, pt, sb, sa2);
    mok_fence_proxy_async_shared();
    mok_mbar_arrive(full_bar);
    mok_named_barrier(kMxProducerBarrier, 128);
}

/* The producer step of one k block in the grouped GEMM: wait for the landing stage's bytes (MOK_SM90_DIAG_LANDING)
 * and for the bf16 slot's release by the consumers (MOK_SM90_DIAG_PRODUCER), then expand it (mx_expand_block). */
template <int TILE_N>
__device__ __forceinline__ void mx_producer_step(const uint8_t *lnd, uint64_t *land_full_bar, uint32_t land_phase,
                                                 uint8_t *slot_a, uint8_t *slot_b, const RingPos &r, uint64_t *full,
                                                 uint64_t *empty, int pt, const int (&bs_at)[TILE_N / 128],
                                                 uint32_t sa2, struct mok_sm90_diag *diag, int stage, int tile, int kb)
{
    mok_sm90_wait(land_full_bar, land_phase, diag, MOK_SM90_DIAG_LANDING, stage, tile, kb);
    mok_sm90_wait(&empty[r.slot], r.phase ^ 1, diag, MOK_SM90_DIAG_PRODUCER, r.slot, tile, kb);
    mx_expand_block<TILE_N>(lnd, slot_a, slot_b, &full[r.slot], pt, bs_at, sa2);
}
#endif

/* ---- mx_scheme 2: the tokens expanded, the weights expanded once at setup ----
 * The grouped GEMM's kMxBBf16 instances: B is the weights' exact MX values held in bf16 (expanded once, at setup,
 * by mok_dequant_mxfp8_bf16: the same bits this expansion would give), loaded by TMA straight into the bf16 slot as
 * the bf16 instance loads it; only A's e4m3 rows land (kMxLandABytes a stage) and are expanded by the producer
 * warpgroup, one row a thread. The expansion's share of a k block falls to a third at 128 x 256 (A's 8K codes of
 * 24K), its shared-memory traffic from ~176 KB to ~144 KB a k block (bf16: ~128 KB, NOTES.md issue 22), at twice
 * the FP8 weight bytes in memory and in the weight stream (a bf16 GEMM's). The products and their order are scheme
 * (b)'s: the same values in the same K order through the same consumers. */
constexpr int kMxLandABytes = kTileM * kMxLandRowBytes; /* one stage: A's 128 rows of 64 codes (512-aligned) */

#if MOK_SM90_DEVICE
/* A's e4m3 rows [row0, +128) at k block kb into a landing stage (thread 0 of the producer warpgroup). */
__device__ __forceinline__ void mx_load_a_block(uint8_t *dst, uint64_t *bar, const CUtensorMap *map_a, int kb,
                                                int row0)
{
    mok_mbar_expect_tx(bar, (uint32_t)kMxLandABytes);
    mok_tma_load_2d(dst, map_a, kb * kBlockK, row0, bar);
}

/* Row pt of a k block's A: both k32 halves loaded (four 16-byte loads), then converted under their scale bytes (sa2:
 * K [0, 32) in the low byte) into the slot's row pt at the 128B swizzle. */
template <bool kTwo>
__device__ __forceinline__ void mx_expand_a_row(uint32_t l_at, uint8_t *slot_a, int pt, uint32_t sa2)
{
    const uint32_t l_row = l_at + pt * kMxLandRowBytes, s_row = mok_smem_addr(slot_a) + pt * kRowBytes;
    uint4 v[2][2];
    mx_load_half(v[0], l_row, pt, 0);
    mx_load_half(v[1], l_row, pt, 1);
    mx_convert_half<kTwo>(v[0], s_row, pt, 0, sa2 & 0xFFu);
    mx_convert_half<kTwo>(v[1], s_row, pt, 1, sa2 >> 8);
}

/* The producer step of one k block of a kMxBBf16 instance, by every thread of the producer warpgroup: wait for the
 * slot's release (MOK_SM90_DIAG_PRODUCER); thread 0 then raises the slot's full barrier's transaction bytes by B's
 * (no arrive: its arrive comes after its own A row, below) and loads B (load_b: the kernel's boxes); wait for A's
 * landing stage (MOK_SM90_DIAG_LANDING), expand this thread's A row (two multiplies per pair where a scale of the
 * warp's rows exceeds 134: a warp vote), fence the generic writes for the async proxy, arrive (full once B's bytes
 * have landed and all 128 have arrived, as scheme (b)'s), then the warpgroup's named barrier: the landing stage may
 * be loaded again. */
template <typename LoadB>
__device__ __forceinline__ void mx_a_producer_step(const uint8_t *lnd, uint64_t *land_full_bar, uint32_t land_phase,
                                                   uint8_t *slot_a, const RingPos &r, uint64_t *full,
                                                   uint64_t *empty, int pt, uint32_t sa2, uint32_t b_bytes,
                                                   LoadB load_b, struct mok_sm90_diag *diag, int stage, int tile,
                                                   int kb)
{
    mok_sm90_wait(&empty[r.slot], r.phase ^ 1, diag, MOK_SM90_DIAG_PRODUCER, r.slot, tile, kb);
    if (pt == 0) {
        mok_mbar_expect_tx_only(&full[r.slot], b_bytes);
        load_b(&full[r.slot]);
    }
    mok_sm90_wait(land_full_bar, land_phase, diag, MOK_SM90_DIAG_LANDING, stage, tile, kb);
    const uint32_t top = max(sa2 & 0xFFu, sa2 >> 8);
    if (__any_sync(0xFFFFFFFFu, top > 134u))
        mx_expand_a_row<true>(mok_smem_addr(lnd), slot_a, pt, sa2);
    else
        mx_expand_a_row<false>(mok_smem_addr(lnd), slot_a, pt, sa2);
    mok_fence_proxy_async_shared();
    mok_mbar_arrive(&full[r.slot]);
    mok_named_barrier(kMxProducerBarrier, 128);
}
#endif

} // namespace mok_sm90

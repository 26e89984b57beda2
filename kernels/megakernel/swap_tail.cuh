/* megakernel/swap_tail.cuh: swap_tail (mok_mega_args.swap_tail; issue 19's small groups): an expert's last row
 * block holding at most kSwapMaxRows real rows runs with the operands swapped, the weights as wgmma's M and the
 * tokens as its N (32, 64, 96 or 112 rows: swap_tail_unit). Below ~200 rows per expert a layer is bound by
 * streaming each expert's weights once, and 128-row blocks padding 65..127 real rows double the tensor work on top
 * (results/h200x1/2026-12-02-split-half-train-gemm: 1.10-1.21x the roofline at 32-85 rows per expert): 85 rows
 * cost 2 x m64n256 per warpgroup pair in a 128-row block, 2 x 2 x m64n96 here.
 *
 * The producer loads the unit's slots as for any unit (A: 128 token rows, B: 256 weight rows) and writes the block's
 * real row count beside the slot (slot_rows). Both consumer warpgroups run the unit, warpgroup w on its own weight
 * rows of the B slot as two 64-row M blocks over the N token rows of the A slot (consume_tile with the operands'
 * roles exchanged):
 *   GEMM1  M blocks: gate rows [64 w, +64) and their up rows 128 further on, so gate and up of one (h column, token)
 *          sit in the same register of the two accumulator blocks; h columns [64 w, +64) of the tile;
 *   GEMM2  M blocks: output columns [128 w, +64) and [128 w + 64, +64).
 * The accumulators hold the output transposed (a register: one column, one token), so the epilogue stages 16-bit
 * values at their transposed places (stage_t: the staging's 128B-swizzled 64-column boxes, token rows in boxes of
 * 64) and stores whole 64 x 64 boxes by TMA (h, out) or sends each token row from the staging to its owner (send).
 * Each warpgroup counts the unit once in done1 / done2, as a half tile, so the counters' targets are unchanged.
 * Part of the fused forward's one translation unit (kernels/megakernel/forward.cu includes it after compute.cuh);
 * its names live in that file's anonymous namespace. */
#pragma once

namespace {

#if MOK_SM90_DEVICE
/* The real rows of each slot's unit (swap_tail), written by the producer beside slot_unit before the slot's
 * arrive. */
__device__ __forceinline__ int *slot_rows()
{
    __shared__ int s[kMaxStages];
    return s;
}

/* The real rows of row block rb of local expert g: up to 128 (a block of the shared experts: 128). */
__device__ __forceinline__ int block_rows(const mok_lsa_args &a, const Unit &p)
{
    if (p.job >= 2)
        return kTileM;
    const int left = a.rows[p.group] - (p.rb * kTileM - a.offset[p.group]);
    return left < kTileM ? left : kTileM;
}

/* Where a thread's transposed values go in its warpgroup's staging half: token rows in boxes of 64 (kBoxBytes
 * apart), 64 columns in stage_word's 128B swizzle (16-byte chunk k of row n at k ^ (n % 8)). The fragment of
 * m64nNk16 gives register i the M row (here: column) c = wq 16 + lane / 4, + 8 for i % 4 >= 2, and the N column
 * (here: token row) n = 8 (i / 4) + q + i % 2, q = 2 (lane % 4). So n % 8 = q + i % 2 whatever i / 4 is: per thread
 * four base addresses (column c or c + 8, token parity) and, per register, a constant offset (i / 4 picks the row
 * group of 8, 8 groups per box). Computed per value instead, the addresses stayed live across the unrolled stores
 * and ptxas spilled (232 bytes at N = 64). */
struct StageT {
    uint32_t base[2][2]; /* [column c / c + 8][token parity]: shared-window addresses */
    __device__ __forceinline__ StageT(const uint8_t *stage, int wq, int lane)
    {
        const uint32_t s = mok_smem_addr(stage);
        const int q = 2 * (lane % 4);
#pragma unroll
        for (int hi = 0; hi < 2; hi++)
#pragma unroll
            for (int e = 0; e < 2; e++)
                base[hi][e] = s + (q + e) * kRowBytes + ((((2 * wq + hi) ^ (q + e)) & 7) << 4) + (lane / 4) * 2;
    }
    /* register i's value (i even: the pair i, i + 1, tokens n and n + 1 of one column) */
    __device__ __forceinline__ void put(int i, uint32_t pair) const
    {
        const int j = i / 4, hi = (i % 4) >= 2;
        const uint32_t off = (j >> 3) * kBoxBytes + (j & 7) * 8 * kRowBytes;
        asm volatile("st.shared.u16 [%0], %1;" ::"r"(base[hi][0] + off), "h"((uint16_t)(pair & 0xFFFFu)) : "memory");
        asm volatile("st.shared.u16 [%0], %1;" ::"r"(base[hi][1] + off), "h"((uint16_t)(pair >> 16)) : "memory");
    }
};

/* An M block of accumulators (64 columns x N tokens) as bf16 into the staging, transposed. */
template <int N>
__device__ __forceinline__ void stage_block_t(const float (&acc)[N / 2], uint8_t *stage, int wq, int lane)
{
    const StageT st(stage, wq, lane);
#pragma unroll
    for (int i = 0; i < N / 2; i += 2)
        st.put(i, pack_bf16x2(acc[i], acc[i + 1]));
}

/* GEMM1's SwiGLU of the gate block g with the up block u (the same registers: the same column and token). */
template <int N>
__device__ __forceinline__ void stage_swiglu_t(const float (&g)[N / 2], const float (&u)[N / 2], uint8_t *stage,
                                               int wq, int lane)
{
    const StageT st(stage, wq, lane);
#pragma unroll
    for (int i = 0; i < N / 2; i += 2)
        st.put(i, swiglu_bf16x2(g[i], u[i], g[i + 1], u[i + 1]));
}

/* The leader's TMA store of the staged token rows [0, N) x 64 columns at (col0, row0): one 64-row box per 64 rows.
 * Padding rows get what nobody reads (every reader of h and out takes routed rows only, and the swapped GEMM2 of
 * the block reads its first N rows, each token its own wgmma column): rows from the real ones up to N the values of
 * padding tokens, rows from N to the box's end the staging's old values, and with N <= 64 rows 64..127 nothing.
 * After the unit's last store, its count in done1 | done2 once the bytes are in global memory (epilogue_store's
 * order). */
__device__ __forceinline__ void store_staged_t(const CUtensorMap *map, const mok_mega_args &m, const Unit &p,
                                               uint8_t *stage, int col0, int n_rows, bool last)
{
    for (int b = 0; b * 64 < n_rows; b++)
        mok_tma_store_2d(map, col0, p.rb * kTileM + 64 * b, stage + b * kBoxBytes);
    mok_bulk_commit();
    if (last) {
        mok_bulk_wait(0);
        mok_fence_proxy_async_global();
        __threadfence();
        atomicAdd(row_counters(m.done, p.job, m.lsa.capacity) + p.rb, 1);
    }
}

/* send: the staged token rows with a destination go to their owners' combine rows, columns [col0, +64): 8 lanes per
 * row (16 bytes each), 16 rows per pass of the warpgroup; posted stores, fenced at the consumer loop's end as
 * send_plain's are. */
__device__ __forceinline__ void send_staged_t(const mok_mega_args &m, const Unit &p, const uint8_t *stage, int col0,
                                              int n_rows, uint8_t *const *comb_base, int t)
{
    const int k = t % 8;
    for (int n = t / 8; n < n_rows; n += 16) {
        uint8_t *dst = send_row_dst(m, 1, p.rb * kTileM + n, comb_base);
        const uint4 v = *reinterpret_cast<const uint4 *>(stage + (n >> 6) * kBoxBytes + (n & 63) * kRowBytes +
                                                         ((k ^ (n & 7)) << 4));
        if (dst)
            *reinterpret_cast<uint4 *>(dst + (size_t)col0 * 2 + 16 * k) = v;
    }
}

/* A swapped unit of N token rows (32..112) on consumer warpgroup cwg (see the top). acc: the consumer's accumulator
 * array, 2 x N / 2 of it used. */
template <bool kSend, int N>
__device__ __forceinline__ void swapped_unit(const Maps &maps, const mok_mega_args &m, const Unit &p, int u,
                                             RingPos &ring, uint64_t *full, uint64_t *empty, float (&acc)[kTileN / 2],
                                             uint8_t *smem_a, uint8_t *smem_b, uint8_t *stage, int k_blocks, int cwg,
                                             int wq, int lane, bool leader, uint8_t *const *comb_base,
                                             struct mok_sm90_diag *diag, int role)
{
    static_assert(N <= kTileN / 2, "two M blocks of N / 2 accumulators each fit the consumer's array");
    float(&blk)[2][N / 2] = *reinterpret_cast<float(*)[2][N / 2]>(&acc[0]);
    const bool g1 = p.job == 0;
    /* the weights (the B slot) as M: GEMM1 gate rows [64 cwg, +64) and up rows 128 on; GEMM2 rows [128 cwg, +128);
     * the tokens (the A slot's first N rows) as N */
    consume_tile<N, 2, kSlotBBytes, kSlotABytes>(ring, m.stages, full, empty, blk, k_blocks, smem_b,
                                                 (g1 ? 64 : 128) * cwg * kRowBytes, smem_a, 1, lane, 0, diag, role, u,
                                                 0, KTail{64, 0, 0}, (g1 ? kTileN / 2 : 64) * kRowBytes);
    if (g1) { /* h columns [128 n + 64 cwg, +64) */
        epilogue_begin(leader, cwg);
        stage_swiglu_t<N>(blk[0], blk[1], stage, wq, lane);
        staged_ready(1 + cwg);
        if (leader)
            store_staged_t(&maps.hc, m, p, stage, p.n * kStageCols + 64 * cwg, N, true);
        return;
    }
#pragma unroll
    for (int h = 0; h < 2; h++) { /* output columns [256 n + 128 cwg + 64 h, +64) */
        const int col0 = p.n * kTileN + 128 * cwg + 64 * h;
        epilogue_begin(leader, cwg);
        stage_block_t<N>(blk[h], stage, wq, lane);
        staged_ready(1 + cwg);
        if (kSend)
            send_staged_t(m, p, stage, col0, N, comb_base, threadIdx.x % 128);
        else if (leader)
            store_staged_t(&maps.oc, m, p, stage, col0, N, h == 1);
    }
}

/* The consumers' dispatch: a unit of `rows` real rows (<= kSwapMaxRows) on the narrowest N of 32, 64, 96 and 112
 * that holds them. Steps of 16 (seven instances) made ptxas put a spill reload inside the send instance's 128-row
 * k loop (scripts/sass_spills.py); with these four none sits near a wgmma loop, at an average of ~16 padded token
 * rows instead of ~8. */
template <bool kSend>
__device__ __forceinline__ void swap_tail_unit(const Maps &maps, const mok_mega_args &m, const Unit &p, int u,
                                               int rows, RingPos &ring, uint64_t *full, uint64_t *empty,
                                               float (&acc)[kTileN / 2], uint8_t *smem_a, uint8_t *smem_b,
                                               uint8_t *stage, int k_blocks, int cwg, int wq, int lane, bool leader,
                                               uint8_t *const *comb_base, struct mok_sm90_diag *diag, int role)
{
#define MOK_SWAPPED(n)                                                                                              \
    swapped_unit<kSend, n>(maps, m, p, u, ring, full, empty, acc, smem_a, smem_b, stage, k_blocks, cwg, wq, lane,  \
                           leader, comb_base, diag, role)
    switch ((rows + 31) / 32) {
    case 1: MOK_SWAPPED(32); break;
    case 2: MOK_SWAPPED(64); break;
    case 3: MOK_SWAPPED(96); break;
    default: MOK_SWAPPED(112); break;
    }
#undef MOK_SWAPPED
}
#endif

} // namespace

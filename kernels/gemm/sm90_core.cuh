/* sm90_core: the Hopper GEMM core, written once for every kernel that runs GEMM tiles (kernels/gemm/sm90_grouped.cu's
 * grouped GEMM, kernels/megakernel/forward.cu's compute blocks; next the backward's and FP8's). As in CUTLASS 3 a
 * tile is a collective mainloop and an epilogue, joined by a few policy choices:
 *   mainloop  the shared-memory ring of `stages` slots with a full and an empty mbarrier each: one producer thread
 *             fills a slot per k block with TMA (producer_acquire, producer_arm; the loads are the kernel's), two
 *             consumer warpgroups run wgmma from it into fp32 registers and give it back (consume_tile, or
 *             skip_tile for a tile nobody reads); RingPos is where each role is in the ring.
 *   policies  template parameters: tile width TILE_N (the wgmma N), 64-row sub-tiles per consumer warpgroup kSub
 *             (TILE_M = 128 kSub), slot sizes; the operand layouts (KMajor, MnMajor: the backward reads the weights
 *             transposed in dgrad, and both operands with K = the expert's rows in wgrad, whose last k block's
 *             rows of the next expert are zeroed: KTail); the precision: bf16 (consume_tile, 128B-swizzled boxes
 *             of 64 K) or, in gemm/sm90_fp8.cuh, fp8_block (consume_tile_fp8_block: e4m3 boxes of 128 K, K-major,
 *             the same bytes, promoted into fp32 per 128 K with the row and block scales) and mxfp8
 *             (consume_tile_mxfp8).
 *   epilogue  pieces the kernels compose: bf16 or SwiGLU staging of accumulator columns into 128B-swizzled boxes
 *             (stage_bf16, stage_swiglu), their TMA store (staged_ready, store_staged); fp32 staging added onto a
 *             gradient by TMA reduce (stage_f32, reduce_staged_f32); the guarded stores of the grouped GEMM
 *             and the megakernel's sends from registers are those kernels' own epilogues.
 * Every wait times out into the failure record (sm90_ptx.cuh). See sm90_grouped.cu for how the roles fit together. */
#pragma once
#include <cuda.h> /* CUtensorMap */
#include <stdint.h>

#include "common/common.cuh"
#include "common/sm90_ptx.cuh"
#include "common/sm90_wgmma_narrow.cuh"

namespace mok_sm90 {

constexpr int kTileM = 128;               /* two consumer warpgroups of 64 rows */
constexpr int kBlockK = 64;               /* bf16 per row of a box: 128 bytes, one 128B-swizzle row */
constexpr int kRowBytes = kBlockK * 2;    /* 128 */
constexpr int kFp8BlockK = 128;           /* fp8_block: e4m3 per row of a box (128 bytes), and the scales' K block */
constexpr int kMxScaleSlot = 512;         /* mxfp8: B scale bytes per slot (128 columns x 4 k32 steps) */
constexpr int kSlotABytes = kTileM * kRowBytes; /* 16 KiB */
constexpr int kThreads = 384;
constexpr int kProducerRegs = 40, kConsumerRegs = 232; /* setmaxnreg: 128 x 40 + 256 x 232 = 384 x 168 */
constexpr int kStartRegs = 168;                         /* what every thread starts with (kernel_resources checks) */
/* The lean layout (mok_gemm_sm90_config.lean, fp8_block's 128 x 256 tiles only): the two consumer warpgroups only
 * (256 threads, no setmaxnreg), one of their threads issuing the loads between its own k blocks (InlineProducer,
 * sm90_grouped_kernel.cuh); at 256 threads a thread may hold 255 registers. Built because fp8_block's 128 x 256
 * tiles (128 accumulators plus a product's part) spilled in the 384-thread layout and ran 1.25-1.78x slower
 * (results/h200x1/2026-12-04-fp8-tiles; 200 / 440 bytes with fp8_n 64, 508 / 1140 with 128). The cause was the
 * __trap() of the wait timeouts (sm90_ptx.cuh mok_sm90_abort), not the registers: since d1a588c the 384-thread
 * instances compile without a spill too, and which layout is faster is a measurement (neither has run since). */
constexpr int kLeanThreads = 256;
__host__ __device__ constexpr bool lean_layout(int tile_m, int tile_n, bool fp8, bool mx, bool lean)
{
    return lean && fp8 && !mx && tile_m == 128 && tile_n == 256; /* mok_gemm_sm90_config.lean */
}

/* Output columns one tile stores: SwiGLU pairs gate and up columns, halving them. */
__host__ __device__ constexpr int tile_cols(int tile_n, int swiglu) { return swiglu ? tile_n / 2 : tile_n; }

#if MOK_SM90_DEVICE
/* Two floats to bf16 (round to nearest even, as __float2bfloat16_rn: bitwise the same) in one instruction, lo in
 * the low half, instead of one conversion each. Fewer instructions in the epilogues; the layer time did not move
 * measurably at the power cap (A/B on 2 x H200, results/h200x2/2026-11-30-megakernel-v7). */
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi)
{
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

__device__ __forceinline__ float ex2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float rcp_approx(float x)
{
    float y;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t swiglu_bf16x2(float g0, float u0, float g1, float u1)
{
    /* The reference rounds GEMM1's output to bf16 before SwiGLU: so does this, a pair per conversion */
    const uint32_t g = pack_bf16x2(g0, g1), u = pack_bf16x2(u0, u1);
    g0 = __uint_as_float(g << 16), g1 = __uint_as_float(g & 0xFFFF0000u);
    u0 = __uint_as_float(u << 16), u1 = __uint_as_float(u & 0xFFFF0000u);
    /* silu(g) = g / (1 + 2^(-g log2 e)): one ex2 and one rcp (the MUFU pipe) per value, flush-to-zero forms, so no
     * subnormal fix-ups around them (__expf's non-ftz ex2 adds a compare and two predicated multiplies per value;
     * nothing here is subnormal that matters: 2^x below 2^-126 flushes to 0, silu(g) = g there, and 1 + e >= 1).
     * expf with an IEEE division took ~9k cycles of each GEMM1 tile's epilogue in the megakernel and made the layer
     * 3-8% slower at the power cap (profile and A/B on 2 x H200, megakernel-v7); the ftz forms against __expf /
     * __fdividef measured the same (new / old 0.993-1.020, one A/B). Relative error ~1e-6 against the
     * accurate fp32 reference, far inside a bf16 rounding step; a value next to a bf16 rounding boundary may round
     * the other way (one bf16 ulp). A gate below about -88: 2^(-g log2 e) is inf, its rcp 0, silu -0 (its limit). */
    return pack_bf16x2(g0 * rcp_approx(1.0f + ex2_approx(g0 * -1.4426950408889634f)) * u0,
                       g1 * rcp_approx(1.0f + ex2_approx(g1 * -1.4426950408889634f)) * u1);
}

/* C staging: boxes of 64 rows x 64 columns (128 bytes per row), 128B-swizzled as the C tensor map expects: the
 * 16-byte chunk q of row r sits at chunk q ^ (r % 8). The 4-byte word of columns (col, col + 1), col even, of
 * row r goes to box col / 64. In one store instruction the 32 lanes hold 8 rows x 4 words of one chunk, which
 * the XOR spreads over all 32 banks. */
constexpr int kBoxBytes = 64 * kRowBytes;
__device__ __forceinline__ void stage_word(uint8_t *stage, int r, int col, uint32_t v)
{
    int box = col >> 6, chunk = (col & 63) >> 3;
    *reinterpret_cast<uint32_t *>(stage + box * kBoxBytes + r * kRowBytes + ((chunk ^ (r & 7)) << 4) +
                                  (col & 7) * 2) = v;
}

/* ---- mainloop ---------------------------------------------------------------------------------------------- */

/* Where a role is in the ring: the slot, and the parity of the pass over the ring (flips each time slot wraps). */
struct RingPos {
    int slot;
    uint32_t phase;
    __device__ __forceinline__ void advance(int stages)
    {
        if (++slot == stages) {
            slot = 0;
            phase ^= 1;
        }
    }
};

/* The producer's step for one k block of tile `tile`, in two parts around what the kernel writes beside the slot:
 * producer_acquire waits until every consumer warp gave the slot back (parity phase ^ 1: on the first pass that is
 * the phase "before" a fresh barrier's first one, which counts as complete, so the empty ring starts free);
 * producer_arm arms its full barrier for `bytes` of TMA (an arrive: it publishes the thread's earlier writes) and
 * returns it for the loads; then the kernel issues its loads and advances the ring. Plain functions, not a functor
 * taking the loads: the producer runs on 40 registers, and a lambda's captures made ptxas spill there. */
__device__ __forceinline__ void producer_acquire(const RingPos &r, uint64_t *empty, struct mok_sm90_diag *diag,
                                                 int tile, int kb)
{
    mok_sm90_wait(&empty[r.slot], r.phase ^ 1, diag, MOK_SM90_DIAG_PRODUCER, r.slot, tile, kb);
}

__device__ __forceinline__ uint64_t *producer_arm(const RingPos &r, uint64_t *full, uint32_t bytes)
{
    mok_mbar_expect_tx(&full[r.slot], bytes);
    return &full[r.slot];
}

/* A consumer warp is done with a slot: tell this CTA's producer and, in a cluster, the peer's, whose B half sits
 * in the slot too (the peer refills it by multicast). Lane c signals CTA c, so the arrivals go out in parallel. */
__device__ __forceinline__ void release_slot(uint64_t *empty_bar, int cm, int lane, int crank)
{
    if (lane == crank)
        mok_mbar_arrive(empty_bar);
    else if (lane < cm)
        mok_mbar_arrive_cluster(empty_bar, (uint32_t)lane);
}

/* The operand layout policies of the bf16 mainloop: how a slot's A or B box is laid out, and so its descriptor,
 * wgmma's transpose bit and the step of one k16 instruction (bytes, unswizzled).
 *   KMajor   each row of the tile (an M or N index) holds 128 bytes of K: TMA's box of a row-major [rows][k]
 *            matrix. The forward's A and B, the dgrad's A.
 *   MnMajor  each row holds 64 M (or N) values of one K index, the tile's columns in blocks of 64 (8 KiB of 64 K
 *            rows, one TMA box of a row-major [k][columns] matrix each, back to back): the dgrad's weights (W is
 *            [k][n]: n contiguous) and both operands of wgrad (K = the expert's rows). A k16 step is 16 rows. */
struct KMajor {
    static constexpr int kTnsp = 0;
    static constexpr uint32_t kK16Step = 32;
    static __device__ __forceinline__ uint64_t desc(const void *p) { return mok_wgmma_desc_sw128(p); }
};
struct MnMajor {
    static constexpr int kTnsp = 1;
    static constexpr uint32_t kK16Step = 16 * kRowBytes;
    static __device__ __forceinline__ uint64_t desc(const void *p)
    {
        return mok_wgmma_desc_sw128_mn(p, 64 * kRowBytes); /* the next 64-column block: one box further */
    }
};

template <int N, int kTa, int kTb>
__device__ __forceinline__ void wgmma_k16(float (&acc)[N / 2], uint64_t da, uint64_t db)
{
    static_assert(N == 32 || N == 64 || N == 96 || N == 112 || N == 128 || N == 256, "wgmma m64nNk16: no wrapper");
    if constexpr (N == 64)
        mok_wgmma_m64n64k16<kTa, kTb>(acc, da, db);
    else if constexpr (N == 128)
        mok_wgmma_m64n128k16<kTa, kTb>(acc, da, db);
    else if constexpr (N == 256)
        mok_wgmma_m64n256k16<kTa, kTb>(acc, da, db);
    else if constexpr (N == 32) /* the narrow forms: the megakernel's swapped tail units (swap_tail.cuh) */
        mok_wgmma_m64n32k16<kTa, kTb>(acc, da, db);
    else if constexpr (N == 96)
        mok_wgmma_m64n96k16<kTa, kTb>(acc, da, db);
    else
        mok_wgmma_m64n112k16<kTa, kTb>(acc, da, db);
}

/* The tail of a K = rows reduction (wgrad): the last k block's rows from `rows` on belong to the next group (or
 * lie past the matrix: TMA's zeros) and must add nothing. Its k16 steps past the rows are not issued (at ~128
 * rows per expert a whole padded k block was a fifth of wgrad's tensor work); the rows of the last issued step from
 * `rows` on are zeroed in the slot before its wgmmas. When both consumer warpgroups read the slot, each zeroes its
 * own A block(s) and its half of B's column blocks and they meet (named barrier kTailBarrier, 256 threads); a
 * warpgroup that owns the slot alone (`solo`) zeroes all of it and meets only its own threads (barrier
 * kTailBarrier + 1 + half). Either way the writes are ordered before the wgmmas' async-proxy reads. */
constexpr int kTailBarrier = 3; /* and 4, 5: the solo warpgroups' */
struct KTail {
    int rows; /* valid K rows of the tile's last k block, 1..64 */
    int half; /* this consumer warpgroup: 0 or 1 */
    int solo; /* 1: this warpgroup alone reads the slot */
    __device__ __forceinline__ int k16_steps() const { return (rows + 15) / 16; }
};

template <int kABlocks, int kBBlocks>
__device__ __forceinline__ void zero_k_tail(uint8_t *a, uint8_t *b, const KTail &t)
{
    const int tid = threadIdx.x % 128, off = t.rows * kRowBytes, bytes = t.k16_steps() * 16 * kRowBytes - off;
    const uint4 z = make_uint4(0, 0, 0, 0);
    const int b0 = t.solo ? 0 : t.half * (kBBlocks / 2), nb = t.solo ? kBBlocks : kBBlocks / 2;
    for (int i = tid * 16; i < bytes; i += 128 * 16) {
#pragma unroll
        for (int j = 0; j < kABlocks; j++)
            *reinterpret_cast<uint4 *>(a + j * 64 * kRowBytes + off + i) = z;
        for (int j = 0; j < nb; j++)
            *reinterpret_cast<uint4 *>(b + (b0 + j) * 64 * kRowBytes + off + i) = z;
    }
    mok_fence_proxy_async_shared();
    if (t.solo)
        mok_named_barrier(kTailBarrier + 1 + t.half, 128);
    else
        mok_named_barrier(kTailBarrier, 256);
}

/* kSteps k16 steps of one k block: per step kSub x kParts wgmma m64nNk16 (consume_tile below says where from) */
template <int kSteps, int TILE_N, int kSub, int kParts, class LayoutA, class LayoutB>
__device__ __forceinline__ void issue_k16s(float (&acc)[kSub][kParts * TILE_N / 2], uint64_t da, uint64_t db,
                                           int b_part_bytes, int a_sub_bytes)
{
#pragma unroll
    for (int kk = 0; kk < kSteps; kk++)
#pragma unroll
        for (int u = 0; u < kSub; u++)
#pragma unroll
            for (int q = 0; q < kParts; q++)
                wgmma_k16<TILE_N, LayoutA::kTnsp, LayoutB::kTnsp>(
                    *reinterpret_cast<float(*)[TILE_N / 2]>(&acc[u][q * (TILE_N / 2)]),
                    da + (LayoutA::kK16Step >> 4) * kk + u * (a_sub_bytes >> 4),
                    db + (LayoutB::kK16Step >> 4) * kk + q * (b_part_bytes >> 4));
}

/* One consumer warpgroup's k loop over a tile: zero the accumulators (kKeepAcc: they hold a start value the caller
 * loaded, wgrad's fp32 gradient, and the products are added onto it); per k block wait for the slot's bytes, run
 * 4 x kSub x kParts wgmma m64nNk16 (N = TILE_N) from it (this warpgroup's A rows at a_offset in the slot, sub-tile u
 * 64 rows further on; B from smem_b's slot, part q b_part_bytes further on into accumulators [q N/2, (q+1) N/2)),
 * commit, and once only this k block's group is in flight (wait<1>: the previous one has finished reading its slot)
 * give the previous slot back; at the end wait for all of them and give the last slot back. cm, crank: the cluster
 * (1, 0 without). kParts 2: two B blocks anywhere in the slot computed as one accumulator tile of 2N columns (the
 * 64-row tiles' column halves). a_sub_bytes: where sub-tile u's A rows start, u a_sub_bytes on (64 rows: the
 * sub-tiles adjacent; the megakernel's swapped GEMM1 tail units pair a gate block with its up block 128 rows on).
 * kProxyFence: a slot's A rows were written by cp.async (the megakernel's `gather`), so the async proxy is fenced
 * after each wait.
 * The accumulator fragment of m64nNk16: thread (warp wq of the warpgroup, lane) holds
 * rows wq*16 + lane/4 (registers 4i, 4i+1) and that + 8 (4i+2, 4i+3), columns 8i + 2*(lane%4) and + 1. */
template <int TILE_N, int kSub, int kSlotA, int kSlotB, int kParts = 1, class LayoutA = KMajor,
          class LayoutB = KMajor, bool kTail = false, bool kKeepAcc = false, bool kProxyFence = false>
__device__ __forceinline__ void consume_tile(RingPos &r, int stages, uint64_t *full, uint64_t *empty,
                                             float (&acc)[kSub][kParts * TILE_N / 2], int k_blocks, uint8_t *smem_a,
                                             int a_offset, uint8_t *smem_b, int cm, int lane, int crank,
                                             struct mok_sm90_diag *diag, int role, int tile, int b_part_bytes = 0,
                                             KTail tail = {64, 0, 0}, int a_sub_bytes = 64 * kRowBytes)
{
    static_assert(!kTail || kParts == 1, "a K tail is zeroed in kSub A blocks and TILE_N / 64 B blocks");
    constexpr int kAcc = kParts * TILE_N / 2;
    if constexpr (!kKeepAcc)
#pragma unroll
        for (int u = 0; u < kSub; u++)
#pragma unroll
            for (int i = 0; i < kAcc; i++)
                acc[u][i] = 0.0f;
    int prev_slot = 0;
    for (int kb = 0; kb < k_blocks; kb++) {
        mok_sm90_wait(&full[r.slot], r.phase, diag, role, r.slot, tile, kb);
        if constexpr (kProxyFence)
            mok_fence_proxy_async_shared(); /* the slot's cp.async rows (generic proxy) before the wgmmas read them */
        int k16_end = kBlockK / 16; /* k16 steps issued from this slot: all but in a K tail's last block */
        if constexpr (kTail)
            if (kb == k_blocks - 1) {
                k16_end = tail.k16_steps();
                if (tail.rows % 16)
                    zero_k_tail<kSub, TILE_N / 64>(smem_a + (size_t)r.slot * kSlotA + a_offset,
                                                   smem_b + (size_t)r.slot * kSlotB, tail);
            }
#pragma unroll
        for (int u = 0; u < kSub; u++)
#pragma unroll
            for (int i = 0; i < kAcc; i++)
                mok_reg_fence(acc[u][i]);
        mok_wgmma_fence(); /* the zeroing (or nothing) before the wgmmas that read the accumulators */
        /* each 64-row sub-tile 8 KiB (= 512 in the addr>>4 field) further on (KMajor: 64 rows; MnMajor: the next
         * 64-column block); a k16 step LayoutX::kK16Step bytes (>> 4 in the field) */
        uint64_t da = LayoutA::desc(smem_a + (size_t)r.slot * kSlotA + a_offset);
        uint64_t db = LayoutB::desc(smem_b + (size_t)r.slot * kSlotB);
        /* a whole block, or a K tail's first k16 steps: each branch a fixed run of wgmmas (a wgmma issued under a
         * condition inside the run makes ptxas fence the accumulators around it, C7519) */
        if (!kTail || k16_end == kBlockK / 16)
            issue_k16s<kBlockK / 16, TILE_N, kSub, kParts, LayoutA, LayoutB>(acc, da, db, b_part_bytes, a_sub_bytes);
        else if (k16_end == 3)
            issue_k16s<3, TILE_N, kSub, kParts, LayoutA, LayoutB>(acc, da, db, b_part_bytes, a_sub_bytes);
        else if (k16_end == 2)
            issue_k16s<2, TILE_N, kSub, kParts, LayoutA, LayoutB>(acc, da, db, b_part_bytes, a_sub_bytes);
        else
            issue_k16s<1, TILE_N, kSub, kParts, LayoutA, LayoutB>(acc, da, db, b_part_bytes, a_sub_bytes);
        mok_wgmma_commit();
#pragma unroll
        for (int u = 0; u < kSub; u++)
#pragma unroll
            for (int i = 0; i < kAcc; i++)
                mok_reg_fence(acc[u][i]);
        if (kb > 0) {
            /* every warp of both consumer warpgroups must say so before the producer refills the slot */
            mok_wgmma_wait<1>();
            release_slot(&empty[prev_slot], cm, lane, crank);
        }
        prev_slot = r.slot;
        r.advance(stages);
    }
    mok_wgmma_wait<0>();
#pragma unroll
    for (int u = 0; u < kSub; u++)
#pragma unroll
        for (int i = 0; i < kAcc; i++)
            mok_reg_fence(acc[u][i]); /* no accumulator read may move above the wait */
    release_slot(&empty[prev_slot], cm, lane, crank);
}

/* A tile nobody reads (all padding): its slots are passed back as they fill, no wgmma. */
__device__ __forceinline__ void skip_tile(RingPos &r, int stages, uint64_t *full, uint64_t *empty, int k_blocks,
                                          int lane, struct mok_sm90_diag *diag, int role, int tile)
{
    for (int kb = 0; kb < k_blocks; kb++) {
        mok_sm90_wait(&full[r.slot], r.phase, diag, role, r.slot, tile, kb);
        release_slot(&empty[r.slot], 1, lane, 0);
        r.advance(stages);
    }
}

/* ---- epilogue pieces ----------------------------------------------------------------------------------------- */

/* Stage kChunks 8-column chunks of accumulators as bf16, from accumulator chunk kFirst on, into staging columns
 * [0, 8 kChunks) of rows la and lb (= la + 8) of this lane (columns 8i + cq, +1: cq = 2 (lane % 4)). Templates, so
 * every register index is a constant: a runtime one would put the accumulators in local memory. */
template <int kFirst, int kChunks, int N>
__device__ __forceinline__ void stage_bf16(const float (&acc)[N], uint8_t *stage, int la, int lb, int cq)
{
#pragma unroll
    for (int i = 0; i < kChunks; i++) {
        const int r = 4 * (kFirst + i);
        stage_word(stage, la, 8 * i + cq, pack_bf16x2(acc[r], acc[r + 1]));
        stage_word(stage, lb, 8 * i + cq, pack_bf16x2(acc[r + 2], acc[r + 3]));
    }
}

/* Stage kChunks 8-column chunks of accumulators as fp32, from chunk kFirst on, into staging columns [0, 8 kChunks)
 * of rows la and lb: boxes of 64 rows x 32 floats (128B-swizzled, encode_tile_map_f32), kBoxBytes each, so a round
 * of kChunks 8 stages two boxes. The 4 lanes of a row write 32 contiguous bytes: 2 wavefronts per warp's store. */
template <int kFirst, int kChunks, int N>
__device__ __forceinline__ void stage_f32(const float (&acc)[N], uint8_t *stage, int la, int lb, int cq)
{
#pragma unroll
    for (int i = 0; i < kChunks; i++) {
        const int r = 4 * (kFirst + i), col = 8 * i + cq, box = col >> 5, chunk = (col & 31) >> 2;
        const int in = (col & 3) * 4;
        *reinterpret_cast<float2 *>(stage + box * kBoxBytes + la * kRowBytes + ((chunk ^ (la & 7)) << 4) + in) =
            make_float2(acc[r], acc[r + 1]);
        *reinterpret_cast<float2 *>(stage + box * kBoxBytes + lb * kRowBytes + ((chunk ^ (lb & 7)) << 4) + in) =
            make_float2(acc[r + 2], acc[r + 3]);
    }
}

/* SwiGLU (GEMM1): the tile's accumulator columns are gate columns [0, N) then the matching up columns [N, 2N)
 * (N accumulators = 2N columns / 4 lanes... per thread: gate column j in register chunk j/8, its up column N/2
 * registers further on); their silu(gate) * up is staged as N bf16 columns (N / 8 chunks). */
template <int N>
__device__ __forceinline__ void stage_swiglu(const float (&acc)[N], uint8_t *stage, int la, int lb, int cq)
{
    constexpr int kUp = N / 2;
#pragma unroll
    for (int i = 0; i < N / 8; i++) {
        const int r = 4 * i;
        stage_word(stage, la, 8 * i + cq, swiglu_bf16x2(acc[r], acc[r + kUp], acc[r + 1], acc[r + 1 + kUp]));
        stage_word(stage, lb, 8 * i + cq, swiglu_bf16x2(acc[r + 2], acc[r + 2 + kUp], acc[r + 3], acc[r + 3 + kUp]));
    }
}

/* After staging: the generic writes made visible to the TMA engine and the warpgroup (named barrier bar_id, 128
 * threads) agreed; then its leader alone stores `boxes` 64 x 64 boxes at columns col0.. of rows row0.. and commits
 * them (asynchronous: the next tile's wgmmas start while the bytes go out). Two calls, so the leader's operands are
 * computed by the leader only (the megakernel's consumers are at their register limit here). */
__device__ __forceinline__ void staged_ready(int bar_id)
{
    mok_fence_proxy_async_shared();
    mok_named_barrier(bar_id, 128);
}

__device__ __forceinline__ void store_staged(const CUtensorMap *map, int col0, int row0, uint8_t *stage, int boxes)
{
    for (int b = 0; b < boxes; b++)
        mok_tma_store_2d(map, col0 + b * 64, row0, stage + b * kBoxBytes);
    mok_bulk_commit();
}

/* Round kRound of a bf16 tile stored through a staging kCols wide: accumulator columns [kCols kRound, +kCols)
 * staged once the previous store has read the staging (kWait false: the caller has waited for that already), then
 * stored by TMA from the leader (a 256-column tile in two rounds halves the staging: sm90_wgrad.cu,
 * sm90_grouped_kernel.cuh kHalfStage) */
template <int kRound, int kCols, bool kWait = true, int N>
__device__ __forceinline__ void store_round(const float (&acc)[N], uint8_t *stage, int la, int lb, int cq,
                                            bool leader, int bar_id, const CUtensorMap *map, int col0, int row0)
{
    if constexpr (kWait) {
        if (leader)
            mok_bulk_wait_read();
        mok_named_barrier(bar_id, 128);
    }
    stage_bf16<kRound * kCols / 8, kCols / 8>(acc, stage, la, lb, cq);
    staged_ready(bar_id);
    if (leader)
        store_staged(map, col0 + kRound * kCols, row0, stage, kCols / 64);
}

/* As store_staged, for stage_f32's boxes (64 rows x 32 floats): added onto the fp32 tensor by TMA reduce. */
__device__ __forceinline__ void reduce_staged_f32(const CUtensorMap *map, int col0, int row0, uint8_t *stage,
                                                  int boxes)
{
    for (int b = 0; b < boxes; b++)
        mok_tma_reduce_add_2d(map, col0 + b * 32, row0, stage + b * kBoxBytes);
    mok_bulk_commit();
}

/* out[g] = sum of count(g') for g' < g, for g in [0, groups] (out[groups]: the total), by one warp, 32 groups
 * per step with a shuffle scan. count(g) is called for g < groups only and may validate (and trap on) its group. */
template <typename Count>
__device__ __forceinline__ void warp_group_prefix(int groups, int lane, int *out, Count count)
{
    int carry = 0;
    for (int base = 0; base <= groups; base += 32) {
        int g = base + lane, cnt = g < groups ? count(g) : 0;
        int v = cnt; /* inclusive warp scan */
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            int y = __shfl_up_sync(0xffffffffu, v, d);
            if (lane >= d)
                v += y;
        }
        if (g <= groups)
            out[g] = carry + v - cnt;
        carry += __shfl_sync(0xffffffffu, v, 31);
    }
}

#endif

/* Host side, defined in sm90_diag.cu: the process's failure record (mapped host memory, printed at exit; NULL while
 * a stream is being captured and none exists yet), and its message on stderr if a kernel filled it (then cleared). */
struct mok_sm90_diag *diag_record(cudaStream_t s);
void diag_print();
/* Host side, defined in sm90_tensor_maps.cu: the 128B-swizzled tensor map of a row-major bf16 matrix [rows][k] read or
 * written in boxes of box_rows x 64. */
bool encode_tile_map(CUtensorMap *map, const void *base, uint64_t rows, uint64_t k, uint32_t box_rows);
/* The same over fp32 [rows][cols] in boxes of box_rows x 32 (one 128-byte swizzle row): weight gradients added
 * by TMA reduce (stage_f32). */
bool encode_tile_map_f32(CUtensorMap *map, float *base, uint64_t rows, uint64_t cols, uint32_t box_rows);
/* The same over e4m3 bytes [rows][k]: boxes of box_rows x 128 bytes (128 K), the fp8 policies' operands; rows
 * row_bytes apart (0: k; else a multiple of 16 >= k, e.g. wire rows with their scales behind the values). land:
 * mxfp8 scheme (b)'s landing boxes instead, box_rows x 64 bytes, 64B swizzle (gemm/sm90_mx_expand.cuh). */
bool encode_tile_map_e4m3(CUtensorMap *map, const void *base, uint64_t rows, uint64_t k, uint32_t box_rows,
                          uint64_t row_bytes = 0, bool land = false);
/* mxfp8's B scales in the tile layout (mok_scale_mx_tiles): [blocks of 64 B rows][k_blocks x 256] bytes, one k
 * block of two adjacent blocks (a slot's kMxScaleSlot bytes) per box; scheme (b) (land): one 64-K block's
 * kMxLandScaleRow bytes of land_blocks adjacent blocks per box (gemm/sm90_mx_expand.cuh mx_load_block). */
bool encode_mx_scale_tile_map(CUtensorMap *map, const void *base, uint64_t blocks, uint64_t k_blocks,
                              uint32_t land_blocks = 0);

} // namespace mok_sm90

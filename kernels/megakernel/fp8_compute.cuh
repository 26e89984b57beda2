/* megakernel/fp8_compute.cuh: the compute blocks' producer and consumers in the FP8 forwards (mok_mega_args.fp8:
 * fp8_block, or mxfp8 with kMx; compute.cuh's compute_role runs the same prologue and unit list, then these loops).
 *
 * Tiles are 128 x 128 (layout.cuh), on a ring like bf16's: a k block is 128 e4m3 per row, the same 128-byte box
 * rows and 128B swizzle; A slots of 16 KiB as bf16's, B slots of 16 (bf16: 32), so more stages fit. fp8_block's
 * kWide instances (fp8_tile_n 256, Fp8Tile below) run the bf16 kernel's 128 x 256 tiles and 32 KiB B slots instead:
 * GEMM1 128 gate + 128 up columns, two 128-column products per k block (64-column ones: the layer 7.5-10% slower,
 * results/h200x1/2026-12-05-lsa-fix-fp8-products), h quantized per tile from its staging
 * (quantize_staged_h, no pairs), GEMM2 256 columns in two epilogue rounds; what follows says 64 / 128 columns
 * for the 128 x 128 tiles.
 *   GEMM1 unit (rb, n): A the slots' e4m3 rows (m.xq's wire rows), B the gate rows [64 n, +64) and the matching
 *     up rows of the expert's w13 (two 64-row boxes); the core's fp8_block policy (consume_tile_fp8_block, two
 *     64-column products per k block, promotion per 128 K with the row's scale x the 128 x 128 block's) into 64
 *     gate + 64 up columns; the epilogue stores SwiGLU's 64 h columns (bf16, TMA), then the pair step below.
 *   h's quantization: a scale covers 128 columns of a row, two GEMM1 tiles (n = 2b, 2b + 1). Each consumer warpgroup
 *     counts its 64-row half in the pair's counter once its h store is complete; the second of the two reads the
 *     pair's 64 x 128 bf16 block back from L2 and writes its e4m3 values (m.hq) and scales (m.hs), then counts the
 *     block in done1[rb]. So done1 reaches 2 x inter / 128 (both halves of every block) exactly when the row
 *     block's h is quantized: the same target as bf16's 2 x inter / 128 GEMM1 tiles. An all-padding half counts
 *     once per pair (the odd tile), with no work. The bf16 h stays in m.h: the check's export reads it
 *     (the wide tiles store it only where mok_mega_args.store_h asks: only that export reads it there).
 *   GEMM2 unit (rb, n): A m.hq, B the expert's w2 rows [128 n, +128); the same policy into 128 output columns,
 *     sent from the registers (kSend) or staged and stored as bf16 (epilogue_store counts done2: 2 x hidden / 128).
 *   mxfp8 (kMx): the core's mxfp8 policy (consume_tile_mxfp8: promotion per 32 K with the row's and the column's
 *     e8m0 scales; the B rows' scales come with each slot, a TMA box of the weights' scale tiles, 512 bytes). Its
 *     scales cover 32 columns, so each GEMM1 tile quantizes its own 64 h columns (quantize_h_mx) and counts its half
 *     in done1 at once, no pairs: done1 reaches 2 x inter / 64.
 *   Shared experts (jobs 2, 3; the kShared instances): bf16, as the baselines and the reference run them
 *     (shared_unit_bf16), on the same 128 x 128 tiles: x_local's rows, sh and sy as in the bf16 kernel; done3
 *     reaches 2 x shared_inter / 64.
 * The weights' block-scale row of a unit comes with it beside the slot (slot_bscale): the consumers know no group.
 * Part of the fused forward's one translation unit (kernels/megakernel/forward.cu includes it after compute.cuh); its
 * names live in that file's anonymous namespace. */
#pragma once

#include "util/fp8_quant.cuh"

namespace {

/* An FP8 instance's tile geometry: 128 x 128 (GEMM1 64 h columns, GEMM2 128 output columns; B slots of 16 KiB), or
 * with kWide (fp8_block with fp8_tile_n 256) the bf16 kernel's 128 x 256 (GEMM1 128 gate + 128 up columns, GEMM2 256;
 * B slots of 32 KiB), whose GEMM1 tile holds a whole 128-column scale block of h: no pairs (quantize_staged_h).
 * The wide tiles became possible once the wait timeouts stopped trapping (sm90_ptx.cuh mok_sm90_abort): with the
 * trap, 128 accumulators and a product spilled in the 384-thread layout. */
template <bool kWide> struct Fp8Tile {
    static constexpr int kHCols = kWide ? kTileN / 2 : kFp8HCols;  /* h columns of a GEMM1 tile */
    static constexpr int kOutCols = kWide ? kTileN : kFp8OutCols;  /* output columns of a GEMM2 tile */
    static constexpr int kSlotB = kWide ? kSlotBBytes : kTileM * kRowBytes;
    static constexpr int kAcc = kOutCols / 2;                       /* accumulators per consumer thread */
};

#if MOK_SM90_DEVICE
/* The weights' scale block row of each slot's unit (its B rows / 128), written by the producer beside slot_unit
 * before the slot's arrive. A function-scope __shared__ array: one per kernel, shared by both roles. */
__device__ __forceinline__ int *slot_bscale()
{
    __shared__ int s[kMaxStages];
    return s;
}

/* Per consumer warpgroup: whether its leader's count made it the second of a GEMM1 pair (handed to the warpgroup
 * through shared memory across the epilogue's named barrier). */
__device__ __forceinline__ volatile int *pair_second()
{
    __shared__ int s[2];
    return s;
}

template <bool kMx, bool kShared, bool kWide>
__device__ __forceinline__ void produce_units_fp8(const Maps &maps, const mok_mega_args &m,
                                                  const volatile UnitList &L, const int *mstart, OwnBlocks own,
                                                  uint8_t *smem_a, uint8_t *smem_b, uint8_t *smem_bs, uint64_t *full,
                                                  uint64_t *empty, int *slot_unit, struct mok_sm90_diag *diag)
{
    using T = Fp8Tile<kWide>;
    const mok_lsa_args &a = m.lsa;
    const int stages = m.stages, hidden = a.hidden, inter = m.inter, sinter = m.shared_inter;
    int *slot_bs = slot_bscale();
    RingPos ring = {0, 0};
    for (;;) {
        const int u = atomicAdd(m.done, 1); /* the ticket */
        if (u >= L.units)
            break;
        const Unit p = unit_at(u, L, mstart, a.local_experts, m.raster, own);
        const int row0 = p.rb * kTileM;
        const bool g1 = p.job == 0 || p.job == 2, shared = kShared && p.job >= 2; /* bf16 tiles (see the top) */
        const int k_blocks = shared ? (g1 ? hidden : sinter) / kBlockK : (g1 ? hidden : inter) / kFp8BlockK;
        const CUtensorMap *ma = p.job == 0 ? &maps.x : p.job == 1 ? &maps.ha : p.job == 2 ? &maps.sx : &maps.sha;
        const CUtensorMap *mb = p.job == 0 ? &maps.w13 : p.job == 1 ? &maps.w2 : p.job == 2 ? &maps.sw13 : &maps.sw2;
        /* GEMM1: the gate rows [kHCols n, +kHCols) of the expert's 2 inter rows and the up rows inter further on;
         * GEMM2: rows [kOutCols n, +kOutCols) of its hidden (the shared MLP's: one group, sinter for inter) */
        const int b_row = p.job == 0 ? p.group * 2 * inter + p.n * T::kHCols
                          : p.job == 1 ? p.group * hidden + p.n * T::kOutCols
                                       : p.n * (g1 ? T::kHCols : T::kOutCols);
        const int b_up = b_row + (p.job == 0 ? inter : sinter); /* GEMM1's up half */
        const int wave_units = (int)gridDim.x - m.comm_blocks; /* lockstep: as the bf16 producer (compute.cuh) */
        if (m.lockstep && u >= wave_units)
            wait_count(m.done + 1, u / wave_units * wave_units, diag, 4, u);
        if (p.job == 0) {
            mok_sm90_wait_rows(a.ready, a.chunk_target, a.chunk_rows, row0, row0 + kTileM, diag, u);
        } else if (p.job == 1) { /* every block of the row block's h quantized, both halves (see the top) */
            wait_count(row_counters(m.done, 0, a.capacity) + p.rb, 2 * (inter / (kMx ? kFp8HCols : 128)), diag, 0,
                       p.rb); /* fp8_block: per 128 columns, by pairs of tiles or (kWide) by each tile */
            mok_fence_proxy_async_global(); /* TMA (the async proxy) reads what generic acquire saw */
        } else if (p.job == 3) { /* every shared GEMM1 half tile of the row block stored (done3) */
            wait_count(row_counters(m.done, 2, a.capacity) + p.rb, 2 * L.ns1, diag, 3, p.rb);
            mok_fence_proxy_async_global();
        }
        for (int kb = 0; kb < k_blocks; kb++) {
            producer_acquire(ring, empty, diag, u, kb);
            if (kb == 0) { /* published by the arrive below (release) */
                slot_unit[ring.slot] = pack_unit(p);
                slot_bs[ring.slot] = b_row / 128;
            }
            uint64_t *bar = producer_arm(ring, full, kSlotABytes + T::kSlotB + (kMx && !shared ? kMxScaleSlot : 0));
            uint8_t *b_dst = smem_b + (size_t)ring.slot * T::kSlotB;
            /* the maps' first coordinate: e4m3 bytes, or bf16 elements (a shared tile's k block of 64) */
            const int kc = kb * (shared ? kBlockK : kFp8BlockK);
            mok_tma_load_2d(smem_a + (size_t)ring.slot * kSlotABytes, ma, kc, row0, bar);
            mok_tma_load_2d(b_dst, mb, kc, b_row, bar);
            if (g1)
                mok_tma_load_2d(b_dst + T::kHCols * kRowBytes, mb, kc, b_up, bar);
            if (kMx && !shared) /* the slot's B scales: 64-row blocks b_row / 64 on (GEMM1: its gate block j is block
                                 * 2 j of the expert's, paired with up block j; sm90_grouped_kernel.cuh) */
                mok_tma_load_2d(smem_bs + (size_t)ring.slot * kMxScaleSlot, g1 ? &maps.bs13 : &maps.bs2, 2 * kc,
                                g1 ? b_row / 64 + p.n : b_row / 64, bar);
            if (kb == 0 && m.lockstep)
                atomicAdd(m.done + 1, 1); /* this unit has started */
            ring.advance(stages);
        }
    }
    producer_end(ring, full, empty, slot_unit, diag);
}

/* The pair step after a GEMM1 tile's h store (all 128 threads of the consumer warpgroup; see the file's comment).
 * row0: this warpgroup's first row. The leader's count publishes this tile's half (its bulk store complete, then a
 * release) and, when it is the second, acquires the first's; the warpgroup then quantizes rows [row0, +64) x
 * columns [128 b, +128): a half warp per row, 8 columns per lane (mok_fp8::quant_block128, the separate quantize
 * kernel's arithmetic, so the check's reference quantizes the exported h to the same bytes). */
__device__ __forceinline__ void quantize_h_pair(const mok_mega_args &m, const Unit &p, int row0, int cwg, int wq,
                                                int lane, bool leader)
{
    const mok_lsa_args &a = m.lsa;
    const int I = m.inter, b = p.n / 2;
    volatile int *second = pair_second();
    if (leader) {
        mok_bulk_wait(0);               /* this tile's h in global memory */
        mok_fence_proxy_async_global(); /* ... and visible to generic loads */
        __threadfence();
        int32_t *pair = m.done + counters(a.capacity, a.t_max, m.shared_inter) +
                        ((size_t)p.rb * 2 + cwg) * (I / 128) + b;
        const int before = atomicAdd(pair, 1);
        __threadfence(); /* the first's fence before its count, this one after mine: its h is seen below */
        second[cwg] = before == 1;
    }
    mok_named_barrier(1 + cwg, 128);
    if (!second[cwg])
        return;
    const int hl = lane % 16;
    for (int i = 0; i < 8; i++) { /* warp wq's 16 rows, two per step */
        const size_t row = (size_t)row0 + wq * 16 + 2 * i + lane / 16, col = (size_t)b * 128 + hl * 8;
        /* through L2: the other tile's half was written by another SM during this kernel */
        const uint4 v = __ldcg(reinterpret_cast<const uint4 *>(m.h + row * I + col));
        float s;
        uint32_t amax_bits;
        const uint2 q = mok_fp8::quant_block128(v, &s, &amax_bits);
        *reinterpret_cast<uint2 *>(m.hq + row * I + col) = q;
        if (hl == 0)
            static_cast<float *>(m.hs)[row * (I / 128) + b] = s;
    }
    mok_named_barrier(1 + cwg, 128); /* every lane's stores, then the leader's fence orders them before its count */
    if (leader) {
        __threadfence();
        atomicAdd(row_counters(m.done, 0, a.capacity) + p.rb, 1); /* done1: one block of one half quantized */
    }
}

/* mxfp8's h step after a GEMM1 tile's store (all 128 threads of the consumer warpgroup): its own 64 rows x 64
 * columns [64 n, +64), two scale blocks per row, read back once the leader's bulk store is complete, quantized by
 * quads (mok_fp8::quant_block32, the separate mxfp8 kernel's arithmetic), then the half counted in done1. */
__device__ __forceinline__ void quantize_h_mx(const mok_mega_args &m, const Unit &p, int row0, int cwg, int wq,
                                              int lane, bool leader)
{
    const mok_lsa_args &a = m.lsa;
    const int I = m.inter;
    if (leader) {
        mok_bulk_wait(0);               /* this tile's h in global memory */
        mok_fence_proxy_async_global(); /* ... and visible to generic loads */
    }
    mok_named_barrier(1 + cwg, 128);
    for (int i = 0; i < 4; i++) { /* warp wq's 16 rows, four per step, 8 lanes (64 columns) per row */
        const size_t row = (size_t)row0 + wq * 16 + 4 * i + lane / 8, col = (size_t)p.n * kFp8HCols + lane % 8 * 8;
        const uint4 v = __ldcg(reinterpret_cast<const uint4 *>(m.h + row * I + col));
        uint8_t e;
        const uint2 q = mok_fp8::quant_block32(v, &e);
        *reinterpret_cast<uint2 *>(m.hq + row * I + col) = q;
        if (lane % 4 == 0)
            static_cast<uint8_t *>(m.hs)[row * (I / 32) + col / 32] = e;
    }
    mok_named_barrier(1 + cwg, 128); /* every lane's stores, then the leader's fence orders them before its count */
    if (leader) {
        __threadfence();
        atomicAdd(row_counters(m.done, 0, a.capacity) + p.rb, 1); /* done1: this tile's half quantized */
    }
}

/* GEMM2's output columns from the accumulators (kSend: straight to the owners' combine rows, or sy's rows for the
 * shared job 3; else staged and stored, counted by epilogue_store): one round of 128 columns, two in the wide tiles
 * (the bf16 kernel's GEMM2 epilogue). kJob: p.job (1 or 3) as a constant, so send_row_dst's test of it folds. */
template <bool kSend, bool kWide, int kJob>
__device__ __forceinline__ void gemm2_epilogue(const Maps &maps, const mok_mega_args &m, const Unit &p,
                                               const float (&acc)[Fp8Tile<kWide>::kAcc], uint8_t *stage,
                                               uint8_t *const *comb_base, int row0, int cwg, int wq, int lane,
                                               bool leader)
{
    using T = Fp8Tile<kWide>;
    const int la = wq * 16 + lane / 4, lb = la + 8, cq = 2 * (lane % 4);
    if constexpr (kSend) {
        uint8_t *da = send_row_dst(m, kJob, row0 + la, comb_base), *db = send_row_dst(m, kJob, row0 + lb, comb_base);
        const int c0 = p.n * T::kOutCols * 2;
        send_plain<3>(acc, da ? da + c0 : nullptr, db ? db + c0 : nullptr, lane);
        if constexpr (kWide)
            send_plain<4>(acc, da ? da + c0 + kStageCols * 2 : nullptr, db ? db + c0 + kStageCols * 2 : nullptr, lane);
    } else {
        epilogue_begin(leader, cwg);
        stage_bf16<0, kStageCols / 8>(acc, stage, la, lb, cq);
        epilogue_store(maps, m, p, leader, cwg, stage, p.n * T::kOutCols, !kWide);
        if constexpr (kWide) {
            epilogue_begin(leader, cwg);
            stage_bf16<kStageCols / 8, kStageCols / 8>(acc, stage, la, lb, cq);
            epilogue_store(maps, m, p, leader, cwg, stage, p.n * T::kOutCols + kStageCols, true);
        }
    }
}

/* A shared-expert unit in the FP8 forward (job 2: GEMM1 + SwiGLU, kHCols h columns into sh; job 3: GEMM2, kOutCols
 * columns of sy): bf16, as the baselines and the check's reference run the shared MLP, on the instance's tiles of the
 * same ring (bf16 boxes of 64 K) and wgmma m64nNk16 into the same accumulators. */
template <bool kSend, bool kWide>
__device__ __forceinline__ void shared_unit_bf16(const Maps &maps, const mok_mega_args &m, const Unit &p, int u,
                                                 RingPos &ring, uint64_t *full, uint64_t *empty,
                                                 float (&acc)[Fp8Tile<kWide>::kAcc], uint8_t *smem_a, uint8_t *smem_b,
                                                 uint8_t *stage, uint8_t *const *comb_base, int cwg, int wq, int lane,
                                                 bool leader, struct mok_sm90_diag *diag, int role)
{
    using T = Fp8Tile<kWide>;
    const int la = wq * 16 + lane / 4, lb = la + 8, cq = 2 * (lane % 4), row0 = p.rb * kTileM + cwg * 64;
    const int k_blocks = (p.job == 2 ? m.lsa.hidden : m.shared_inter) / kBlockK;
    float(&tile)[1][T::kAcc] = *reinterpret_cast<float(*)[1][T::kAcc]>(&acc[0]);
    consume_tile<T::kOutCols, 1, kSlotABytes, T::kSlotB>(ring, m.stages, full, empty, tile, k_blocks, smem_a,
                                                        cwg * 64 * kRowBytes, smem_b, 1, lane, 0, diag, role, u);
    if (p.job == 2) { /* gate accumulators with the up ones: kHCols h columns, counted in done3 once stored */
        epilogue_begin(leader, cwg);
        stage_swiglu(acc, stage, la, lb, cq);
        staged_ready(1 + cwg);
        if (leader) {
            store_staged(&maps.shc, p.n * T::kHCols, row0, stage, T::kHCols / 64);
            mok_bulk_wait(0);
            mok_fence_proxy_async_global();
            __threadfence();
            atomicAdd(row_counters(m.done, 2, m.lsa.capacity) + p.rb, 1);
        }
    } else { /* into sy (rows below t_max; epilogue_store counts nothing for job 3) */
        gemm2_epilogue<kSend, kWide, 3>(maps, m, p, acc, stage, comb_base, row0, cwg, wq, lane, leader);
    }
}

/* GEMM1's h step on the bf16 kernel's 128 x 256 tiles (fp8_block's kWide, mxfp8's scheme (b): mx_expand.cuh), after
 * the SwiGLU staging (all 128 threads of the consumer warpgroup, after staged_ready): the warpgroup's 64 rows x the
 * tile's 128 h columns, read from the staging (the bf16 values the TMA store writes to m.h: no L2 read-back),
 * quantized into hq and hs by the separate quantize kernels' arithmetic (so the check's reference, quantizing the
 * exported h, gets the same bytes): fp8_block one block per row by half warps (mok_fp8::quant_block128, fp32 scales
 * [row][I / 128]), or (kMx) per 32 columns by quads (quant_block32, e8m0 scales [row][I / 32]); then the half tile
 * counted in done1 (GEMM2 reads hq and hs only). A lane takes one 16-byte chunk (8 columns) of a row, 16 lanes a
 * row: a step reads two rows of the two 64-column boxes (stage_word's swizzle) and writes 128 contiguous bytes of hq
 * per row. */
template <bool kMx>
__device__ __forceinline__ void quantize_staged_h(const mok_mega_args &m, const Unit &p, const uint8_t *stage,
                                                  int row0, int cwg, int wq, int lane, bool leader)
{
    const int I = m.inter, chunk = lane % 16;
#pragma unroll 2
    for (int i = 0; i < 8; i++) { /* warp wq's 16 rows, two per step */
        const int r = wq * 16 + 2 * i + lane / 16;
        const uint4 v = *reinterpret_cast<const uint4 *>(stage + (chunk >> 3) * kBoxBytes + r * kRowBytes +
                                                         (((chunk & 7) ^ (r & 7)) << 4));
        const size_t row = (size_t)row0 + r, col = (size_t)p.n * kStageCols + chunk * 8;
        uint2 q;
        if constexpr (kMx) {
            uint8_t e;
            q = mok_fp8::quant_block32(v, &e);
            if (lane % 4 == 0)
                static_cast<uint8_t *>(m.hs)[row * (I / 32) + col / 32] = e;
        } else {
            float s;
            uint32_t amax_bits;
            q = mok_fp8::quant_block128(v, &s, &amax_bits);
            if (chunk == 0)
                static_cast<float *>(m.hs)[row * (I / 128) + p.n] = s;
        }
        *reinterpret_cast<uint2 *>(m.hq + row * I + col) = q;
    }
    mok_named_barrier(1 + cwg, 128); /* every lane's stores, then the leader's fence orders them before its count */
    if (leader) {
        __threadfence();
        atomicAdd(row_counters(m.done, 0, m.lsa.capacity) + p.rb, 1); /* done1: this half tile's h quantized */
    }
}

template <bool kSend, bool kMx, bool kShared, bool kWide>
__device__ __forceinline__ void consume_units_fp8(const Maps &maps, const mok_mega_args &m, uint64_t *full,
                                                  uint64_t *empty, uint8_t *smem_a, uint8_t *smem_b,
                                                  const uint8_t *smem_bs, uint8_t *stage, const int *slot_unit,
                                                  uint8_t *const *comb_base, int cwg, int wq, int lane, bool leader,
                                                  struct mok_sm90_diag *diag, int role)
{
    using T = Fp8Tile<kWide>;
    static_assert(!(kWide && kMx), "the wide tiles are fp8_block's");
    /* wgmma products per k block: 128 columns on the wide tiles (mok-gemm's fastest fp8_n there), 64 otherwise and
     * beside the shared experts' bf16 tiles (with 128 that instance spills in its k loop) */
    constexpr int kProducts = kWide && !kShared ? T::kOutCols / 128 : T::kOutCols / 64;
    const mok_lsa_args &a = m.lsa;
    const int stages = m.stages, hidden = a.hidden, inter = m.inter;
    const int *slot_bs = slot_bscale();
    const int la = wq * 16 + lane / 4, lb = la + 8, cq = 2 * (lane % 4);
    float acc[T::kAcc]; /* 64 rows x kOutCols columns per warpgroup */
    NoPump pump;
    RingPos ring = {0, 0};
    for (;;) {
        mok_sm90_wait(&full[ring.slot], ring.phase, diag, role, ring.slot, -1, 0); /* the unit's first k block */
        /* lane 0 reads the slot's unit (compute.cuh says why lane 0) */
        const int u = __shfl_sync(0xffffffffu, lane == 0 ? *(volatile int *)&slot_unit[ring.slot] : 0, 0);
        if (u < 0)
            break;
        const Unit p = unpack_unit(u);
        if (kShared && p.job >= 2) {
            shared_unit_bf16<kSend, kWide>(maps, m, p, u, ring, full, empty, acc, smem_a, smem_b, stage, comb_base,
                                           cwg, wq, lane, leader, diag, role);
            continue;
        }
        const bool g1 = p.job == 0;
        const int kb128 = (g1 ? hidden : inter) / kFp8BlockK; /* k blocks, and scales per row */
        const int row0 = p.rb * kTileM + cwg * 64;
        if (a.entry[row0] < 0) { /* an all-padding half (compute.cuh says why it is skipped) */
            skip_tile(ring, stages, full, empty, kb128, lane, diag, role, u);
            /* done1: a pair's one count (kMx, kWide: every tile's), or done2 */
            if (leader && (g1 ? kMx || kWide || p.n % 2 == 1 : !kSend))
                atomicAdd(row_counters(m.done, p.job, a.capacity) + p.rb, 1);
            continue;
        }
        if constexpr (kMx) {
            /* A's e8m0 bytes of rows la and la + 8 (written in this kernel: kLiveA; GEMM1's behind each slot's e4m3
             * values); B's arrive with each slot */
            const int a_stride = g1 ? fp8_row_bytes(hidden) : inter / 32;
            const uint8_t *sa = (g1 ? m.xq + hidden : static_cast<const uint8_t *>(m.hs)) + (size_t)(row0 + la) *
                                                                                            a_stride;
            consume_tile_mxfp8<kFp8OutCols / 64, true>(ring, stages, full, empty, acc, kb128, smem_a,
                                                       cwg * 64 * kRowBytes, kSlotABytes, smem_b, slot_b_bytes(true),
                                                       smem_bs, lane, diag, role, u, sa, 8 * a_stride);
        } else {
            /* scales: A's rows la and la + 8 (written in this kernel: kLiveA; GEMM1's behind each slot's e4m3
             * values, a_stride floats per row); B's block row, and for GEMM1 the up columns' block inter / 128 block
             * rows on */
            const int b_block = __shfl_sync(0xffffffffu, lane == 0 ? *(volatile int *)&slot_bs[ring.slot] : 0, 0);
            const int a_stride = g1 ? fp8_row_bytes(hidden) / 4 : kb128;
            const float *sa = (g1 ? reinterpret_cast<const float *>(m.xq + hidden) : static_cast<const float *>(m.hs)) +
                              (size_t)(row0 + la) * a_stride;
            const float *sb = (g1 ? m.w13s : m.w2s) + (size_t)b_block * kb128;
            /* the second column half's block: the up block inter / 128 block rows on, or (kWide GEMM2) the next */
            const int sb_hi = g1 ? inter / 128 * kb128 : kWide ? kb128 : 0;
            consume_tile_fp8_block<T::kOutCols, kProducts, NoPump, true>(
                ring, stages, full, empty, acc, kb128, smem_a, cwg * 64 * kRowBytes, kSlotABytes, smem_b, T::kSlotB, 1,
                lane, 0, diag, role, u, sa, 8 * a_stride, sb, sb_hi, pump);
        }
        if (g1) { /* kHCols h columns: the gate accumulators with the up ones, one or two staged boxes */
            epilogue_begin(leader, cwg);
            stage_swiglu(acc, stage, la, lb, cq);
            staged_ready(1 + cwg);
            /* the wide tiles quantize h from this staging: its bf16 store only when asked (mok_mega_args.store_h;
             * read by the leader alone: a register live across the tile spills) */
            if (leader && (!kWide || !m.store_h || __ldg(m.store_h) != 0))
                store_staged(&maps.hc, p.n * T::kHCols, row0, stage, T::kHCols / 64);
            if constexpr (kMx)
                quantize_h_mx(m, p, row0, cwg, wq, lane, leader);
            else if constexpr (kWide)
                quantize_staged_h<false>(m, p, stage, row0, cwg, wq, lane, leader);
            else
                quantize_h_pair(m, p, row0, cwg, wq, lane, leader);
        } else { /* the output columns to the owners' combine rows, or staged into out */
            gemm2_epilogue<kSend, kWide, 1>(maps, m, p, acc, stage, comb_base, row0, cwg, wq, lane, leader);
        }
    }
}
#endif

} // namespace

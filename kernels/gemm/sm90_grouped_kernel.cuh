/* gemm/sm90_grouped_kernel.cuh: the grouped GEMM's device side (kernels/gemm/sm90_grouped.cu says what it does and
 * holds its launcher): the shared-memory layout, the tile map and the kernel, on the GEMM core (sm90_core.cuh, its
 * FP8 policies in sm90_fp8.cuh).
 * Included once, by sm90_grouped.cu; its names live in that file's anonymous namespace.
 * Why one file of ~640 lines: the kernel template and the producer loops of its mxfp8 instances (scheme (b)'s and
 * mx_scheme 2's, ~160 lines) share the tile map and the lean layout's inline producer defined here; moving the loops
 * out would first give the tile map a header of its own. */
#pragma once

#include <type_traits>

namespace {

using namespace mok_sm90;

constexpr int kMaxGroups = 1024;
constexpr int kMaxStages = 8;
constexpr int kSmemLimit = 227 * 1024;    /* the opt-in maximum of one CTA on sm_90 */

/* Dynamic shared memory: [align slack][A slots][B slots][C staging][mxfp8: B scale slots, or scheme (b)'s landing
 * ring][full barriers][empty barriers][scheme (b): landing barriers][tile prefix].
 * The slack lets the kernel round the base up to 1024 bytes, which the 128B swizzle needs (TMA writes and wgmma
 * reads assume the swizzle pattern starts on a 1024-byte boundary); nothing promises the dynamic base is. C
 * staging: the tile's rows x its output columns in bf16, 1024-aligned like the slots. mxfp8: each slot's B scales
 * (kMxScaleSlot bytes, 16-byte aligned for the bulk copy: they follow the 1024-aligned staging); scheme (b)
 * (expand): `land` landing stages of e4m3 rows and B scales after the staging (the ring 1024-aligned, its
 * stages 512-aligned), with a full barrier each (sm90_mx_expand.cuh); mx_scheme 2 (land_a): stages of A's rows
 * only; land 0 for the other instances. mx_scheme 3 (rega): A's slots hold its e4m3 codes, 64 bytes a row.
 * half: the staging is at most 128 columns wide (kHalfStage: a 256-column tile without SwiGLU stored in two rounds). */
__host__ __device__ constexpr int stage_cols(int tile_n, int swiglu, bool half)
{
    return half && tile_cols(tile_n, swiglu) > 128 ? 128 : tile_cols(tile_n, swiglu);
}

size_t smem_bytes(int tile_m, int tile_n, int stages, int groups, int swiglu, bool mx = false, int land = 0,
                  bool land_a = false, bool rega = false, bool half = false)
{
    const size_t land_bytes = land_a ? (size_t)kMxLandABytes : (size_t)mx_land_stage_bytes(tile_n);
    const size_t a_row = rega ? (size_t)kMxLandRowBytes : (size_t)kRowBytes; /* mx_scheme 3: A's e4m3 codes */
    return 1024 + (size_t)stages * ((size_t)tile_m * a_row + (size_t)tile_n * kRowBytes) +
           (size_t)tile_m * stage_cols(tile_n, swiglu, half) * 2 + (mx ? (size_t)stages * kMxScaleSlot : 0) +
           (size_t)land * (land_bytes + 8) + 2 * (size_t)stages * 8 + (size_t)(groups + 1) * 4;
}

/* Where tile t lies. */
struct TilePos {
    int group;
    int row0;    /* first row of A and C this tile covers: offset[group] + m * tile_m */
    int row_end; /* offset[group + 1]: rows from here on are another group's (or nobody's): never stored */
    int n;       /* column tile index within the group */
};

#if MOK_SM90_DEVICE
/* Work is counted in units of cm tiles (cm: 1, or 2 CTAs of a cluster): vertically adjacent tiles sharing B
 * (cluster_m), or with share_a horizontally adjacent ones sharing A (cluster_n: n_tiles even); for cm = 1 a unit is
 * a tile. tile_start[g] = first unit of group g (exclusive prefix), tile_start[groups] = total. Empty groups repeat
 * the same start; the largest g with tile_start[g] <= t is the non-empty group that holds t (t < total). */
__device__ __forceinline__ TilePos map_tile(int t, const int *tile_start, const int32_t *offset, int groups,
                                            int n_tiles, int cm, int crank, int n_major, int tile_m, int share_a = 0)
{
    int lo = 0, hi = groups - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (tile_start[mid] <= t)
            lo = mid;
        else
            hi = mid - 1;
    }
    int local = t - tile_start[lo];
    TilePos p;
    p.group = lo;
    /* m-major (consecutive units share the A rows, so consecutive CTAs start on the same A at the same time) or
     * n-major (consecutive units share the B tile: the operand that is 4x larger at GEMM1's shapes) */
    const int n_units = share_a ? n_tiles / cm : n_tiles;
    int m_units = (tile_start[lo + 1] - tile_start[lo]) / n_units;
    int mu = n_major ? local % m_units : local / n_units;
    const int nu = n_major ? local / m_units : local % n_units;
    /* with a cluster of cm CTAs a unit is cm vertically (or with share_a horizontally) adjacent tiles; this CTA
     * takes the crank-th. Past an odd group's last tile a vertical pair's second computes rows of the next group
     * (or TMA's zeros) and stores none of them. */
    p.n = share_a ? nu * cm + crank : nu;
    p.row0 = offset[lo] + (share_a ? mu : mu * cm + crank) * tile_m;
    p.row_end = offset[lo + 1];
    return p;
}

/* The lean layout's producer (sm90_core.cuh, lean_layout): one consumer thread (thread 0, in the first warpgroup)
 * issues the loads of this CTA's (tile, k block) sequence between its own k blocks. step(), before the thread's wait
 * for the k block it consumes next: load every next k block whose slot is free (a non-blocking probe of the slot's
 * empty barrier), up to `stages` ahead; block on the slot only where the k block about to be consumed is not loaded
 * yet (its slot's previous k block was loaded earlier, so the other warpgroup can always give it back: no
 * deadlock). drain(), after a tile's last release: the same without the blocking case. The simple loads only: no
 * clusters, lockstep, ready counters, mxfp8 scales or transposed weights (the host refuses them with this layout). */
struct InlineProducer {
    const CUtensorMap *map_a, *map_b;
    uint8_t *smem_a, *smem_b;
    uint64_t *full, *empty;
    const int *tile_start;
    const int32_t *offset;
    struct mok_sm90_diag *diag;
    int groups, n_tiles, n_major, n_out, swiglu, stages, k_blocks, unit_step, total_tiles, slot_bytes_a, slot_bytes_b;
    int tile_m, tile_n, elems_k;
    RingPos ring;
    int t, kb, row0, b_row;
    int issued, consumed; /* k blocks loaded and consumed by this warpgroup, counted over the whole sequence */
    bool active;          /* the one thread that loads */

    __device__ __forceinline__ void load_one()
    {
        if (kb == 0) {
            TilePos p = map_tile(t, tile_start, offset, groups, n_tiles, 1, 0, n_major, tile_m);
            row0 = p.row0;
            b_row = swiglu ? p.group * 2 * n_out + p.n * (tile_n / 2) : p.group * n_out + p.n * tile_n;
        }
        producer_acquire(ring, empty, diag, t, kb);
        uint64_t *bar = producer_arm(ring, full, (uint32_t)(slot_bytes_a + slot_bytes_b));
        uint8_t *a_dst = smem_a + (size_t)ring.slot * slot_bytes_a;
        uint8_t *b_dst = smem_b + (size_t)ring.slot * slot_bytes_b;
        const int kc = kb * elems_k;
        mok_tma_load_2d(a_dst, map_a, kc, row0, bar);
        if (swiglu) { /* gate half then up half, adjacent, as the 384-thread producer loads them */
            mok_tma_load_2d(b_dst, map_b, kc, b_row, bar);
            mok_tma_load_2d(b_dst + (tile_n / 2) * kRowBytes, map_b, kc, b_row + n_out, bar);
        } else {
            mok_tma_load_2d(b_dst, map_b, kc, b_row, bar);
        }
        ring.advance(stages);
        issued++;
        if (++kb == k_blocks) {
            kb = 0;
            t += unit_step;
        }
    }

    /* load while slots are free; block only for the k block the caller consumes next (must) */
    __device__ __forceinline__ void pump(bool must_cover_next)
    {
        while (t < total_tiles && issued < consumed + stages) {
            const bool must = must_cover_next && issued <= consumed;
            if (!must && !mok_mbar_test_wait(mok_smem_addr(&empty[ring.slot]), ring.phase ^ 1))
                break;
            load_one();
        }
    }

    __device__ __forceinline__ void step()
    {
        if (active)
            pump(true);
        consumed++;
    }

    __device__ __forceinline__ void drain()
    {
        if (active)
            pump(false);
    }
};

/* mxfp8 scheme (b)'s loads (sm90_mx_expand.cuh), by thread 0 of the producer warpgroup: the next k block of this
 * CTA's (tile, k block) sequence, lt and lkb (with its tile's first A row, B row and B scale block), into landing
 * stage `stage`. Plain arguments, not a struct of them: the producer runs on kMxProducerRegs registers. */
template <int TILE_N>
__device__ __forceinline__ void mx_load_next(int &lt, int &lkb, int &row0, int &b_row, int &bs_block, int stage,
                                             uint8_t *land, uint64_t *land_full, const CUtensorMap *map_a,
                                             const CUtensorMap *map_b, const CUtensorMap *map_bs,
                                             const int *tile_start, const int32_t *offset, int groups, int n_tiles,
                                             int n_major, int n_out, int swiglu, int k_blocks, int unit_step,
                                             int total_tiles)
{
    if (lt >= total_tiles)
        return;
    if (lkb == 0) {
        const TilePos p = map_tile(lt, tile_start, offset, groups, n_tiles, 1, 0, n_major, kTileM);
        row0 = p.row0;
        b_row = swiglu ? p.group * 2 * n_out + p.n * (TILE_N / 2) : p.group * n_out + p.n * TILE_N;
        /* the tile's first scale block: with SwiGLU its first gate block's place 2j, j = b_row's block in W[g]'s
         * gate half (mok_mxfp8_tile_index's pairing) */
        bs_block = swiglu ? p.group * 2 * n_out / 64 + p.n * (TILE_N / 64) : b_row / 64;
    }
    mx_load_block<TILE_N>(land + (size_t)stage * mx_land_stage_bytes(TILE_N), &land_full[stage], map_a, map_b, map_bs,
                          lkb, row0, b_row, bs_block, swiglu, n_out);
    if (++lkb == k_blocks) {
        lkb = 0;
        lt += unit_step;
    }
}

/* The producer warpgroup of the kMxExpand instances: every thread walks the CTA's (tile, k block) sequence and runs
 * mx_producer_step on each k block (its A row's two scale bytes loaded first); thread 0 also keeps the landing ring
 * land_stages k blocks ahead, loading each stage again once the step's named barrier says it is read. */
template <int TILE_N>
__device__ __forceinline__ void mx_expand_loop(const CUtensorMap *map_a, const CUtensorMap *map_b,
                                               const CUtensorMap *map_bs, uint8_t *smem_a, uint8_t *smem_b,
                                               uint8_t *land, uint64_t *full, uint64_t *empty, uint64_t *land_full,
                                               const int *tile_start, const int32_t *offset, int groups, int n_tiles,
                                               int n_major, int n_out, int swiglu, int stages, int k_blocks,
                                               int unit0, int unit_step, int total_tiles, int rows_capacity, int k,
                                               const uint8_t *a_mx_scale, int land_stages, struct mok_sm90_diag *diag)
{
    const int pt = threadIdx.x; /* 0..127 */
    int bs_at[TILE_N / 128];
    mx_scale_places<TILE_N>(pt, swiglu, bs_at);
    int lt = unit0, lkb = 0, lrow0 = 0, lb_row = 0, lbs = 0;
    if (pt == 0)
        for (int s = 0; s < land_stages; s++)
            mx_load_next<TILE_N>(lt, lkb, lrow0, lb_row, lbs, s, land, land_full, map_a, map_b, map_bs, tile_start,
                                 offset, groups, n_tiles, n_major, n_out, swiglu, k_blocks, unit_step, total_tiles);
    RingPos ring = {0, 0};
    int stage = 0;
    uint32_t land_phase = 0;
    for (int t = unit0; t < total_tiles; t += unit_step) {
        const TilePos p = map_tile(t, tile_start, offset, groups, n_tiles, 1, 0, n_major, kTileM);
        /* row pt's scale bytes, k / 32 per row (k a multiple of 128: a k block's two are 2-byte aligned); rows past
         * the allocation read the last row's (their A rows are TMA's zeros, and never stored) */
        const uint16_t *sa = reinterpret_cast<const uint16_t *>(
            a_mx_scale + (size_t)min(p.row0 + pt, rows_capacity - 1) * (k / 32));
        for (int kb = 0; kb < k_blocks; kb++) {
            const uint32_t sa2 = __ldg(sa + kb);
            mx_producer_step<TILE_N>(land + (size_t)stage * mx_land_stage_bytes(TILE_N), &land_full[stage],
                                     land_phase, smem_a + (size_t)ring.slot * kTileM * kRowBytes,
                                     smem_b + (size_t)ring.slot * TILE_N * kRowBytes, ring, full, empty, pt, bs_at,
                                     sa2, diag, stage, t, kb);
            ring.advance(stages);
            if (pt == 0)
                mx_load_next<TILE_N>(lt, lkb, lrow0, lb_row, lbs, stage, land, land_full, map_a, map_b, map_bs,
                                     tile_start, offset, groups, n_tiles, n_major, n_out, swiglu, k_blocks, unit_step,
                                     total_tiles);
            if (++stage == land_stages) {
                stage = 0;
                land_phase ^= 1;
            }
        }
    }
}

/* The producer warpgroup of the kMxBBf16 instances (mx_scheme 2, sm90_mx_expand.cuh): every thread walks the CTA's
 * (tile, k block) sequence and runs mx_a_producer_step on each k block (its A row's two scale bytes loaded first);
 * thread 0 loads each k block's B (bf16, the bf16 instance's boxes) into the slot, and keeps A's landing ring
 * land_stages k blocks ahead, loading each stage again once the step's named barrier says it is read. */
template <int TILE_N>
__device__ __forceinline__ void mx_expand_a_loop(const CUtensorMap *map_a, const CUtensorMap *map_b, uint8_t *smem_a,
                                                 uint8_t *smem_b, uint8_t *land, uint64_t *full, uint64_t *empty,
                                                 uint64_t *land_full, const int *tile_start, const int32_t *offset,
                                                 int groups, int n_tiles, int n_major, int n_out, int swiglu,
                                                 int stages, int k_blocks, int unit0, int unit_step, int total_tiles,
                                                 int rows_capacity, int k, const uint8_t *a_mx_scale, int land_stages,
                                                 struct mok_sm90_diag *diag)
{
    const int pt = threadIdx.x; /* 0..127 */
    int lt = unit0, lkb = 0, lrow0 = 0; /* thread 0: the next k block to land */
    auto load_next = [&](int st) {
        if (lt >= total_tiles)
            return;
        if (lkb == 0)
            lrow0 = map_tile(lt, tile_start, offset, groups, n_tiles, 1, 0, n_major, kTileM).row0;
        mx_load_a_block(land + (size_t)st * kMxLandABytes, &land_full[st], map_a, lkb, lrow0);
        if (++lkb == k_blocks) {
            lkb = 0;
            lt += unit_step;
        }
    };
    if (pt == 0)
        for (int st = 0; st < land_stages; st++)
            load_next(st);
    RingPos ring = {0, 0};
    int stage = 0;
    uint32_t land_phase = 0;
    for (int t = unit0; t < total_tiles; t += unit_step) {
        const TilePos p = map_tile(t, tile_start, offset, groups, n_tiles, 1, 0, n_major, kTileM);
        const int b_row = swiglu ? p.group * 2 * n_out + p.n * (TILE_N / 2) : p.group * n_out + p.n * TILE_N;
        /* row pt's scale bytes, as mx_expand_loop reads them */
        const uint16_t *sa = reinterpret_cast<const uint16_t *>(
            a_mx_scale + (size_t)min(p.row0 + pt, rows_capacity - 1) * (k / 32));
        for (int kb = 0; kb < k_blocks; kb++) {
            const uint32_t sa2 = __ldg(sa + kb);
            uint8_t *b_dst = smem_b + (size_t)ring.slot * TILE_N * kRowBytes;
            const int kc = kb * kBlockK;
            mx_a_producer_step(land + (size_t)stage * kMxLandABytes, &land_full[stage], land_phase,
                               smem_a + (size_t)ring.slot * kTileM * kRowBytes, ring, full, empty, pt, sa2,
                               (uint32_t)(TILE_N * kRowBytes),
                               [&](uint64_t *bar) { /* the bf16 instance's B boxes: SwiGLU's gate half, then up */
                                   if (swiglu) {
                                       mok_tma_load_2d(b_dst, map_b, kc, b_row, bar);
                                       mok_tma_load_2d(b_dst + (TILE_N / 2) * kRowBytes, map_b, kc, b_row + n_out,
                                                       bar);
                                   } else {
                                       mok_tma_load_2d(b_dst, map_b, kc, b_row, bar);
                                   }
                               },
                               diag, stage, t, kb);
            ring.advance(stages);
            if (pt == 0)
                load_next(stage);
            if (++stage == land_stages) {
                stage = 0;
                land_phase ^= 1;
            }
        }
    }
}
#endif

/* kFp8N: 0 for bf16, else the fp8_block precision policy (sm90_core.cuh, consume_tile_fp8_block) with products of
 * kFp8N columns (64 or 128): A and B e4m3 with their scales a_scale [rows_capacity][k / 128] and b_scale
 * [B rows / 128][k / 128], on 128 x 128 tiles (a consumer thread holds 64 accumulators and a product's part) or
 * 128 x 256 (128 accumulators: the lean layout, 256 threads, the loads issued by InlineProducer). Without it the
 * scales are unused.
 * kMx (with kFp8N): the mxfp8 policy instead (consume_tile_mxfp8): A and B e4m3 with e8m0 scales, a_mx_scale
 * [rows_capacity][k / 32] (the quantizer's layout, read by the consumers from global memory) and B's in the GEMM's
 * tile layout [B rows / 64][k / 128][256] (mok_scale_mx_tiles), loaded by the producer into each slot through
 * map_bs, one TMA box of two 64-row blocks; 128 x 128 tiles without clusters (cm 1). map_bs is unused elsewhere. */
/* kBT (bf16, 128-row tiles, no SwiGLU or clusters): the dgrad policy. B[g] is the forward's weight read transposed,
 * row-major [k][n_out] (C = A W[g], W's columns contiguous): its slot is TILE_N / 64 boxes of 64 K rows x 64
 * columns (map_b over [groups k][n_out] in boxes of 64 x 64), read by the consumers as MnMajor. */
/* kMxExpand (kFp8N 0, 128 x 128 or 128 x 256, no clusters or lockstep): mxfp8 scheme (b), sm90_mx_expand.cuh. The
 * operands are mxfp8's (a_fp8 and a_mx_scale as for kMx, B e4m3 with its scales in the tile layout through map_bs),
 * map_a and map_b e4m3 in boxes of 64 bytes (one 64-K block) x rows, 64B-swizzled, into the landing ring; the
 * producer warpgroup expands them into the bf16 slots, whose full barriers count its 128 threads; the consumers and
 * the epilogue are the bf16 instance's.
 * kMxBBf16 (with kMxExpand): mx_scheme 2. B is bf16 (the weights' MX values expanded at setup), map_b the bf16
 * instance's; only A lands and is expanded; the full barriers count the 128 arrivals and B's TMA bytes.
 * kMxRegA (kFp8N 0, 128 x 128 or 128 x 256, no clusters or lockstep): mx_scheme 3, sm90_mx_rega.cuh. The bf16
 * instance's producer loads A's e4m3 rows (map_a in 64-byte boxes, 64B-swizzled: 8 KiB A slots) and B in bf16 (the
 * weights' MX values with K permuted within each 64-K block); each consumer thread expands its A fragment into
 * registers for wgmma's register operand; the epilogue is the bf16 instance's. */
template <int TILE_M, int TILE_N, int kFp8N = 0, bool kMx = false, bool kBT = false, bool kMxExpand = false,
          bool kLeanReq = false, bool kMxBBf16 = false, bool kMxRegA = false, bool kHalfStage = false>
__global__ void __launch_bounds__(lean_layout(TILE_M, TILE_N, kFp8N != 0, kMx, kLeanReq) ? kLeanThreads : kThreads, 1)
    gemm_sm90_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                     const __grid_constant__ CUtensorMap map_c, uint16_t *__restrict__ c,
                     const int32_t *__restrict__ offset, int groups, int rows_capacity,
                     int n_out, int k, int swiglu, int stages, const int32_t *__restrict__ ready,
                     const int32_t *__restrict__ ready_target, int ready_rows, int cm, int share_a, int *wave_ctr,
                     int lock_kb, int n_major, struct mok_sm90_diag *diag, const float *__restrict__ a_scale,
                     const float *__restrict__ b_scale, const uint8_t *__restrict__ a_mx_scale,
                     const __grid_constant__ CUtensorMap map_bs, int land_stages)
{
#if MOK_SM90_DEVICE
    /* The tile policy. TILE_M 128 or 256: each consumer warpgroup owns TILE_M / 2 rows (kSub 64-row sub-tiles) and
     * every column. TILE_M 64 (kSplitN, with TILE_N 256): both warpgroups share the 64 rows and split the columns,
     * TILE_N / 2 each, so a group of 64 rows or fewer is one tile instead of a half-empty 128-row one (small groups
     * are bound by their weights' DRAM stream, and padded rows double the tensor work under it). The B slot is loaded
     * as for 128-row tiles; each warpgroup runs two m64n64 wgmmas per k16 on two 64-row blocks of it: with SwiGLU
     * its quarter of the gate rows and the matching quarter of the up rows (so it pairs its own gate and up
     * columns), without it the two quarters of its column half. The same instructions either way (the blocks'
     * offsets differ, computed once per kernel), and a compile-time choice per instance: no branch in the k loop.
     * (Four TMA boxes per slot instead made the 40-register producer spill.) */
    constexpr bool kSplitN = TILE_M == 64;
    static_assert(!kSplitN || TILE_N == 256, "64-row tiles split 256 columns between the two consumer warpgroups");
    constexpr bool kFp8 = kFp8N != 0;
    static_assert(!kFp8 || (TILE_M == 128 && TILE_N == 128) || (!kMx && TILE_M == 128 && TILE_N == 256),
                  "fp8_block runs 128 x 128 or 128 x 256 tiles, mxfp8 128 x 128");
    constexpr bool kLean = lean_layout(TILE_M, TILE_N, kFp8, kMx, kLeanReq);
    static_assert(!kLeanReq || kLean, "the lean layout runs fp8_block's 128 x 256 tiles");
    static_assert(kFp8N == 0 || kFp8N == 64 || kFp8N == 128, "fp8_block products of 64 or 128 columns");
    static_assert(!kMx || kFp8, "mxfp8 is an FP8 policy: kFp8N gives its product width");
    static_assert(!kBT || (!kFp8 && TILE_M == 128), "dgrad (kBT) runs bf16 128-row tiles");
    static_assert(!kMxExpand || (!kFp8 && !kBT && TILE_M == 128), "mxfp8 scheme (b) runs 128-row tiles, bf16 slots");
    static_assert(!kMxBBf16 || kMxExpand, "mx_scheme 2 is scheme (b) with B in bf16");
    static_assert(!kMxRegA || (!kFp8 && !kBT && !kMxExpand && TILE_M == 128), "mx_scheme 3 runs 128-row tiles");
    /* kHalfStage: without SwiGLU a 128 x 256 tile's C staging (64 KiB) leaves room for 3 stages; staged and stored
     * in two rounds of 128 columns (32 KiB, the second after the first's store has read it) it leaves room for 4 */
    static_assert(!kHalfStage || (TILE_M == 128 && TILE_N == 256 && !kFp8 && !kMxExpand && !kMxRegA),
                  "the two-round epilogue is bf16 128 x 256's");
    constexpr int kLandBytes = kMxBBf16 ? kMxLandABytes : mx_land_stage_bytes(TILE_N); /* one landing stage */
    constexpr int kElemsK = kFp8 ? kFp8BlockK : kBlockK; /* K elements per k block: 128 bytes of a row either way */
    constexpr int kSlotA = kMxRegA ? kMxRegASlotBytes : TILE_M * kRowBytes; /* 8, 16 or 32 KiB (mx_scheme 3: codes) */
    constexpr int kSlotBBytes = TILE_N * kRowBytes;
    constexpr int kSub = kSplitN ? 1 : TILE_M / 128; /* 64-row wgmma sub-tiles per consumer warpgroup */
    constexpr int kWgN = kSplitN ? TILE_N / 2 : TILE_N; /* columns of the accumulator tile a warpgroup computes */
    constexpr int kParts = kSplitN ? 2 : 1;             /* wgmma B blocks per k16, of kWgN / kParts rows each */
    constexpr int kAcc = kWgN / 2;      /* fp32 accumulators per sub-tile per consumer thread: 64 x kWgN / 128 */
    static_assert(kSub * kAcc <= 128, "a consumer thread holds at most 128 accumulators (232 registers)");
    constexpr int kConsumerWarps = 8;   /* arrivals that free a slot: every consumer warp (of every CTA), once */

    extern __shared__ uint8_t smem_raw[];
    /* round the shared-space address (what TMA and the descriptors see) up to 1024 */
    uint8_t *smem = smem_raw + ((1024 - (mok_smem_addr(smem_raw) & 1023)) & 1023);
    uint8_t *smem_a = smem;                                   /* stages x TILE_M*128 B, each 1024-aligned */
    uint8_t *smem_b = smem_a + (size_t)stages * kSlotA;       /* stages x TILE_N*128 B, each 1024-aligned */
    const int cols_per_tile = tile_cols(TILE_N, swiglu);      /* output columns per tile */
    /* cols_per_tile, or at most 128 (kHalfStage; spelled apart so that the other instances' code stays as it was) */
    const int staged_cols = kHalfStage ? stage_cols(TILE_N, swiglu, true) : cols_per_tile;
    uint8_t *smem_c = smem_b + (size_t)stages * kSlotBBytes;  /* TILE_M rows x staged_cols bf16 */
    uint8_t *smem_bs = smem_c + (size_t)TILE_M * staged_cols * 2; /* mxfp8: stages x kMxScaleSlot */
    uint8_t *land = smem_bs; /* scheme (b): land_stages landing stages */
    uint64_t *full = reinterpret_cast<uint64_t *>(smem_bs + (kMx ? (size_t)stages * kMxScaleSlot : 0) +
                                                  (kMxExpand ? land_stages * kLandBytes : 0));
    uint64_t *empty = full + stages;
    uint64_t *land_full = empty + stages; /* scheme (b) */
    int *tile_start = reinterpret_cast<int *>(empty + stages + (kMxExpand ? land_stages : 0));

    const int n_tiles = n_out / cols_per_tile;
    const int k_blocks = k / kElemsK;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    /* cluster: crank picks the tile of a unit, units go round-robin over clusters (cm = 1: over CTAs) */
    const int crank = cm > 1 ? (int)mok_cluster_rank() : 0;
    const int unit0 = cm > 1 ? (int)mok_cluster_id() : blockIdx.x;
    const int unit_step = cm > 1 ? (int)mok_cluster_count() : gridDim.x;

    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            /* the producer's arrive.expect_tx, TMA (ours and the peer's) adding bytes; scheme (b): every producer
             * thread's arrival once its rows are expanded (mx_scheme 2: thread 0 adds B's bytes, no arrive) */
            mok_mbar_init(&full[s], kMxExpand ? 128 : 1);
            mok_mbar_init(&empty[s], kConsumerWarps * cm); /* the peer's consumers read the half we multicast */
        }
        if constexpr (kMxExpand)
            for (int s = 0; s < land_stages; s++)
                mok_mbar_init(&land_full[s], 1); /* thread 0's arrive.expect_tx, the TMA bytes */
        mok_fence_mbar_init(); /* inits visible to the async proxy (TMA complete_tx) */
        mok_tma_prefetch_map(&map_a);
        mok_tma_prefetch_map(&map_b);
    }
    /* Tile prefix over the groups, one warp, 32 groups per step: tiles of g = ceil(rows_g / TILE_M) * n_tiles.
     * offset[] is validated here: a bad one would make tiles write outside C or into another group. */
    if (warp == 0)
        warp_group_prefix(groups, lane, tile_start, [&](int g) {
            int r0 = offset[g], r1 = offset[g + 1];
            if (r0 < 0 || r1 < r0 || r1 > rows_capacity)
                mok_sm90_fail(diag, MOK_SM90_DIAG_OFFSETS, 0, 0, g, r0, r1);
            const int m_tiles = (r1 - r0 + TILE_M - 1) / TILE_M;
            return share_a ? m_tiles * (n_tiles / cm) : (m_tiles + cm - 1) / cm * n_tiles;
        });
    /* barriers initialized (the peer's too: it will multicast into ours), prefix written */
    if (cm > 1)
        mok_cluster_sync();
    else
        __syncthreads();
    const int total_tiles = tile_start[groups]; /* units */

    if (!kLean && warp < 4) {
        /* ---------------- producer warpgroup (the lean layout has none: InlineProducer) ---------------- */
        mok_setmaxnreg_dec<kMxExpand ? kMxProducerRegs : kProducerRegs>();
        if constexpr (kMxBBf16) { /* all 128 threads expand A; thread 0 loads B too */
            mx_expand_a_loop<TILE_N>(&map_a, &map_b, smem_a, smem_b, land, full, empty, land_full, tile_start, offset,
                                     groups, n_tiles, n_major, n_out, swiglu, stages, k_blocks, unit0, unit_step,
                                     total_tiles, rows_capacity, k, a_mx_scale, land_stages, diag);
            return;
        } else if constexpr (kMxExpand) { /* all 128 threads expand (no clusters: no exit barrier) */
            mx_expand_loop<TILE_N>(&map_a, &map_b, &map_bs, smem_a, smem_b, land, full, empty, land_full, tile_start,
                                   offset, groups, n_tiles, n_major, n_out, swiglu, stages, k_blocks, unit0,
                                   unit_step, total_tiles, rows_capacity, k, a_mx_scale, land_stages, diag);
            return;
        }
        if (threadIdx.x != 0) {
            if (cm > 1)
                mok_cluster_sync(); /* the exit barrier below: every thread of the cluster takes part */
            return; /* nothing else for the other 127 threads */
        }
        RingPos ring = {0, 0};
        /* waves in which every CTA has a unit: the lockstep barrier applies to those (the last, partial wave
         * has CTAs that never arrive) */
        const int full_waves = total_tiles / unit_step;
        int wave = 0;
        for (int t = unit0; t < total_tiles; t += unit_step, wave++) {
            TilePos p = map_tile(t, tile_start, offset, groups, n_tiles, cm, crank, n_major, TILE_M, share_a);
            /* B rows: without SwiGLU rows [g*n_out + n*TILE_N, +TILE_N); with it the gate rows
             * [g*2*n_out + n*TILE_N/2, +TILE_N/2) and the up rows n_out further on. */
            int b_row = swiglu ? p.group * 2 * n_out + p.n * (TILE_N / 2) : p.group * n_out + p.n * TILE_N;
            /* rows still arriving (ready counters given): only this tile's real rows are waited for */
            mok_sm90_wait_rows(ready, ready_target, ready_rows, p.row0, min(p.row0 + TILE_M, p.row_end), diag, t);
            for (int kb = 0; kb < k_blocks; kb++) {
                /* Lockstep: CTAs that share A or B tiles read them from L2 only if they are at about the same k
                 * at the same time (L2 holds ~12 us of DRAM traffic here). GEMM1 at DeepSeek-V3 shapes reads 6x
                 * its operands from DRAM (40% L2 hits); the hypothesis was that the persistent grid drifts apart.
                 * Every lock_kb k blocks the producers meet at a grid barrier (every tile has k_blocks, so within
                 * the full waves all CTAs count the same k blocks); the consumers keep draining the ring. Measured:
                 * one barrier per wave cut DRAM reads 60 -> 50 GB but not the time; kept as a parameter. */
                const int k_done = wave * k_blocks + kb; /* k blocks this CTA issued before this one */
                /* (mxfp8 and dgrad run without lockstep and clusters: compiled out of their producers, which
                 * need the registers for their scale loads, or the weight's TILE_N / 64 boxes) */
                if (!kMx && !kBT && wave_ctr && wave < full_waves && k_done > 0 && k_done % lock_kb == 0)
                    mok_sm90_wave_barrier(wave_ctr, gridDim.x, k_done / lock_kb, diag);
                producer_acquire(ring, empty, diag, t, kb);
                uint64_t *bar = producer_arm(ring, full, kSlotA + kSlotBBytes + (kMx ? kMxScaleSlot : 0));
                uint8_t *a_dst = smem_a + (size_t)ring.slot * kSlotA;
                uint8_t *b_dst = smem_b + (size_t)ring.slot * kSlotBBytes;
                int kc = kb * kElemsK;
                if (!kMx && !kBT && share_a) {
                    /* A in two halves of TILE_M/2 rows (the box of map_a), one per CTA, each multicast into both:
                     * the pair's tiles are adjacent columns of the same rows (small groups stream their weights
                     * and read A from L2 once per column tile: the pair halves those reads) */
                    mok_tma_load_2d_multicast(a_dst + crank * (TILE_M / 2) * kRowBytes, &map_a, kc,
                                              p.row0 + crank * (TILE_M / 2), bar, (uint16_t)((1u << cm) - 1));
                } else {
                    mok_tma_load_2d(a_dst, &map_a, kc, p.row0, bar);
                }
                if (!kMx && !kBT && cm > 1 && !share_a) {
                    /* B in two halves of TILE_N/2 rows (the box of map_b), one per CTA, each multicast into
                     * both: with SwiGLU the gate half and the up half, without it the two row halves */
                    int half_row = swiglu ? b_row + crank * n_out : b_row + crank * (TILE_N / 2);
                    mok_tma_load_2d_multicast(b_dst + crank * (TILE_N / 2) * kRowBytes, &map_b, kc, half_row, bar,
                                              (uint16_t)((1u << cm) - 1));
                } else if (kBT) {
                    /* dgrad: W[g]'s rows kc.. (K) of columns [n TILE_N, +TILE_N), a 64-column box each */
                    for (int j = 0; j < TILE_N / 64; j++)
                        mok_tma_load_2d(b_dst + j * 64 * kRowBytes, &map_b, p.n * TILE_N + 64 * j, p.group * k + kc,
                                        bar);
                } else if (swiglu) {
                    /* gate half then up half, adjacent: (TILE_N/2)*128 bytes is a whole number of 1024-byte
                     * swizzle atoms, so the up half's swizzle lines up with what one descriptor expects */
                    mok_tma_load_2d(b_dst, &map_b, kc, b_row, bar);
                    mok_tma_load_2d(b_dst + (TILE_N / 2) * kRowBytes, &map_b, kc, b_row + n_out, bar);
                } else {
                    mok_tma_load_2d(b_dst, &map_b, kc, b_row, bar);
                }
                if constexpr (kMx) {
                    /* the B scales of the slot's two 64-row blocks (gate and up, or the tile's two halves), one
                     * TMA box of 2 x 256 bytes: map_bs is [blocks][k / 128 x 256] bytes, k block kb of block b at
                     * (256 kb = 2 kc, b), and the tile layout puts the two blocks a tile reads next to each other
                     * (W13's gate block j at 2j, its up block at 2j + 1: GEMM1's tile n starts at b_row / 64 + n).
                     * One box from a tensor map, not two or bulk copies from a pointer: those made the 40-register
                     * producer spill. */
                    mok_tma_load_2d(smem_bs + (size_t)ring.slot * kMxScaleSlot, &map_bs, 2 * kc,
                                    swiglu ? b_row / 64 + p.n : b_row / 64, bar);
                }
                ring.advance(stages);
            }
        }
        if (cm > 1)
            mok_cluster_sync(); /* stay until the peer is done with our shared memory */
    } else {
        /* ---------------- consumer warpgroups ---------------- */
        if constexpr (!kLean)
            mok_setmaxnreg_inc<kMxExpand ? kMxConsumerRegs : kConsumerRegs>();
        /* 0: tile rows [0, TILE_M/2), 1: rows [TILE_M/2, TILE_M) (kSplitN: the column halves [0, TILE_N/2),
         * [TILE_N/2, TILE_N) of the 64 rows) */
        const int cwg = kLean ? warp / 4 : warp / 4 - 1;
        const int wq = warp % 4;         /* warp within the warpgroup: rows wq*16 .. +15 of each 64-row sub-tile */
        const int role = MOK_SM90_DIAG_CONSUMER + cwg;
        float acc[kSub][kAcc];
        RingPos ring = {0, 0};
        std::conditional_t<kLean, InlineProducer, NoPump> pump{};
        if constexpr (kLean) {
            pump.map_a = &map_a, pump.map_b = &map_b, pump.smem_a = smem_a, pump.smem_b = smem_b;
            pump.full = full, pump.empty = empty, pump.tile_start = tile_start, pump.offset = offset, pump.diag = diag;
            pump.groups = groups, pump.n_tiles = n_tiles, pump.n_major = n_major, pump.n_out = n_out;
            pump.swiglu = swiglu, pump.stages = stages, pump.k_blocks = k_blocks, pump.unit_step = unit_step;
            pump.total_tiles = total_tiles, pump.slot_bytes_a = kSlotA, pump.slot_bytes_b = kSlotBBytes;
            pump.tile_m = TILE_M, pump.tile_n = TILE_N, pump.elems_k = kElemsK;
            pump.ring = {0, 0}, pump.t = unit0, pump.kb = 0, pump.issued = 0, pump.consumed = 0;
            pump.active = threadIdx.x == 0;
        }
        for (int t = unit0; t < total_tiles; t += unit_step) {
            TilePos p = map_tile(t, tile_start, offset, groups, n_tiles, cm, crank, n_major, TILE_M, share_a);
            if constexpr (kMx) {
                /* this thread's two rows' scale bytes, k / 32 per row (rows past the allocation read the last
                 * row's: never stored) */
                const int ra = min(p.row0 + cwg * 64 + wq * 16 + lane / 4, rows_capacity - 1);
                const int rb = min(ra + 8, rows_capacity - 1);
                consume_tile_mxfp8<kFp8 ? 128 / kFp8N : 1>(ring, stages, full, empty, acc[0], k_blocks, smem_a,
                                                cwg * (TILE_M / 2) * kRowBytes, kSlotA, smem_b, kSlotBBytes, smem_bs,
                                                lane, diag, role, t, a_mx_scale + (size_t)ra * (k / 32),
                                                (rb - ra) * (k / 32));
            } else if constexpr (kMxRegA) {
                /* rows r0 and r0 + 8 of the tile, chunk q (sm90_mx_rega.cuh), their scale bytes of chunk q's k32
                 * blocks (rows past the allocation read the last row's: never stored) */
                const int r0 = cwg * 64 + wq * 16 + lane / 4, q = lane % 4;
                const int ra = min(p.row0 + r0, rows_capacity - 1), rb = min(p.row0 + r0 + 8, rows_capacity - 1);
                const MxRegA mt = {(uint32_t)(r0 * kMxLandRowBytes + ((q ^ ((r0 >> 1) & 3)) << 4)),
                                   (uint32_t)((r0 + 8) * kMxLandRowBytes + ((q ^ (((r0 + 8) >> 1) & 3)) << 4)),
                                   a_mx_scale + (size_t)ra * (k / 32) + q / 2,
                                   a_mx_scale + (size_t)rb * (k / 32) + q / 2};
                consume_tile_mx_rega<TILE_N>(ring, stages, full, empty, acc[0], k_blocks, smem_a, smem_b, mt, lane,
                                             diag, role, t);
            } else if constexpr (kFp8) {
                /* this thread's two rows' scales, k_blocks per row (rows past the allocation read the last row's: never
                 * stored) */
                const int ra = min(p.row0 + cwg * 64 + wq * 16 + lane / 4, rows_capacity - 1);
                const int rb = min(ra + 8, rows_capacity - 1);
                /* B scale rows: the 128-row blocks of the accumulator columns' two halves: with SwiGLU the gate
                 * block and the up block (TILE_N / 2 rows of each, inside one block as n_out % 128 == 0), without
                 * it the tile's column halves (one block where TILE_N is 128). (Written here, not as a lambda shared
                 * with anything: a lambda capturing by reference made ptxas spill in every instance of this
                 * kernel.) */
                const int b_first = swiglu ? p.group * 2 * n_out + p.n * (TILE_N / 2) : p.group * n_out + p.n * TILE_N;
                const int b_second = swiglu ? b_first + n_out : TILE_N == 128 ? b_first : b_first + TILE_N / 2;
                consume_tile_fp8_block<kWgN, kWgN / (kFp8 ? kFp8N : 64)>(
                    ring, stages, full, empty, acc[0], k_blocks, smem_a, cwg * (TILE_M / 2) * kRowBytes, kSlotA, smem_b,
                    kSlotBBytes, cm, lane, crank, diag, role, t, a_scale + (size_t)ra * k_blocks, (rb - ra) * k_blocks,
                    b_scale + (size_t)(b_first / 128) * k_blocks, (b_second / 128 - b_first / 128) * k_blocks, pump);
            } else {
                /* this warpgroup's rows of A: (TILE_M/2) * 128 B into the slot, still 1024-aligned (kSplitN: all 64
                 * rows; B blocks of 64 rows: with SwiGLU gate rows [64 w, +64) and up rows [128 + 64 w, +64) of the
                 * slot, without it rows [128 w, +64) and [128 w + 64, +64)) */
                using LayoutB = std::conditional_t<kBT, MnMajor, KMajor>;
                consume_tile<kWgN / kParts, kSub, kSlotA, kSlotBBytes, kParts, KMajor, LayoutB>(
                    ring, stages, full, empty, acc, k_blocks, smem_a, kSplitN ? 0 : cwg * (TILE_M / 2) * kRowBytes,
                    smem_b + (kSplitN ? cwg * (swiglu ? TILE_N / 4 : TILE_N / 2) * kRowBytes : 0), cm, lane, crank,
                    diag, role, t, kSplitN ? (swiglu ? TILE_N / 2 : TILE_N / 4) * kRowBytes : 0);
            }

            /* Epilogue, per 64-row sub-tile. m64nNk16 accumulator fragment: thread (wq, lane) holds rows
             * wq*16 + lane/4 (registers 4i, 4i+1) and that + 8 (registers 4i+2, 4i+3), columns 8i + 2*(lane%4)
             * and + 1. The staging holds the warpgroup's kSub sub-tiles; one wait frees it for all of them. */
            const int bar_id = 1 + cwg; /* 128 threads: this warpgroup only */
            const bool leader = wq == 0 && lane == 0;
            /* kSplitN: a warpgroup stores half the tile's output columns, from column wg_col0 of the tile */
            const int wg_cols = kSplitN ? cols_per_tile / 2 : cols_per_tile;
            const int wg_col0 = kSplitN ? cwg * wg_cols : 0;
            uint8_t *wg_stage = smem_c + (size_t)cwg * (TILE_M / 2) * staged_cols * 2; /* = 64 x wg_cols (kSplitN) */
            if (leader)
                mok_bulk_wait_read(); /* the previous tile's boxes have left the staging area */
            mok_named_barrier(bar_id, 128);
#pragma unroll
            for (int u = 0; u < kSub; u++) {
                const int sub_row0 = kSplitN ? p.row0 : p.row0 + cwg * (TILE_M / 2) + u * 64;
                if (sub_row0 + 64 <= p.row_end) {
                    /* All 64 rows are this group's: stage them and store whole boxes with TMA. */
                    uint8_t *stage = wg_stage + (size_t)u * 64 * wg_cols * 2;
                    const int la = wq * 16 + lane / 4, lb = la + 8, cq = 2 * (lane % 4);
                    if constexpr (kHalfStage) {
                        if (!swiglu) { /* two rounds of 128 columns through a 64 x 128 staging (the first
                                        * round's wait for the staging is the one above) */
                            const int col0 = p.n * cols_per_tile;
                            store_round<0, kWgN / 2, false>(acc[u], stage, la, lb, cq, leader, bar_id, &map_c, col0,
                                                            sub_row0);
                            store_round<1, kWgN / 2>(acc[u], stage, la, lb, cq, leader, bar_id, &map_c, col0,
                                                     sub_row0);
                            continue;
                        }
                    }
                    if (!swiglu)
                        stage_bf16<0, kWgN / 8>(acc[u], stage, la, lb, cq);
                    else
                        stage_swiglu(acc[u], stage, la, lb, cq);
                    staged_ready(bar_id);
                    if (leader)
                        store_staged(&map_c, p.n * cols_per_tile + wg_col0, sub_row0, stage, wg_cols / 64);
                    continue;
                }
                /* The group ends inside these 64 rows (a TMA box would overwrite the next group's): guarded
                 * stores of this group's rows only. */
                const int ra = sub_row0 + wq * 16 + lane / 4, rb = ra + 8;
                const bool oka = ra < p.row_end, okb = rb < p.row_end;
                const int col0 = p.n * cols_per_tile + wg_col0 + 2 * (lane % 4);
                uint32_t *ca = reinterpret_cast<uint32_t *>(c + (size_t)(oka ? ra : 0) * n_out + col0);
                uint32_t *cb = reinterpret_cast<uint32_t *>(c + (size_t)(okb ? rb : 0) * n_out + col0);
                if (!swiglu) {
#pragma unroll
                    for (int i = 0; i < kWgN / 8; i++) {
                        if (oka)
                            ca[4 * i] = pack_bf16x2(acc[u][4 * i], acc[u][4 * i + 1]); /* 8 columns = 4 words */
                        if (okb)
                            cb[4 * i] = pack_bf16x2(acc[u][4 * i + 2], acc[u][4 * i + 3]);
                    }
                } else {
                    /* gate column j is in register chunk j/8, its up column j + kWgN/2 in chunk j/8 + kWgN/16:
                     * kWgN/4 registers further on */
                    constexpr int kUp = kWgN / 4;
#pragma unroll
                    for (int i = 0; i < kWgN / 16; i++) {
                        if (oka)
                            ca[4 * i] = swiglu_bf16x2(acc[u][4 * i], acc[u][4 * i + kUp], acc[u][4 * i + 1],
                                                      acc[u][4 * i + 1 + kUp]);
                        if (okb)
                            cb[4 * i] = swiglu_bf16x2(acc[u][4 * i + 2], acc[u][4 * i + 2 + kUp], acc[u][4 * i + 3],
                                                      acc[u][4 * i + 3 + kUp]);
                    }
                }
            }
        }
        if (wq == 0 && lane == 0)
            mok_bulk_wait(0); /* the staging area stays valid and the stores complete before the CTA exits */
        if (cm > 1)
            mok_cluster_sync(); /* the peer's consumers may still arrive on our empty barriers */
    }
#else
    /* Built for a target without wgmma/setmaxnreg (sm_90 without "a", Blackwell): never meant to run. */
    if (threadIdx.x == 0 && blockIdx.x == 0)
        printf("mok-bench: gemm_sm90 kernel not built for sm_90a on this target\n");
    __trap();
#endif
}

} // namespace

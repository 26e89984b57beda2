/* megakernel/layout.cuh: the kernel's fixed tile shape, its shared-memory and counter layouts and its tensor
 * maps (host and device).
 * Part of the fused forward's one translation unit (kernels/megakernel/forward.cu includes it once, in this order:
 * layout, sync, units, comm, compute); its names live in that file's anonymous namespace. */
#pragma once

#include "gemm/sm90_mx_expand.cuh" /* mxfp8 scheme (b): the landing ring's sizes */

namespace {

constexpr int kTileN = 256;            /* accumulator columns per tile: GEMM1 128 gate + 128 up, GEMM2 256 */
constexpr int kMaxGroups = 1024;
constexpr int kSlotBBytes = kTileN * kRowBytes;
/* C staging: 128 rows x 128 bf16 columns, what one GEMM1 + SwiGLU tile stores. GEMM2's 256 columns go out in two
 * halves through it: 32 KiB of staging instead of 64 leaves room for a fourth 48 KiB stage of the ring, which both
 * GEMMs use (a second TMA store round per GEMM2 tile costs less than a shallower ring for all of them). */
constexpr int kStageCols = kTileN / 2;
constexpr int kStageBytes = kTileM * kStageCols * 2;
constexpr int kSmemLimit = 227 * 1024;
/* swap_tail (swap_tail.cuh): the most real rows a row block may hold to run with the tokens as wgmma's N; above,
 * N = 128 costs what the 128-row block does */
constexpr int kSwapMaxRows = 112;

/* A ring slot's B bytes: 256 rows of 128 bytes in bf16; fp8's tiles read 128 (mok_mega_args.fp8, below), so its
 * ring fits five or six stages beside the staging (by the expert count) where bf16's fits four. */
__host__ __device__ constexpr int slot_b_bytes(bool fp8) { return fp8 ? kTileM * kRowBytes : kSlotBBytes; }

/* [align slack][A slots][B slots][C staging][mxfp8: B scale slots][full barriers][empty barriers][row-block prefix],
 * and with own_first [own_pack][own_start] (only then: they would cost a ring stage at some expert counts). fp8:
 * mok_mega_args.fp8 (1 fp8_block, 2 mxfp8, whose slots carry the B rows' e8m0 scales too: kMxScaleSlot bytes).
 * land > 0: mxfp8 with mx_scheme 1 (mx_expand.cuh), bf16 slots, and after the staging the landing ring of e4m3 rows
 * (`land` stages, 512-aligned: the staging ends 1024-aligned) with its full barriers after the ring's. */
size_t smem_bytes(int stages, int groups, int own_first, int fp8 = 0, int land = 0, bool wide = false)
{
    const bool tiles128 = fp8 != 0 && land == 0 && !wide; /* wide: fp8 on the bf16 kernel's tiles and slots
                                                            * (fp8_block's fp8_tile_n 256, mxfp8's mx_scheme 3) */
    return 1024 + (size_t)stages * (kSlotABytes + slot_b_bytes(tiles128) + (tiles128 && fp8 == 2 ? kMxScaleSlot : 0)) +
           kStageBytes + (size_t)land * (mx_land_stage_bytes(kTileN) + 8) + 2 * (size_t)stages * 8 +
           (size_t)(groups + 1) * 4 + (own_first ? (size_t)(2 * groups + 1) * 4 : 0);
}

/* mok_mega_args.done: [0] the unit ticket, [1] units started (lockstep), then per row block GEMM1's and GEMM2's
 * counters over the slots, then the shared GEMM1's over the own tokens (row_counters). The ticket first: its
 * address is then the kernel parameter itself, which costs the producer (beside consumers at their register
 * limit) no register to keep. */
__host__ __device__ size_t counters(int capacity, int t_max, int shared_inter)
{
    return 2 + 2 * (size_t)(capacity / kTileM) + (shared_inter ? (size_t)t_max / kTileM + 1 : 0);
}

/* fp8 (mok_mega_args.fp8): the tiles are 128 x 128 (128 x 256 ones spilled in the 384-thread layout until the
 * timeouts stopped trapping, results/h200x1/2026-12-04-fp8-tiles; fp8_block's fp8_tile_n 256 now runs them:
 * fp8_compute.cuh Fp8Tile). A GEMM1 tile
 * is 64 gate + 64 up columns, so 64 h columns; a GEMM2 tile 128 output columns. h's scales cover 128 columns, two
 * GEMM1 tiles: after done[] come their pair counters, [row block][consumer warpgroup][inter / 128], each counting
 * the two tiles' 64-row halves (fp8_compute.cuh: the second to finish quantizes the pair's 64 x 128 block). */
constexpr int kFp8HCols = 64, kFp8OutCols = 128;
/* A wire row (fp8_comm.cuh), and an fp8 expert slot: hidden e4m3 bytes, then hidden / 32 bytes of scales
 * (fp8_block: hidden / 128 fp32; mxfp8: hidden / 32 e8m0), padded to 16 */
__host__ __device__ constexpr int fp8_row_bytes(int hidden) { return (hidden + hidden / 32 + 15) / 16 * 16; }
__host__ __device__ size_t fp8_pair_counters(int capacity, int inter)
{
    return (size_t)(capacity / kTileM) * 2 * (size_t)(inter / 128);
}

/* The tensor maps, as kernel parameters (__grid_constant__: TMA reads them where they are). The boxes below are
 * bf16's; fp8 (forward.cu) maps x over the slots' wire rows (mok_mega_args.xq, 128 rows of 128 bytes, the wire
 * row's stride), w13 in 64-row boxes, ha over hq and w2 in 128-row boxes, all of e4m3 bytes. */
struct Maps {
    CUtensorMap x;   /* xin [capacity][H], A of GEMM1, 128-row boxes */
    CUtensorMap w13; /* [EL * 2I][H], 128-row boxes (gate half, up half) */
    CUtensorMap hc;  /* h [capacity][I] as GEMM1's C: 64 x 64 store boxes */
    CUtensorMap ha;  /* h as GEMM2's A: 128-row boxes */
    CUtensorMap w2;  /* [EL * H][I], 256-row boxes */
    CUtensorMap oc;  /* out [capacity][H] as GEMM2's C: 64 x 64 store boxes */
    /* shared experts (shared_inter > 0; unused otherwise) */
    CUtensorMap sx;   /* this forward's own token rows [t_max][H], A of the shared GEMM1, 128-row boxes */
    CUtensorMap sw13; /* [2 SI][H], 128-row boxes */
    CUtensorMap shc;  /* sh [t_max][SI] as the shared GEMM1's C: 64 x 64 store boxes */
    CUtensorMap sha;  /* sh as the shared GEMM2's A: 128-row boxes */
    CUtensorMap sw2;  /* [H][SI], 256-row boxes */
    CUtensorMap syc;  /* sy [t_max][H] as the shared GEMM2's C: 64 x 64 store boxes */
    CUtensorMap guc;  /* gu [capacity][2I] as GEMM1's second C (kSave: the backward's saved gate and up columns) */
    CUtensorMap sguc; /* sgu [t_max][2 SI] as the shared GEMM1's second C (kSave with shared experts) */
    CUtensorMap bs13; /* mxfp8: w13's e8m0 scale tiles, a GEMM1 tile's gate and up blocks (512 bytes) per box */
    CUtensorMap bs2;  /* mxfp8: w2's, a GEMM2 tile's two 64-row blocks per box */
};

} // namespace

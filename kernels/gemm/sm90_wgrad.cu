/* gemm/sm90_wgrad: the backward's weight gradients on the GEMM core (kernels/mok_gemm.h, mok_wgrad_sm90):
 * C[g][m][n] (+)= sum over group g's rows r of A[r][m] B[r][n], K = the group's rows.
 *
 * Work: every group has the same (m / 128) x (n / TILE_N) output tiles (the weight's shape), so tile t is group
 * t / tiles_per_group, m-major inside it; a persistent grid walks t = blockIdx.x, += gridDim.x. Consecutive CTAs
 * work on one group at a time and read the same rows of A and B from L2.
 *
 * Roles as in the grouped GEMM (sm90_grouped.cu): one producer thread fills the ring with TMA, two consumer
 * warpgroups run wgmma from it (consume_tile with both operands MnMajor: a k block is 64 of the group's rows, A's
 * 128 columns m0.. as two 64-column boxes, B's TILE_N columns as TILE_N / 64). The last k block's rows past the
 * group's end belong to the next group (or lie past the matrix: TMA's zeros): its k16 steps past them are not
 * issued, and the rows of the last issued one are zeroed in the slot before its wgmmas (KTail). Writing bf16
 * gradients, the epilogue stages each consumer warpgroup's 64 x TILE_N fragment in shared memory and TMA stores it
 * in whole 128-byte rows (store_staged): stores from the accumulator fragments (16 bytes per row per instruction)
 * held the L2 at 86-88% of its throughput with the SMs at 28% of theirs (ncu,
 * Qwen3-235B 4096: 0.91 / 1.74 ms staged against 1.70 / 3.30). Staged whole, a 128 x 256 bf16 tile's 64 KiB leave room
 * for a ring of 3 stages; a configured ring of 4 (mok-gemm's `wgrad_stages`) stages it in two rounds of 128 columns, as
 * the fused backward does (32 KiB, the second round after the first's store has read the staging; kStageCols,
 * sm90_core.cuh store_round). The automatic depth (stages 0) keeps the whole staging: with the ring of 4 the backward
 * took 0.987-1.002x the time, wgrad's own phase 0.945-1.012x while the unchanged dgrad beside it took 1.015-1.039x (one
 * H100, results/h100x1/2026-12-07-core-stages). Accumulating fp32 gradients, each consumer thread loads its fragment of
 * the gradient tile into the accumulators before the tile's first wgmma and the products are added onto it (kKeepAcc):
 * a tile's loads are all in flight at once, under the wait for its operands, and the epilogue is stores (32 bytes per
 * row per instruction: whole sectors). Measured against two other forms on one H200
 * (results/h200x1/2026-12-04-mok-gemm-backward, separate calls): the same loads after the k loop (each thread stalls
 * once per fragment pair) made the whole backward 1.6-1.9x slower, and the tile staged and added at L2 by TMA
 * (cp.reduce.async.bulk.tensor .add) made wgrad 1.02-1.16x slower. Two variants measured slower and were taken out
 * (NOTES.md, tried and not merged): the CTA's next gradient tile prefetched into L2, and the warpgroups taking 128 x
 * 128 tiles in turn (ping-pong). The tile is this CTA's alone and its rows are summed in row order: the same inputs
 * give bitwise the same gradient every run.
 *
 * A group without rows: under accumulation its tiles are skipped (nothing to add), in bf16 they are written zeros
 * (the step's whole gradient is zero). Every wait times out into the failure record (sm90_ptx.cuh), and a bad
 * offset[] traps with a record as the grouped GEMM's does. */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "common/bulk.cuh"
#include "common/common.cuh"
#include "common/sm90_ptx.cuh"
#include "gemm/sm90_core.cuh"
#include "mok_gemm.h"

namespace {

using namespace mok_sm90;

constexpr int kMaxStages = 8;
constexpr int kSmemLimit = 227 * 1024;

/* The epilogue's staging per consumer warpgroup: its 64 rows x stage_cols bf16, stage_cols the tile's tile_n
 * (staged whole) or 128 (in rounds); fp32 gradients are not staged */
size_t stage_bytes(int stage_cols, bool f32) { return f32 ? 0 : (size_t)64 * stage_cols * 2; }

size_t smem_bytes(int tile_n, bool f32, int stages, int stage_cols)
{
    return 1024 + (size_t)stages * ((size_t)kTileM * kRowBytes + (size_t)tile_n * kRowBytes) +
           2 * stage_bytes(stage_cols, f32) + 2 * (size_t)stages * 8;
}

#if MOK_SM90_DEVICE
/* The rows of group g, validated (a bad offset[] would read other groups' rows or past the matrix) */
__device__ __forceinline__ int2 group_rows(const int32_t *offset, int g, int rows_capacity, struct mok_sm90_diag *diag)
{
    const int r0 = offset[g], r1 = offset[g + 1];
    if (r0 < 0 || r1 < r0 || r1 > rows_capacity)
        mok_sm90_fail(diag, MOK_SM90_DIAG_OFFSETS, 0, 0, g, r0, r1);
    return make_int2(r0, r1);
}
#endif

/* kStageCols: the bf16 epilogue's staging width, TILE_N (whole) or 128 (two rounds of a 256-column tile) */
template <int TILE_N, bool kF32, int kStageCols = TILE_N>
__global__ void __launch_bounds__(kThreads, 1)
    wgrad_sm90_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                      const __grid_constant__ CUtensorMap map_c, float *__restrict__ c_f32,
                      const int32_t *__restrict__ offset, int groups, int rows_capacity, int m, int n, int stages,
                      struct mok_sm90_diag *diag)
{
#if MOK_SM90_DEVICE
    constexpr int kSlotA = kTileM * kRowBytes, kSlotB = TILE_N * kRowBytes;
    constexpr int kAcc = TILE_N / 2;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (mok_smem_addr(smem_raw) & 1023)) & 1023); /* 128B swizzle: 1024-aligned */
    uint8_t *smem_a = smem, *smem_b = smem_a + (size_t)stages * kSlotA;
    uint8_t *smem_c = smem_b + (size_t)stages * kSlotB; /* 1024-aligned: the slots are */
    static_assert(kStageCols == TILE_N || (kStageCols == 128 && TILE_N == 256), "staged whole or in halves");
    constexpr int kStage = kF32 ? 0 : 64 * kStageCols * 2; /* map_c: bf16 gradients only */
    uint64_t *full = reinterpret_cast<uint64_t *>(smem_c + 2 * kStage), *empty = full + stages;

    const int m_tiles = m / kTileM, n_tiles = n / TILE_N, per_group = m_tiles * n_tiles;
    const int total = groups * per_group;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            mok_mbar_init(&full[s], 1);
            mok_mbar_init(&empty[s], 8); /* every consumer warp */
        }
        mok_fence_mbar_init();
        mok_tma_prefetch_map(&map_a);
        mok_tma_prefetch_map(&map_b);
    }
    __syncthreads();

    if (warp < 4) {
        /* ---------------- producer ---------------- */
        mok_setmaxnreg_dec<kProducerRegs>();
        if (threadIdx.x != 0)
            return;
        RingPos ring = {0, 0};
        for (int t = blockIdx.x; t < total; t += gridDim.x) {
            const int g = t / per_group, local = t % per_group;
            const int m0 = local / n_tiles * kTileM, n0 = local % n_tiles * TILE_N;
            const int2 rr = group_rows(offset, g, rows_capacity, diag);
            const int k_blocks = (rr.y - rr.x + 63) / 64;
            for (int kb = 0; kb < k_blocks; kb++) {
                producer_acquire(ring, empty, diag, t, kb);
                uint64_t *bar = producer_arm(ring, full, kSlotA + kSlotB);
                uint8_t *a_dst = smem_a + (size_t)ring.slot * kSlotA, *b_dst = smem_b + (size_t)ring.slot * kSlotB;
                const int row = rr.x + kb * 64;
                for (int j = 0; j < kTileM / 64; j++)
                    mok_tma_load_2d(a_dst + j * 64 * kRowBytes, &map_a, m0 + 64 * j, row, bar);
                for (int j = 0; j < TILE_N / 64; j++)
                    mok_tma_load_2d(b_dst + j * 64 * kRowBytes, &map_b, n0 + 64 * j, row, bar);
                ring.advance(stages);
            }
        }
    } else {
        /* ---------------- consumers: rows [64 cwg, +64) of each tile ---------------- */
        mok_setmaxnreg_inc<kConsumerRegs>();
        /* the warpgroup index through a shuffle, so that ptxas knows it uniform over each warp (a wgmma under a
         * branch it takes for divergent is serialized, C7520) */
        const int cwg = __shfl_sync(0xffffffffu, warp / 4 - 1, 0), wq = warp % 4;
        const int role = MOK_SM90_DIAG_CONSUMER + cwg;
        float acc[1][kAcc];
        RingPos ring = {0, 0};
        const int bar_id = 1 + cwg; /* 128 threads: this warpgroup's epilogue */
        const bool leader = wq == 0 && lane == 0;
        uint8_t *stage = smem_c + (size_t)cwg * kStage;
        for (int t = blockIdx.x; t < total; t += gridDim.x) {
            const int g = t / per_group, local = t % per_group;
            const int m0 = local / n_tiles * kTileM, n0 = local % n_tiles * TILE_N;
            const int2 rr = group_rows(offset, g, rows_capacity, diag);
            const int rows = rr.y - rr.x, k_blocks = (rows + 63) / 64;
            if (k_blocks == 0 && kF32)
                continue; /* nothing to add */
            /* the m64nNk16 fragment: rows wq 16 + lane / 4 (registers 4i, 4i + 1) and + 8 (4i + 2, 4i + 3),
             * columns 8i + 2 (lane % 4), + 1; this warpgroup's rows are [64 cwg, +64) of the tile */
            const int la = wq * 16 + lane / 4, lb = la + 8, cq = 2 * (lane % 4);
            const int row0 = g * m + m0 + cwg * 64;
            const size_t base_a = (size_t)(row0 + la) * n + n0 + cq, base_b = base_a + (size_t)8 * n;
            if constexpr (kF32) {
#pragma unroll
                for (int i = 0; i < kAcc / 4; i++) {
                    const float2 va = *reinterpret_cast<const float2 *>(c_f32 + base_a + 8 * i);
                    const float2 vb = *reinterpret_cast<const float2 *>(c_f32 + base_b + 8 * i);
                    acc[0][4 * i] = va.x, acc[0][4 * i + 1] = va.y, acc[0][4 * i + 2] = vb.x, acc[0][4 * i + 3] = vb.y;
                }
            }
            if (k_blocks == 0) {
#pragma unroll
                for (int i = 0; i < kAcc; i++)
                    acc[0][i] = 0.0f;
            } else {
                consume_tile<TILE_N, 1, kSlotA, kSlotB, 1, MnMajor, MnMajor, true, kF32>(
                    ring, stages, full, empty, acc, k_blocks, smem_a, cwg * 64 * kRowBytes, smem_b, 1, lane, 0, diag,
                    role, t, 0, KTail{rows - (k_blocks - 1) * 64, cwg, 0});
            }
            if constexpr (kF32) {
#pragma unroll
                for (int i = 0; i < kAcc / 4; i++) {
                    *reinterpret_cast<float2 *>(c_f32 + base_a + 8 * i) = make_float2(acc[0][4 * i], acc[0][4 * i + 1]);
                    *reinterpret_cast<float2 *>(c_f32 + base_b + 8 * i) =
                        make_float2(acc[0][4 * i + 2], acc[0][4 * i + 3]);
                }
            } else {
                store_round<0, kStageCols>(acc[0], stage, la, lb, cq, leader, bar_id, &map_c, n0, row0);
                if constexpr (kStageCols < TILE_N)
                    store_round<1, kStageCols>(acc[0], stage, la, lb, cq, leader, bar_id, &map_c, n0, row0);
            }
        }
        if (!kF32 && leader)
            mok_bulk_wait(0); /* the staging stays valid and the gradients are written before the CTA exits */
    }
#else
    if (threadIdx.x == 0 && blockIdx.x == 0)
        printf("mok-bench: wgrad_sm90 kernel not built for sm_90a on this target\n");
    __trap();
#endif
}

void say(char *why, int why_len, const char *msg, int a = 0, int b = 0, int c = 0)
{
    if (why && why_len > 0)
        snprintf(why, (size_t)why_len, msg, a, b, c);
}

/* The instances: 128 x 256 and 128 x 128 tiles (both warpgroups on each); fp32 or bf16; bf16 128 x 256 also
 * staged in two rounds (stage_cols 128) */
const void *kernel_for(int tile_n, bool f32, int stage_cols)
{
    if (f32)
        return tile_n == 256 ? reinterpret_cast<const void *>(&wgrad_sm90_kernel<256, true>)
                             : reinterpret_cast<const void *>(&wgrad_sm90_kernel<128, true>);
    if (tile_n == 256 && stage_cols == 128)
        return reinterpret_cast<const void *>(&wgrad_sm90_kernel<256, false, 128>);
    return tile_n == 256 ? reinterpret_cast<const void *>(&wgrad_sm90_kernel<256, false>)
                         : reinterpret_cast<const void *>(&wgrad_sm90_kernel<128, false>);
}

/* The ring: the deepest that fits with the epilogue staged whole, or the configured depth, staged whole where it
 * fits and in two rounds of 128 columns where only that fits (bf16, tile_n 256). stages 0: nothing fits. */
struct Ring {
    int stages, stage_cols;
};

Ring resolve_ring(const struct mok_gemm_sm90_config *c, bool f32, size_t limit)
{
    const int whole = c->tile_n;
    if (c->stages) {
        if (smem_bytes(c->tile_n, f32, c->stages, whole) <= limit)
            return {c->stages, whole};
        if (!f32 && c->tile_n == 256 && smem_bytes(c->tile_n, f32, c->stages, 128) <= limit)
            return {c->stages, 128};
        return {0, whole};
    }
    for (int s = kMaxStages; s >= 2; s--)
        if (smem_bytes(c->tile_n, f32, s, whole) <= limit)
            return {s, whole};
    return {0, whole};
}

int check(const struct mok_wgrad_args *w, const struct mok_gemm_sm90_config *c, Ring *ring, char *why, int why_len)
{
    say(why, why_len, "ok");
    int dev = 0, major = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        cudaGetLastError();
        say(why, why_len, "cannot query the current device");
        return cudaErrorNotSupported;
    }
    if (major != 9) {
        say(why, why_len, "wgrad: sm_90a only (this GPU is sm_%d)", major * 10);
        return cudaErrorNotSupported;
    }
    if (c->tile_n != 128 && c->tile_n != 256) {
        say(why, why_len, "wgrad: tile_n %d: 128 or 256", c->tile_n);
        return cudaErrorInvalidValue;
    }
    if (c->cluster_m > 1 || c->lockstep || c->sms < 0 || (c->stages && (c->stages < 2 || c->stages > kMaxStages))) {
        say(why, why_len, "wgrad: no clusters or lockstep (cluster_m %d, lockstep %d), sms >= 0, stages 0 or 2..8 "
            "(%d)", c->cluster_m, c->lockstep, c->stages);
        return cudaErrorInvalidValue;
    }
    if (!w->a || !w->b || !w->offset || (w->c_f32 == nullptr) == (w->c_bf16 == nullptr)) {
        say(why, why_len, "wgrad: a, b, offset and exactly one of c_f32, c_bf16");
        return cudaErrorInvalidValue;
    }
    if (w->groups < 1 || w->m < kTileM || w->m % kTileM || w->n < c->tile_n || w->n % c->tile_n) {
        say(why, why_len, "wgrad: groups %d >= 1, m %d a multiple of 128, n %d a multiple of tile_n", w->groups, w->m,
            w->n);
        return cudaErrorInvalidValue;
    }
    if ((long long)w->groups * (w->m / kTileM) * (w->n / c->tile_n) >= (1ll << 31) ||
        (long long)w->groups * w->m >= (1ll << 31) || w->rows_capacity < 0 ||
        (long long)w->rows_capacity + 64 >= (1ll << 31)) {
        say(why, why_len, "wgrad: problem too large for 32-bit tile coordinates (rows_capacity %d)", w->rows_capacity);
        return cudaErrorInvalidValue;
    }
    if (((uintptr_t)w->a | (uintptr_t)w->b | (uintptr_t)w->c_f32 | (uintptr_t)w->c_bf16) % 16) {
        say(why, why_len, "wgrad: a, b and c must be 16-byte aligned (TMA, vector stores)");
        return cudaErrorInvalidValue;
    }
    *ring = resolve_ring(c, w->c_f32 != nullptr, (size_t)(optin < kSmemLimit ? optin : kSmemLimit));
    if (!ring->stages) {
        say(why, why_len, "wgrad: stages %d of tile_n %d do not fit in shared memory", c->stages, c->tile_n);
        return cudaErrorInvalidValue;
    }
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, kernel_for(c->tile_n, w->c_f32 != nullptr, ring->stage_cols)) != cudaSuccess) {
        cudaGetLastError();
        say(why, why_len, "wgrad: no sm_90a image of the kernel in this build (add 90a to gpu_archs)");
        return cudaErrorNotSupported;
    }
    if (fa.numRegs * kThreads < 128 * kProducerRegs + 256 * kConsumerRegs) {
        say(why, why_len, "wgrad: the kernel starts with %d registers per thread, setmaxnreg 40/232 needs 168",
            fa.numRegs);
        return cudaErrorNotSupported;
    }
    return cudaSuccess;
}

} // namespace

extern "C" int mok_wgrad_sm90_supports(const struct mok_wgrad_args *w, const struct mok_gemm_sm90_config *c,
                                       char *why, int why_len)
{
    Ring ring = {0, 0};
    return w && c && check(w, c, &ring, why, why_len) == cudaSuccess;
}

extern "C" int mok_wgrad_sm90(const struct mok_wgrad_args *w, const struct mok_gemm_sm90_config *c,
                              mok_stream_t stream)
{
    Ring ring = {0, 0};
    char why[256];
    if (!w || !c)
        return cudaErrorInvalidValue;
    int rc = check(w, c, &ring, why, sizeof why);
    if (rc != cudaSuccess)
        return rc;
    if (w->rows_capacity == 0 && w->c_f32)
        return cudaSuccess; /* nothing to add (and a tensor map cannot have a zero dimension) */
    cudaStream_t s = mok_cuda_stream(stream);
    if (w->rows_capacity == 0) /* bf16: every gradient is zero */
        return (int)cudaMemsetAsync(w->c_bf16, 0, (size_t)w->groups * w->m * w->n * 2, s);
    CUtensorMap map_a, map_b, map_c;
    memset(&map_c, 0, sizeof map_c); /* fp32 gradients: unused */
    if (!encode_tile_map(&map_a, w->a, (uint64_t)w->rows_capacity, (uint64_t)w->m, 64) ||
        !encode_tile_map(&map_b, w->b, (uint64_t)w->rows_capacity, (uint64_t)w->n, 64) ||
        (w->c_bf16 && !encode_tile_map(&map_c, w->c_bf16, (uint64_t)w->groups * w->m, (uint64_t)w->n, 64)))
        return cudaErrorInvalidValue;
    int dev = 0, grid = c->sms;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        (grid <= 0 && cudaDeviceGetAttribute(&grid, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess))
        return (int)cudaGetLastError();
    const bool f32 = w->c_f32 != nullptr, halves = ring.stage_cols < c->tile_n;
    const int stages = ring.stages;
    const size_t smem = smem_bytes(c->tile_n, f32, stages, ring.stage_cols);
    cudaError_t e = cudaFuncSetAttribute(kernel_for(c->tile_n, f32, ring.stage_cols),
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return (int)e;
    }
    struct mok_sm90_diag *diag = diag_record(s);
#define MOK_LAUNCH_WGRAD(TN, F32, SC)                                                                             \
    wgrad_sm90_kernel<TN, F32, SC><<<grid, kThreads, smem, s>>>(map_a, map_b, map_c, w->c_f32, w->offset,         \
                                                                w->groups, w->rows_capacity, w->m, w->n, stages, diag)
    if (f32 && c->tile_n == 256)
        MOK_LAUNCH_WGRAD(256, true, 256);
    else if (f32)
        MOK_LAUNCH_WGRAD(128, true, 128);
    else if (c->tile_n == 256 && halves)
        MOK_LAUNCH_WGRAD(256, false, 128);
    else if (c->tile_n == 256)
        MOK_LAUNCH_WGRAD(256, false, 256);
    else
        MOK_LAUNCH_WGRAD(128, false, 128);
#undef MOK_LAUNCH_WGRAD
    return MOK_LAUNCH_RESULT();
}

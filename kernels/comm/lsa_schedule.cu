/* lsa_schedule: publishing routing tables in the symmetric window, pulling every peer's, and building the
 * global schedule on the GPU. Deterministic by construction: each block owns a fixed range of one source rank's
 * routes, block offsets come from an in-order scan, and inside a block one warp ranks routes 32 at a time with
 * __match_any_sync, so slots follow (source rank, token, k) order whatever the timing.
 *
 * Why one file of ~700 lines: mok_lsa_schedule picks between the general kernels and the one-block and fused small
 * variants for the same schedule, and all of them share the file's table and counting helpers; the variants are
 * checked against each other (tests/test_gpu_lsa.c, the host reference in src/schedule.c). */
#include <nccl.h>
#include <nccl_device.h>

#include "common/common.cuh"
#include "comm/lsa_device.cuh" /* count_contribution, store_kind_flag */
#include "common/lsa_sync.cuh"

#define SCHED_THREADS 256

__device__ __forceinline__ uint64_t *flag_slot(const mok_lsa_args &a, int peer, int kind, int source)
{
    size_t off = a.off_flags + ((size_t)kind * MOK_LSA_MAX_RANKS + source) * sizeof(uint64_t);
    return (uint64_t *)ncclGetLsaPointer((ncclWindow_t)a.window, off, peer);
}

__device__ __forceinline__ int32_t *table_tokens(const mok_lsa_args &a, int peer)
{
    return (int32_t *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_table, peer);
}

/* My routing into my window's table (token count, ids, weights), thread `first` of `stride` copying. */
__device__ __forceinline__ void write_own_table(const mok_lsa_args &a, int first, int stride)
{
    int32_t *tab = table_tokens(a, a.rank);
    int32_t *ids = tab + 1;
    float *w = (float *)(ids + (size_t)a.t_max * a.topk);
    for (int i = first; i < a.my_tokens * a.topk; i += stride) {
        ids[i] = a.my_ids[i];
        w[i] = a.my_w[i];
    }
    if (first == 0)
        tab[0] = a.my_tokens;
}

/* Many blocks: my routing into my window (one block took 200-300 us at 8192 tokens: latency-bound). */
__global__ void __launch_bounds__(SCHED_THREADS) lsa_table_kernel(mok_lsa_args a)
{
    write_own_table(a, blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
}

/* One block, after the table: epoch + 1 and a release flag in every peer's window (mine included). */
__device__ __forceinline__ void publish_table(const mok_lsa_args &a)
{
    __shared__ uint64_t epoch;
    if (threadIdx.x == 0)
        epoch = ++a.epoch[0];
    __syncthreads();
    if (threadIdx.x < a.nranks) {
        __threadfence_system();
        mok_st_release_sys(flag_slot(a, threadIdx.x, 0, a.rank), epoch);
    }
}

__global__ void __launch_bounds__(SCHED_THREADS) lsa_publish_kernel(mok_lsa_args a) { publish_table(a); }

/* Small tables: the copy and the publish in one block, one launch instead of two. */
__global__ void __launch_bounds__(SCHED_THREADS) lsa_table_publish_kernel(mok_lsa_args a)
{
    write_own_table(a, threadIdx.x, blockDim.x);
    __syncthreads(); /* every thread's table writes before the flag (each fences at system scope in publish) */
    publish_table(a);
}

/* grid (blocks, P): wait for source p's table of this epoch, copy it into local memory. */
__global__ void __launch_bounds__(SCHED_THREADS) lsa_pull_tables_kernel(mok_lsa_args a)
{
    int p = blockIdx.y;
    if (threadIdx.x == 0) {
        uint64_t *mine = (uint64_t *)ncclGetLsaPointer((ncclWindow_t)a.window,
                                                       a.off_flags + (size_t)p * sizeof(uint64_t), a.rank);
        mok_wait_geq_sys(mine, a.epoch[0], a.rank, "schedule", "published", p, a.timeout_cycles);
    }
    __syncthreads();
    const int32_t *tab = table_tokens(a, p);
    int tokens = tab[0];
    if (blockIdx.x == 0 && threadIdx.x == 0)
        a.all_tokens[p] = tokens;
    const int32_t *ids = tab + 1;
    const float *w = (const float *)(ids + (size_t)a.t_max * a.topk);
    int n = tokens * a.topk;
    size_t base = (size_t)p * a.t_max * a.topk;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        a.all_ids[base + i] = ids[i];
        a.all_w[base + i] = w[i];
    }
}

__device__ __forceinline__ int routes_per_block(const mok_lsa_args &a)
{
    return (a.t_max * a.topk + a.sched_blocks - 1) / a.sched_blocks;
}

/* grid (sched_blocks, P): per-block histogram of routes into each of my local experts. */
__global__ void __launch_bounds__(SCHED_THREADS) lsa_count_kernel(mok_lsa_args a)
{
    extern __shared__ int32_t hist[];
    int p = blockIdx.y, b = blockIdx.x;
    for (int i = threadIdx.x; i < a.local_experts; i += blockDim.x)
        hist[i] = 0;
    __syncthreads();
    int per = routes_per_block(a), n = a.all_tokens[p] * a.topk;
    int begin = b * per, end = min(begin + per, n);
    int first = a.rank * a.local_experts;
    const int32_t *ids = a.all_ids + (size_t)p * a.t_max * a.topk;
    for (int r = begin + threadIdx.x; r < end; r += blockDim.x) {
        int le = ids[r] - first;
        if (le >= 0 && le < a.local_experts)
            atomicAdd(&hist[le], 1);
    }
    __syncthreads();
    /* [expert][cell], cell = p * sched_blocks + b: one expert's cells are contiguous for its scan */
    int cells = a.nranks * a.sched_blocks, cell = p * a.sched_blocks + b;
    for (int i = threadIdx.x; i < a.local_experts; i += blockDim.x)
        a.block_off[(size_t)i * cells + cell] = hist[i];
}

/* The sum of sum over the block's threads before this one (thread order), for every thread of the block: a warp
 * shuffle scan, then one over the warps' totals (warp_sums: 32 shared ints). Ends synchronized. */
__device__ __forceinline__ int32_t block_exclusive_scan(int32_t sum, int32_t *warp_sums)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int32_t inc = sum; /* inclusive scan inside the warp */
    for (int off = 1; off < 32; off <<= 1) {
        int32_t v = __shfl_up_sync(0xffffffffu, inc, off);
        if (lane >= off)
            inc += v;
    }
    if (lane == 31)
        warp_sums[warp] = inc;
    __syncthreads();
    if (warp == 0) {
        int32_t w = lane < (int)(blockDim.x >> 5) ? warp_sums[lane] : 0, winc = w;
        for (int off = 1; off < 32; off <<= 1) {
            int32_t v = __shfl_up_sync(0xffffffffu, winc, off);
            if (lane >= off)
                winc += v;
        }
        warp_sums[lane] = winc - w; /* exclusive prefix of each warp */
    }
    __syncthreads();
    return warp_sums[warp] + inc - sum;
}

/* One block per local expert: exclusive scan of its cells (in (p, b) order, as routes are ordered) and its rows.
 * Each thread sums a contiguous run of cells, the run sums are scanned with warp shuffles, then written back. */
__global__ void __launch_bounds__(1024) lsa_expert_scan_kernel(mok_lsa_args a)
{
    __shared__ int32_t warp_sums[32];
    int le = blockIdx.x, cells = a.nranks * a.sched_blocks;
    int32_t *row = a.block_off + (size_t)le * cells;
    int per = (cells + blockDim.x - 1) / blockDim.x, begin = threadIdx.x * per, end = min(begin + per, cells);
    int32_t sum = 0;
    for (int i = begin; i < end; i++)
        sum += row[i];
    int32_t run = block_exclusive_scan(sum, warp_sums);
    for (int i = begin; i < end; i++) {
        int32_t c = row[i];
        row[i] = run;
        run += c;
    }
    if (threadIdx.x == blockDim.x - 1)
        a.rows[le] = run;
}

/* An expert's slots: its rows rounded up to whole tiles. */
__device__ __forceinline__ int padded_rows(const mok_lsa_args &a, int rows)
{
    return (rows + a.tile_rows - 1) / a.tile_rows * a.tile_rows;
}

/* The block's threads: off[0..EL] (shared) = the exclusive prefix of the experts' padded rows (rows[le] rounded up
 * to tile_rows), each thread a contiguous run of experts, the run sums scanned with warp shuffles; *overflow (shared,
 * EL before the call) = the first expert whose padded rows end past capacity (a tile that does not fit is an
 * overflow too). warp_sums: 32 shared ints. Ends synchronized. */
__device__ __forceinline__ void padded_offsets(const mok_lsa_args &a, const int32_t *rows, int32_t *off,
                                               int32_t *warp_sums, int32_t *overflow)
{
    const int EL = a.local_experts, tid = threadIdx.x;
    const int run_len = (EL + blockDim.x - 1) / blockDim.x, lo = min(tid * run_len, EL), hi = min(lo + run_len, EL);
    int sum = 0;
    for (int le = lo; le < hi; le++)
        sum += padded_rows(a, rows[le]);
    int run = block_exclusive_scan(sum, warp_sums);
    for (int le = lo; le < hi; le++) {
        int padded = padded_rows(a, rows[le]);
        off[le] = run;
        if (run + padded > a.capacity)
            atomicMin(overflow, le);
        run += padded;
    }
    if (tid == (int)blockDim.x - 1)
        off[EL] = run;
    __syncthreads();
}

/* One thread, after padded_offsets: the first overflow into the status the host reports (sticky). */
__device__ __forceinline__ void report_overflow(const mok_lsa_args &a, const int32_t *rows, const int32_t *off,
                                                int overflow)
{
    if (overflow < a.local_experts && a.status[0] == 0) {
        a.status[1] = a.rank * a.local_experts + overflow;
        a.status[2] = off[overflow] + padded_rows(a, rows[overflow]);
        a.status[3] = a.capacity;
        __threadfence();
        a.status[0] = 1;
    }
}

/* Chunks first, first + stride, ...: the real (non-padding) rows each must receive (ready zeroed if zero_ready). The
 * experts' row ends off + rows never decrease, so a chunk's experts are a run found by bisection. */
__device__ __forceinline__ void chunk_targets(const mok_lsa_args &a, const int32_t *rows, const int32_t *off,
                                              int first, int stride, bool zero_ready)
{
    const int EL = a.local_experts, nchunks = (a.capacity + a.chunk_rows - 1) / a.chunk_rows;
    for (int c = first; c < nchunks; c += stride) {
        int clo = c * a.chunk_rows, chi = min(clo + a.chunk_rows, a.capacity), cnt = 0, l = 0, h = EL;
        while (l < h) {
            int m = (l + h) >> 1;
            if (off[m] + rows[m] > clo)
                h = m;
            else
                l = m + 1;
        }
        for (int le = l; le < EL && off[le] < chi; le++) {
            int b0 = max(clo, off[le]), b1 = min(chi, off[le] + rows[le]);
            cnt += b1 > b0 ? b1 - b0 : 0;
        }
        a.chunk_target[c] = cnt;
        if (zero_ready)
            a.ready[c] = 0;
    }
}

/* Many blocks, after the expert scans: the padded expert offsets (every block scans them in shared memory; block
 * 0 writes them out and reports an overflow: a one-thread kernel walking the experts took 15 us at 128 experts),
 * the block offsets made absolute, then the chunk targets. Dynamic shared memory: 2 * EL + 1 ints. */
__global__ void __launch_bounds__(SCHED_THREADS) lsa_absolute_kernel(mok_lsa_args a)
{
    extern __shared__ int32_t abs_smem[];
    __shared__ int32_t warp_sums[32];
    __shared__ int32_t overflow;
    const int EL = a.local_experts, nb = a.sched_blocks * a.nranks;
    int32_t *rows = abs_smem, *off = abs_smem + EL; /* [EL], [EL + 1] */
    for (int i = threadIdx.x; i < EL; i += blockDim.x)
        rows[i] = a.rows[i];
    if (threadIdx.x == 0)
        overflow = EL;
    __syncthreads();
    padded_offsets(a, rows, off, warp_sums, &overflow);
    if (blockIdx.x == 0) {
        for (int i = threadIdx.x; i <= EL; i += blockDim.x)
            a.offset[i] = off[i];
        if (threadIdx.x == 0)
            report_overflow(a, rows, off, overflow);
    }
    int i0 = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    for (int i = i0; i < EL * nb; i += stride)
        a.block_off[i] += off[i / nb];
    chunk_targets(a, rows, off, i0, stride, true);
}

/* grid (sched_blocks, P), one warp: stable placement of the block's routes, 32 at a time. */
__global__ void __launch_bounds__(32) lsa_place_kernel(mok_lsa_args a)
{
    extern __shared__ int32_t next[];
    int p = blockIdx.y, b = blockIdx.x, lane = threadIdx.x;
    int cells = a.nranks * a.sched_blocks, cell = p * a.sched_blocks + b;
    for (int i = lane; i < a.local_experts; i += 32)
        next[i] = a.block_off[(size_t)i * cells + cell];
    __syncwarp();
    int per = routes_per_block(a), n = a.all_tokens[p] * a.topk;
    int begin = b * per, end = min(begin + per, n);
    int first = a.rank * a.local_experts;
    size_t base = (size_t)p * a.t_max * a.topk;
    for (int r0 = begin; r0 < end; r0 += 32) {
        int r = r0 + lane;
        int le = r < end ? a.all_ids[base + r] - first : -1;
        bool mine = le >= 0 && le < a.local_experts;
        int key = mine ? le : -1 - lane; /* lanes not routed here never match each other */
        unsigned same = __match_any_sync(0xffffffffu, key);
        int slot = -1;
        if (mine) {
            int before = __popc(same & ((1u << lane) - 1));
            slot = next[le] + before;
            if (slot >= a.capacity)
                slot = -1; /* overflow: reported by the scan, never written out of bounds */
        }
        __syncwarp();
        if (mine && (same & ((1u << lane) - 1)) == 0) /* the first lane of each expert group advances it */
            next[le] += __popc(same);
        __syncwarp();
        if (r < end) {
            a.route_slot[base + r] = slot;
            if (slot >= 0)
                a.entry[slot] = (int32_t)(((uint32_t)p << 25) | ((uint32_t)(r / a.topk) << 5) | (uint32_t)(r % a.topk));
        }
    }
}

/* ---- small problems: the whole schedule in one block ------------------------------------------------------
 * At a few thousand routes the multi-kernel schedule is launch-bound (six dependent launches of a few us each).
 * Here the same stages run in one block, separated by __syncthreads: tables pulled and counted, padded offsets and
 * the overflow check, chunk targets, then placement by one warp walking the routes in (source rank, token, k)
 * order 32 at a time, which is the order the multi-block placement produces, so the schedule is the same. */
#define SMALL_SCHED_THREADS 1024
#define SMALL_SCHED_MAX_ROUTES 4096 /* all ranks' routes; placement is one warp, 32 routes per step */

__global__ void __launch_bounds__(SMALL_SCHED_THREADS) lsa_schedule_small_kernel(mok_lsa_args a)
{
    extern __shared__ int32_t sched_smem[]; /* rows[EL], next[EL + 1] */
    __shared__ int32_t tokens[MOK_LSA_MAX_RANKS];
    __shared__ int32_t warp_sums[32];
    __shared__ int32_t overflow;
    int EL = a.local_experts, first = a.rank * EL, tid = threadIdx.x;
    int32_t *rows = sched_smem, *next = sched_smem + EL;
    if (tid < a.nranks) {
        const uint64_t *published = (const uint64_t *)ncclGetLsaPointer(
            (ncclWindow_t)a.window, a.off_flags + (size_t)tid * sizeof(uint64_t), a.rank);
        mok_wait_geq_sys(published, a.epoch[0], a.rank, "schedule", "published", tid, a.timeout_cycles);
        tokens[tid] = table_tokens(a, tid)[0];
        a.all_tokens[tid] = tokens[tid];
    }
    for (int i = tid; i < EL; i += blockDim.x)
        rows[i] = 0;
    if (tid == 0)
        overflow = EL;
    for (int i = tid; i < a.capacity; i += blockDim.x)
        a.entry[i] = -1;
    __syncthreads();
    for (int p = 0; p < a.nranks; p++) { /* local copies of every table, and the routes into my experts */
        const int32_t *ids = table_tokens(a, p) + 1;
        const float *w = (const float *)(ids + (size_t)a.t_max * a.topk);
        size_t base = (size_t)p * a.t_max * a.topk;
        for (int i = tid; i < tokens[p] * a.topk; i += blockDim.x) {
            int id = ids[i];
            a.all_ids[base + i] = id;
            a.all_w[base + i] = w[i];
            if (id - first >= 0 && id - first < EL)
                atomicAdd(&rows[id - first], 1);
        }
    }
    __syncthreads();
    padded_offsets(a, rows, next, warp_sums, &overflow); /* next[le] starts at expert le's offset */
    if (tid == 0)
        report_overflow(a, rows, next, overflow);
    for (int le = tid; le <= EL; le += blockDim.x) {
        a.offset[le] = next[le];
        if (le < EL)
            a.rows[le] = rows[le];
    }
    chunk_targets(a, rows, next, tid, blockDim.x, true);
    __syncthreads(); /* the other threads read next[] above; placement advances it */
    if (tid >= 32)
        return;
    int lane = tid;
    for (int p = 0; p < a.nranks; p++) {
        int n = tokens[p] * a.topk;
        size_t base = (size_t)p * a.t_max * a.topk;
        for (int r0 = 0; r0 < n; r0 += 32) { /* as lsa_place_kernel */
            int r = r0 + lane;
            int le = r < n ? a.all_ids[base + r] - first : -1;
            bool mine = le >= 0 && le < EL;
            unsigned same = __match_any_sync(0xffffffffu, mine ? le : -1 - lane);
            int slot = -1;
            if (mine) {
                slot = next[le] + __popc(same & ((1u << lane) - 1));
                if (slot >= a.capacity)
                    slot = -1;
            }
            __syncwarp();
            if (mine && (same & ((1u << lane) - 1)) == 0)
                next[le] += __popc(same);
            __syncwarp();
            if (r < n) {
                a.route_slot[base + r] = slot;
                if (slot >= 0)
                    a.entry[slot] = (int32_t)(((uint32_t)p << 25) | ((uint32_t)(r / a.topk) << 5) |
                                              (uint32_t)(r % a.topk));
            }
        }
    }
}

/* ---- small problems, fused (small=auto) ------------------------------------------------------------------
 * The one-block schedule above places routes with one warp, 32 per step: 64 dependent steps (a global load, a
 * match, two stores each) at 128 tokens x 2 ranks, so it outlasted the push it ran beside. Here every warp of the
 * block places a contiguous run of the (source rank, token, k) order, starting each expert after that expert's
 * routes in the runs before it (a per-warp histogram scanned per expert), as count/scan/place do with blocks: the
 * same slots, in a handful of steps. */
#define FUSED_THREADS 1024
#define FUSED_STEPS 8 /* routes per lane, held in registers between the table copy and the placement */
#define FUSED_MAX_ROUTES (FUSED_THREADS * FUSED_STEPS)
#define FUSED_PUSH_UNROLL 4

/* Route g of the concatenated tables (source rank ascending, then token, then k) -> (p, r). */
__device__ __forceinline__ void route_at(const int32_t *tokens, int nranks, int topk, int g, int *p, int *r)
{
    int q = 0;
    while (q < nranks - 1 && g >= tokens[q] * topk)
        g -= tokens[q++] * topk;
    *p = q;
    *r = g;
}

__host__ __device__ __forceinline__ size_t block_schedule_smem(int local_experts)
{
    return sizeof(int32_t) * ((size_t)(FUSED_THREADS / 32 + 2) * local_experts + 1); /* hist[warps][EL], rows, off */
}

/* The whole schedule in one block of FUSED_THREADS: every peer's table of this epoch (pulled from its window),
 * local copies, padded offsets, overflow status, chunk targets (ready zeroed if zero_ready), slots. */
__device__ __forceinline__ void block_schedule(const mok_lsa_args &a, uint64_t epoch, bool zero_ready)
{
    extern __shared__ int32_t sched_smem[];
    __shared__ int32_t tokens[MOK_LSA_MAX_RANKS];
    __shared__ int32_t warp_sums[32];
    __shared__ int32_t overflow;
    const int EL = a.local_experts, first = a.rank * EL, tid = threadIdx.x, k = a.topk;
    const int lane = tid & 31, warp = tid >> 5, nwarps = FUSED_THREADS / 32;
    int32_t *hist = sched_smem;        /* [warp][EL]: routes, then the warp's first slot past the offset */
    int32_t *rows = hist + nwarps * EL; /* [EL] */
    int32_t *off = rows + EL;           /* [EL + 1] padded offsets */
    if (tid < a.nranks) {
        mok_wait_geq_sys(flag_slot(a, a.rank, 0, tid), epoch, a.rank, "schedule", "published", tid,
                         a.timeout_cycles);
        tokens[tid] = table_tokens(a, tid)[0];
        a.all_tokens[tid] = tokens[tid];
    }
    if (tid == 0)
        overflow = EL;
    for (int i = tid; i < nwarps * EL; i += FUSED_THREADS)
        hist[i] = 0;
    for (int i = tid; i < a.capacity; i += FUSED_THREADS)
        a.entry[i] = -1;
    __syncthreads();
    int n = 0;
    for (int p = 0; p < a.nranks; p++)
        n += tokens[p] * k;
    const int per = (n + FUSED_THREADS - 1) / FUSED_THREADS * 32; /* routes per warp, whole steps (host: n fits) */
    const int begin = warp * per;
    int32_t id[FUSED_STEPS];
    float w[FUSED_STEPS];
#pragma unroll
    for (int s = 0; s < FUSED_STEPS; s++) { /* every remote load first, so they are in flight together */
        int g = begin + s * 32 + lane, p, r;
        id[s] = -1;
        w[s] = 0.0f;
        if (s * 32 < per && g < n) {
            route_at(tokens, a.nranks, k, g, &p, &r);
            const int32_t *ids = table_tokens(a, p) + 1;
            id[s] = ids[r];
            w[s] = ((const float *)(ids + (size_t)a.t_max * k))[r];
        }
    }
    int32_t le_of[FUSED_STEPS]; /* local expert, -1 elsewhere */
#pragma unroll
    for (int s = 0; s < FUSED_STEPS; s++) {
        int g = begin + s * 32 + lane, p, r;
        le_of[s] = -1;
        if (s * 32 < per && g < n) {
            route_at(tokens, a.nranks, k, g, &p, &r);
            size_t at = (size_t)p * a.t_max * k + r;
            a.all_ids[at] = id[s];
            a.all_w[at] = w[s];
            int le = id[s] - first;
            if (le >= 0 && le < EL) {
                le_of[s] = le;
                atomicAdd(&hist[warp * EL + le], 1);
            }
        }
    }
    __syncthreads();
    for (int le = tid; le < EL; le += FUSED_THREADS) { /* per expert: exclusive scan over the warps, in order */
        int run = 0;
        for (int v = 0; v < nwarps; v++) {
            int c = hist[v * EL + le];
            hist[v * EL + le] = run;
            run += c;
        }
        rows[le] = run;
    }
    __syncthreads();
    padded_offsets(a, rows, off, warp_sums, &overflow);
    for (int le = tid; le <= EL; le += FUSED_THREADS) {
        a.offset[le] = off[le];
        if (le < EL)
            a.rows[le] = rows[le];
    }
    if (tid == 0)
        report_overflow(a, rows, off, overflow);
    chunk_targets(a, rows, off, tid, FUSED_THREADS, zero_ready);
    /* placement: each warp its run, 32 routes per step, as lsa_place_kernel (only this warp touches its hist row) */
    const unsigned below = (1u << lane) - 1;
#pragma unroll
    for (int s = 0; s < FUSED_STEPS; s++) {
        if (s * 32 < per) { /* warp-uniform */
            int g = begin + s * 32 + lane, le = le_of[s];
            bool mine = le >= 0;
            unsigned same = __match_any_sync(0xffffffffu, mine ? le : -1 - lane);
            int slot = -1;
            if (mine) {
                slot = off[le] + hist[warp * EL + le] + __popc(same & below);
                if (slot >= a.capacity)
                    slot = -1; /* overflow: reported above, never written out of bounds */
            }
            __syncwarp();
            if (mine && (same & below) == 0)
                hist[warp * EL + le] += __popc(same);
            __syncwarp();
            if (g < n) {
                int p, r;
                route_at(tokens, a.nranks, k, g, &p, &r);
                a.route_slot[(size_t)p * a.t_max * k + r] = slot;
                if (slot >= 0)
                    a.entry[slot] = (int32_t)(((uint32_t)p << 25) | ((uint32_t)(r / k) << 5) | (uint32_t)(r % k));
            }
        }
    }
}

/* Pull dispatch, small problems: the schedule in one block (after mok_lsa_publish, which counted the epoch).
 * min blocks 1: without it ptxas (13.0, sm_90a) settles on 32 registers and spills. */
__global__ void __launch_bounds__(FUSED_THREADS, 1) lsa_schedule_block_kernel(mok_lsa_args a)
{
    block_schedule(a, a.epoch[0], true);
}

/* Push dispatch, small problems: the whole dispatch phase in one launch. Block 0 publishes my table, builds the
 * schedule from every rank's table, waits until every rank's rows landed in my window (mine included: see the
 * epoch below) and marks every chunk ready; blocks 1..sms push my rows at once, since with layout=landing a
 * row's destinations follow from my own routing alone. Cooperative launch: block 0 waits for my last pushing
 * block's flag, so the grid must be resident. Each forward's epoch is a.epoch[0] + 1, read by every block at its
 * start; block 0 stores it back at its end, after my own "landed" flag, which my last pushing block sets after
 * every pushing block read it. */
__global__ void __launch_bounds__(FUSED_THREADS) lsa_dispatch_fused_kernel(mok_lsa_args a)
{
    __shared__ uint64_t epoch_sh;
    if (threadIdx.x == 0)
        epoch_sh = *(volatile uint64_t *)a.epoch + 1;
    __syncthreads();
    const uint64_t epoch = epoch_sh;
    if (blockIdx.x == 0) {
        write_own_table(a, threadIdx.x, blockDim.x);
        __syncthreads();
        if (threadIdx.x < a.nranks) { /* as publish_table, with this forward's epoch */
            __threadfence_system();
            mok_st_release_sys(flag_slot(a, threadIdx.x, 0, a.rank), epoch);
        }
        block_schedule(a, epoch, false);
        if (threadIdx.x < a.nranks)
            mok_wait_geq_sys(flag_slot(a, a.rank, 2, threadIdx.x), epoch, a.rank, "dispatch", "landed", threadIdx.x,
                             a.timeout_cycles);
        __syncthreads(); /* also: this block's chunk targets are visible to all its threads */
        int nchunks = (a.capacity + a.chunk_rows - 1) / a.chunk_rows;
        for (int c = threadIdx.x; c < nchunks; c += blockDim.x)
            a.ready[c] = a.chunk_target[c];
        if (threadIdx.x == 0)
            *(volatile uint64_t *)a.epoch = epoch;
        return;
    }
    /* one warp per (token, piece of its row): at 128 tokens a warp per token would leave 3/4 of 16 SMs' warps idle
     * and each warp's row would take seven dependent rounds of loads */
    const int lane = threadIdx.x & 31, k = a.topk, vecs = a.hidden / 8, pushers = gridDim.x - 1;
    const int warp = ((blockIdx.x - 1) * blockDim.x + threadIdx.x) >> 5, nwarps = (pushers * blockDim.x) >> 5;
    int parts = a.my_tokens > 0 ? nwarps / a.my_tokens : 1, max_parts = vecs / (32 * FUSED_PUSH_UNROLL);
    parts = max(1, min(parts, max_parts));
    const int piece = (vecs + parts - 1) / parts;
    const size_t row_bytes = (size_t)a.hidden * 2;
    const uint4 *mine = (const uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window,
                                                         a.off_x + (size_t)a.set * a.x_set_bytes, a.rank);
    for (int item = warp; item < a.my_tokens * parts; item += nwarps) {
        int t = item / parts, v_begin = item % parts * piece, v_end = min(v_begin + piece, vecs);
        unsigned bit = lane < k ? 1u << (a.my_ids[t * k + lane] / a.local_experts) : 0u;
        unsigned ranks = __reduce_or_sync(0xffffffffu, bit) & ~(1u << a.rank);
        if (!ranks)
            continue;
        fan_out_row<FUSED_PUSH_UNROLL>(mine + (size_t)t * vecs, v_begin, v_end, lane, [&](auto store) {
            for (unsigned m = ranks; m; m &= m - 1)
                store((uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window,
                                                 a.off_land + ((size_t)a.rank * a.t_max + t) * row_bytes,
                                                 __ffs(m) - 1));
        });
    }
    /* the last pushing block flags "landed" in every window, mine included (as signal_done, over the pushers, with
     * this launch's epoch: a.epoch[0] is still the previous forward's here) */
    __syncthreads();
    if (threadIdx.x == 0 && count_contribution(a, 2, pushers))
        store_kind_flag(a, 2, epoch);
}

/* Dynamic shared memory of the kernels that hold the experts' rows and padded offsets (rows[EL], off[EL + 1]):
 * lsa_absolute_kernel and lsa_schedule_small_kernel. */
static size_t rows_offsets_smem(const mok_lsa_args *a)
{
    return sizeof(int32_t) * (2 * (size_t)a->local_experts + 1);
}

static bool block_schedule_fits(const mok_lsa_args *a)
{
    return a->small_paths == MOK_LSA_SMALL_FUSED && a->nranks <= 32 &&
           (long long)a->nranks * a->t_max * a->topk <= FUSED_MAX_ROUTES &&
           block_schedule_smem(a->local_experts) <= 48 * 1024;
}

__host__ __forceinline__ bool small_schedule(const mok_lsa_args *a)
{
    return a->small_paths == MOK_LSA_SMALL_V1 &&
           (long long)a->nranks * a->t_max * a->topk <= SMALL_SCHED_MAX_ROUTES &&
           rows_offsets_smem(a) <= 32 * 1024;
}

extern "C" int mok_lsa_publish(const struct mok_lsa_args *a, mok_stream_t stream)
{
    if (a->nranks > MOK_LSA_MAX_RANKS || a->nranks > SCHED_THREADS)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = mok_cuda_stream(stream);
    int n = a->my_tokens * a->topk, blocks = (n + SCHED_THREADS - 1) / SCHED_THREADS;
    if (a->small_paths && blocks <= 4) { /* up to 1024 routes: one block copies and publishes, one launch */
        lsa_table_publish_kernel<<<1, SCHED_THREADS, 0, s>>>(*a);
        return MOK_LAUNCH_RESULT();
    }
    lsa_table_kernel<<<blocks < 1 ? 1 : blocks > 1024 ? 1024 : blocks, SCHED_THREADS, 0, s>>>(*a);
    int err = MOK_LAUNCH_RESULT();
    if (err)
        return err;
    lsa_publish_kernel<<<1, SCHED_THREADS, 0, s>>>(*a);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_lsa_schedule(const struct mok_lsa_args *a, mok_stream_t stream)
{
    cudaStream_t s = mok_cuda_stream(stream);
    int err;
    if (block_schedule_fits(a)) {
        lsa_schedule_block_kernel<<<1, FUSED_THREADS, block_schedule_smem(a->local_experts), s>>>(*a);
        return MOK_LAUNCH_RESULT();
    }
    if (small_schedule(a)) {
        lsa_schedule_small_kernel<<<1, SMALL_SCHED_THREADS, rows_offsets_smem(a), s>>>(*a);
        return MOK_LAUNCH_RESULT();
    }
    int pull_blocks = (a->t_max * a->topk + SCHED_THREADS - 1) / SCHED_THREADS;
    dim3 grid_pull(pull_blocks < 1 ? 1 : pull_blocks > 256 ? 256 : pull_blocks, a->nranks);
    lsa_pull_tables_kernel<<<grid_pull, SCHED_THREADS, 0, s>>>(*a);
    if ((err = MOK_LAUNCH_RESULT()))
        return err;
    if ((err = (int)cudaMemsetAsync(a->entry, 0xFF, sizeof(int32_t) * (size_t)a->capacity, s)))
        return err;
    dim3 grid(a->sched_blocks, a->nranks);
    size_t shm = sizeof(int32_t) * (size_t)a->local_experts;
    lsa_count_kernel<<<grid, SCHED_THREADS, shm, s>>>(*a);
    if ((err = MOK_LAUNCH_RESULT()))
        return err;
    lsa_expert_scan_kernel<<<a->local_experts, 1024, 0, s>>>(*a);
    if ((err = MOK_LAUNCH_RESULT()))
        return err;
    int cells = a->local_experts * a->sched_blocks * a->nranks;
    int nchunks = (a->capacity + a->chunk_rows - 1) / a->chunk_rows;
    int work = cells > nchunks ? cells : nchunks, abs_blocks = (work + SCHED_THREADS - 1) / SCHED_THREADS;
    lsa_absolute_kernel<<<abs_blocks < 1 ? 1 : abs_blocks > 1024 ? 1024 : abs_blocks, SCHED_THREADS,
                          rows_offsets_smem(a), s>>>(*a);
    if ((err = MOK_LAUNCH_RESULT()))
        return err;
    lsa_place_kernel<<<grid, 32, shm, s>>>(*a);
    return MOK_LAUNCH_RESULT();
}

/* The fused dispatch's grid (sms pushing blocks + the schedule block) must be resident at once. */
static int fused_dispatch_max_blocks(size_t smem)
{
    static size_t cached_smem = (size_t)-1;
    static int cached = 0;
    if (smem != cached_smem) {
        int sms = mok_sm_count(), per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, lsa_dispatch_fused_kernel, FUSED_THREADS, smem) !=
            cudaSuccess)
            per_sm = 0;
        cached = per_sm * sms;
        cached_smem = smem;
    }
    return cached;
}

extern "C" int mok_lsa_dispatch_fused_fits(const struct mok_lsa_args *a, int blocks)
{
    return a->push && a->landing && block_schedule_fits(a) && a->hidden % 8 == 0 && a->topk <= 32 && blocks >= 1 &&
           blocks + 1 <= fused_dispatch_max_blocks(block_schedule_smem(a->local_experts));
}

extern "C" int mok_lsa_dispatch_fused(const struct mok_lsa_args *a, int blocks, mok_stream_t stream)
{
    if (!mok_lsa_dispatch_fused_fits(a, blocks))
        return (int)cudaErrorInvalidValue;
    cudaError_t e = mok_launch_cooperative(lsa_dispatch_fused_kernel, (unsigned)(blocks + 1), FUSED_THREADS,
                                           block_schedule_smem(a->local_experts), mok_cuda_stream(stream), *a);
    return e != cudaSuccess ? (int)e : MOK_LAUNCH_RESULT();
}

/* lsa_schedule: publishing routing tables in the symmetric window, pulling every peer's, and building the
 * global schedule on the GPU. Deterministic by construction: each block owns a fixed range of one source rank's
 * routes, block offsets come from an in-order scan, and inside a block one warp ranks routes 32 at a time with
 * __match_any_sync, so slots follow (source rank, token, k) order whatever the timing. */
#include <nccl.h>
#include <nccl_device.h>

#include "common.cuh"
#include "lsa_sync.cuh"

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

/* Many blocks: my routing into my window (one block took 200-300 us at 8192 tokens: latency-bound). */
__global__ void __launch_bounds__(SCHED_THREADS) lsa_table_kernel(mok_lsa_args a)
{
    int32_t *tab = table_tokens(a, a.rank);
    int32_t *ids = tab + 1;
    float *w = (float *)(ids + (size_t)a.t_max * a.topk);
    int n = a.my_tokens * a.topk;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        ids[i] = a.my_ids[i];
        w[i] = a.my_w[i];
    }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        tab[0] = a.my_tokens;
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
    int32_t *tab = table_tokens(a, a.rank);
    int32_t *ids = tab + 1;
    float *w = (float *)(ids + (size_t)a.t_max * a.topk);
    for (int i = threadIdx.x; i < a.my_tokens * a.topk; i += blockDim.x) {
        ids[i] = a.my_ids[i];
        w[i] = a.my_w[i];
    }
    if (threadIdx.x == 0)
        tab[0] = a.my_tokens;
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
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
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
    int32_t run = warp_sums[warp] + inc - sum;
    for (int i = begin; i < end; i++) {
        int32_t c = row[i];
        row[i] = run;
        run += c;
    }
    if (threadIdx.x == blockDim.x - 1)
        a.rows[le] = run;
}

/* One thread: padded offsets of the experts and the overflow check (EL steps). */
__global__ void lsa_offsets_kernel(mok_lsa_args a)
{
    int EL = a.local_experts, off = 0, overflow = -1, need = 0;
    for (int le = 0; le < EL; le++) {
        a.offset[le] = off;
        int padded = (a.rows[le] + a.tile_rows - 1) / a.tile_rows * a.tile_rows;
        if (overflow < 0 && off + padded > a.capacity) { /* a tile that does not fit is an overflow too */
            overflow = le;
            need = off + padded;
        }
        off += padded;
    }
    a.offset[EL] = off;
    if (overflow >= 0 && a.status[0] == 0) { /* sticky: the first overflow is what the host reports */
        a.status[1] = a.rank * EL + overflow;
        a.status[2] = need;
        a.status[3] = a.capacity;
        __threadfence();
        a.status[0] = 1;
    }
}

/* Many blocks: block offsets made absolute, then chunk targets (the real, non-padding rows of each chunk). */
__global__ void __launch_bounds__(SCHED_THREADS) lsa_absolute_kernel(mok_lsa_args a)
{
    int EL = a.local_experts, nb = a.sched_blocks * a.nranks;
    int i0 = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    for (int i = i0; i < EL * nb; i += stride)
        a.block_off[i] += a.offset[i / nb];
    int nchunks = (a.capacity + a.chunk_rows - 1) / a.chunk_rows;
    for (int c = i0; c < nchunks; c += stride) {
        int lo = c * a.chunk_rows, hi = min(lo + a.chunk_rows, a.capacity), n = 0;
        for (int le = 0; le < EL; le++) {
            int b0 = max(lo, a.offset[le]), b1 = min(hi, a.offset[le] + a.rows[le]);
            n += b1 > b0 ? b1 - b0 : 0;
        }
        a.chunk_target[c] = n;
        a.ready[c] = 0;
    }
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
 * At a few thousand routes the multi-kernel schedule is launch-bound (seven dependent launches of a few us each).
 * Here the same stages run in one block, separated by __syncthreads: tables pulled and counted, padded offsets and
 * the overflow check, chunk targets, then placement by one warp walking the routes in (source rank, token, k)
 * order 32 at a time, which is the order the multi-block placement produces, so the schedule is the same. */
#define SMALL_SCHED_THREADS 1024
#define SMALL_SCHED_MAX_ROUTES 4096 /* all ranks' routes; placement is one warp, 32 routes per step */

__global__ void __launch_bounds__(SMALL_SCHED_THREADS) lsa_schedule_small_kernel(mok_lsa_args a)
{
    extern __shared__ int32_t sched_smem[]; /* rows[EL], next[EL] */
    __shared__ int32_t tokens[MOK_LSA_MAX_RANKS];
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
    if (tid == 0) { /* padded offsets and the overflow check, as lsa_offsets_kernel */
        int off = 0, overflow = -1, need = 0;
        for (int le = 0; le < EL; le++) {
            next[le] = off;
            int padded = (rows[le] + a.tile_rows - 1) / a.tile_rows * a.tile_rows;
            if (overflow < 0 && off + padded > a.capacity) {
                overflow = le;
                need = off + padded;
            }
            off += padded;
        }
        a.offset[EL] = off;
        if (overflow >= 0 && a.status[0] == 0) {
            a.status[1] = a.rank * EL + overflow;
            a.status[2] = need;
            a.status[3] = a.capacity;
            __threadfence();
            a.status[0] = 1;
        }
    }
    __syncthreads();
    for (int le = tid; le < EL; le += blockDim.x) {
        a.offset[le] = next[le];
        a.rows[le] = rows[le];
    }
    int nchunks = (a.capacity + a.chunk_rows - 1) / a.chunk_rows;
    for (int c = tid; c < nchunks; c += blockDim.x) { /* real (non-padding) rows per chunk, as lsa_absolute_kernel */
        int lo = c * a.chunk_rows, hi = min(lo + a.chunk_rows, a.capacity), n = 0;
        for (int le = 0; le < EL; le++) {
            int b0 = max(lo, next[le]), b1 = min(hi, next[le] + rows[le]);
            n += b1 > b0 ? b1 - b0 : 0;
        }
        a.chunk_target[c] = n;
        a.ready[c] = 0;
    }
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

__host__ __forceinline__ bool small_schedule(const mok_lsa_args *a)
{
    return a->small_paths && (long long)a->nranks * a->t_max * a->topk <= SMALL_SCHED_MAX_ROUTES &&
           2 * sizeof(int32_t) * (size_t)a->local_experts <= 32 * 1024;
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
    if (small_schedule(a)) {
        lsa_schedule_small_kernel<<<1, SMALL_SCHED_THREADS, 2 * sizeof(int32_t) * (size_t)a->local_experts, s>>>(*a);
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
    lsa_offsets_kernel<<<1, 1, 0, s>>>(*a);
    if ((err = MOK_LAUNCH_RESULT()))
        return err;
    int cells = a->local_experts * a->sched_blocks * a->nranks;
    int nchunks = (a->capacity + a->chunk_rows - 1) / a->chunk_rows;
    int work = cells > nchunks ? cells : nchunks, abs_blocks = (work + SCHED_THREADS - 1) / SCHED_THREADS;
    lsa_absolute_kernel<<<abs_blocks < 1 ? 1 : abs_blocks > 1024 ? 1024 : abs_blocks, SCHED_THREADS, 0, s>>>(*a);
    if ((err = MOK_LAUNCH_RESULT()))
        return err;
    lsa_place_kernel<<<grid, 32, shm, s>>>(*a);
    return MOK_LAUNCH_RESULT();
}

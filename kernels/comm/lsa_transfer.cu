/* lsa_transfer: the data movement of the LSA path, in the variants the `lsa` tuning parameters select.
 * Dispatch moves each (source rank, token) row across NVLink once per destination rank: pulled by the
 * destination (LSA loads) or pushed by the owner (LSA stores), into a copy per local expert slot (layout=slots)
 * or into one landing row the slots read (layout=landing), then releases the chunk counters of those slots.
 * Combine pushes rows (per route) or fp32-summed partials (per rank) into the token owner's window, signals
 * completion with an epoch flag, and the owner sums in a fixed order, so y is bitwise reproducible. Rows move by
 * warps with 16-byte vectors and several loads in flight per lane (copy=warp) or by the bulk copy engine through
 * shared memory (copy=bulk).
 *
 * The owner's per-route sums (forward and backward) are in kernels/comm/lsa_route_sum.cu, the per-rank sum's device
 * pieces in comm/lsa_rank_sum.cuh, the per-rank combine with reduce=overlap in kernels/comm/lsa_combine_overlap.cu.
 * What stays here shares file-local pipeline helpers and constants (the bulk-copy pipeline, the thread counts), and
 * the launchers choose among these kernels at run time. */
#include <nccl.h>
#include <nccl_device.h>

#include "common/common.cuh"
#include "common/bulk.cuh"
#include "comm/lsa_bulk_ring.cuh"
#include "comm/lsa_combine_overlap.cuh"
#include "comm/lsa_device.cuh"
#include "comm/lsa_rank_sum.cuh"
#include "comm/lsa_route_sum.cuh"
#include "common/lsa_sync.cuh"

/* ---- bulk-copy pipeline -----------------------------------------------------------------------------------
 * Each warp owns a contiguous range of this rank's schedule slots and moves its items with the bulk copy engine:
 * lane 0 keeps up to `stages` row loads in flight (global -> shared, completing on an mbarrier), stores each
 * arrived row to its destinations (shared -> global), and reuses a stage once that row's stores are done; the
 * other lanes look items up in parallel. Dispatch items are tokens (a row pulled once, stored to every local
 * slot of that token); per-route combine items are slots (a row pushed to the token owner's window). */
#define PIPE_WARPS 2
#define MAX_STAGES 8
/* A stage is reused LAG rows after its row's stores were issued, so the wait for those stores rarely blocks:
 * at most stages - LAG loads are in flight. */
#define LAG 2

struct pipe_smem {
    uint64_t bar[MAX_STAGES];
    int32_t p[MAX_STAGES], row[MAX_STAGES], nslots[MAX_STAGES];
    int32_t slots[MAX_STAGES][32];
};

__host__ __device__ __forceinline__ size_t pipe_warp_bytes(int stages, int row_bytes)
{
    return sizeof(pipe_smem) + (size_t)stages * row_bytes;
}

/* The chunk counters of a dispatched token's slots: the bulk engine's writes completed (bulk wait), are made
 * visible to generic readers, then released at GPU scope. */
__device__ __forceinline__ void publish_item(const mok_lsa_args &a, const pipe_smem *ps, int stage)
{
    mok_fence_proxy_async_global();
    __threadfence();
    for (int i = 0; i < ps->nslots[stage]; i++)
        atomicAdd(&a.ready[ps->slots[stage][i] / a.chunk_rows], 1);
}

/* Is the slot holding route e = (p, t, j) the first of its token's routes into this rank? Then it stands for
 * the token: the row is pulled once for all of them. */
__device__ __forceinline__ bool primary_slot(const mok_lsa_args &a, int32_t e)
{
    if (e < 0)
        return false;
    int p = (int)((uint32_t)e >> 25), t = (e >> 5) & 0xFFFFF, j = e & 31;
    const int32_t *rs = a.route_slot + ((size_t)p * a.t_max + t) * a.topk;
    for (int i = 0; i < j; i++)
        if (rs[i] >= 0)
            return false;
    return true;
}

template <bool DISPATCH>
__device__ __forceinline__ void bulk_pipeline(const mok_lsa_args &a, pipe_smem *ps, char *buf, int stages)
{
    int lane = threadIdx.x & 31;
    int gwarp = blockIdx.x * PIPE_WARPS + (threadIdx.x >> 5), nwarps = gridDim.x * PIPE_WARPS;
    int used = min(a.offset[a.local_experts], a.capacity);
    int per = (used + nwarps - 1) / nwarps, begin = gwarp * per, end = min(begin + per, used);
    uint32_t row_bytes = (uint32_t)a.hidden * 2;
    if (lane == 0) {
        for (int i = 0; i < stages; i++)
            mok_mbar_init(&ps->bar[i], 1);
        mok_fence_mbar_init();
    }
    __syncwarp();
    int loads = 0, done = 0, published = 0;
    unsigned batch = 0; /* lanes of the current 32-slot window whose items are not loaded yet */
    int window = begin - 32;
    int32_t my_entry = -1;
    for (;;) {
        while (loads - done < stages - LAG) { /* issue loads while stages are free and items remain */
            while (!batch && window + 32 < end) {
                window += 32;
                int s = window + lane;
                my_entry = s < end ? a.entry[s] : -1;
                bool item = DISPATCH ? primary_slot(a, my_entry) : my_entry >= 0;
                batch = __ballot_sync(0xffffffffu, item);
            }
            if (!batch)
                break;
            int src_lane = __ffs(batch) - 1;
            batch &= batch - 1;
            int32_t e = __shfl_sync(0xffffffffu, my_entry, src_lane);
            int p = (int)((uint32_t)e >> 25), t = (e >> 5) & 0xFFFFF;
            int stage = loads % stages;
            if (loads >= stages) { /* reuse: the item that last used this stage must have finished its stores */
                if (lane == 0) {
                    mok_bulk_wait(done - 1 - (loads - stages)); /* == LAG in steady state */
                    if (DISPATCH)
                        for (; published <= loads - stages; published++)
                            publish_item(a, ps, published % stages);
                }
                __syncwarp();
            }
            if (DISPATCH) { /* every local slot this token goes to */
                int sl = lane < a.topk ? a.route_slot[((size_t)p * a.t_max + t) * a.topk + lane] : -1;
                unsigned m = __ballot_sync(0xffffffffu, sl >= 0);
                if (sl >= 0)
                    ps->slots[stage][__popc(m & ((1u << lane) - 1))] = sl;
                if (lane == 0)
                    ps->nslots[stage] = __popc(m);
            }
            if (lane == 0) {
                ps->p[stage] = p;
                ps->row[stage] = t * a.topk + (e & 31); /* combine: the owner's row of this route */
                const void *src =
                    DISPATCH ? ncclGetLsaPointer((ncclWindow_t)a.window,
                                                 a.off_x + (size_t)a.set * a.x_set_bytes + (size_t)t * row_bytes, p)
                             : (const void *)(a.expert_out + (size_t)(window + src_lane) * a.hidden);
                mok_mbar_expect_tx(&ps->bar[stage], row_bytes);
                mok_bulk_load(buf + (size_t)stage * row_bytes, src, row_bytes, &ps->bar[stage]);
            }
            __syncwarp();
            loads++;
        }
        if (done == loads)
            break;
        int stage = done % stages; /* the oldest load: wait for it, store it everywhere it goes */
        if (lane == 0) {
            mok_wait_mbar(&ps->bar[stage], (uint32_t)((done / stages) & 1), a.rank, DISPATCH ? "dispatch" : "combine",
                          "row load into stage", stage);
            const char *row = buf + (size_t)stage * row_bytes;
            if (DISPATCH) {
                for (int i = 0; i < ps->nslots[stage]; i++)
                    mok_bulk_store(a.xin + (size_t)ps->slots[stage][i] * a.hidden, row, row_bytes);
            } else {
                void *dst = ncclGetLsaPointer((ncclWindow_t)a.window,
                                              a.off_comb + (size_t)ps->row[stage] * row_bytes, ps->p[stage]);
                mok_bulk_store(dst, row, row_bytes);
            }
            mok_bulk_commit();
        }
        __syncwarp();
        done++;
    }
    if (lane == 0) {
        mok_bulk_wait(0);
        if (DISPATCH)
            for (; published < done; published++)
                publish_item(a, ps, published % stages);
        mok_fence_proxy_async_global();
    }
    __syncwarp();
}

__global__ void __launch_bounds__(PIPE_WARPS * 32) lsa_dispatch_kernel(mok_lsa_args a, int stages)
{
    extern __shared__ __align__(128) char smem[];
    size_t per_warp = pipe_warp_bytes(stages, a.hidden * 2);
    pipe_smem *ps = (pipe_smem *)(smem + (threadIdx.x >> 5) * per_warp);
    bulk_pipeline<true>(a, ps, (char *)ps + sizeof(pipe_smem), stages);
}

/* Push dispatch: one warp per own token; the row goes by NVLink stores into the landing row [my rank][t] of
 * every other rank one of its experts lives on; then the last block flags "landed" in every window. */
__global__ void __launch_bounds__(WARP_COPY_THREADS) lsa_push_kernel(mok_lsa_args a)
{
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = (gridDim.x * blockDim.x) >> 5;
    push_rows<UNROLL>(a, warp, nwarps, lane);
    signal_done(a, 2);
}

/* copy=bulk, layout=landing: the push and the per-rank combine through per-warp bulk rings (lsa_bulk_ring.cuh),
 * `ring` warps per block, every one a ring warp. */
__global__ void lsa_push_ring_kernel(mok_lsa_args a, int ring)
{
    extern __shared__ __align__(128) char smem[];
    int warp = threadIdx.x >> 5;
    ring_stream<false>(a, (ring_smem *)smem, smem + RING_BUFS_OFFSET, warp, ring, blockIdx.x * ring + warp,
                       gridDim.x * ring, 0, 0, false);
    signal_done(a, 2);
}

__global__ void lsa_combine_rank_ring_kernel(mok_lsa_args a, int ring)
{
    extern __shared__ __align__(128) char smem[];
    ring_init((ring_smem *)smem);
    ring_stream<true>(a, (ring_smem *)smem, smem + RING_BUFS_OFFSET, threadIdx.x >> 5, ring, 0, 0, blockIdx.x,
                      gridDim.x, false);
    signal_done(a);
}

extern "C" int mok_lsa_ring_fits(int hidden)
{
    int max_smem = mok_smem_optin();
    return ring_warps(hidden * 2, max_smem, RING_MAX_WARPS) > 0;
}

/* Push dispatch, receiving side: every source's rows landed (its flag), so every chunk is ready at once. */
__global__ void __launch_bounds__(256) lsa_landed_kernel(mok_lsa_args a)
{
    if (threadIdx.x < a.nranks && threadIdx.x != a.rank) {
        const uint64_t *flag = (const uint64_t *)ncclGetLsaPointer(
            (ncclWindow_t)a.window, a.off_flags + ((size_t)2 * MOK_LSA_MAX_RANKS + threadIdx.x) * sizeof(uint64_t),
            a.rank);
        mok_wait_geq_sys(flag, a.epoch[0], a.rank, "dispatch", "landed", threadIdx.x, a.timeout_cycles);
    }
    __syncthreads();
    int nchunks = (a.capacity + a.chunk_rows - 1) / a.chunk_rows;
    for (int c = threadIdx.x; c < nchunks; c += blockDim.x)
        a.ready[c] = a.chunk_target[c];
}

__global__ void __launch_bounds__(RANK_COMBINE_THREADS) lsa_combine_rank_kernel(mok_lsa_args a)
{
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = (gridDim.x * blockDim.x) >> 5;
    combine_per_rank(a, warp, nwarps, lane, a.landing);
    signal_done(a);
}

__global__ void __launch_bounds__(PIPE_WARPS * 32) lsa_combine_route_kernel(mok_lsa_args a, int stages)
{
    extern __shared__ __align__(128) char smem[];
    size_t per_warp = pipe_warp_bytes(stages, a.hidden * 2);
    pipe_smem *ps = (pipe_smem *)(smem + (threadIdx.x >> 5) * per_warp);
    bulk_pipeline<false>(a, ps, (char *)ps + sizeof(pipe_smem), stages);
    __threadfence_system(); /* lane 0 already ordered its bulk writes before this */
    signal_done(a);
}


__global__ void __launch_bounds__(256) lsa_reduce_kernel(mok_lsa_args a)
{
    wait_all_done(a);
    reduce_tokens(a);
}


/* Small problems, per rank: combine, done signal and the owner's sum in one launch. Every block waits for every
 * rank's done flag, which the last block of each rank's combine sets, so all blocks must be resident at once:
 * the grid is the `sms` blocks of the combine (one per SM at most, checked <= the SM count by supports()),
 * launched cooperatively so the runtime guarantees it. */
#define FUSED_REDUCE_MAX_TOKENS 512
__global__ void __launch_bounds__(RANK_COMBINE_THREADS) lsa_combine_rank_reduce_kernel(mok_lsa_args a)
{
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = (gridDim.x * blockDim.x) >> 5;
    combine_per_rank(a, warp, nwarps, lane, a.landing);
    signal_done(a);
    wait_all_done(a);
    reduce_tokens(a);
}

/* ---- warp copies: the other copy engine ---------------------------------------------------------------
 * One warp per (source rank, token): one NVLink read of the row (16-byte vectors, UNROLL in flight per lane),
 * one local write per expert slot, then the slots' chunk counters. */
__global__ void __launch_bounds__(WARP_COPY_THREADS) lsa_dispatch_warp_kernel(mok_lsa_args a)
{
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = (gridDim.x * blockDim.x) >> 5;
    dispatch_pull_rows<UNROLL>(a, warp, nwarps, lane);
}

/* Per route: one warp per slot, expert_out row -> owner's comb[t*k + j]; then the done signal. */
__global__ void __launch_bounds__(COMBINE_THREADS) lsa_combine_route_warp_kernel(mok_lsa_args a)
{
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = (gridDim.x * blockDim.x) >> 5;
    int vecs = a.hidden / 8, used = a.offset[a.local_experts];
    if (used > a.capacity)
        used = a.capacity;
    /* Slots are expert-major and, inside an expert, by source rank: walked in order, all warps would send to one
     * owner rank at a time (and every rank to the same one), each NVLink busy one way at a time. A stride prime
     * to `used` visits every slot once in an order that mixes owners. */
    long long step = used % 7919 ? 7919 : 1;
    for (int i = warp; i < used; i += nwarps) {
        int s = (int)((long long)i * step % used);
        int32_t e = a.entry[s];
        if (e < 0)
            continue;
        int p = (int)((uint32_t)e >> 25), t = (e >> 5) & 0xFFFFF, j = e & 31;
        uint4 *dst = (uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window,
                                                a.off_comb + ((size_t)t * a.topk + j) * a.hidden * 2, p);
        const uint4 *src = a.landing ? landed_row(a, p, t) : (const uint4 *)a.expert_out + (size_t)s * vecs;
        copy_row<UNROLL>(src, dst, vecs, lane);
    }
    signal_done(a);
}

/* As many row stages per warp as fit in the shared memory a block may use (227 KiB on Hopper). */
static int pipe_stages(int hidden, size_t *smem_bytes)
{
    int max_smem = mok_smem_optin();
    int stages = MAX_STAGES;
    while (stages > LAG + 1 && PIPE_WARPS * pipe_warp_bytes(stages, hidden * 2) > (size_t)max_smem)
        stages--;
    *smem_bytes = PIPE_WARPS * pipe_warp_bytes(stages, hidden * 2);
    return stages;
}

extern "C" int mok_lsa_dispatch(const struct mok_lsa_args *a, int blocks, mok_stream_t stream)
{
    if (a->hidden % 8 || a->topk > 32)
        return (int)cudaErrorInvalidValue;
    if (a->push) {
        lsa_landed_kernel<<<1, 256, 0, mok_cuda_stream(stream)>>>(*a);
        return MOK_LAUNCH_RESULT();
    }
    if (!a->bulk_copies) {
        lsa_dispatch_warp_kernel<<<blocks, WARP_COPY_THREADS, 0, mok_cuda_stream(stream)>>>(*a);
        return MOK_LAUNCH_RESULT();
    }
    size_t smem;
    int stages = pipe_stages(a->hidden, &smem);
    cudaFuncSetAttribute(lsa_dispatch_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    lsa_dispatch_kernel<<<blocks, PIPE_WARPS * 32, smem, mok_cuda_stream(stream)>>>(*a, stages);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_lsa_push(const struct mok_lsa_args *a, int blocks, mok_stream_t stream)
{
    if (!a->push)
        return 0;
    if (a->hidden % 8 || a->topk > 32 || !a->landing)
        return (int)cudaErrorInvalidValue;
    if (a->bulk_copies) {
        size_t smem;
        int ring = ring_config(lsa_push_ring_kernel, a->hidden, RING_MAX_WARPS, &smem);
        if (ring < 1)
            return (int)cudaErrorInvalidValue;
        lsa_push_ring_kernel<<<blocks, ring * 32, smem, mok_cuda_stream(stream)>>>(*a, ring);
        return MOK_LAUNCH_RESULT();
    }
    lsa_push_kernel<<<blocks, WARP_COPY_THREADS, 0, mok_cuda_stream(stream)>>>(*a);
    return MOK_LAUNCH_RESULT();
}


extern "C" int mok_lsa_combine(const struct mok_lsa_args *a, int blocks, mok_stream_t stream)
{
    if (a->hidden % 8 || a->topk > 32 || a->nranks > 32)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = mok_cuda_stream(stream);
    if (a->small_paths && a->combine_per_rank && a->t_max <= FUSED_REDUCE_MAX_TOKENS) {
        /* launch latency dominates: one kernel. Cooperative: its blocks wait for each other (through the done
         * flags), so the launch must guarantee they are all resident, or fail; a plain launch could leave some
         * queued behind spinning ones */
        cudaError_t e = mok_launch_cooperative(lsa_combine_rank_reduce_kernel, (unsigned)blocks, RANK_COMBINE_THREADS, 0,
                                               s, *a);
        return e != cudaSuccess ? (int)e : MOK_LAUNCH_RESULT();
    }
    if (a->combine_per_rank && a->reduce_overlap) /* the sum inside the combine launch (end of this file) */
        return mok_lsa_combine_overlap(a, blocks, s);
    if (!a->combine_per_rank) {
        int err = mok_lsa_combine_routes(a, blocks, stream);
        return err ? err : mok_lsa_reduce(a, stream);
    }
    if (a->bulk_copies && a->landing) { /* per rank from here on */
        size_t smem;
        int ring = ring_config(lsa_combine_rank_ring_kernel, a->hidden, RING_MAX_WARPS, &smem);
        if (ring < 1)
            return (int)cudaErrorInvalidValue;
        lsa_combine_rank_ring_kernel<<<blocks, ring * 32, smem, s>>>(*a, ring);
    } else {
        lsa_combine_rank_kernel<<<blocks, RANK_COMBINE_THREADS, 0, s>>>(*a);
    }
    int err = MOK_LAUNCH_RESULT();
    if (err)
        return err;
    return mok_lsa_reduce(a, stream);
}

/* The per-route combine's sends alone: every slot's expert_out row to its owner's combine row of its route, then
 * the done flag (the forward's mok_lsa_combine adds the weighted sum; the backward's owner runs mok_lsa_grad_sum). */
extern "C" int mok_lsa_combine_routes(const struct mok_lsa_args *a, int blocks, mok_stream_t stream)
{
    if (a->hidden % 8 || a->topk > 32 || a->nranks > 32 || a->combine_per_rank)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = mok_cuda_stream(stream);
    if (!a->bulk_copies) {
        lsa_combine_route_warp_kernel<<<blocks, COMBINE_THREADS, 0, s>>>(*a);
        return MOK_LAUNCH_RESULT();
    }
    size_t smem;
    int stages = pipe_stages(a->hidden, &smem);
    cudaFuncSetAttribute(lsa_combine_route_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    lsa_combine_route_kernel<<<blocks, PIPE_WARPS * 32, smem, s>>>(*a, stages);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_lsa_reduce(const struct mok_lsa_args *a, mok_stream_t stream)
{
    if (!a->combine_per_rank)
        return mok_lsa_route_sum(a, false, stream);
    int grid = a->my_tokens < 1 ? 1 : a->my_tokens > 4096 ? 4096 : a->my_tokens;
    lsa_reduce_kernel<<<grid, 256, 0, mok_cuda_stream(stream)>>>(*a);
    return MOK_LAUNCH_RESULT();
}



/* ---- small problems, fused (small=auto): combine and the owner's sum in one launch, on enough blocks ---------
 * lsa_combine_rank_reduce_kernel (small=v1) sums on its `sms` combine blocks: 128 tokens / 16 blocks = 8 tokens in
 * series per block after the done flags, slower than the separate lsa_reduce_kernel. Here the first `combine`
 * blocks combine and signal done, and every block (up to one per token, as many as can be resident: the launch is
 * cooperative, since all wait for flags the combine blocks set) sums. With a block per token, the token's own
 * partial (local data) is formed before the flags, so only the peers' partials are read after them. */
#define WIDE_COMBINE_THREADS 512 /* also fits the per-rank combine's registers; 2 vectors per thread at hidden 7168 */
#define WIDE_OWN_VECS 2          /* own partials held in registers across the wait: vectors per thread */

__global__ void __launch_bounds__(WIDE_COMBINE_THREADS) lsa_combine_rank_reduce_wide_kernel(mok_lsa_args a,
                                                                                           int combine)
{
    if (blockIdx.x < combine) {
        int lane = threadIdx.x & 31;
        int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = (combine * blockDim.x) >> 5;
        combine_per_rank(a, warp, nwarps, lane, a.landing);
        signal_done(a, 1, combine); /* over the combining blocks only */
    }
    int vecs = a.hidden / 8;
    if (gridDim.x < (unsigned)a.my_tokens || vecs > WIDE_OWN_VECS * (int)blockDim.x) { /* grid-uniform */
        wait_all_done(a);
        reduce_tokens(a);
        return;
    }
    /* one token per block, counted from the last block so that the combine blocks get none where the grid allows:
     * reduce_tokens' per-rank sum with the own partial formed before the wait */
    int t = (int)(gridDim.x - 1 - blockIdx.x);
    __shared__ token_meta m;
    if (t < a.my_tokens) /* block-uniform */
        load_token_meta(a, t, &m);
    __syncthreads();
    unsigned touched = t < a.my_tokens ? m.touched : 0u;
    float own[WIDE_OWN_VECS][8];
    if (t < a.my_tokens) {
#pragma unroll
        for (int u = 0; u < WIDE_OWN_VECS; u++) {
            int v = threadIdx.x + u * blockDim.x;
            if (v < vecs && (touched >> a.rank & 1))
                own_partial(a, m, t, v, own[u]);
        }
    }
    wait_all_done(a);
    if (t >= a.my_tokens)
        return;
    const uint4 *comb = (const uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_comb, a.rank);
    store_rank_sums(a, comb, t, vecs, touched, own);
}

extern "C" int mok_lsa_combine_small(const struct mok_lsa_args *a, int blocks, mok_stream_t stream)
{
    static int resident = -1; /* blocks of the kernel the GPU holds at once (one device per process) */
    if (resident < 0) {
        int sms = mok_sm_count(), per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, lsa_combine_rank_reduce_wide_kernel,
                                                          WIDE_COMBINE_THREADS, 0) != cudaSuccess)
            per_sm = 0;
        resident = per_sm * sms;
    }
    if (!a->combine_per_rank || a->t_max > FUSED_REDUCE_MAX_TOKENS || blocks > resident) {
        mok_lsa_args general = *a; /* not the small=v1 kernel: the general ones */
        general.small_paths = MOK_LSA_SMALL_OFF;
        return mok_lsa_combine(&general, blocks, stream);
    }
    if (a->hidden % 8 || a->topk > 32 || a->nranks > 32)
        return (int)cudaErrorInvalidValue;
    int grid = a->my_tokens + blocks; /* a block per token beside the combine blocks, as far as they fit */
    cudaError_t e = mok_launch_cooperative(lsa_combine_rank_reduce_wide_kernel, (unsigned)(grid < resident ? grid : resident),
                                           WIDE_COMBINE_THREADS, 0, mok_cuda_stream(stream), *a, blocks);
    return e != cudaSuccess ? (int)e : MOK_LAUNCH_RESULT();
}

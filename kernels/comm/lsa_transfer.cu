/* lsa_transfer: the data movement of the LSA path, in the variants the `lsa` tuning parameters select.
 * Dispatch moves each (source rank, token) row across NVLink once per destination rank: pulled by the
 * destination (LSA loads) or pushed by the owner (LSA stores), into a copy per local expert slot (layout=slots)
 * or into one landing row the slots read (layout=landing), then releases the chunk counters of those slots.
 * Combine pushes rows (per route) or fp32-summed partials (per rank) into the token owner's window, signals
 * completion with an epoch flag, and the owner sums in a fixed order, so y is bitwise reproducible. Rows move by
 * warps with 16-byte vectors and several loads in flight per lane (copy=warp) or by the bulk copy engine through
 * shared memory (copy=bulk).
 *
 * The owner's per-route sums (forward and backward) are in kernels/comm/lsa_route_sum.cu.
 *
 * Why one file of ~850 lines: the launchers choose among the kernels at run time (mok_lsa_combine picks the ring,
 * the per-rank, the per-route, the fused small and the reduce=overlap kernels from the parameters), and the kernels
 * share file-local pipeline helpers and constants (the bulk-copy pipeline, ring_config, the thread counts); split
 * into files, those would become a cross-file interface that only this file uses. */
#include <nccl.h>
#include <nccl_device.h>

#include "common/common.cuh"
#include "common/bulk.cuh"
#include "comm/lsa_bulk_ring.cuh"
#include "comm/lsa_device.cuh"
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
            mok_mbar_wait(&ps->bar[stage], (uint32_t)((done / stages) & 1));
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

/* Ring warps per block (at most max_warps) for this row size, and their dynamic shared memory; the kernel's
 * shared-memory limit raised to it. 0: not even one warp's ring fits (supports() rejects that). */
template <typename Kernel> static int ring_config(Kernel kernel, int hidden, int max_warps, size_t *smem)
{
    int max_smem = mok_smem_optin();
    int warps = ring_warps(hidden * 2, max_smem, max_warps);
    *smem = ring_smem_bytes(warps, hidden * 2);
    if (warps > 0)
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)*smem);
    return warps;
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


/* What the owner's per-rank sum needs of token t besides the rows, read once per token by one warp into shared
 * memory: the ranks it touches and its routes into my experts (own partial: weights and slots, ascending j,
 * compacted). Read per thread and vector instead (a chain of dependent loads per route, with a branch on each slot)
 * this was what bounded the sum: 157 us for 8192 DeepSeek-V3 tokens, ~2.2 TB/s. */
struct token_meta {
    unsigned touched;
    int n_own;
    float w_own[32];
    int slot_own[32];
};

/* Warp 0 of the block fills *m; the caller synchronizes the block before reading it (and before refilling). */
__device__ __forceinline__ void load_token_meta(const mok_lsa_args &a, int t, token_meta *m)
{
    if (threadIdx.x >= 32)
        return;
    int lane = threadIdx.x;
    bool route = lane < a.topk;
    int id = route ? a.my_ids[t * a.topk + lane] : 0;
    unsigned touched = __reduce_or_sync(0xffffffffu, route ? 1u << (id / a.local_experts) : 0u);
    size_t e = ((size_t)a.rank * a.t_max + t) * a.topk + lane;
    int slot = route ? a.route_slot[e] : -1;
    unsigned own = __ballot_sync(0xffffffffu, slot >= 0);
    if (slot >= 0) {
        int r = __popc(own & ((1u << lane) - 1));
        m->w_own[r] = a.all_w[e];
        m->slot_own[r] = slot;
    }
    if (lane == 0) {
        m->touched = touched;
        m->n_own = __popc(own);
    }
}

/* The landing layout's own partial from the token's own row vector (every own route reads that one row). */
__device__ __forceinline__ void weigh_own(uint4 raw, const token_meta &m, float part[8])
{
    vec8 in;
    in.v = raw;
    float x[8], acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 8; i++)
        x[i] = mok_bf16_to_f32(in.h[i]);
    for (int r = 0; r < m.n_own; r++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[i] += m.w_own[r] * x[i];
#pragma unroll
    for (int i = 0; i < 8; i++)
        part[i] = mok_bf16_to_f32(mok_f32_to_bf16(acc[i]));
}

/* Per rank, my own tokens: the partial sum of their routes into my experts, computed where the owner sums
 * rather than sent to myself by the combine (which would cost the few comm SMs a local read and write of every
 * token). The same operations in the same order as the combine's (ascending j, fp32 fma from 0, rounded to bf16),
 * so y is bitwise what it was when the combine wrote this partial. Landing: every route reads the one landed row,
 * loaded once. */
__device__ __forceinline__ void own_partial(const mok_lsa_args &a, const token_meta &m, int t, int v, float part[8])
{
    if (a.landing) {
        weigh_own(m.n_own > 0 ? landed_row(a, a.rank, t)[v] : make_uint4(0, 0, 0, 0), m, part);
        return;
    }
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int vecs = a.hidden / 8;
    for (int r = 0; r < m.n_own; r++) {
        vec8 in;
        in.v = ((const uint4 *)a.expert_out)[(size_t)m.slot_own[r] * vecs + v];
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[i] += m.w_own[r] * mok_bf16_to_f32(in.h[i]);
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
        part[i] = mok_bf16_to_f32(mok_f32_to_bf16(acc[i]));
}

/* The owner's fixed-order per-rank sum of token t's vector v into acc: over the ranks the token touches, in
 * ascending order, its own partial (bf16-rounded, in fp32) at its own rank and the peer's pushed partial elsewhere.
 * Every per-rank sum goes through here, so they are bitwise the same. */
__device__ __forceinline__ void add_rank_partials(const mok_lsa_args &a, const uint4 *comb, int t, int v, int vecs,
                                                  unsigned touched, const float (&own)[8], float (&acc)[8])
{
    for (int q = 0; q < a.nranks; q++)
        if (!(touched & (1u << q))) {
            continue;
        } else if (q == a.rank) {
#pragma unroll
            for (int i = 0; i < 8; i++)
                acc[i] += own[i];
        } else {
            vec8 in;
            in.v = comb[((size_t)t * a.nranks + q) * vecs + v];
#pragma unroll
            for (int i = 0; i < 8; i++)
                acc[i] += mok_bf16_to_f32(in.h[i]);
        }
}


/* y[t], vector v, of a per-rank sum whose own partial is already at hand. */
__device__ __forceinline__ void store_rank_sum(const mok_lsa_args &a, const uint4 *comb, int t, int v, int vecs,
                                               unsigned touched, const float (&own)[8])
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    add_rank_partials(a, comb, t, v, vecs, touched, own, acc);
    store_y(a, t, v, vecs, acc);
}

/* store_rank_sum for the U vectors per thread of token t whose own partials a block holds in registers (vector
 * threadIdx.x + u * blockDim.x in own[u]). */
template <int U>
__device__ __forceinline__ void store_rank_sums(const mok_lsa_args &a, const uint4 *comb, int t, int vecs,
                                                unsigned touched, const float (&own)[U][8])
{
#pragma unroll
    for (int u = 0; u < U; u++) {
        int v = threadIdx.x + u * blockDim.x;
        if (v < vecs)
            store_rank_sum(a, comb, t, v, vecs, touched, own[u]);
    }
}

/* The owner's fixed-order per-rank sum: one block per token (grid-stride). (Per route: kernels/comm/lsa_route_sum.cu.) */
__device__ __forceinline__ void reduce_tokens(const mok_lsa_args &a)
{
    int vecs = a.hidden / 8;
    const uint4 *comb = (const uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_comb, a.rank);
    __shared__ token_meta m;
    for (int t = blockIdx.x; t < a.my_tokens; t += gridDim.x) {
        __syncthreads(); /* the previous token's readers of m are done */
        load_token_meta(a, t, &m);
        __syncthreads();
        for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            float own[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            if (m.touched & (1u << a.rank))
                own_partial(a, m, t, v, own);
            add_rank_partials(a, comb, t, v, vecs, m.touched, own, acc);
            store_y_with_shared(a, t, v, vecs, acc);
        }
    }
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

static int launch_combine_overlap(const mok_lsa_args *a, int blocks, cudaStream_t s); /* reduce=overlap */

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
        return launch_combine_overlap(a, blocks, s);
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

/* ---- reduce=overlap (per rank, general path): the owner's sum inside the combine launch, chunk by chunk ---------
 * lsa_reduce_kernel starts only after every rank's done flag, so its HBM traffic (peers' partials, own rows, y) is
 * exposed after the transfer. Here one cooperative launch of `combine` blocks plus a reduce block on every other
 * SM: combine blocks send whole chunks (reduce_chunk consecutive tokens of one owner, owners interleaved
 * and rotated by this rank as rank_token_item does) and after each chunk store the epoch into that chunk's flag
 * [my rank][chunk] in the owner's window (every chunk of every owner, empty ones included, so an owner can wait
 * for all its peers). Reduce blocks walk the owner's tokens as reduce_tokens does (grid-stride), form the own
 * partial, wait for the token's chunk flags of every peer, and sum in reduce_tokens' order: y is bitwise the same.
 * Combine blocks never wait, so with all blocks resident nothing can deadlock. The done flags are still set (by
 * the last combine block), so the protocol stays what it was for anything else. */
#define OVERLAP_THREADS RANK_COMBINE_THREADS
#define OVERLAP_OWN_VECS 2 /* own partials held in registers across the chunk wait: vectors per thread */

/* load_rank_item for token t of source p (t_end: the chunk's end, at most p's token count) */
__device__ __forceinline__ rank_item load_chunk_item(const mok_lsa_args &a, int p, int t, int t_end, int lane)
{
    rank_item it = {-1, 0.0f};
    if (t < t_end && lane < a.topk) { /* warp-uniform t */
        size_t e = ((size_t)p * a.t_max + t) * a.topk + lane;
        it.slot = a.route_slot[e];
        it.w = a.all_w[e];
    }
    return it;
}

/* combine_per_rank's item loop over the tokens [t0, t_end) of source p, warps of one block */
__device__ __forceinline__ void combine_chunk(const mok_lsa_args &a, int p, int t0, int t_end, int warp, int nwarps,
                                             int lane)
{
    rank_item cur = load_chunk_item(a, p, t0 + warp, t_end, lane);
    for (int t = t0 + warp; t < t_end; t += nwarps) {
        rank_item next = load_chunk_item(a, p, t + nwarps, t_end, lane);
        unsigned mask = __ballot_sync(0xffffffffu, cur.slot >= 0);
        if (mask)
            combine_rank_item(a, p, t, lane, mask, cur, a.landing);
        cur = next;
    }
}

/* Combine block cb of ncb: chunk items i = cb, cb + ncb, ... of (P - 1) x chunks, each flagged once done. */
__device__ __forceinline__ void overlap_combine(const mok_lsa_args &a, int cb, int ncb)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    int others = a.nranks - 1, items = others * overlap_chunks(a);
    uint64_t epoch = a.epoch[0];
    for (int i = cb; i < items; i += ncb) {
        int c = i / others, p = (a.rank + 1 + i % others) % a.nranks;
        int t0 = c * a.reduce_chunk, t_end = min(t0 + a.reduce_chunk, a.all_tokens[p]);
        combine_chunk(a, p, t0, t_end, warp, nwarps, lane);
        __syncthreads(); /* every warp's stores of this chunk issued */
        if (threadIdx.x == 0) {
            __threadfence_system();
            mok_st_release_sys(overlap_flag(a, p, a.rank, c), epoch);
        }
    }
    signal_done(a, 1, ncb); /* over the combining blocks only */
}

/* Block-wide: every peer has flagged the chunk of my token t (waited: the chunk already waited for; block-uniform). */
__device__ __forceinline__ void wait_token_chunk(const mok_lsa_args &a, int t, int *waited, uint64_t epoch)
{
    int c = t / a.reduce_chunk;
    if (c == *waited)
        return;
    int q = threadIdx.x;
    if (q < a.nranks && q != a.rank)
        mok_wait_geq_sys(overlap_flag(a, a.rank, q, c), epoch, a.rank, "combine",
                         "chunk flag [source * chunks + chunk]", q * overlap_chunks(a) + c, a.timeout_cycles);
    __syncthreads();
    *waited = c;
}

/* overlap_reduce for the landing layout with the own partials in registers: token t + nrb's metadata and own row
 * are loaded while token t waits and is summed. After the combine's last chunk flags, what is left of the phase is
 * each reduce block's last few tokens, and each then costs about one memory round trip (the peers' partials)
 * instead of four in a row (metadata, own row, flag, partials). Same sums in the same order as overlap_reduce. */
__device__ __forceinline__ void overlap_reduce_landed(const mok_lsa_args &a, int rb, int nrb)
{
    int vecs = a.hidden / 8;
    uint64_t epoch = a.epoch[0];
    const uint4 *comb = (const uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_comb, a.rank);
    __shared__ token_meta m[2]; /* token k of this block in m[k & 1] */
    uint4 x[OVERLAP_OWN_VECS];  /* the own row's vectors of the token at hand, then of the next */
    int t = rb;
    if (t < a.my_tokens)
        load_token_meta(a, t, &m[0]);
    __syncthreads();
#pragma unroll
    for (int u = 0; u < OVERLAP_OWN_VECS; u++) {
        int v = threadIdx.x + u * blockDim.x;
        if (t < a.my_tokens && v < vecs)
            x[u] = landed_row(a, a.rank, t)[v];
    }
    int waited = -1;
    for (int k = 0; t < a.my_tokens; t += nrb, k++) { /* block-uniform */
        const token_meta &cm = m[k & 1];
        int tn = t + nrb;
        if (tn < a.my_tokens) /* warp 0; m[(k + 1) & 1] was last read before the previous iteration's barrier */
            load_token_meta(a, tn, &m[(k + 1) & 1]);
        float own[OVERLAP_OWN_VECS][8];
#pragma unroll
        for (int u = 0; u < OVERLAP_OWN_VECS; u++) {
            int v = threadIdx.x + u * blockDim.x;
            if (v < vecs)
                weigh_own(x[u], cm, own[u]);
            if (tn < a.my_tokens && v < vecs) /* the next token's own row, in flight across this token's wait */
                x[u] = landed_row(a, a.rank, tn)[v];
        }
        wait_token_chunk(a, t, &waited, epoch);
        store_rank_sums(a, comb, t, vecs, cm.touched, own);
        __syncthreads(); /* every thread is done with m[k & 1]; warp 0's m[(k + 1) & 1] is complete */
    }
}

/* Reduce block rb of nrb: reduce_tokens' grid-stride over my tokens with a wait per chunk. */
__device__ __forceinline__ void overlap_reduce(const mok_lsa_args &a, int rb, int nrb)
{
    int vecs = a.hidden / 8;
    uint64_t epoch = a.epoch[0];
    const uint4 *comb = (const uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_comb, a.rank);
    bool regs = vecs <= OVERLAP_OWN_VECS * (int)blockDim.x; /* grid-uniform */
    int waited = -1;
    __shared__ token_meta m;
    for (int t = rb; t < a.my_tokens; t += nrb) {
        __syncthreads(); /* the previous token's readers of m are done */
        load_token_meta(a, t, &m);
        __syncthreads();
        unsigned touched = m.touched;
        bool mine = touched >> a.rank & 1;
        float own[OVERLAP_OWN_VECS][8];
        if (regs && mine) { /* local data only: before the wait */
#pragma unroll
            for (int u = 0; u < OVERLAP_OWN_VECS; u++) {
                int v = threadIdx.x + u * blockDim.x;
                if (v < vecs)
                    own_partial(a, m, t, v, own[u]);
            }
        }
        wait_token_chunk(a, t, &waited, epoch);
        if (regs) {
            store_rank_sums(a, comb, t, vecs, touched, own);
        } else {
            for (int v = threadIdx.x; v < vecs; v += blockDim.x) { /* reduce_tokens' per-rank sum */
                float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                if (touched & (1u << a.rank))
                    own_partial(a, m, t, v, part);
                store_rank_sum(a, comb, t, v, vecs, touched, part);
            }
        }
    }
}

/* kRing (copy=bulk, layout=landing): the combine blocks send through per-warp bulk rings, `ring` warps each, and
 * flag each chunk once its rows' writes are complete (ring_chunks_done). */
template <bool kRing>
__global__ void __launch_bounds__(OVERLAP_THREADS, 1) lsa_combine_rank_overlap_kernel(mok_lsa_args a, int combine,
                                                                                   int ring)
{
    if ((int)blockIdx.x >= combine) {
        if (a.landing && a.hidden / 8 <= OVERLAP_OWN_VECS * OVERLAP_THREADS) /* grid-uniform */
            overlap_reduce_landed(a, blockIdx.x - combine, gridDim.x - combine);
        else
            overlap_reduce(a, blockIdx.x - combine, gridDim.x - combine);
    } else if (!kRing) {
        overlap_combine(a, blockIdx.x, combine);
    } else {
        extern __shared__ __align__(128) char smem[];
        ring_init((ring_smem *)smem);
        int warp = threadIdx.x >> 5;
        if (warp < ring)
            ring_stream<true>(a, (ring_smem *)smem, smem + RING_BUFS_OFFSET, warp, ring, 0, 0, blockIdx.x, combine,
                              true);
        signal_done(a, 1, combine);
    }
}

extern "C" int mok_lsa_overlap_reduce_blocks(int blocks)
{
    static int sms = -1; /* SMs that hold a block of the kernel (0: none fits); one device per process */
    if (sms < 0) {
        int dev = 0, n = 0, per_sm = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, lsa_combine_rank_overlap_kernel<false>,
                                                          OVERLAP_THREADS, 0) != cudaSuccess)
            n = 0, per_sm = 0, cudaGetLastError(); /* a failed query must not linger as a launch's error */
        sms = per_sm >= 1 ? n : 0;
    }
    return sms > blocks ? sms - blocks : 0;
}

static int launch_combine_overlap(const mok_lsa_args *a, int blocks, cudaStream_t s)
{
    int reduce = mok_lsa_overlap_reduce_blocks(blocks);
    if (reduce < 1) /* supports() rejects this config before setup */
        return (int)cudaErrorCooperativeLaunchTooLarge;
    cudaLaunchAttribute coop;
    coop.id = cudaLaunchAttributeCooperative;
    coop.val.cooperative = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(blocks + reduce));
    cfg.blockDim = dim3(OVERLAP_THREADS);
    cfg.stream = s;
    cfg.attrs = &coop;
    cfg.numAttrs = 1;
    if (a->bulk_copies && a->landing) { /* one block per SM either way: the ring's shared memory costs no SM */
        int ring = ring_config(lsa_combine_rank_overlap_kernel<true>, a->hidden, OVERLAP_THREADS / 32,
                               &cfg.dynamicSmemBytes);
        if (ring < 1)
            return (int)cudaErrorInvalidValue;
        cudaError_t e = cudaLaunchKernelEx(&cfg, lsa_combine_rank_overlap_kernel<true>, *a, blocks, ring);
        return e != cudaSuccess ? (int)e : MOK_LAUNCH_RESULT();
    }
    cudaError_t e = cudaLaunchKernelEx(&cfg, lsa_combine_rank_overlap_kernel<false>, *a, blocks, 0);
    return e != cudaSuccess ? (int)e : MOK_LAUNCH_RESULT();
}

/* lsa_combine_overlap: the per-rank combine with reduce=overlap, the owner's sum inside the combine's launch, chunk
 * by chunk (the section below says how), and its launcher for mok_lsa_combine (kernels/comm/lsa_transfer.cu). */
#include <nccl.h>
#include <nccl_device.h>

#include "common/common.cuh"
#include "common/bulk.cuh"
#include "comm/lsa_bulk_ring.cuh"
#include "comm/lsa_combine_overlap.cuh"
#include "comm/lsa_device.cuh"
#include "comm/lsa_rank_sum.cuh"
#include "common/lsa_sync.cuh"

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

int mok_lsa_combine_overlap(const mok_lsa_args *a, int blocks, cudaStream_t s)
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

/* lsa_bulk_ring: the landing layout's two NVLink streams (the push dispatch and the per-rank combine) moved by
 * the bulk copy engine, copy=bulk. Each ring warp keeps a private ring of RING_DEPTH row buffers in shared
 * memory: lane 0 loads a local row into a buffer (global -> shared, completing on the buffer's mbarrier), the
 * warp transforms it in place (the combine's weighted sum; nothing for the push) and lane 0 stores it to its
 * destination(s) in the peers' windows (shared -> global, one bulk group per row). A buffer is reloaded once its
 * store has *read* it (wait_group.read), not once the remote write completed, so what is on the wire is not held
 * in registers or buffers. The idea: warp copies hold every byte in flight in registers, which the combine's fp32
 * sum competes for. Measured (results/h200x2/2026-11-30-lsa-comm-v3, 2 x H200, 16 SMs): the ring push moves rows
 * as fast as the warp push (both at the link rate), the ring combine is slower than the batched warp combine
 * (three 14 KiB buffers per warp leave room for 5 ring warps per SM, too few to weigh rows at the link rate).
 * Kept as a tuning option (copy=bulk with layout=landing), not the default.
 *
 * The first bulk pipeline (bulk_pipeline in lsa_transfer.cu, per-route rows; results/h200x2/2026-11-29-lsa-comm-wip)
 * waited for each store's write to complete before reusing its buffer, a NVLink round trip per row; that is why it
 * lost to warp copies. */
#pragma once
#include "common/bulk.cuh"
#include "comm/lsa_device.cuh"

#define RING_DEPTH 3      /* buffers per warp: the row being summed/stored, the next two loading */
#define RING_MAX_WARPS 16 /* ring warps per block at most (small rows: a 512-thread block's warps) */

struct ring_meta { /* what the warp knows of the row in a buffer, written at load, read at store */
    int p, t;      /* combine: source rank and token (the destination comb row); push: t only */
    int pos;       /* combine: the position of the item's chunk in this block's chunk sequence */
    unsigned mask; /* combine: routes j into this rank; push: destination ranks */
    float w[32];   /* combine: the weights of mask's routes, ascending j, compacted */
};

struct ring_smem {
    uint64_t full[RING_MAX_WARPS][RING_DEPTH];
    ring_meta meta[RING_MAX_WARPS][RING_DEPTH];
    int done_upto[RING_MAX_WARPS]; /* combine: chunk positions whose stores this warp has completed */
    int flagged_upto;              /* combine: chunk positions whose flag this block has set */
};

/* the row buffers start at this offset of the dynamic shared memory, after the ring_smem header */
#define RING_BUFS_OFFSET ((sizeof(ring_smem) + 127) / 128 * 128)

/* Ring warps of a block for rows of row_bytes (0: not even one warp's ring fits in max_smem), and the dynamic
 * shared memory they take. Host and device agree on this. */
__host__ __device__ __forceinline__ int ring_warps(int row_bytes, int max_smem, int max_warps)
{
    long long w = ((long long)max_smem - (long long)RING_BUFS_OFFSET) / ((long long)RING_DEPTH * row_bytes);
    if (w > RING_MAX_WARPS)
        w = RING_MAX_WARPS;
    return w > max_warps ? max_warps : w < 0 ? 0 : (int)w;
}

__host__ __device__ __forceinline__ size_t ring_smem_bytes(int warps, int row_bytes)
{
    return RING_BUFS_OFFSET + (size_t)warps * RING_DEPTH * row_bytes;
}

/* Ring warps per block (at most max_warps) for this row size, and their dynamic shared memory; the kernel's
 * shared-memory limit raised to it. 0: not even one warp's ring fits (supports() rejects that). */
template <typename Kernel> static inline int ring_config(Kernel kernel, int hidden, int max_warps, size_t *smem)
{
    int max_smem = mok_smem_optin();
    int warps = ring_warps(hidden * 2, max_smem, max_warps);
    *smem = ring_smem_bytes(warps, hidden * 2);
    if (warps > 0)
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)*smem);
    return warps;
}

/* reduce=overlap's chunk flags (here because the ring flags chunks too; lsa_transfer.cu includes this file):
 * chunks of a.reduce_chunk owner tokens, and the flag of chunk c of owner `owner`'s tokens, set by source
 * rank src, in the owner's window. */
__device__ __forceinline__ int overlap_chunks(const mok_lsa_args &a)
{
    return (a.t_max + a.reduce_chunk - 1) / a.reduce_chunk;
}

__device__ __forceinline__ uint64_t *overlap_flag(const mok_lsa_args &a, int owner, int src, int c)
{
    return (uint64_t *)ncclGetLsaPointer(
        (ncclWindow_t)a.window, a.off_cflags + ((size_t)src * overlap_chunks(a) + c) * sizeof(uint64_t), owner);
}

/* The items of one ring warp. Combine (kCombine): the tokens of the block's chunk sequence i = cb, cb + ncb, ...
 * over (peer p, chunk c) pairs, ordered like overlap_combine's (rank-rotated), this warp taking tokens
 * t0 + warp, t0 + warp + nwarps, ... of each chunk. Push: own tokens t = warp, warp + nwarps, ... (warp over the
 * grid) with at least one remote destination rank. The candidate's routing is loaded one step ahead, so its
 * latency hides behind the row being summed and stored. */
template <bool kCombine> struct ring_walker {
    const mok_lsa_args &a;
    int lane, warp, nwarps;
    int pos, npos, cb, ncb; /* combine: chunk position, positions of this block, block, blocks */
    int p, t0, t_end, t;    /* the candidate item (combine: its chunk) */
    int pre_slot;           /* combine: route_slot of the candidate's route j = lane; push: its expert id */
    float pre_w;            /* combine: that route's weight */

    __device__ __forceinline__ void set_chunk()
    {
        int others = a.nranks - 1, i = cb + pos * ncb, c = i / others;
        p = (a.rank + 1 + i % others) % a.nranks;
        t0 = c * a.reduce_chunk;
        t_end = min(t0 + a.reduce_chunk, a.all_tokens[p]);
        t = t0 + warp;
    }

    /* preload the candidate's routing (combine: after skipping to the chunk that holds it) */
    __device__ __forceinline__ void preload()
    {
        pre_slot = -1;
        if (kCombine) {
            while (pos < npos && t >= t_end)
                if (++pos < npos)
                    set_chunk();
            if (pos < npos && lane < a.topk) {
                size_t e = ((size_t)p * a.t_max + t) * a.topk + lane;
                pre_slot = a.route_slot[e];
                pre_w = a.all_w[e];
            }
        } else if (t < a.my_tokens && lane < a.topk) {
            pre_slot = a.my_ids[t * a.topk + lane];
        }
    }

    __device__ __forceinline__ ring_walker(const mok_lsa_args &args, int lane_, int warp_, int nwarps_, int cb_,
                                           int ncb_)
        : a(args), lane(lane_), warp(warp_), nwarps(nwarps_), pos(0), npos(0), cb(cb_), ncb(ncb_), p(0), t0(0),
          t_end(0), t(warp_), pre_slot(-1), pre_w(0.0f)
    {
        if (kCombine) {
            int items = (a.nranks - 1) * overlap_chunks(a);
            npos = cb < items ? (items - cb + ncb - 1) / ncb : 0;
            if (npos > 0)
                set_chunk();
        }
        preload();
    }

    /* Warp-collective: the next item with work into *m (false at the end of the sequence). */
    __device__ __forceinline__ bool next(ring_meta *m)
    {
        for (;;) {
            if (kCombine ? pos >= npos : t >= a.my_tokens)
                return false;
            unsigned mask;
            if (kCombine) {
                mask = __ballot_sync(0xffffffffu, pre_slot >= 0);
                if (pre_slot >= 0)
                    m->w[__popc(mask & ((1u << lane) - 1))] = pre_w;
            } else {
                unsigned bit = pre_slot >= 0 ? 1u << (pre_slot / a.local_experts) : 0u;
                mask = __reduce_or_sync(0xffffffffu, bit) & ~(1u << a.rank);
            }
            int item_p = p, item_t = t, item_pos = pos;
            t += nwarps;
            preload();
            if (!mask)
                continue;
            if (lane == 0) {
                m->p = item_p;
                m->t = item_t;
                m->pos = item_pos;
                m->mask = mask;
            }
            __syncwarp();
            return true;
        }
    }
};

/* The combine's chunk flags from a block's ring warps: a chunk position is flagged once every ring warp has
 * completed the stores of its items there (done_upto >= pos): the warp that moves the minimum publishes. */
__device__ __forceinline__ void ring_chunks_done(const mok_lsa_args &a, ring_smem *rs, int warp, int nwarps, int upto,
                                                 int cb, int ncb, uint64_t epoch)
{
    /* called by lane 0 after mok_bulk_wait covered the stores up to `upto`: make them visible, then say so */
    mok_fence_proxy_async_global();
    __threadfence_system();
    atomicMax(&rs->done_upto[warp], upto);
    int m = upto;
    for (int w = 0; w < nwarps; w++)
        m = min(m, atomicAdd(&rs->done_upto[w], 0));
    int old = atomicMax(&rs->flagged_upto, m);
    if (old >= m)
        return;
    __threadfence_system();
    int others = a.nranks - 1;
    for (int k = old + 1; k <= m; k++) {
        int i = cb + k * ncb, c = i / others, p = (a.rank + 1 + i % others) % a.nranks;
        mok_st_release_sys(overlap_flag(a, p, a.rank, c), epoch);
    }
}

/* One ring warp's whole stream (warp < nwarps ring warps of this block; gwarp / ngwarps: over the grid, the push's
 * token walk). Combine: chunk flags if `flags` (reduce=overlap), positions of the block cb of ncb. All of this
 * warp's bulk writes are complete and fenced when it returns. */
template <bool kCombine>
__device__ __forceinline__ void ring_stream(const mok_lsa_args &a, ring_smem *rs, char *bufs, int warp, int nwarps,
                                            int gwarp, int ngwarps, int cb, int ncb, bool flags)
{
    int lane = threadIdx.x & 31;
    uint32_t row_bytes = (uint32_t)a.hidden * 2;
    int vecs = a.hidden / 8;
    uint64_t *full = rs->full[warp];
    ring_meta *meta = rs->meta[warp];
    char *ring = bufs + (size_t)warp * RING_DEPTH * row_bytes;
    uint64_t epoch = a.epoch[0];
    if (lane == 0) {
        for (int d = 0; d < RING_DEPTH; d++)
            mok_mbar_init(&full[d], 1);
        mok_fence_mbar_init();
    }
    __syncwarp();
    ring_walker<kCombine> walk(a, lane, kCombine ? warp : gwarp, kCombine ? nwarps : ngwarps, cb, ncb);
    /* lane 0 issues item k's load into buffer k % RING_DEPTH */
    auto issue = [&](int k) -> bool {
        int d = k % RING_DEPTH;
        if (!walk.next(&meta[d]))
            return false;
        if (lane == 0) {
            const void *src = kCombine ? (const void *)landed_row(a, meta[d].p, meta[d].t)
                                       : (const void *)landed_row(a, a.rank, meta[d].t);
            mok_mbar_expect_tx(&full[d], row_bytes);
            mok_bulk_load(ring + (size_t)d * row_bytes, src, row_bytes, &full[d]);
        }
        return true;
    };
    int loaded = 0;
    while (loaded < RING_DEPTH - 1 && issue(loaded))
        loaded++;
    bool more = loaded == RING_DEPTH - 1;
    int stored = 0;                          /* rows (bulk groups) stored so far */
    int store_pos = 0;                       /* combine: chunk position of the last stored item */
    int closed_upto = -1, closed_groups = 0; /* combine: positions all stored, not yet known complete */
    for (int k = 0; k < loaded; k++) {
        int d = k % RING_DEPTH;
        mok_wait_mbar(&full[d], (uint32_t)((k / RING_DEPTH) & 1), a.rank, "ring", "row load into buffer", d);
        ring_meta *m = &meta[d];
        uint4 *row = (uint4 *)(ring + (size_t)d * row_bytes);
        if (kCombine) { /* the per-rank partial in place: weigh_landed, as the warp path (bitwise the same) */
            int nw = __popc(m->mask);
            float w[REG_ROUTES];
#pragma unroll
            for (int r = 0; r < REG_ROUTES; r++)
                w[r] = r < nw ? m->w[r] : 0.0f;
            unsigned rest = m->mask; /* routes past the first REG_ROUTES (topk > 8) */
            for (int r = 0; r < REG_ROUTES && rest; r++)
                rest &= rest - 1;
            const float *wrow = a.all_w + ((size_t)m->p * a.t_max + m->t) * a.topk;
            for (int v = lane; v < vecs; v += 32)
                row[v] = weigh_landed(row[v], w, min(nw, REG_ROUTES), rest, wrow);
            /* this lane's shared-memory writes ordered before the bulk engine's reads of them */
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
            __syncwarp();
        }
        if (lane == 0) {
            if (kCombine) {
                if (m->pos > store_pos) { /* every item of the positions before is stored */
                    closed_upto = m->pos - 1;
                    closed_groups = stored;
                    store_pos = m->pos;
                }
                mok_bulk_store(ncclGetLsaPointer((ncclWindow_t)a.window,
                                                 a.off_comb + ((size_t)m->t * a.nranks + a.rank) * row_bytes, m->p),
                               row, row_bytes);
            } else {
                for (unsigned q = m->mask; q; q &= q - 1)
                    mok_bulk_store(ncclGetLsaPointer((ncclWindow_t)a.window,
                                                     a.off_land + ((size_t)a.rank * a.t_max + m->t) * row_bytes,
                                                     __ffs(q) - 1),
                                   row, row_bytes);
            }
            mok_bulk_commit();
            stored++;
            /* the buffer of item k - 1 is reloaded next: its store (the group before this one) must have read it */
            asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
            if (kCombine && flags && closed_upto >= 0 && stored - closed_groups >= 2) {
                mok_bulk_wait(stored - closed_groups); /* the closed positions' writes are complete */
                ring_chunks_done(a, rs, warp, nwarps, closed_upto, cb, ncb, epoch);
                closed_upto = -1;
            }
        }
        __syncwarp();
        if (more && issue(loaded))
            loaded++;
        else
            more = false;
    }
    if (lane == 0) {
        mok_bulk_wait(0); /* every row's write complete */
        mok_fence_proxy_async_global();
        if (kCombine && flags)
            ring_chunks_done(a, rs, warp, nwarps, walk.npos - 1, cb, ncb, epoch);
    }
    __syncwarp();
}

/* Block-level setup of the ring state (every thread of the block calls it, before any ring warp starts). */
__device__ __forceinline__ void ring_init(ring_smem *rs)
{
    if (threadIdx.x < RING_MAX_WARPS)
        rs->done_upto[threadIdx.x] = -1;
    if (threadIdx.x == 0)
        rs->flagged_upto = -1;
    __syncthreads();
}

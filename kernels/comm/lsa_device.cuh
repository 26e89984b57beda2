/* lsa_device: the device-side pieces of the LSA transfers that more than one kernel file uses: row and item
 * lookups, the per-rank combine, the done signal and its wait, the owner's stores of y (kernels/comm/lsa_transfer.cu,
 * lsa_route_sum.cu, kernels/megakernel/forward.cu).
 * Everything is inline device code: no printf and no calls, so a kernel that also issues wgmma can include it
 * without ptxas serializing its wgmmas. */
#pragma once
#include <nccl.h>
#include <nccl_device.h>

#include "common/common.cuh"
#include "common/lsa_sync.cuh"

#define WARP_COPY_THREADS 1024
#define COMBINE_THREADS 512 /* per-route warp combine; the per-rank kernels: RANK_COMBINE_THREADS */
#define UNROLL 4

union vec8 {
    uint4 v;
    uint16_t h[8];
};

/* route_slot of token (p, t) for each k, gathered into a lane mask; slots of lane j in `slot` (lane < k). */
__device__ __forceinline__ unsigned token_slots(const mok_lsa_args &a, int p, int t, int lane, int *slot)
{
    int s = lane < a.topk ? a.route_slot[((size_t)p * a.t_max + t) * a.topk + lane] : -1;
    *slot = s;
    return __ballot_sync(0xffffffffu, s >= 0);
}

/* Work item g -> (source rank p, token t), with the ranks interleaved and rotated by this rank: if every rank
 * walked p = 0, 1, ... in step, all of them would read from (dispatch) or write to (combine) the same rank at the
 * same time, and each NVLink would carry traffic in one direction at a time. Interleaved, every link is busy both
 * ways for the whole kernel. Every g in [0, nranks * t_max) maps to a distinct (p, t < t_max). */
__device__ __forceinline__ void rank_token_item(const mok_lsa_args &a, int g, int *p, int *t)
{
    *t = g / a.nranks;
    *p = (a.rank + 1 + g % a.nranks) % a.nranks;
}

/* Landing layout: where the row of token t of rank p lives on this rank. */
__device__ __forceinline__ const uint4 *landed_row(const mok_lsa_args &a, int p, int t)
{
    if (p == a.rank)
        return (const uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window,
                                                a.off_x + (size_t)a.set * a.x_set_bytes + (size_t)t * a.hidden * 2,
                                                a.rank);
    return (const uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window,
                                            a.off_land + ((size_t)p * a.t_max + t) * a.hidden * 2, a.rank);
}

/* Per rank: one warp per (source rank, token) with routes into this rank: sum_j w_j * out[slot_j] in fp32
 * (ascending j), one bf16 row to the owner's comb[t][my rank]. It streams like lsa_push_kernel (which runs near the
 * link rate) only if the sum costs few instructions per vector and loads stay in flight: the landing path gathers
 * the token's weights into registers once (no shuffle per vector and route), converts each vector once, and streams
 * the row in batches (stream_landed); the next item's metadata loads while this one streams. 512 threads: at 1024
 * (64 registers) sm_100 spills the landing loop. */
#define RANK_COMBINE_THREADS 512
#define RANK_UNROLL 4   /* slots: the accumulators of this many vectors per lane live across the routes */
#define REG_ROUTES 8    /* routes whose weight sits in a register; more (topk > 8) are read from memory */

/* Remote item g -> (source rank p != my rank, token t): rank_token_item's interleaved, rotated order without my
 * own rank (own_partial forms those partials), so no warp visits an item only to skip it. A bijection from
 * [0, (nranks - 1) * t_max) onto {p != rank} x [0, t_max). */
__device__ __forceinline__ void remote_token_item(const mok_lsa_args &a, int g, int *p, int *t)
{
    *t = g / (a.nranks - 1);
    *p = (a.rank + 1 + g % (a.nranks - 1)) % a.nranks;
}

/* What a warp needs of an item before streaming it: this lane's route j = lane (slot, -1 if none, and weight). */
struct rank_item {
    int slot;
    float w;
};

/* Loads are issued here and consumed one item later, so their latency hides behind the previous item's stream. */
__device__ __forceinline__ rank_item load_rank_item(const mok_lsa_args &a, int g, int items, int lane)
{
    rank_item it = {-1, 0.0f};
    if (g < items) { /* warp-uniform */
        int p, t;
        remote_token_item(a, g, &p, &t);
        if (t < a.all_tokens[p] && lane < a.topk) {
            size_t e = ((size_t)p * a.t_max + t) * a.topk + lane;
            it.slot = a.route_slot[e];
            it.w = a.all_w[e];
        }
    }
    return it;
}

/* One landed vector times the token's nw weights: converted once, acc += w_j * x in ascending j from 0.0f (fma, as
 * the reference and own_partial), rounded to bf16. nw is warp-uniform: the guards are uniform branches. Routes
 * past REG_ROUTES (topk > 8 only) are read from memory, not shuffled: lanes may have left at a ragged row end. */
__device__ __forceinline__ uint4 weigh_landed(uint4 raw, const float (&w)[REG_ROUTES], int nw, unsigned rest,
                                              const float *wrow)
{
    vec8 in, out;
    in.v = raw;
    float x[8], acc[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        x[i] = mok_bf16_to_f32(in.h[i]);
        acc[i] = 0.0f;
    }
#pragma unroll
    for (int r = 0; r < REG_ROUTES; r++)
        if (r < nw)
#pragma unroll
            for (int i = 0; i < 8; i++)
                acc[i] += w[r] * x[i];
    for (unsigned m = rest; m; m &= m - 1) {
        float wj = wrow[__ffs(m) - 1];
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[i] += wj * x[i];
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
        out.h[i] = mok_f32_to_bf16(acc[i]);
    return out.v;
}

/* Landing: all slots of the token are the same landed row: stream it once, in batches of LANDED_BATCH vectors per
 * lane: the next batch's loads go out, this batch is weighed, then its stores go out back to back. Measured at 8192
 * DeepSeek-V3 tokens, 16 SMs (combine phase with the owner's sum after it): 542 us when each vector was stored as
 * soon as it was weighed (7 loads in flight, refilled one by one), 520 / 514 us batched by 4 / 2, 481 us for a plain
 * copy of the same rows. Batches of 2 hold 4 vectors per lane, so the 512-thread kernels keep their registers. */
#define LANDED_BATCH 2
__device__ __forceinline__ void stream_landed(const uint4 *src, uint4 *dst, int vecs, int lane,
                                              const float (&w)[REG_ROUTES], int nw, unsigned rest, const float *wrow)
{
    uint4 cur[LANDED_BATCH], nxt[LANDED_BATCH];
#pragma unroll
    for (int u = 0; u < LANDED_BATCH; u++)
        if (lane + u * 32 < vecs)
            cur[u] = src[lane + u * 32];
    for (int v0 = lane; v0 < vecs; v0 += 32 * LANDED_BATCH) {
        int n0 = v0 + 32 * LANDED_BATCH;
#pragma unroll
        for (int u = 0; u < LANDED_BATCH; u++)
            if (n0 + u * 32 < vecs)
                nxt[u] = src[n0 + u * 32];
#pragma unroll
        for (int u = 0; u < LANDED_BATCH; u++)
            cur[u] = weigh_landed(cur[u], w, nw, rest, wrow);
#pragma unroll
        for (int u = 0; u < LANDED_BATCH; u++)
            if (v0 + u * 32 < vecs)
                dst[v0 + u * 32] = cur[u];
#pragma unroll
        for (int u = 0; u < LANDED_BATCH; u++)
            cur[u] = nxt[u];
    }
}

/* acc[u] += w * in[u] (fma; the caller walks the routes in ascending j). */
__device__ __forceinline__ void add_route(float (&acc)[RANK_UNROLL][8], const vec8 (&in)[RANK_UNROLL], float w)
{
#pragma unroll
    for (int u = 0; u < RANK_UNROLL; u++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[u][i] += w * mok_bf16_to_f32(in[u].h[i]);
}

__device__ __forceinline__ void load_route(vec8 (&in)[RANK_UNROLL], const uint4 *src, int v0, int vecs)
{
#pragma unroll
    for (int u = 0; u < RANK_UNROLL; u++)
        in[u].v = v0 + u * 32 < vecs ? src[v0 + u * 32] : make_uint4(0, 0, 0, 0);
}

/* Slots: a different expert_out row per route, each vector converted once as it is used. Weight and slot come by
 * shuffle once per route and RANK_UNROLL vectors (registers indexed by a runtime route count would be local
 * memory; unrolled over the count, the compiler hoists every route's loads and spills). The trip count is
 * warp-uniform, so all lanes are there for the shuffles even when vecs is not a multiple of 32. */
__device__ __forceinline__ void stream_slots(const mok_lsa_args &a, uint4 *dst, int lane, unsigned mask,
                                             int my_slot, float my_w)
{
    int vecs = a.hidden / 8;
    const uint4 *out = (const uint4 *)a.expert_out;
    for (int base = 0; base < vecs; base += 32 * RANK_UNROLL) {
        int v0 = base + lane;
        float acc[RANK_UNROLL][8];
#pragma unroll
        for (int u = 0; u < RANK_UNROLL; u++)
#pragma unroll
            for (int i = 0; i < 8; i++)
                acc[u][i] = 0.0f;
        for (unsigned m = mask; m; m &= m - 1) { /* ascending j */
            int j = __ffs(m) - 1;
            float w = __shfl_sync(0xffffffffu, my_w, j);
            vec8 in[RANK_UNROLL];
            load_route(in, out + (size_t)__shfl_sync(0xffffffffu, my_slot, j) * vecs, v0, vecs);
            add_route(acc, in, w);
        }
#pragma unroll
        for (int u = 0; u < RANK_UNROLL; u++)
            if (v0 + u * 32 < vecs) {
                vec8 o;
#pragma unroll
                for (int i = 0; i < 8; i++)
                    o.h[i] = mok_f32_to_bf16(acc[u][i]);
                dst[v0 + u * 32] = o.v;
            }
    }
}

/* One (source rank p, token t) item of the per-rank combine: the partial of its routes into this rank (mask: the
 * lanes j whose route is here, cur: this lane's slot and weight) to the owner's comb[t][my rank]. */
__device__ __forceinline__ void combine_rank_item(const mok_lsa_args &a, int p, int t, int lane, unsigned mask,
                                                  rank_item cur, bool rows_landed)
{
    uint4 *dst = (uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window,
                                            a.off_comb + ((size_t)t * a.nranks + a.rank) * a.hidden * 2, p);
    if (!rows_landed) {
        stream_slots(a, dst, lane, mask, cur.slot, cur.w);
        return;
    }
    /* the weights of the routes into this rank, ascending j: the r-th into a register */
    float w[REG_ROUTES];
    unsigned rest = mask;
#pragma unroll
    for (int r = 0; r < REG_ROUTES; r++) {
        w[r] = __shfl_sync(0xffffffffu, cur.w, (__ffs(rest) - 1) & 31); /* past the last: unused */
        rest &= rest - 1;
    }
    const float *wrow = a.all_w + ((size_t)p * a.t_max + t) * a.topk;
    stream_landed(landed_row(a, p, t), dst, a.hidden / 8, lane, w, min(__popc(mask), REG_ROUTES), rest, wrow);
}

/* rows_landed: comm mode with layout=landing, where every route of a token returns its landed input row; else
 * each route has its own expert output row (a.expert_out[slot]). */
__device__ __forceinline__ void combine_per_rank(const mok_lsa_args &a, int warp, int nwarps, int lane,
                                                 bool rows_landed)
{
    int items = (a.nranks - 1) * a.t_max;
    rank_item cur = load_rank_item(a, warp, items, lane);
    for (int g = warp; g < items; g += nwarps) {
        rank_item next = load_rank_item(a, g + nwarps, items, lane);
        unsigned mask = __ballot_sync(0xffffffffu, cur.slot >= 0);
        if (mask) {
            int p, t;
            remote_token_item(a, g, &p, &t);
            combine_rank_item(a, p, t, lane, mask, cur, rows_landed);
        }
        cur = next;
    }
}

/* One contribution of `expected` to this forward's kind flag, by one thread whose (or whose group's) writes are
 * done: fenced at system scope, counted in epoch[kind]. True for the last contribution, which has reset the
 * counter and must then store the epoch into every rank's flag (store_kind_flag). */
__device__ __forceinline__ bool count_contribution(const mok_lsa_args &a, int kind, int expected)
{
    __threadfence_system();
    unsigned long long prev = atomicAdd((unsigned long long *)&a.epoch[kind], 1ull);
    if (prev != (unsigned long long)expected - 1)
        return false;
    a.epoch[kind] = 0;
    __threadfence_system();
    return true;
}

/* This rank's kind flag in every rank's window := epoch (release, system scope). */
__device__ __forceinline__ void store_kind_flag(const mok_lsa_args &a, int kind, uint64_t epoch)
{
    for (int q = 0; q < a.nranks; q++) {
        uint64_t *flag = (uint64_t *)ncclGetLsaPointer(
            (ncclWindow_t)a.window, a.off_flags + ((size_t)kind * MOK_LSA_MAX_RANKS + a.rank) * sizeof(uint64_t), q);
        mok_st_release_sys(flag, epoch);
    }
}

/* count_contribution, and the flag with this forward's epoch (epoch[0]) from the last one. */
__device__ __forceinline__ void count_and_signal(const mok_lsa_args &a, int kind, int expected)
{
    if (count_contribution(a, kind, expected))
        store_kind_flag(a, kind, a.epoch[0]);
}

/* The last block of a combine kernel to finish tells every owner that this rank's rows of this epoch are in
 * place: each block's writes are fenced at system scope before it counts itself. blocks: how many blocks of the
 * launch combine (all of them unless given: the megakernel's comm blocks are a prefix of its grid). */
__device__ __forceinline__ void signal_done(const mok_lsa_args &a, int kind = 1, int blocks = -1)
{
    __syncthreads();
    if (threadIdx.x == 0)
        count_and_signal(a, kind, blocks < 0 ? (int)gridDim.x : blocks);
}

/* Vectors [v_begin, v_end) of a row by one warp, U 16-byte vectors per lane in flight: each group is loaded from
 * src once and stored to every destination row for_each_dst hands to its callback (src or a destination may be
 * a peer's). The dispatch's fan-out (one load, a store per rank or slot) and copy_row are this loop.
 * kWarpUniform: every lane makes the same number of passes (a callback that shuffles needs the whole warp); without
 * it a lane stops after its last vector, so lanes differ when the last pass holds 1-31 vectors ((v_end - v_begin)
 * mod 32 U): FP8 wire rows (hidden 256: 17 vectors) deadlocked the pull dispatch's slot shuffles that way. The two loops are written out
 * apart: one loop for both (a lambda per pass, or a uniform trip count) changed the other kernels' machine code. */
template <int U, bool kWarpUniform = false, typename ForEachDst>
__device__ __forceinline__ void fan_out_row(const uint4 *src, int v_begin, int v_end, int lane, ForEachDst for_each_dst)
{
    if constexpr (kWarpUniform) {
        for (int base = v_begin; base < v_end; base += 32 * U) {
            const int v0 = base + lane;
            uint4 val[U];
#pragma unroll
            for (int u = 0; u < U; u++)
                if (v0 + u * 32 < v_end)
                    val[u] = src[v0 + u * 32];
            for_each_dst([&](uint4 *dst) {
#pragma unroll
                for (int u = 0; u < U; u++)
                    if (v0 + u * 32 < v_end)
                        dst[v0 + u * 32] = val[u];
            });
        }
        return;
    }
    for (int v0 = v_begin + lane; v0 < v_end; v0 += 32 * U) {
        uint4 val[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (v0 + u * 32 < v_end)
                val[u] = src[v0 + u * 32];
        for_each_dst([&](uint4 *dst) {
#pragma unroll
            for (int u = 0; u < U; u++)
                if (v0 + u * 32 < v_end)
                    dst[v0 + u * 32] = val[u];
        });
    }
}

/* One row by one warp, U 16-byte vectors per lane in flight (src or dst may be a peer's). */
template <int U> __device__ __forceinline__ void copy_row(const uint4 *src, uint4 *dst, int vecs, int lane)
{
    fan_out_row<U>(src, 0, vecs, lane, [&](auto store) { store(dst); });
}

/* Pull dispatch, one warp per (source rank, token) with routes here: the row is loaded from the owner's window
 * once and stored into every local slot of the token (layout=slots) or its landing row, U vectors per lane in
 * flight; then each slot's chunk counter is released. warp / nwarps: this warp among the launch's copy warps. */
template <int U>
__device__ __forceinline__ void dispatch_pull_rows(const mok_lsa_args &a, int warp, int nwarps, int lane)
{
    int vecs = a.hidden / 8;
    for (int g = warp; g < a.nranks * a.t_max; g += nwarps) {
        int p, t;
        rank_token_item(a, g, &p, &t);
        if (t >= a.all_tokens[p])
            continue;
        int my_slot;
        unsigned mask = token_slots(a, p, t, lane, &my_slot);
        if (!mask)
            continue;
        const uint4 *src = (const uint4 *)ncclGetLsaPointer(
            (ncclWindow_t)a.window, a.off_x + (size_t)a.set * a.x_set_bytes + (size_t)t * a.hidden * 2, p);
        bool stays = a.landing && p == a.rank; /* landing: own tokens are read where they are */
        if (!stays)
            fan_out_row<U, true>(src, 0, vecs, lane, [&](auto store) { /* shuffles: every lane there */
                if (a.landing) { /* one landing row for all of this token's slots */
                    store((uint4 *)landed_row(a, p, t));
                    return;
                }
                for (unsigned m = mask; m; m &= m - 1)
                    store((uint4 *)a.xin + (size_t)__shfl_sync(0xffffffffu, my_slot, __ffs(m) - 1) * vecs);
            });
        /* every lane's stores of this row (warp barrier), then per slot a fence and the count: the fence comes
         * after the barrier so it orders the other lanes' stores too, and a consumer that sees the count sees the
         * whole row */
        __syncwarp();
        if (lane < a.topk && my_slot >= 0) {
            __threadfence();
            atomicAdd(&a.ready[my_slot / a.chunk_rows], 1);
        }
    }
}

/* Push dispatch, one warp per own token: the row goes by NVLink stores into the landing row [my rank][t] of every
 * other rank one of its experts lives on, U vectors per lane in flight. The caller then flags "landed". */
template <int U> __device__ __forceinline__ void push_rows(const mok_lsa_args &a, int warp, int nwarps, int lane)
{
    int vecs = a.hidden / 8;
    for (int t = warp; t < a.my_tokens; t += nwarps) {
        unsigned bit = lane < a.topk ? 1u << (a.my_ids[t * a.topk + lane] / a.local_experts) : 0u;
        unsigned ranks = __reduce_or_sync(0xffffffffu, bit) & ~(1u << a.rank);
        if (!ranks)
            continue;
        const uint4 *src = landed_row(a, a.rank, t); /* my own row, in my window */
        fan_out_row<U>(src, 0, vecs, lane, [&](auto store) {
            for (unsigned m = ranks; m; m &= m - 1)
                store((uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window,
                                                 a.off_land + ((size_t)a.rank * a.t_max + t) * a.hidden * 2,
                                                 __ffs(m) - 1));
        });
    }
}

/* ---- the owner's sums (kernels/comm/lsa_transfer.cu per rank, kernels/comm/lsa_route_sum.cu per route) ---- */

/* Every rank's rows of this epoch are in my window (their done flags). */
__device__ __forceinline__ void wait_all_done(const mok_lsa_args &a)
{
    if (threadIdx.x < a.nranks) {
        const uint64_t *flag = (const uint64_t *)ncclGetLsaPointer(
            (ncclWindow_t)a.window, a.off_flags + ((size_t)MOK_LSA_MAX_RANKS + threadIdx.x) * sizeof(uint64_t),
            a.rank);
        mok_wait_geq_sys(flag, a.epoch[0], a.rank, "combine", "done", threadIdx.x, a.timeout_cycles);
    }
    __syncthreads();
}

__device__ __forceinline__ void store_y(const mok_lsa_args &a, int t, int v, int vecs, const float (&acc)[8])
{
    vec8 out;
#pragma unroll
    for (int i = 0; i < 8; i++)
        out.h[i] = mok_f32_to_bf16(acc[i]);
    ((uint4 *)a.y)[(size_t)t * vecs + v] = out.v;
}

/* y[t], vector v, of the owner's sum in acc plus the shared experts' output, added last as the reference adds it. */
__device__ __forceinline__ void store_y_with_shared(const mok_lsa_args &a, int t, int v, int vecs, float (&acc)[8])
{
    if (a.shared_y) {
        vec8 sh;
        sh.v = ((const uint4 *)a.shared_y)[(size_t)t * vecs + v];
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[i] += mok_bf16_to_f32(sh.h[i]);
    }
    store_y(a, t, v, vecs, acc);
}

/* lsa_transfer: the data movement of the LSA path. Dispatch pulls each (source rank, token) row once through an
 * LSA pointer (NVLink load) and stores it into every local expert slot that token routes to, then releases the
 * chunk counters of those slots. Combine pushes rows (or fp32-summed per-rank partials) into the token owner's
 * window, signals completion with an epoch flag, and the owner sums in a fixed order. Warps move rows with
 * 16-byte vectors, several loads in flight per lane, so a handful of SMs keeps NVLink busy. */
#include <nccl.h>
#include <nccl_device.h>

#include "common.cuh"
#include "lsa_sync.cuh"

#define XFER_THREADS 1024
#define COMBINE_THREADS 512 /* the fp32 partial sums need more registers than 1024 threads leave */
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

/* One warp per (source rank, token): one NVLink read of the row, one local write per expert slot. */
__global__ void __launch_bounds__(XFER_THREADS) lsa_dispatch_kernel(mok_lsa_args a)
{
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = (gridDim.x * blockDim.x) >> 5;
    int vecs = a.hidden / 8;
    for (int g = warp; g < a.nranks * a.t_max; g += nwarps) {
        int p = g / a.t_max, t = g % a.t_max;
        if (t >= a.all_tokens[p])
            continue;
        int my_slot;
        unsigned mask = token_slots(a, p, t, lane, &my_slot);
        if (!mask)
            continue;
        const uint4 *src = (const uint4 *)ncclGetLsaPointer(
            (ncclWindow_t)a.window, a.off_x + (size_t)a.set * a.x_set_bytes + (size_t)t * a.hidden * 2, p);
        for (int v0 = lane; v0 < vecs; v0 += 32 * UNROLL) {
            uint4 val[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                if (v0 + u * 32 < vecs)
                    val[u] = src[v0 + u * 32];
            for (unsigned m = mask; m; m &= m - 1) {
                int slot = __shfl_sync(0xffffffffu, my_slot, __ffs(m) - 1);
                uint4 *dst = (uint4 *)a.xin + (size_t)slot * vecs;
#pragma unroll
                for (int u = 0; u < UNROLL; u++)
                    if (v0 + u * 32 < vecs)
                        dst[v0 + u * 32] = val[u];
            }
        }
        /* every lane's stores of this row, then one release per slot: a consumer that sees the count sees the row */
        __threadfence();
        __syncwarp();
        if (lane < a.topk && my_slot >= 0)
            atomicAdd(&a.ready[my_slot / a.chunk_rows], 1);
    }
}

/* Per route: one warp per slot, expert_out row -> owner's comb[t*k + j]. */
__device__ __forceinline__ void combine_per_route(const mok_lsa_args &a, int warp, int nwarps, int lane)
{
    int vecs = a.hidden / 8, used = a.offset[a.local_experts];
    if (used > a.capacity)
        used = a.capacity;
    for (int s = warp; s < used; s += nwarps) {
        int32_t e = a.entry[s];
        if (e < 0)
            continue;
        int p = (int)((uint32_t)e >> 25), t = (e >> 5) & 0xFFFFF, j = e & 31;
        uint4 *dst = (uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window,
                                                a.off_comb + ((size_t)t * a.topk + j) * a.hidden * 2, p);
        const uint4 *src = (const uint4 *)a.expert_out + (size_t)s * vecs;
        for (int v0 = lane; v0 < vecs; v0 += 32 * UNROLL) {
            uint4 val[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                if (v0 + u * 32 < vecs)
                    val[u] = src[v0 + u * 32];
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                if (v0 + u * 32 < vecs)
                    dst[v0 + u * 32] = val[u];
        }
    }
}

/* Per rank: one warp per (source rank, token): sum_j w_j * out[slot_j] in fp32 (ascending j), one bf16 row to the
 * owner's comb[t][my rank]. */
__device__ __forceinline__ void combine_per_rank(const mok_lsa_args &a, int warp, int nwarps, int lane)
{
    int vecs = a.hidden / 8;
    for (int g = warp; g < a.nranks * a.t_max; g += nwarps) {
        int p = g / a.t_max, t = g % a.t_max;
        if (t >= a.all_tokens[p])
            continue;
        int my_slot;
        unsigned mask = token_slots(a, p, t, lane, &my_slot);
        if (!mask)
            continue;
        float my_w = lane < a.topk ? a.all_w[((size_t)p * a.t_max + t) * a.topk + lane] : 0.0f;
        uint4 *dst = (uint4 *)ncclGetLsaPointer(
            (ncclWindow_t)a.window, a.off_comb + ((size_t)t * a.nranks + a.rank) * a.hidden * 2, p);
        for (int v = lane; v < vecs; v += 32) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (unsigned m = mask; m; m &= m - 1) {
                int j = __ffs(m) - 1;
                int slot = __shfl_sync(0xffffffffu, my_slot, j);
                float w = __shfl_sync(0xffffffffu, my_w, j);
                vec8 in;
                in.v = ((const uint4 *)a.expert_out)[(size_t)slot * vecs + v];
#pragma unroll
                for (int i = 0; i < 8; i++)
                    acc[i] += w * mok_bf16_to_f32(in.h[i]);
            }
            vec8 out;
#pragma unroll
            for (int i = 0; i < 8; i++)
                out.h[i] = mok_f32_to_bf16(acc[i]);
            dst[v] = out.v;
        }
    }
}

__global__ void __launch_bounds__(COMBINE_THREADS) lsa_combine_kernel(mok_lsa_args a)
{
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = (gridDim.x * blockDim.x) >> 5;
    if (a.combine_per_rank)
        combine_per_rank(a, warp, nwarps, lane);
    else
        combine_per_route(a, warp, nwarps, lane);
    /* the last block to finish tells every owner that this rank's rows of this epoch are all in place */
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        unsigned long long prev = atomicAdd((unsigned long long *)&a.epoch[1], 1ull);
        if (prev == gridDim.x - 1) {
            a.epoch[1] = 0;
            __threadfence_system();
            uint64_t epoch = a.epoch[0];
            for (int q = 0; q < a.nranks; q++) {
                uint64_t *flag = (uint64_t *)ncclGetLsaPointer(
                    (ncclWindow_t)a.window, a.off_flags + ((size_t)MOK_LSA_MAX_RANKS + a.rank) * sizeof(uint64_t), q);
                mok_st_release_sys(flag, epoch);
            }
        }
    }
}

/* The owner's fixed-order sum: one block per token (grid-stride), after every rank's done flag. */
__global__ void __launch_bounds__(256) lsa_reduce_kernel(mok_lsa_args a)
{
    if (threadIdx.x < a.nranks) {
        const uint64_t *flag = (const uint64_t *)ncclGetLsaPointer(
            (ncclWindow_t)a.window, a.off_flags + ((size_t)MOK_LSA_MAX_RANKS + threadIdx.x) * sizeof(uint64_t),
            a.rank);
        mok_wait_geq_sys(flag, a.epoch[0], a.rank, "combine", "done", threadIdx.x);
    }
    __syncthreads();
    int vecs = a.hidden / 8;
    const uint4 *comb = (const uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_comb, a.rank);
    for (int t = blockIdx.x; t < a.my_tokens; t += gridDim.x) {
        unsigned touched = 0;
        for (int j = 0; j < a.topk; j++)
            touched |= 1u << (a.my_ids[t * a.topk + j] / a.local_experts);
        for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            if (a.combine_per_rank) {
                for (int q = 0; q < a.nranks; q++) /* ascending rank: fixed order */
                    if (touched & (1u << q)) {
                        vec8 in;
                        in.v = comb[((size_t)t * a.nranks + q) * vecs + v];
#pragma unroll
                        for (int i = 0; i < 8; i++)
                            acc[i] += mok_bf16_to_f32(in.h[i]);
                    }
            } else {
                for (int j = 0; j < a.topk; j++) {
                    float w = a.my_w[t * a.topk + j];
                    vec8 in;
                    in.v = comb[((size_t)t * a.topk + j) * vecs + v];
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        acc[i] += w * mok_bf16_to_f32(in.h[i]);
                }
            }
            vec8 out;
#pragma unroll
            for (int i = 0; i < 8; i++)
                out.h[i] = mok_f32_to_bf16(acc[i]);
            ((uint4 *)a.y)[(size_t)t * vecs + v] = out.v;
        }
    }
}

/* Reference for the comm benchmark: the same sums, on this rank's own x, without any communication. */
__global__ void lsa_reference_kernel(const uint4 *x, const int32_t *ids, const float *w, int tokens, int topk,
                                     int vecs, int local_experts, int nranks, int per_rank, uint4 *y)
{
    for (int t = blockIdx.x; t < tokens; t += gridDim.x)
        for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
            vec8 in;
            in.v = x[(size_t)t * vecs + v];
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            if (per_rank) {
                for (int q = 0; q < nranks; q++) {
                    float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                    bool any = false;
                    for (int j = 0; j < topk; j++)
                        if (ids[t * topk + j] / local_experts == q) {
                            any = true;
#pragma unroll
                            for (int i = 0; i < 8; i++)
                                part[i] += w[t * topk + j] * mok_bf16_to_f32(in.h[i]);
                        }
                    if (any)
#pragma unroll
                        for (int i = 0; i < 8; i++)
                            acc[i] += mok_bf16_to_f32(mok_f32_to_bf16(part[i]));
                }
            } else {
                for (int j = 0; j < topk; j++)
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        acc[i] += w[t * topk + j] * mok_bf16_to_f32(in.h[i]);
            }
            vec8 out;
#pragma unroll
            for (int i = 0; i < 8; i++)
                out.h[i] = mok_f32_to_bf16(acc[i]);
            y[(size_t)t * vecs + v] = out.v;
        }
}

extern "C" int mok_lsa_dispatch(const struct mok_lsa_args *a, int blocks, mok_stream_t stream)
{
    if (a->hidden % 8 || a->topk > 32)
        return (int)cudaErrorInvalidValue;
    lsa_dispatch_kernel<<<blocks, XFER_THREADS, 0, mok_cuda_stream(stream)>>>(*a);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_lsa_combine(const struct mok_lsa_args *a, int blocks, mok_stream_t stream)
{
    if (a->hidden % 8 || a->topk > 32 || a->nranks > 32)
        return (int)cudaErrorInvalidValue;
    cudaStream_t s = mok_cuda_stream(stream);
    lsa_combine_kernel<<<blocks, COMBINE_THREADS, 0, s>>>(*a);
    int err = MOK_LAUNCH_RESULT();
    if (err)
        return err;
    int grid = a->my_tokens < 1 ? 1 : a->my_tokens > 4096 ? 4096 : a->my_tokens;
    lsa_reduce_kernel<<<grid, 256, 0, s>>>(*a);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_lsa_reference(const uint16_t *x, const int32_t *ids, const float *w, int tokens, int topk,
                                 int hidden, int local_experts, int nranks, int per_rank, uint16_t *y,
                                 mok_stream_t stream)
{
    if (tokens <= 0)
        return 0;
    lsa_reference_kernel<<<tokens < 4096 ? tokens : 4096, 256, 0, mok_cuda_stream(stream)>>>(
        (const uint4 *)x, ids, w, tokens, topk, hidden / 8, local_experts, nranks, per_rank, (uint4 *)y);
    return MOK_LAUNCH_RESULT();
}

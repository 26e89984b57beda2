/* lsa_route_sum: the owner's fixed-order per-route sums, once every rank's done flag is up: the forward's weighted
 * sum over k (the megakernel's and the per-route combine's; mok_lsa_reduce), and the fused backward's unweighted dx
 * with each route's d_router (mok_lsa_grad_sum). The per-rank sums' pieces: comm/lsa_rank_sum.cuh. */
#include <nccl.h>
#include <nccl_device.h>

#include "common/common.cuh"
#include "comm/lsa_device.cuh"
#include "comm/lsa_route_sum.cuh"
#include "common/lsa_sync.cuh"

/* The per-route owner's sum (the megakernel's), one thread per (token, 16-byte vector), grid-stride. Every route's
 * row vector (up to ROUTE_BATCH of them) is loaded before the first is added, so a thread has 8 loads in flight
 * instead of one: the loop it replaced loaded, waited and added route by route, with a block of 256 threads per
 * token (DeepSeek-V3: 896 vectors, 3.5 per thread); 0.4-0.6% of the layer at 8192 tokens
 * (results/h200x2/2026-11-30-megakernel-v5). The adds go in the fixed order j = 0..topk-1, then the shared
 * experts' (as the reference), so y is bitwise the same from run to run. A warp's 32 vectors belong to one token
 * when hidden / 8 is a multiple of 32 (every supported model), so its weight loads are one broadcast each. */
#define ROUTE_BATCH 8
/* kWeighted: the forward's sum, y = sum_j w_j row_j; without, the backward's dx = sum_j row_j (its rows already
 * carry the router weight). */
template <bool kWeighted> __device__ __forceinline__ void reduce_routes(const mok_lsa_args &a)
{
    int vecs = a.hidden / 8, topk = a.topk;
    const uint4 *comb = (const uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_comb, a.rank);
    size_t total = (size_t)a.my_tokens * vecs, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        int t = (int)(i / vecs), v = (int)(i % vecs);
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int j0 = 0; j0 < topk; j0 += ROUTE_BATCH) {
            vec8 in[ROUTE_BATCH];
            float w[ROUTE_BATCH];
#pragma unroll
            for (int j = 0; j < ROUTE_BATCH; j++)
                if (j0 + j < topk) {
                    in[j].v = comb[((size_t)t * topk + j0 + j) * vecs + v];
                    w[j] = kWeighted ? a.my_w[(size_t)t * topk + j0 + j] : 1.0f;
                }
#pragma unroll
            for (int j = 0; j < ROUTE_BATCH; j++)
                if (j0 + j < topk)
#pragma unroll
                    for (int e = 0; e < 8; e++)
                        acc[e] += kWeighted ? w[j] * mok_bf16_to_f32(in[j].h[e]) : mok_bf16_to_f32(in[j].h[e]);
        }
        store_y_with_shared(a, t, v, vecs, acc);
    }
}

__global__ void __launch_bounds__(256) lsa_reduce_routes_kernel(mok_lsa_args a)
{
    wait_all_done(a);
    reduce_routes<true>(a);
}

/* The fused backward's owner sum: dx over k, and each route's d_router from the window (mok_lsa_grad_sum). */
__global__ void __launch_bounds__(256) lsa_grad_sum_kernel(mok_lsa_args a)
{
    wait_all_done(a);
    const float *dr = (const float *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_dr, a.rank);
    const size_t routes = (size_t)a.my_tokens * a.topk, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < routes; i += stride)
        a.d_router[i] = dr[i];
    reduce_routes<false>(a);
}

/* One thread per (token, vector), at most 8 blocks of 256 per SM (grid-stride beyond). */
int mok_lsa_route_sum(const struct mok_lsa_args *a, bool grad, mok_stream_t stream)
{
    int sms = mok_sm_count();
    unsigned grid = mok_blocks_for((size_t)a->my_tokens * (size_t)(a->hidden / 8), 256, 8u * (sms > 0 ? sms : 132));
    if (grad)
        lsa_grad_sum_kernel<<<grid, 256, 0, mok_cuda_stream(stream)>>>(*a);
    else
        lsa_reduce_routes_kernel<<<grid, 256, 0, mok_cuda_stream(stream)>>>(*a);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_lsa_grad_sum(const struct mok_lsa_args *a, mok_stream_t stream)
{
    if (a->combine_per_rank || !a->d_router)
        return (int)cudaErrorInvalidValue; /* per route only, with somewhere to put d_router */
    return mok_lsa_route_sum(a, true, stream);
}

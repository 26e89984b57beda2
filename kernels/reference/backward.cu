/* backward: the independent fp32 reference of the MoE layer's backward (issue 21), per expert, from the forward's
 * saved inputs: SIMT tiled GEMMs whose operands are read through small accessors (gathered token rows, bf16 or fp32,
 * row-major or transposed: reference/ref_gemm.cuh), no tensor cores, no cuBLAS, none of the implementations' code. The math is
 * src/ref_moe.h's (the host's double-precision version, against which tests/test_gpu_ref_bwd.c checks this one). */
#include "common/common.cuh"
#include "reference/ref_gemm.cuh"

namespace {

using namespace mok_ref;

__device__ __forceinline__ float round_bf16(float v, int r) { return r ? mok_bf16_to_f32(mok_f32_to_bf16(v)) : v; }

/* One block per route row: from GEMM1's fp32 gate and up (gu [n][2I]) and dh' [n][I], the route's d_router
 * <dh', h> (into d_router[route[r]]) and dgu [n][2I] = w [dh' u silu'(g), dh' silu(g)]. With round, g, u and h take
 * the forward's bf16 roundings first (the reference's forward rounds them: ref_swiglu_kernel). */
__global__ void __launch_bounds__(256) ref_swiglu_bwd_kernel(const float *gu, const float *dhp, const float *w,
                                                             const int32_t *route, int n, int inter, int round,
                                                             float *dgu, float *d_router)
{
    __shared__ float part[256];
    for (int r = blockIdx.x; r < n; r += gridDim.x) {
        const float wr = w[route[r]];
        float dot = 0.0f;
        for (int i = threadIdx.x; i < inter; i += blockDim.x) {
            float g = round_bf16(gu[(size_t)r * 2 * inter + i], round);
            float u = round_bf16(gu[(size_t)r * 2 * inter + inter + i], round);
            float s = 1.0f / (1.0f + expf(-g)), silu = g * s;
            float h = round_bf16(silu * u, round), d = dhp[(size_t)r * inter + i];
            dot += d * h;
            dgu[(size_t)r * 2 * inter + i] = wr * d * u * s * (1.0f + g * (1.0f - s));
            dgu[(size_t)r * 2 * inter + inter + i] = wr * d * silu;
        }
        part[threadIdx.x] = dot;
        __syncthreads();
        for (int step = blockDim.x / 2; step > 0; step /= 2) { /* a fixed tree: the same sum every run */
            if ((int)threadIdx.x < step)
                part[threadIdx.x] += part[threadIdx.x + step];
            __syncthreads();
        }
        if (threadIdx.x == 0)
            d_router[route[r]] = part[0];
        __syncthreads();
    }
}

/* h [n][I] fp32 from gu, with the forward's roundings when asked (dW2's right operand). */
__global__ void ref_h_kernel(const float *gu, int n, int inter, int round, float *h)
{
    size_t total = (size_t)n * inter;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / inter, c = i % inter;
        float g = round_bf16(gu[r * 2 * inter + c], round), u = round_bf16(gu[r * 2 * inter + inter + c], round);
        h[i] = round_bf16(g / (1.0f + expf(-g)) * u, round);
    }
}

__global__ void ref_sum_dx_kernel(const float *dx_route, int tokens, int topk, int hidden, const float *shared,
                                  float *dx)
{
    size_t total = (size_t)tokens * hidden;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / hidden, col = i % hidden;
        float acc = 0.0f;
        for (int j = 0; j < topk; j++) /* slots in order: a fixed-order sum */
            acc += dx_route[(t * topk + j) * hidden + col];
        dx[i] = acc + (shared ? shared[i] : 0.0f);
    }
}

} // namespace

extern "C" int mok_ref_bwd_expert_f32(const uint16_t *x, const uint16_t *dy, const float *route_w, const int32_t *tok,
                                      const int32_t *route, int n, int hidden, int inter, const uint16_t *w13,
                                      const uint16_t *w2, int round, float *scratch, float *dx_route, float *dw13,
                                      float *dw2, float *d_router, mok_stream_t stream)
{
    if (n <= 0)
        return 0;
    cudaStream_t s = mok_cuda_stream(stream);
    const int H = hidden, I = inter;
    float *gu = scratch, *dhp = gu + (size_t)n * 2 * I, *dgu = dhp + (size_t)n * I, *h = dgu + (size_t)n * 2 * I;
    int rc;
    /* forward again: gu = x W13^T */
    if ((rc = launch_gemm(Bf16Rows{x, tok, H}, Bf16RowsT{w13, nullptr, H}, n, 2 * I, H, gu, nullptr, 0, s)))
        return rc;
    /* dh' = dy W2 (W2 [H][I]: element (c, i) is row c's column i) */
    if ((rc = launch_gemm(Bf16Rows{dy, tok, H}, Bf16Rows{w2, nullptr, I}, n, I, H, dhp, nullptr, 0, s)))
        return rc;
    ref_swiglu_bwd_kernel<<<n < 4096 ? n : 4096, 256, 0, s>>>(gu, dhp, route_w, route, n, I, round, dgu, d_router);
    if ((rc = MOK_LAUNCH_RESULT()))
        return rc;
    ref_h_kernel<<<mok_blocks_for((size_t)n * I, 256, 16384), 256, 0, s>>>(gu, n, I, round, h);
    if ((rc = MOK_LAUNCH_RESULT()))
        return rc;
    /* dx rows of the routes: [dg, du] W13 (W13 [2I][H]) */
    if (dx_route && (rc = launch_gemm(F32{dgu, 2 * I}, Bf16Rows{w13, nullptr, H}, n, H, 2 * I, dx_route, route, 0, s)))
        return rc;
    if (!dw13)
        return 0;
    /* dW2 += (w dy)^T h: [H][I], K = the routes */
    if ((rc = launch_gemm(ScaledBf16RowsT{dy, tok, route_w, route, H}, F32{h, I}, H, I, n, dw2, nullptr, 1, s)))
        return rc;
    /* dW13 += [dg, du]^T x: [2I][H], K = the routes */
    return launch_gemm(F32T{dgu, 2 * I}, Bf16Rows{x, tok, H}, 2 * I, H, n, dw13, nullptr, 1, s);
}

extern "C" int mok_ref_sum_dx(const float *dx_route, int tokens, int topk, int hidden, const float *shared, float *dx,
                              mok_stream_t stream)
{
    size_t total = (size_t)tokens * hidden;
    if (total == 0)
        return 0;
    ref_sum_dx_kernel<<<mok_blocks_for(total, 256, 16384), 256, 0, mok_cuda_stream(stream)>>>(dx_route, tokens, topk,
                                                                                              hidden, shared, dx);
    return MOK_LAUNCH_RESULT();
}

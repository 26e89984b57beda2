/* backward: the independent fp32 reference of the MoE layer's backward (issue 21), per expert, from the forward's
 * saved inputs: SIMT tiled GEMMs whose operands are read through small accessors (gathered token rows, bf16 or fp32,
 * row-major or transposed), no tensor cores, no cuBLAS, none of the implementations' code. The math is
 * src/ref_moe.h's (the host's double-precision version, against which tests/test_gpu_ref_bwd.c checks this one). */
#include "common/common.cuh"

namespace {

constexpr int kBM = 64, kBN = 64, kBK = 32;

/* C[m][n] (+)= sum_k A(m, k) B(k, n), 256 threads each a 4 x 4 patch of a 64 x 64 tile; A and B are accessors (any
 * layout, any element type, gathered rows), so the backward's four GEMM shapes are one kernel. Rows of C land at
 * c_row[m] when given. */
template <typename A, typename B>
__global__ void __launch_bounds__(256) ref_gemm_any(A a, B b, int m, int n, int k, float *c, const int32_t *c_row,
                                                    int accumulate)
{
    __shared__ float as[kBK][kBM + 4];
    __shared__ float bs[kBK][kBN + 4];
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < k; k0 += kBK) {
        for (int i = threadIdx.x; i < kBM * kBK; i += 256) {
            int row = i / kBK, kk = i % kBK, gk = k0 + kk;
            as[kk][row] = m0 + row < m && gk < k ? a(m0 + row, gk) : 0.0f;
            bs[kk][row] = n0 + row < n && gk < k ? b(gk, n0 + row) : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < kBK; kk++)
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fmaf(as[kk][ty * 4 + i], bs[kk][tx * 4 + j], acc[i][j]);
        __syncthreads();
    }
    for (int i = 0; i < 4; i++) {
        int gm = m0 + ty * 4 + i;
        if (gm >= m)
            continue;
        size_t dst = c_row ? (size_t)c_row[gm] : (size_t)gm;
        for (int j = 0; j < 4; j++) {
            int gn = n0 + tx * 4 + j;
            if (gn < n)
                c[dst * n + gn] = accumulate ? c[dst * n + gn] + acc[i][j] : acc[i][j];
        }
    }
}

/* Accessors: element (i, j) of a matrix. */
struct Bf16Rows { /* bf16 [*][ld], row i at rows[i] (or i) */
    const uint16_t *p;
    const int32_t *rows;
    int ld;
    __device__ float operator()(int i, int j) const { return mok_bf16_to_f32(p[(size_t)(rows ? rows[i] : i) * ld + j]); }
};
struct Bf16RowsT { /* (i, j) = bf16 row j's column i, rows gathered: a transposed view */
    const uint16_t *p;
    const int32_t *rows;
    int ld;
    __device__ float operator()(int i, int j) const { return mok_bf16_to_f32(p[(size_t)(rows ? rows[j] : j) * ld + i]); }
};
struct ScaledBf16RowsT { /* (i, j) = w[route[j]] x bf16 row rows[j]'s column i: (w dy)^T over the routes */
    const uint16_t *p;
    const int32_t *rows;
    const float *w;
    const int32_t *route;
    int ld;
    __device__ float operator()(int i, int j) const
    {
        return w[route[j]] * mok_bf16_to_f32(p[(size_t)rows[j] * ld + i]);
    }
};
struct F32 { /* fp32 [*][ld] */
    const float *p;
    int ld;
    __device__ float operator()(int i, int j) const { return p[(size_t)i * ld + j]; }
};
struct F32T { /* (i, j) = fp32 row j's column i */
    const float *p;
    int ld;
    __device__ float operator()(int i, int j) const { return p[(size_t)j * ld + i]; }
};

template <typename A, typename B>
int launch_gemm(A a, B b, int m, int n, int k, float *c, const int32_t *c_row, int accumulate, cudaStream_t s)
{
    if (m <= 0 || n <= 0)
        return 0;
    dim3 grid((unsigned)((n + kBN - 1) / kBN), (unsigned)((m + kBM - 1) / kBM));
    ref_gemm_any<<<grid, 256, 0, s>>>(a, b, m, n, k, c, c_row, accumulate);
    return MOK_LAUNCH_RESULT();
}

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
    if ((rc = launch_gemm(F32{dgu, 2 * I}, Bf16Rows{w13, nullptr, H}, n, H, 2 * I, dx_route, route, 0, s)))
        return rc;
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

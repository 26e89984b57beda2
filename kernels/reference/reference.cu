/* reference: the independent fp32 path every implementation is checked against. Plain tiled SIMT GEMMs over
 * gathered rows (no tensor cores, no cuBLAS, none of the implementations' permutations), the layer's bf16
 * roundings of its intermediates reproduced (GEMM1 output, SwiGLU output), and a fixed-order fp32 top-k sum. */
#include "common/common.cuh"

#define REF_BM 64
#define REF_BN 64
#define REF_BK 32

/* 256 threads, each a 4x4 patch of the 64x64 tile. Shared tiles are k-major so the inner loop reads
 * consecutive floats (no bank conflicts on the broadcast). */
__global__ void __launch_bounds__(256) ref_gemm_kernel(const uint16_t *a, const int32_t *a_row, int m, int k,
                                                       const uint16_t *b, int n, float *c, const int32_t *c_row)
{
    __shared__ float as[REF_BK][REF_BM + 4];
    __shared__ float bs[REF_BK][REF_BN + 4];
    int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    int m0 = blockIdx.y * REF_BM, n0 = blockIdx.x * REF_BN;
    float acc[4][4] = {};
    for (int k0 = 0; k0 < k; k0 += REF_BK) {
        for (int i = threadIdx.x; i < REF_BM * REF_BK; i += 256) {
            int row = i / REF_BK, kk = i % REF_BK;
            int gm = m0 + row;
            float av = 0.0f;
            if (gm < m) {
                size_t src = a_row ? (size_t)a_row[gm] : (size_t)gm;
                av = mok_bf16_to_f32(a[src * k + k0 + kk]);
            }
            as[kk][row] = av;
            int gn = n0 + row;
            bs[kk][row] = gn < n ? mok_bf16_to_f32(b[(size_t)gn * k + k0 + kk]) : 0.0f;
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < REF_BK; kk++) {
            float av[4], bv[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                av[i] = as[kk][ty * 4 + i];
                bv[i] = bs[kk][tx * 4 + i];
            }
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int gm = m0 + ty * 4 + i;
        if (gm >= m)
            continue;
        size_t dst = c_row ? (size_t)c_row[gm] : (size_t)gm;
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int gn = n0 + tx * 4 + j;
            if (gn < n)
                c[dst * n + gn] = acc[i][j];
        }
    }
}

__global__ void ref_swiglu_kernel(const float *g, int m, int inter, uint16_t *h)
{
    size_t total = (size_t)m * inter;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / inter, col = i % inter;
        float gate = mok_bf16_to_f32(mok_f32_to_bf16(g[r * 2 * inter + col]));
        float up = mok_bf16_to_f32(mok_f32_to_bf16(g[r * 2 * inter + inter + col]));
        /* expf, not __expf: the reference takes the accurate path */
        h[i] = mok_f32_to_bf16(gate / (1.0f + expf(-gate)) * up);
    }
}

__global__ void ref_sum_routes_kernel(const float *route_out, const float *w, int tokens, int topk, int hidden,
                                      const float *shared, float *y)
{
    size_t total = (size_t)tokens * hidden;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / hidden, col = i % hidden;
        float acc = 0.0f;
        /* Expert outputs stay fp32 here although implementations store them in bf16: rounding both sides
         * would turn rare rounding-boundary flips into full-ulp differences (2^-8 of a large row), while
         * rounding one side bounds the difference by half an ulp. */
        for (int j = 0; j < topk; j++)
            acc += w[t * topk + j] * route_out[(t * topk + j) * hidden + col];
        if (shared)
            acc += shared[i];
        y[i] = acc;
    }
}

extern "C" int mok_ref_gemm_f32(const uint16_t *a, const int32_t *a_row, int m, int k, const uint16_t *b, int n,
                                float *c, const int32_t *c_row, mok_stream_t stream)
{
    if (m <= 0)
        return 0;
    if (k % REF_BK)
        return (int)cudaErrorInvalidValue;
    dim3 grid((n + REF_BN - 1) / REF_BN, (m + REF_BM - 1) / REF_BM);
    ref_gemm_kernel<<<grid, 256, 0, mok_cuda_stream(stream)>>>(a, a_row, m, k, b, n, c, c_row);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_ref_swiglu(const float *g, int m, int intermediate, uint16_t *h, mok_stream_t stream)
{
    if (m <= 0)
        return 0;
    size_t total = (size_t)m * intermediate;
    ref_swiglu_kernel<<<mok_blocks_for(total, 256, 16384), 256, 0, mok_cuda_stream(stream)>>>(g, m, intermediate, h);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_ref_sum_routes(const float *route_out, const float *topk_w, int tokens, int topk, int hidden,
                                  const float *shared, float *y, mok_stream_t stream)
{
    size_t total = (size_t)tokens * hidden;
    if (total == 0)
        return 0;
    ref_sum_routes_kernel<<<mok_blocks_for(total, 256, 16384), 256, 0, mok_cuda_stream(stream)>>>(
        route_out, topk_w, tokens, topk, hidden, shared, y);
    return MOK_LAUNCH_RESULT();
}

/* Comm mode: experts return their input, so the layer is y[t] = sum_j w[t][j] * x[t], summed in fp32. */
__global__ void ref_comm_kernel(const uint16_t *x, const float *w, int tokens, int topk, int hidden, float *y)
{
    size_t total = (size_t)tokens * hidden;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t t = i / hidden;
        float wsum = 0.0f;
        for (int j = 0; j < topk; j++)
            wsum += w[t * topk + j];
        y[i] = wsum * mok_bf16_to_f32(x[i]);
    }
}

extern "C" int mok_ref_comm_f32(const uint16_t *x, const float *topk_w, int tokens, int topk, int hidden, float *y,
                                mok_stream_t stream)
{
    size_t total = (size_t)tokens * hidden;
    if (total == 0)
        return 0;
    ref_comm_kernel<<<mok_blocks_for(total, 256, 16384), 256, 0, mok_cuda_stream(stream)>>>(x, topk_w, tokens, topk,
                                                                                            hidden, y);
    return MOK_LAUNCH_RESULT();
}

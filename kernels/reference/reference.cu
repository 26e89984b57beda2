/* reference: the independent fp32 path every implementation is checked against. Plain tiled SIMT GEMMs over
 * gathered rows (reference/ref_gemm.cuh: no tensor cores, no cuBLAS, none of the implementations' permutations), the
 * layer's bf16 roundings of its intermediates reproduced (GEMM1 output, SwiGLU output), and a fixed-order fp32 top-k
 * sum. */
#include "common/common.cuh"
#include "reference/ref_gemm.cuh"

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
    if (k % mok_ref::kBK) /* the layer's K (hidden, intermediate) are multiples of the tiles' K step */
        return (int)cudaErrorInvalidValue;
    /* C = A B^T: A's rows gathered by a_row, B [n][k] row-major read transposed */
    return mok_ref::launch_gemm(mok_ref::Bf16Rows{a, a_row, k}, mok_ref::Bf16RowsT{b, nullptr, k}, m, n, k, c, c_row,
                                0, mok_cuda_stream(stream));
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

/* swiglu: out = silu(gate) * up over GEMM1's [rows][2I] output (gate columns first, then up), fp32 math; and its
 * backward (dgu, the router-weight gradient and dW2's scaled operand). */
#include "common/common.cuh"

union mok_vec8 {
    uint4 v;
    uint16_t h[8];
};

__global__ void swiglu_kernel(const uint4 *in, int rows, int ivecs, uint4 *out)
{
    size_t total = (size_t)rows * ivecs;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / ivecs, c = i % ivecs;
        mok_vec8 g, u, o;
        g.v = in[r * 2 * ivecs + c];
        u.v = in[r * 2 * ivecs + ivecs + c];
#pragma unroll
        for (int j = 0; j < 8; j++)
            o.h[j] = mok_f32_to_bf16(mok_silu(mok_bf16_to_f32(g.h[j])) * mok_bf16_to_f32(u.h[j]));
        out[i] = o.v;
    }
}

extern "C" int mok_swiglu_bf16(const uint16_t *in, int rows, int intermediate, uint16_t *out, mok_stream_t stream)
{
    if (rows <= 0)
        return 0;
    if (intermediate % 8)
        return (int)cudaErrorInvalidValue;
    size_t total = (size_t)rows * (intermediate / 8);
    swiglu_kernel<<<mok_blocks_for(total, 256, 16384), 256, 0, mok_cuda_stream(stream)>>>(
        (const uint4 *)in, rows, intermediate / 8, (uint4 *)out);
    return MOK_LAUNCH_RESULT();
}

/* The backward, one block of 256 threads per row (grid-stride over rows): 8 columns per thread per step. d_router's
 * dot product is summed per thread in column order, then over the block in a fixed tree: the same bits every run. */
__global__ void swiglu_bwd_kernel(const uint4 *gu, const uint4 *dhp, const float *w, int rows, int ivecs, uint4 *dgu,
                                  uint4 *hw, float *d_router)
{
    __shared__ float part[256];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float wr = w[r];
        float dot = 0.0f;
        for (int c = threadIdx.x; c < ivecs; c += blockDim.x) {
            mok_vec8 g, u, d, dg, du, h;
            g.v = gu[(size_t)r * 2 * ivecs + c];
            u.v = gu[(size_t)r * 2 * ivecs + ivecs + c];
            d.v = dhp[(size_t)r * ivecs + c];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                const float gf = mok_bf16_to_f32(g.h[j]), uf = mok_bf16_to_f32(u.h[j]);
                const float sig = 1.0f / (1.0f + expf(-gf)), silu = gf * sig;
                const float hb = mok_bf16_to_f32(mok_f32_to_bf16(silu * uf)); /* h as the forward stored it */
                const float dh = mok_bf16_to_f32(d.h[j]);
                dot += dh * hb;
                const float dhw = wr * dh;
                dg.h[j] = mok_f32_to_bf16(dhw * uf * sig * (1.0f + gf * (1.0f - sig)));
                du.h[j] = mok_f32_to_bf16(dhw * silu);
                h.h[j] = mok_f32_to_bf16(wr * hb);
            }
            dgu[(size_t)r * 2 * ivecs + c] = dg.v;
            dgu[(size_t)r * 2 * ivecs + ivecs + c] = du.v;
            hw[(size_t)r * ivecs + c] = h.v;
        }
        part[threadIdx.x] = dot;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s /= 2) {
            if (threadIdx.x < s)
                part[threadIdx.x] += part[threadIdx.x + s];
            __syncthreads();
        }
        if (threadIdx.x == 0)
            d_router[r] = part[0];
        __syncthreads(); /* part[] is reused by the next row */
    }
}

extern "C" int mok_swiglu_bwd_bf16(const uint16_t *gu, const uint16_t *dhp, const float *w, int rows,
                                   int intermediate, uint16_t *dgu, uint16_t *hw, float *d_router, mok_stream_t stream)
{
    if (rows <= 0)
        return 0;
    if (intermediate % 8)
        return (int)cudaErrorInvalidValue;
    swiglu_bwd_kernel<<<rows < 16384 ? rows : 16384, 256, 0, mok_cuda_stream(stream)>>>(
        (const uint4 *)gu, (const uint4 *)dhp, w, rows, intermediate / 8, (uint4 *)dgu, (uint4 *)hw, d_router);
    return MOK_LAUNCH_RESULT();
}

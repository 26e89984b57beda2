/* swiglu: out = silu(gate) * up over GEMM1's [rows][2I] output (gate columns first, then up), fp32 math. */
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

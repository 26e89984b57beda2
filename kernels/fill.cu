/* fill: seeded random tensors and poison. Element i of tensor (seed, tensor_id) depends on nothing else, so
 * a tensor is the same whatever the grid, the rank or the order it is generated in. */
#include "common.cuh"

__global__ void fill_uniform_bf16_kernel(uint16_t *dst, size_t n, uint64_t key, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t h = mok_mix64(key ^ mok_mix64(i));
        /* 24 random bits -> [0, 1) -> [-1, 1) */
        float u = (float)(h >> 40) * (1.0f / 16777216.0f);
        dst[i] = mok_f32_to_bf16((2.0f * u - 1.0f) * scale);
    }
}

__global__ void fill_normal_bf16_kernel(uint16_t *dst, size_t n, uint64_t key, float std)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t h = mok_mix64(key ^ mok_mix64(i));
        /* two 24-bit uniforms; u1 in (0, 1] so the log is finite */
        float u1 = ((float)(h >> 40) + 1.0f) * (1.0f / 16777216.0f);
        float u2 = (float)((h >> 16) & 0xFFFFFF) * (1.0f / 16777216.0f);
        dst[i] = mok_f32_to_bf16(std * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
    }
}

__global__ void poison_bf16_kernel(uint16_t *dst, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = 0x7FC1; /* a quiet NaN no arithmetic produces by chance */
}

extern "C" int mok_fill_uniform_bf16(uint16_t *dst, size_t n, uint64_t seed, uint64_t tensor_id, float scale,
                                     mok_stream_t stream)
{
    if (n == 0)
        return 0;
    uint64_t key = mok_mix64(seed * 0x100000001B3ull ^ mok_mix64(tensor_id));
    fill_uniform_bf16_kernel<<<mok_blocks_for(n, 256, 8192), 256, 0, mok_cuda_stream(stream)>>>(dst, n, key, scale);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_fill_normal_bf16(uint16_t *dst, size_t n, uint64_t seed, uint64_t tensor_id, float std,
                                    mok_stream_t stream)
{
    if (n == 0)
        return 0;
    uint64_t key = mok_mix64(seed * 0x100000001B3ull ^ mok_mix64(tensor_id));
    fill_normal_bf16_kernel<<<mok_blocks_for(n, 256, 8192), 256, 0, mok_cuda_stream(stream)>>>(dst, n, key, std);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_poison_bf16(uint16_t *dst, size_t n, mok_stream_t stream)
{
    if (n == 0)
        return 0;
    poison_bf16_kernel<<<mok_blocks_for(n, 256, 8192), 256, 0, mok_cuda_stream(stream)>>>(dst, n);
    return MOK_LAUNCH_RESULT();
}

/* fill: seeded random tensors and poison. Element i of tensor (seed, tensor_id) depends on nothing else, so
 * a tensor is the same whatever the grid, the rank or the order it is generated in. */
#include "common/common.cuh"

/* bf16 b rounded to its top mant_bits mantissa bits (of 7), to nearest with halves away from zero: the sign is
 * apart, so adding half of the dropped range and clearing it rounds the magnitude (a carry moves the exponent). */
__device__ __forceinline__ uint16_t keep_mantissa_bits(uint16_t b, int mant_bits)
{
    const int drop = 7 - mant_bits;
    if (drop <= 0)
        return b;
    return (uint16_t)((b + (1u << (drop - 1))) & ~((1u << drop) - 1u));
}

/* normal: Box-Muller on two 24-bit uniforms of the element's hash (u1 in (0, 1] so the log is finite); uniform:
 * 24 random bits -> [0, 1) -> [-1, 1). Then spread, rounding to bf16 and to mant_bits mantissa bits. */
template <bool kNormal>
__global__ void fill_bf16_kernel(uint16_t *dst, size_t n, uint64_t key, float spread, int mant_bits)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t h = mok_mix64(key ^ mok_mix64(i));
        float v;
        if (kNormal) {
            float u1 = ((float)(h >> 40) + 1.0f) * (1.0f / 16777216.0f);
            float u2 = (float)((h >> 16) & 0xFFFFFF) * (1.0f / 16777216.0f);
            v = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
        } else {
            v = 2.0f * ((float)(h >> 40) * (1.0f / 16777216.0f)) - 1.0f;
        }
        dst[i] = keep_mantissa_bits(mok_f32_to_bf16(v * spread), mant_bits);
    }
}

/* fp32 uniform in [-scale, scale): the start of an accumulated gradient buffer (fp32_accumulate); dst[i] is the
 * tensor's element first + i */
__global__ void fill_f32_kernel(float *dst, size_t n, size_t first, uint64_t key, float scale)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t h = mok_mix64(key ^ mok_mix64(first + i));
        dst[i] = (2.0f * ((float)(h >> 40) * (1.0f / 16777216.0f)) - 1.0f) * scale;
    }
}

__global__ void poison_bf16_kernel(uint16_t *dst, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = 0x7FC1; /* a quiet NaN no arithmetic produces by chance */
}

__global__ void poison_f32_kernel(uint32_t *dst, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = 0x7FC00001u; /* a quiet NaN with a payload no arithmetic produces */
}

extern "C" int mok_fill_bf16(uint16_t *dst, size_t n, uint64_t seed, uint64_t tensor_id, int normal, float spread,
                             int mant_bits, mok_stream_t stream)
{
    if (n == 0)
        return 0;
    uint64_t key = mok_mix64(seed * 0x100000001B3ull ^ mok_mix64(tensor_id));
    int blocks = mok_blocks_for(n, 256, 8192);
    if (normal)
        fill_bf16_kernel<true><<<blocks, 256, 0, mok_cuda_stream(stream)>>>(dst, n, key, spread, mant_bits);
    else
        fill_bf16_kernel<false><<<blocks, 256, 0, mok_cuda_stream(stream)>>>(dst, n, key, spread, mant_bits);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_fill_uniform_bf16(uint16_t *dst, size_t n, uint64_t seed, uint64_t tensor_id, float scale,
                                     mok_stream_t stream)
{
    return mok_fill_bf16(dst, n, seed, tensor_id, 0, scale, 7, stream);
}

extern "C" int mok_fill_f32_part(float *dst, size_t n, size_t first, uint64_t seed, uint64_t tensor_id, float scale,
                                 mok_stream_t stream)
{
    if (n == 0)
        return 0;
    uint64_t key = mok_mix64(seed * 0x100000001B3ull ^ mok_mix64(tensor_id));
    fill_f32_kernel<<<mok_blocks_for(n, 256, 8192), 256, 0, mok_cuda_stream(stream)>>>(dst, n, first, key, scale);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_fill_f32(float *dst, size_t n, uint64_t seed, uint64_t tensor_id, float scale, mok_stream_t stream)
{
    return mok_fill_f32_part(dst, n, 0, seed, tensor_id, scale, stream);
}

extern "C" int mok_poison_bf16(uint16_t *dst, size_t n, mok_stream_t stream)
{
    if (n == 0)
        return 0;
    poison_bf16_kernel<<<mok_blocks_for(n, 256, 8192), 256, 0, mok_cuda_stream(stream)>>>(dst, n);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_poison_f32(float *dst, size_t n, mok_stream_t stream)
{
    if (n == 0)
        return 0;
    poison_f32_kernel<<<mok_blocks_for(n, 256, 8192), 256, 0, mok_cuda_stream(stream)>>>((uint32_t *)dst, n);
    return MOK_LAUNCH_RESULT();
}

__global__ void convert_f32_bf16_kernel(const float *in, size_t n, uint16_t *out)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = mok_f32_to_bf16(in[i]);
}

extern "C" int mok_convert_f32_bf16(const float *in, size_t n, uint16_t *out, mok_stream_t stream)
{
    if (n == 0)
        return 0;
    convert_f32_bf16_kernel<<<mok_blocks_for(n, 256, 8192), 256, 0, mok_cuda_stream(stream)>>>(in, n, out);
    return MOK_LAUNCH_RESULT();
}

/* reference_fp8: the fp8_block and mxfp8 forward GEMMs' references (src/fp8.h's formats): both operands dequantized
 * to fp32 as they are read, then the references' one SIMT GEMM (reference/ref_gemm.cuh). Its own e4m3 decoder: the reference
 * shares no code with the implementations' kernels (kernels/util/quant.cu's encoder included), only the format. */
#include "common/common.cuh"
#include "reference/ref_gemm.cuh"

namespace {

constexpr int kFp8Block = 128; /* MOK_FP8_BLOCK: K elements per activation scale, the weight blocks' side */

/* e4m3 (fn) bits to fp32, exact: exponent field e (bias 7) and mantissa m map to fp32's exponent e + 120 and
 * mantissa m << 20; e == 0 is subnormal, m 2^-9 (m <= 7: exact in fp32); S.1111.111 is NaN. */
__device__ __forceinline__ float e4m3_to_f32(uint8_t v)
{
    uint32_t e = (v >> 3) & 0xFu, m = v & 7u;
    float a = e == 0 ? (float)m * 0.001953125f : __uint_as_float(((e + 120u) << 23) | (m << 20));
    if (e == 0xFu && m == 7u)
        a = __uint_as_float(0x7FC00000u);
    return v & 0x80u ? -a : a;
}

/* (i, kk) = e4m3(q[i][kk]) x scale[i][kk / 128]: activation rows e4m3 [m][k], fp32 scales [m][k / 128] */
struct Fp8BlockRows {
    const uint8_t *q;
    const float *scale;
    int k;
    __device__ float operator()(int i, int kk) const
    {
        return e4m3_to_f32(q[(size_t)i * k + kk]) * scale[(size_t)i * (k / kFp8Block) + kk / kFp8Block];
    }
};

/* (kk, j) = e4m3(q[j][kk]) x scale[j / 128][kk / 128]: weights e4m3 [n][k], fp32 scales [n / 128][k / 128], read
 * transposed (C = A W^T) */
struct Fp8BlockWeightsT {
    const uint8_t *q;
    const float *scale;
    int k;
    __device__ float operator()(int kk, int j) const
    {
        return e4m3_to_f32(q[(size_t)j * k + kk]) *
               scale[(size_t)(j / kFp8Block) * (k / kFp8Block) + kk / kFp8Block];
    }
};

constexpr int kMxBlock = 32; /* MOK_MX_BLOCK: K elements per e8m0 scale */

/* e8m0 byte e to 2^(e - 127), exact (ldexpf reaches fp32's subnormals: 2^-127 for e = 0); 255 is NaN */
__device__ __forceinline__ float e8m0_to_f32(uint8_t e)
{
    return e == 0xFFu ? __uint_as_float(0x7FC00000u) : ldexpf(1.0f, (int)e - 127);
}

/* (i, kk) = e4m3(q[i][kk]) x 2^(scale[i][kk / 32] - 127): rows e4m3 [m][k], e8m0 scales [m][k / 32] */
struct MxRows {
    const uint8_t *q, *scale;
    int k;
    __device__ float operator()(int i, int kk) const
    {
        return e4m3_to_f32(q[(size_t)i * k + kk]) * e8m0_to_f32(scale[(size_t)i * (k / kMxBlock) + kk / kMxBlock]);
    }
};

/* (kk, j) = the same of weights e4m3 [n][k] with scales [n][k / 32], read transposed (C = A W^T) */
struct MxWeightsT {
    const uint8_t *q, *scale;
    int k;
    __device__ float operator()(int kk, int j) const
    {
        return e4m3_to_f32(q[(size_t)j * k + kk]) * e8m0_to_f32(scale[(size_t)j * (k / kMxBlock) + kk / kMxBlock]);
    }
};

} // namespace

extern "C" int mok_ref_gemm_mxfp8(const uint8_t *a, const uint8_t *a_scale, int m, int k, const uint8_t *w,
                                  const uint8_t *w_scale, int n, float *c, mok_stream_t stream)
{
    if (m < 0 || n < 0 || k < 0 || k % kMxBlock)
        return (int)cudaErrorInvalidValue;
    if (m == 0 || n == 0)
        return 0;
    return mok_ref::launch_gemm(MxRows{a, a_scale, k}, MxWeightsT{w, w_scale, k}, m, n, k, c, nullptr, 0,
                                mok_cuda_stream(stream));
}

extern "C" int mok_ref_gemm_fp8_block(const uint8_t *a, const float *a_scale, int m, int k, const uint8_t *w,
                                      const float *w_scale, int n, float *c, mok_stream_t stream)
{
    if (m < 0 || n < 0 || k < 0 || k % kFp8Block || n % kFp8Block) /* the format's blocks (k % 128 covers kBK) */
        return (int)cudaErrorInvalidValue;
    if (m == 0 || n == 0)
        return 0;
    return mok_ref::launch_gemm(Fp8BlockRows{a, a_scale, k}, Fp8BlockWeightsT{w, w_scale, k}, m, n, k, c, nullptr, 0,
                                mok_cuda_stream(stream));
}

namespace {
__global__ void widen_bf16_kernel(const uint16_t *in, size_t n, float *out)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = mok_bf16_to_f32(in[i]);
}
} // namespace

extern "C" int mok_ref_widen_bf16(const uint16_t *in, size_t n, float *out, mok_stream_t stream)
{
    if (n == 0)
        return 0;
    widen_bf16_kernel<<<mok_blocks_for(n, 256, 4096), 256, 0, mok_cuda_stream(stream)>>>(in, n, out);
    return MOK_LAUNCH_RESULT();
}

/* The fp8_block layer reference's row moves: plain per-element copies (a reference need not be fast, and shares
 * no code with the implementations' wire-row kernels). */
namespace {
__global__ void fp8_gather_kernel(const uint8_t *q, const uint8_t *scale, int k, const int32_t *idx, int n,
                                  uint8_t *q_out, uint8_t *s_out)
{
    const size_t total = (size_t)n * k;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t row = i / k, col = i % k, src = (size_t)idx[row];
        q_out[i] = q[src * k + col];
        if (col % 32 == 0) /* a scale byte per 32 values, in either format */
            s_out[row * (k / 32) + col / 32] = scale[src * (k / 32) + col / 32];
    }
}

__global__ void scatter_rows_f32_kernel(const float *src, int n, int width, const int32_t *idx, float *dst)
{
    const size_t total = (size_t)n * width;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        dst[(size_t)idx[i / width] * width + i % width] = src[i];
}
} // namespace

extern "C" int mok_ref_fp8_gather(const uint8_t *q, const void *scale, int k, const int32_t *idx, int n,
                                  uint8_t *q_out, void *s_out, mok_stream_t stream)
{
    if (n <= 0)
        return 0;
    if (k % 128)
        return (int)cudaErrorInvalidValue;
    const size_t total = (size_t)n * k;
    fp8_gather_kernel<<<mok_blocks_for(total, 256, 4096), 256, 0, mok_cuda_stream(stream)>>>(
        q, static_cast<const uint8_t *>(scale), k, idx, n, q_out, static_cast<uint8_t *>(s_out));
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_ref_scatter_rows_f32(const float *src, int n, int width, const int32_t *idx, float *dst,
                                        mok_stream_t stream)
{
    if (n <= 0)
        return 0;
    const size_t total = (size_t)n * width;
    scatter_rows_f32_kernel<<<mok_blocks_for(total, 256, 4096), 256, 0, mok_cuda_stream(stream)>>>(src, n, width, idx,
                                                                                                   dst);
    return MOK_LAUNCH_RESULT();
}

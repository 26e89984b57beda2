/* quant: FP8 quantization of bf16 rows on the GPU, bit for bit the host reference's (src/fp8.h: the formats, the
 * scale rules, the rounding): the separate quantize step the NCCL baselines and lsa-layer run before their dispatch
 * and between their GEMMs, and what the megakernel's dispatch is to match when it quantizes rows as it sends them.
 * Rows: mxfp8 a quad per scale block (32 values, 16 bytes a lane), fp8_block a half
 * warp per block of 128. Weights (fp8_block, 128 x 128 blocks, quantized once at setup but ~6 G elements for a large
 * model): one CTA per block, 16-byte loads. A non-finite input sets *status to 1 (the host reference refuses it). And
 * mxfp8's dequantization back to bf16, which an MX-emulating baseline runs, and mx_scheme 3's weight expansion. */
#include <cuda_fp8.h>

#include "common/common.cuh"
#include "gemm/mx_expand.h"
#include "util/fp8_quant.cuh"

namespace {

using mok_fp8::e4m3;
using mok_fp8::kE4m3Max;

template <int kBlock>
__device__ __forceinline__ float block_amax(const uint16_t *x, int32_t *status)
{
    float amax = 0.0f;
    for (int i = 0; i < kBlock; i++) {
        float v = mok_bf16_to_f32(x[i]);
        if (!isfinite(v))
            atomicExch(status, 1);
        amax = fmaxf(amax, fabsf(v));
    }
    return amax;
}

/* rows_dev (NULL: none): the rows that hold data, a count only the device knows (lsa-layer's expert slots); blocks
 * past its per_row blocks per row are left alone. */
__device__ __forceinline__ long long blocks_upto(long long blocks, const int32_t *rows_dev, int per_row)
{
    if (!rows_dev)
        return blocks;
    long long upto = (long long)max(*rows_dev, 0) * per_row;
    return upto < blocks ? upto : blocks;
}

/* mxfp8 rows: a quad per 32-value block, 16 bytes per lane (mok_fp8::quant_block32, the megakernel's own), so the
 * rows stream near DRAM rate: h's quantization runs in the timed path of mok-gemm and the FP8 baselines (the
 * thread-per-block kernel below, kept for unaligned rows, ran at ~10% of the DRAM peak there: 563 us for h at
 * Qwen3-235B-local 4096 on one H100, results/h100x1/2026-12-05-mx-weights-bf16). Each lane flags inf or NaN in its
 * own 8 values (bits >= 0x7F80). */
__global__ void quant_mxfp8_quads_kernel(const uint16_t *x, long long blocks, const int32_t *rows_dev, int per_row,
                                         uint8_t *q, uint8_t *scale, int32_t *status)
{
    blocks = blocks_upto(blocks, rows_dev, per_row);
    const int ql = threadIdx.x % 4, quad = (threadIdx.x % 32) / 4;
    const long long quads = (long long)gridDim.x * blockDim.x / 4;
    for (long long b = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 4; b - quad < blocks; b += quads) {
        /* every quad of the warp stays in the loop while any has a block: quant_block32 shuffles over all 32 lanes */
        const bool mine = b < blocks;
        const uint4 v = mine ? *reinterpret_cast<const uint4 *>(x + b * 32 + ql * 8) : make_uint4(0, 0, 0, 0);
        const uint32_t m2 = __vmaxu2(__vmaxu2(v.x & 0x7FFF7FFFu, v.y & 0x7FFF7FFFu),
                                     __vmaxu2(v.z & 0x7FFF7FFFu, v.w & 0x7FFF7FFFu));
        uint8_t e;
        const uint2 out = mok_fp8::quant_block32(v, &e);
        if (!mine)
            continue;
        if (max(m2 & 0xFFFFu, m2 >> 16) >= 0x7F80u)
            atomicExch(status, 1);
        if (ql == 0)
            scale[b] = e;
        *reinterpret_cast<uint2 *>(q + b * 32 + ql * 8) = out;
    }
}

/* One thread per block: rows whose pointers are not 16-byte (x) and 8-byte (q) aligned. */
__global__ void quant_mxfp8_kernel(const uint16_t *x, long long blocks, const int32_t *rows_dev, int per_row,
                                   uint8_t *q, uint8_t *scale, int32_t *status)
{
    blocks = blocks_upto(blocks, rows_dev, per_row);
    for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; b < blocks; b += (long long)gridDim.x * blockDim.x) {
        const uint16_t *in = x + b * 32;
        float amax = block_amax<32>(in, status); /* a bf16's value: its bits are the float's upper half */
        int e = mok_fp8_e8m0_exponent_bits(__float_as_uint(amax) >> 16);
        scale[b] = (uint8_t)(e + 127);
        float s = ldexpf(1.0f, e);
        for (int i = 0; i < 32; i++)
            q[b * 32 + i] = e4m3(mok_bf16_to_f32(in[i]) / s);
    }
}

/* fp8_block rows: a half warp per 1 x 128 block, 16 bytes per lane (the block's 256 bytes in one coalesced load),
 * so the rows stream at DRAM rate: it runs in the baselines' timed path (h's quantization between GEMM1 and GEMM2).
 * amax on the bits as the weights' kernel does (below): exact, and bits >= 0x7F80 flag inf or NaN. */
__global__ void quant_fp8_block_kernel(const uint16_t *x, long long blocks, const int32_t *rows_dev, int per_row,
                                       uint8_t *q, float *scale, int32_t *status)
{
    blocks = blocks_upto(blocks, rows_dev, per_row);
    const int half = (threadIdx.x % 32) / 16, hl = threadIdx.x % 16;
    const long long halves = (long long)gridDim.x * blockDim.x / 16;
    for (long long b = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 16; b - half < blocks; b += halves) {
        /* both half warps stay in the loop while either has a block, so the shuffles see all 32 lanes */
        const bool mine = b < blocks;
        uint4 v = mine ? *reinterpret_cast<const uint4 *>(x + b * 128 + hl * 8) : make_uint4(0, 0, 0, 0);
        float s;
        uint32_t m;
        const uint2 out = mok_fp8::quant_block128(v, &s, &m);
        if (!mine)
            continue;
        if (hl == 0) {
            scale[b] = s;
            if (m >= 0x7F80u)
                atomicExch(status, 1);
        }
        *reinterpret_cast<uint2 *>(q + b * 128 + hl * 8) = out;
    }
}

/* fp8_block weights: one CTA of 256 threads per 128 x 128 block (grid-stride over the blocks of all matrices), blocks
 * numbered (matrix, block row, block column) in order, which is also their scale's index. A block row of 128 bf16 is
 * 16 chunks of 16 bytes: thread t loads chunks t, t + 256, ..., t + 1792 (a warp reads two whole rows per step,
 * all 8 loads in flight before any use), so a thread holds 64 values and the block needs one pass over memory.
 * amax on the bits: |bf16| orders like its bits with the sign cleared, so a 16-bit SIMD max over pairs gives the
 * exact host amax, and any bits >= 0x7F80 (exponent all ones) mean inf or NaN somewhere in the block. The encode
 * divides (x / s, correctly rounded) as the host does: a reciprocal multiply can differ in the last bit. */
constexpr int kWBlock = 128, kWThreads = 256, kWChunks = kWBlock * kWBlock / 8 / kWThreads;

__global__ void __launch_bounds__(kWThreads) quant_fp8_block_weights_kernel(const uint16_t *w, long long blocks,
                                                                           long long nbk, int k,
                                                                           uint8_t *q, float *scale,
                                                                           int32_t *status)
{
    __shared__ uint32_t warp_max[kWThreads / 32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (long long b = blockIdx.x; b < blocks; b += gridDim.x) {
        long long mat_row = b / nbk; /* (matrix, block row) flattened: matrices stack their rows */
        size_t base = (size_t)mat_row * kWBlock * k + (size_t)(b % nbk) * kWBlock;
        uint4 v[kWChunks];
#pragma unroll
        for (int i = 0; i < kWChunks; i++) {
            int c = threadIdx.x + i * kWThreads, row = c / 16, col = c % 16 * 8;
            v[i] = *reinterpret_cast<const uint4 *>(w + base + (size_t)row * k + col);
        }
        uint32_t m2 = 0;
#pragma unroll
        for (int i = 0; i < kWChunks; i++) {
            m2 = __vmaxu2(m2, v[i].x & 0x7FFF7FFFu);
            m2 = __vmaxu2(m2, v[i].y & 0x7FFF7FFFu);
            m2 = __vmaxu2(m2, v[i].z & 0x7FFF7FFFu);
            m2 = __vmaxu2(m2, v[i].w & 0x7FFF7FFFu);
        }
        uint32_t m = max(m2 & 0xFFFFu, m2 >> 16);
#pragma unroll
        for (int off = 16; off; off >>= 1)
            m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
        if (lane == 0)
            warp_max[warp] = m;
        __syncthreads();
        uint32_t amax_bits = warp_max[0];
#pragma unroll
        for (int i = 1; i < kWThreads / 32; i++)
            amax_bits = max(amax_bits, warp_max[i]);
        __syncthreads(); /* every thread has read warp_max before the next block's warps write it */
        float amax = mok_bf16_to_f32((uint16_t)amax_bits);
        float s = amax > 0.0f ? amax / kE4m3Max : 1.0f;
        if (threadIdx.x == 0) {
            scale[b] = s;
            if (amax_bits >= 0x7F80u)
                atomicExch(status, 1);
        }
#pragma unroll
        for (int i = 0; i < kWChunks; i++) {
            int c = threadIdx.x + i * kWThreads, row = c / 16, col = c % 16 * 8;
            const uint32_t words[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
            uint32_t out[2] = {0, 0};
#pragma unroll
            for (int j = 0; j < 8; j++) {
                uint16_t bits = (uint16_t)(words[j / 2] >> (j % 2 * 16)); /* little endian: the lower half first */
                out[j / 4] |= (uint32_t)e4m3(mok_bf16_to_f32(bits) / s) << (j % 4 * 8);
            }
            *reinterpret_cast<uint2 *>(q + base + (size_t)row * k + col) = make_uint2(out[0], out[1]);
        }
    }
}

/* mxfp8 -> bf16 (the emulating baseline's dequantization, in its timed run): a thread per 8 values (8 bytes in, 16
 * out), grid-stride. e4m3 through cuda_fp8's exact widening to half, times the block's power of two as an fp32
 * multiply (exact), rounded to bf16 (exact wherever the value is in bf16's normal range: 4 significant bits). */
__global__ void dequant_mxfp8_kernel(const uint8_t *q, const uint8_t *scale, long long groups, uint16_t *out)
{
    for (long long g = blockIdx.x * (long long)blockDim.x + threadIdx.x; g < groups; g += (long long)gridDim.x * blockDim.x) {
        const uint2 v = *reinterpret_cast<const uint2 *>(q + g * 8);
        const float s = ldexpf(1.0f, (int)scale[g / 4] - 127); /* 4 groups of 8 per 32-value block */
        const uint32_t words[2] = {v.x, v.y};
        uint32_t o[4];
#pragma unroll
        for (int j = 0; j < 8; j += 2) {
            const uint8_t b0 = (uint8_t)(words[j / 4] >> (j % 4 * 8)), b1 = (uint8_t)(words[j / 4] >> (j % 4 * 8 + 8));
            const float f0 = __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b0, __NV_E4M3)));
            const float f1 = __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)b1, __NV_E4M3)));
            o[j / 2] = (uint32_t)mok_f32_to_bf16(f0 * s) | (uint32_t)mok_f32_to_bf16(f1 * s) << 16;
        }
        *reinterpret_cast<uint4 *>(out + g * 8) = make_uint4(o[0], o[1], o[2], o[3]);
    }
}

/* mxfp8 -> bf16 with K permuted within each 64-K block (mx_scheme 3's weights, mok_mx_k64_pos): a thread per word
 * of four codes (natural K 4w .. 4w + 3 of a row), expanded by the GEMM's own conversion (mok_mx_expand4: the bits
 * scheme (b) would put in its slots) into its two pairs' places. */
__global__ void expand_mxfp8_k64perm_kernel(const uint8_t *q, const uint8_t *scale, long long words, int k,
                                            uint16_t *out)
{
    for (long long w = blockIdx.x * (long long)blockDim.x + threadIdx.x; w < words;
         w += (long long)gridDim.x * blockDim.x) {
        const long long e = 4 * w, row = e / k;
        const int col = (int)(e - row * k), n = col & 63;
        const struct mok_mx_pair p = mok_mx_expand4(*reinterpret_cast<const uint32_t *>(q + e),
                                                    scale[row * (k / 32) + col / 32]);
        uint32_t *o = reinterpret_cast<uint32_t *>(out + row * k + (col - n));
        o[mok_mx_k64_pos(n) / 2] = p.lo;
        o[mok_mx_k64_pos(n + 2) / 2] = p.hi;
    }
}

} // namespace

extern "C" int mok_expand_mxfp8_bf16_k64perm(const uint8_t *q, const uint8_t *scale, long long rows, int k,
                                             uint16_t *out, mok_stream_t stream)
{
    if (rows < 0 || k < 0 || k % 64 || (uintptr_t)q % 4 || (uintptr_t)out % 4)
        return (int)cudaErrorInvalidValue;
    const long long words = rows * (k / 4);
    if (words == 0)
        return 0;
    expand_mxfp8_k64perm_kernel<<<mok_blocks_for((size_t)words, 256, 8192), 256, 0, mok_cuda_stream(stream)>>>(
        q, scale, words, k, out);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_dequant_mxfp8_bf16(const uint8_t *q, const uint8_t *scale, long long rows, int k, uint16_t *out,
                                      mok_stream_t stream)
{
    if (rows < 0 || k < 0 || k % 32 || (uintptr_t)q % 8 || (uintptr_t)out % 16)
        return (int)cudaErrorInvalidValue;
    long long groups = rows * (k / 8);
    if (groups == 0)
        return 0;
    dequant_mxfp8_kernel<<<mok_blocks_for((size_t)groups, 256, 8192), 256, 0, mok_cuda_stream(stream)>>>(
        q, scale, groups, out);
    return MOK_LAUNCH_RESULT();
}

/* Blocks are consecutive K elements of a row-major [rows][k] matrix: with k a multiple of the block, block b covers
 * elements [32 b, 32 b + 32) of the flat array, so scale[r][k / 32] is scale[b] in order. */
static int quant_mxfp8(const uint16_t *x, int rows, const int32_t *rows_dev, int k, uint8_t *q, uint8_t *scale,
                       int32_t *status, mok_stream_t stream)
{
    if (rows < 0 || k < 0 || k % 32 || !status)
        return (int)cudaErrorInvalidValue;
    long long blocks = (long long)rows * (k / 32);
    if (blocks == 0)
        return 0;
    if ((uintptr_t)x % 16 == 0 && (uintptr_t)q % 8 == 0)
        quant_mxfp8_quads_kernel<<<mok_blocks_for((size_t)blocks * 4, 256, 8192), 256, 0, mok_cuda_stream(stream)>>>(
            x, blocks, rows_dev, k / 32, q, scale, status);
    else
        quant_mxfp8_kernel<<<mok_blocks_for((size_t)blocks, 256, 4096), 256, 0, mok_cuda_stream(stream)>>>(
            x, blocks, rows_dev, k / 32, q, scale, status);
    return MOK_LAUNCH_RESULT();
}

static int quant_fp8_block(const uint16_t *x, int rows, const int32_t *rows_dev, int k, uint8_t *q, float *scale,
                           int32_t *status, mok_stream_t stream)
{
    if (rows < 0 || k < 0 || k % 128 || !status)
        return (int)cudaErrorInvalidValue;
    long long blocks = (long long)rows * (k / 128);
    if (blocks == 0)
        return 0;
    if ((uintptr_t)x % 16 || (uintptr_t)q % 8) /* the kernel's uint4 loads and uint2 stores */
        return (int)cudaErrorInvalidValue;
    /* 16 blocks per CTA of 256 threads */
    quant_fp8_block_kernel<<<mok_blocks_for((size_t)(blocks + 15) / 16, 1, 8192), 256, 0, mok_cuda_stream(stream)>>>(
        x, blocks, rows_dev, k / 128, q, scale, status);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_quant_mxfp8_bf16(const uint16_t *x, int rows, int k, uint8_t *q, uint8_t *scale, int32_t *status,
                                    mok_stream_t stream)
{
    return quant_mxfp8(x, rows, NULL, k, q, scale, status, stream);
}

extern "C" int mok_quant_fp8_block_bf16(const uint16_t *x, int rows, int k, uint8_t *q, float *scale,
                                        int32_t *status, mok_stream_t stream)
{
    return quant_fp8_block(x, rows, NULL, k, q, scale, status, stream);
}

extern "C" int mok_quant_mxfp8_bf16_upto(const uint16_t *x, int max_rows, const int32_t *rows, int k, uint8_t *q,
                                         uint8_t *scale, int32_t *status, mok_stream_t stream)
{
    return rows ? quant_mxfp8(x, max_rows, rows, k, q, scale, status, stream) : (int)cudaErrorInvalidValue;
}

extern "C" int mok_quant_fp8_block_bf16_upto(const uint16_t *x, int max_rows, const int32_t *rows, int k, uint8_t *q,
                                             float *scale, int32_t *status, mok_stream_t stream)
{
    return rows ? quant_fp8_block(x, max_rows, rows, k, q, scale, status, stream) : (int)cudaErrorInvalidValue;
}

/* mats stacked [rows][k] matrices are one [mats * rows][k] matrix whose 128-row block rows never straddle two
 * matrices (rows % 128 == 0), so scale[mats][rows / 128][k / 128] is that matrix's [mats * rows / 128][k / 128]. */
extern "C" int mok_quant_fp8_block_weights_bf16(const uint16_t *w, long long mats, int rows, int k, uint8_t *q,
                                                float *scale, int32_t *status, mok_stream_t stream)
{
    if (mats < 0 || rows < 0 || k < 0 || rows % kWBlock || k % kWBlock || !status)
        return (int)cudaErrorInvalidValue;
    long long nbk = k / kWBlock, blocks = mats * (rows / kWBlock) * nbk;
    if (blocks == 0)
        return 0;
    if ((uintptr_t)w % 16 || (uintptr_t)q % 8) /* the kernel's uint4 loads and uint2 stores */
        return (int)cudaErrorInvalidValue;
    /* As many CTAs as are resident at once (3 per SM at the kernel's 80 registers on sm_90), each looping over
     * blocks: 96 KiB of loads in flight per SM stream HBM, and a model's weights need no launch of ~10^5-10^6 CTAs */
    static int per_sm = -1;
    if (per_sm < 0 && cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, quant_fp8_block_weights_kernel,
                                                                     kWThreads, 0) != cudaSuccess) {
        cudaGetLastError(); /* a failed query must not linger as the launch's error */
        per_sm = -1;
    }
    long long sms = mok_sm_count() > 0 ? mok_sm_count() : 132;
    long long resident = sms * (per_sm > 0 ? per_sm : 2);
    long long grid = blocks < resident ? blocks : resident;
    quant_fp8_block_weights_kernel<<<(unsigned)grid, kWThreads, 0, mok_cuda_stream(stream)>>>(
        w, blocks, nbk, k, q, scale, status);
    return MOK_LAUNCH_RESULT();
}

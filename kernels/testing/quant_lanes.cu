/* testing/quant_lanes: the lane-group quantizers the megakernel's push and GEMM1 epilogue run
 * (kernels/util/fp8_quant.cuh: quant_block128 by half warps, quant_block32 by quads), over whole rows as the push
 * drives them (a warp per row, 8 values per lane per pass), so tests/test_gpu_quant.c can hold them byte for byte
 * against src/fp8.c's host quantizers, as it holds the separate quantize kernels. */
#include "common/common.cuh"
#include "testing/mok_test_kernels.h"
#include "util/fp8_quant.cuh"

/* a warp per row; k a multiple of 256 */
__global__ void quant_lanes_kernel(const uint16_t *x, int rows, int k, int mx, uint8_t *q, void *scale)
{
    const int lane = threadIdx.x % 32;
    for (int r = (blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += gridDim.x * blockDim.x / 32)
        for (int v = lane; v < k / 8; v += 32) { /* values [8 v, 8 v + 8) of row r */
            const uint4 val = reinterpret_cast<const uint4 *>(x + (size_t)r * k)[v];
            uint2 out;
            if (mx) {
                uint8_t e;
                out = mok_fp8::quant_block32(val, &e);
                if (lane % 4 == 0)
                    static_cast<uint8_t *>(scale)[(size_t)r * (k / 32) + v / 4] = e;
            } else {
                float s;
                uint32_t amax_bits;
                out = mok_fp8::quant_block128(val, &s, &amax_bits);
                if (lane % 16 == 0)
                    static_cast<float *>(scale)[(size_t)r * (k / 128) + v / 16] = s;
            }
            reinterpret_cast<uint2 *>(q + (size_t)r * k)[v] = out;
        }
}

extern "C" int mok_test_quant_lanes(const uint16_t *x, int rows, int k, int mx, uint8_t *q, void *scale,
                                    mok_stream_t stream)
{
    if (rows < 1 || k < 256 || k % 256)
        return (int)cudaErrorInvalidValue;
    quant_lanes_kernel<<<mok_blocks_for((size_t)rows * 32, 256, 1024), 256, 0, mok_cuda_stream(stream)>>>(
        x, rows, k, mx, q, scale);
    return MOK_LAUNCH_RESULT();
}

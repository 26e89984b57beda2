/* testing/mx_expand: mxfp8 scheme (b)'s conversion (kernels/gemm/mx_expand.h) on the device, for every e4m3 code and
 * every e8m0 scale, so tests/test_gpu_mxfp8.c can hold the device's instructions (fma.rn.bf16x2 on subnormal inputs
 * and outputs, its rounding, the two-multiply range) bit for bit against their host model. */
#include "common/common.cuh"
#include "gemm/mx_expand.h"
#include "testing/mok_test_kernels.h"

/* one thread per (scale, word of four consecutive codes); out[s * 256 + code] */
__global__ void mx_expand_table_kernel(uint16_t *out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 255 * 64)
        return;
    const uint32_t s = (uint32_t)i / 64, c0 = (uint32_t)i % 64 * 4;
    const struct mok_mx_pair p = mok_mx_expand4(c0 | (c0 + 1) << 8 | (c0 + 2) << 16 | (c0 + 3) << 24, s);
    uint16_t *o = out + s * 256 + c0;
    o[0] = (uint16_t)p.lo, o[1] = (uint16_t)(p.lo >> 16), o[2] = (uint16_t)p.hi, o[3] = (uint16_t)(p.hi >> 16);
}

extern "C" int mok_test_mx_expand_table(uint16_t *out, mok_stream_t stream)
{
    mx_expand_table_kernel<<<255 * 64 / 256 + 1, 256, 0, mok_cuda_stream(stream)>>>(out);
    return MOK_LAUNCH_RESULT();
}

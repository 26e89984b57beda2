/* combine: the weighted top-k sum that finishes the layer, fp32 in a fixed order (j = 0..k-1, then the
 * shared experts), one rounding to bf16. Fixed order makes y bitwise reproducible run to run. */
#include "common/common.cuh"

union mok_vec8c {
    uint4 v;
    uint16_t h[8];
};

/* grid.x = tokens; each thread owns 8 columns at a time. */
__global__ void weighted_combine_kernel(const uint4 *rows, const int32_t *send_pos, const float *topk_w,
                                        int token_begin, int topk, int vecs, const uint4 *shared, uint4 *y)
{
    int t = token_begin + blockIdx.x;
    for (int c = threadIdx.x; c < vecs; c += blockDim.x) {
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int j = 0; j < topk; j++) {
            int r = t * topk + j;
            float w = topk_w[r];
            mok_vec8c in;
            in.v = rows[(size_t)send_pos[r] * vecs + c];
#pragma unroll
            for (int e = 0; e < 8; e++)
                acc[e] += w * mok_bf16_to_f32(in.h[e]);
        }
        if (shared) {
            mok_vec8c s;
            s.v = shared[(size_t)t * vecs + c];
#pragma unroll
            for (int e = 0; e < 8; e++)
                acc[e] += mok_bf16_to_f32(s.h[e]);
        }
        mok_vec8c o;
#pragma unroll
        for (int e = 0; e < 8; e++)
            o.h[e] = mok_f32_to_bf16(acc[e]);
        y[(size_t)t * vecs + c] = o.v;
    }
}

extern "C" int mok_weighted_combine(const uint16_t *rows, const int32_t *send_pos, const float *topk_w,
                                    int token_begin, int token_end, int topk, int hidden, const uint16_t *shared,
                                    uint16_t *y, mok_stream_t stream)
{
    int tokens = token_end - token_begin;
    if (tokens <= 0)
        return 0;
    if (hidden % 8)
        return (int)cudaErrorInvalidValue;
    int vecs = hidden / 8;
    int threads = vecs < 256 ? ((vecs + 31) / 32) * 32 : 256;
    weighted_combine_kernel<<<tokens, threads, 0, mok_cuda_stream(stream)>>>(
        (const uint4 *)rows, send_pos, topk_w, token_begin, topk, vecs, (const uint4 *)shared, (uint4 *)y);
    return MOK_LAUNCH_RESULT();
}

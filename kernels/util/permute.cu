/* permute: row copies between token order, the send/receive layouts and expert-major order. Rows are at
 * least 64 bf16 (128 bytes), so each warp moves one row with 16-byte vectors. */
#include "common/common.cuh"

/* One warp per destination row; width in 16-byte vectors. */
__global__ void scatter_tokens_kernel(const uint4 *x, int vecs, int topk, const int32_t *send_pos, int route_begin,
                                      int route_end, uint4 *dst)
{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    int r = route_begin + warp;
    if (r >= route_end)
        return;
    const uint4 *src = x + (size_t)(r / topk) * vecs;
    uint4 *out = dst + (size_t)send_pos[r] * vecs;
    for (int v = lane; v < vecs; v += 32)
        out[v] = src[v];
}

__global__ void gather_rows_kernel(const uint4 *src, const int32_t *src_row, int rows, int vecs, uint4 *dst)
{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (warp >= rows)
        return;
    const uint4 *in = src + (size_t)src_row[warp] * vecs;
    uint4 *out = dst + (size_t)warp * vecs;
    for (int v = lane; v < vecs; v += 32)
        out[v] = in[v];
}

extern "C" int mok_scatter_tokens(const uint16_t *x, int hidden, int topk, const int32_t *send_pos, int route_begin,
                                  int route_end, uint16_t *dst, mok_stream_t stream)
{
    int rows = route_end - route_begin;
    if (rows <= 0)
        return 0;
    if (hidden % 8)
        return (int)cudaErrorInvalidValue;
    unsigned blocks = (unsigned)(((size_t)rows * 32 + 255) / 256);
    scatter_tokens_kernel<<<blocks, 256, 0, mok_cuda_stream(stream)>>>((const uint4 *)x, hidden / 8, topk, send_pos,
                                                                      route_begin, route_end, (uint4 *)dst);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_gather_rows(const uint16_t *src, const int32_t *src_row, int rows, int width, uint16_t *dst,
                               mok_stream_t stream)
{
    if (rows <= 0)
        return 0;
    if (width % 8)
        return (int)cudaErrorInvalidValue;
    unsigned blocks = (unsigned)(((size_t)rows * 32 + 255) / 256);
    gather_rows_kernel<<<blocks, 256, 0, mok_cuda_stream(stream)>>>((const uint4 *)src, src_row, rows, width / 8,
                                                                   (uint4 *)dst);
    return MOK_LAUNCH_RESULT();
}

/* One fp32 value per route or row: the router weights travelling with dy rows and the d_router partials coming
 * back with dx rows (the backward). */
__global__ void gather_f32_kernel(const float *src, const int32_t *idx, int n, float *dst)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        dst[i] = src[idx[i]];
}

__global__ void scatter_f32_kernel(const float *src, int n, const int32_t *idx, float *dst)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        dst[idx[i]] = src[i];
}

extern "C" int mok_gather_f32(const float *src, const int32_t *idx, int n, float *dst, mok_stream_t stream)
{
    if (n <= 0)
        return 0;
    gather_f32_kernel<<<mok_blocks_for((size_t)n, 256, 4096), 256, 0, mok_cuda_stream(stream)>>>(src, idx, n, dst);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_scatter_f32(const float *src, int n, const int32_t *idx, float *dst, mok_stream_t stream)
{
    if (n <= 0)
        return 0;
    scatter_f32_kernel<<<mok_blocks_for((size_t)n, 256, 4096), 256, 0, mok_cuda_stream(stream)>>>(src, n, idx, dst);
    return MOK_LAUNCH_RESULT();
}

/* fp8_rows: FP8 token rows on the wire. A wire row is a row's k e4m3 bytes followed by its scales, padded to 16
 * bytes, so one NCCL message carries both and a row never needs a second transfer for its scales. Both formats
 * (src/fp8.h) give a row k / 32 bytes of scales: fp8_block k / 128 fp32 (1 x 128 blocks), mxfp8 k / 32 e8m0 bytes
 * (per 32); the kernels move them as k / 128 32-bit words and never read them. The NCCL baselines quantize x once,
 * scatter the rows into the send layout as wire rows, and gather the received wire rows into the expert-major
 * operands the GEMMs read (values [rows][k], scales [rows][k / 32 bytes]). lsa-layer lays x out as wire rows in order
 * (a NULL map: row r to wire row r), the LSA transfers copy them into its expert slots, and it unpacks the slots in
 * order, as many as its device-built schedule filled (a row count only the device holds). One warp per row: 16-byte
 * vectors for the values, a word per lane for the scales. */
#include "common/common.cuh"

__global__ void fp8_rows_scatter_kernel(const uint4 *q, const uint32_t *scale, int k, int topk, const int32_t *send_pos,
                                        int route_begin, int route_end, uint8_t *dst, int wire_bytes)
{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    int r = route_begin + warp;
    if (r >= route_end)
        return;
    const int t = r / topk, vecs = k / 16, kb = k / 128;
    uint8_t *row = dst + (size_t)(send_pos ? send_pos[r] : r) * wire_bytes;
    const uint4 *src = q + (size_t)t * vecs;
    uint4 *out = reinterpret_cast<uint4 *>(row);
    for (int v = lane; v < vecs; v += 32)
        out[v] = src[v];
    uint32_t *out_s = reinterpret_cast<uint32_t *>(row + k);
    for (int b = lane; b < kb; b += 32)
        out_s[b] = scale[(size_t)t * kb + b];
}

/* rows_dev (NULL: none) bounds rows on the device; src_row NULL reads wire row i for row i. */
__global__ void fp8_rows_gather_kernel(const uint8_t *src, int wire_bytes, const int32_t *src_row, int rows,
                                       const int32_t *rows_dev, int k, uint4 *q, uint32_t *scale)
{
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (warp >= rows || (rows_dev && warp >= *rows_dev))
        return;
    const int vecs = k / 16, kb = k / 128;
    const uint8_t *row = src + (size_t)(src_row ? src_row[warp] : warp) * wire_bytes;
    const uint4 *in = reinterpret_cast<const uint4 *>(row);
    uint4 *out = q + (size_t)warp * vecs;
    for (int v = lane; v < vecs; v += 32)
        out[v] = in[v];
    const uint32_t *in_s = reinterpret_cast<const uint32_t *>(row + k);
    for (int b = lane; b < kb; b += 32)
        scale[(size_t)warp * kb + b] = in_s[b];
}

static bool bad_shape(int k, int wire_bytes, const void *a, const void *b, const void *scale)
{
    return k % 128 || wire_bytes % 16 || wire_bytes < k + k / 32 || ((uintptr_t)a | (uintptr_t)b) % 16 ||
           (uintptr_t)scale % 4;
}

extern "C" int mok_fp8_rows_scatter(const uint8_t *q, const void *scale, int k, int topk, const int32_t *send_pos,
                                    int route_begin, int route_end, uint8_t *dst, int wire_bytes, mok_stream_t stream)
{
    int rows = route_end - route_begin;
    if (rows <= 0)
        return 0;
    if (bad_shape(k, wire_bytes, q, dst, scale))
        return (int)cudaErrorInvalidValue;
    unsigned blocks = (unsigned)(((size_t)rows * 32 + 255) / 256);
    fp8_rows_scatter_kernel<<<blocks, 256, 0, mok_cuda_stream(stream)>>>(
        reinterpret_cast<const uint4 *>(q), static_cast<const uint32_t *>(scale), k, topk, send_pos, route_begin,
        route_end, dst, wire_bytes);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_fp8_rows_gather(const uint8_t *src, int wire_bytes, const int32_t *src_row, int rows, int k,
                                   uint8_t *q, void *scale, mok_stream_t stream)
{
    if (rows <= 0)
        return 0;
    if (bad_shape(k, wire_bytes, src, q, scale))
        return (int)cudaErrorInvalidValue;
    unsigned blocks = (unsigned)(((size_t)rows * 32 + 255) / 256);
    fp8_rows_gather_kernel<<<blocks, 256, 0, mok_cuda_stream(stream)>>>(src, wire_bytes, src_row, rows, NULL, k,
                                                                       reinterpret_cast<uint4 *>(q),
                                                                       static_cast<uint32_t *>(scale));
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_fp8_rows_unpack(const uint8_t *src, int wire_bytes, int max_rows, const int32_t *rows, int k,
                                   uint8_t *q, void *scale, mok_stream_t stream)
{
    if (max_rows <= 0)
        return 0;
    if (!rows || bad_shape(k, wire_bytes, src, q, scale))
        return (int)cudaErrorInvalidValue;
    unsigned blocks = (unsigned)(((size_t)max_rows * 32 + 255) / 256);
    fp8_rows_gather_kernel<<<blocks, 256, 0, mok_cuda_stream(stream)>>>(src, wire_bytes, NULL, max_rows, rows, k,
                                                                       reinterpret_cast<uint4 *>(q),
                                                                       static_cast<uint32_t *>(scale));
    return MOK_LAUNCH_RESULT();
}

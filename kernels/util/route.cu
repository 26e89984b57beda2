/* route: per-chunk expert counts and send-buffer positions for the NCCL baselines. This is the "count tokens
 * per expert on the device" step of the standard pipeline; the counts then go to the host (the baseline's
 * own synchronization) to size the grouped send/recv. */
#include "common/common.cuh"

__global__ void route_count_kernel(const int32_t *topk_ids, int routes, int topk, int chunk_tokens, int experts,
                                   int32_t *counts)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= routes)
        return;
    int chunk = (r / topk) / chunk_tokens;
    atomicAdd(&counts[(size_t)chunk * experts + topk_ids[r]], 1);
}

/* One block per chunk: exclusive scan of that chunk's expert counts. Chunk c starts at route row
 * c * chunk_tokens * topk because every token of the chunk contributes exactly topk rows. */
__global__ void route_offsets_kernel(const int32_t *counts, int chunk_tokens, int topk, int experts,
                                     int32_t *offsets)
{
    __shared__ int32_t partial[1024];
    int c = blockIdx.x;
    const int32_t *row = counts + (size_t)c * experts;
    /* each thread sums a contiguous slice, then thread 0 scans the slice sums: experts <= 1024 */
    int per = (experts + blockDim.x - 1) / blockDim.x;
    int begin = threadIdx.x * per, end = min(begin + per, experts);
    int32_t s = 0;
    for (int e = begin; e < end; e++)
        s += row[e];
    partial[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        int32_t run = c * chunk_tokens * topk;
        for (int i = 0; i < (int)blockDim.x; i++) {
            int32_t v = partial[i];
            partial[i] = run;
            run += v;
        }
    }
    __syncthreads();
    int32_t run = partial[threadIdx.x];
    for (int e = begin; e < end; e++) {
        offsets[(size_t)c * experts + e] = run;
        run += row[e];
    }
}

__global__ void route_positions_kernel(const int32_t *topk_ids, int routes, int topk, int chunk_tokens,
                                       int experts, const int32_t *offsets, int32_t *cursor, int32_t *send_pos)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= routes)
        return;
    size_t slot = (size_t)((r / topk) / chunk_tokens) * experts + topk_ids[r];
    send_pos[r] = offsets[slot] + atomicAdd(&cursor[slot], 1);
}

extern "C" int mok_route_count(const int32_t *topk_ids, int tokens, int topk, int chunk_tokens, int experts,
                               int32_t *counts, mok_stream_t stream)
{
    int routes = tokens * topk;
    if (routes == 0)
        return 0;
    route_count_kernel<<<(routes + 255) / 256, 256, 0, mok_cuda_stream(stream)>>>(topk_ids, routes, topk,
                                                                               chunk_tokens, experts, counts);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_route_positions(const int32_t *topk_ids, int tokens, int topk, int chunk_tokens, int experts,
                                   const int32_t *counts, int32_t *offsets, int32_t *cursor, int32_t *send_pos,
                                   mok_stream_t stream)
{
    int routes = tokens * topk;
    if (routes == 0)
        return 0;
    if (experts > 1024 * 1024)
        return (int)cudaErrorInvalidValue;
    int nchunks = (tokens + chunk_tokens - 1) / chunk_tokens;
    cudaStream_t s = mok_cuda_stream(stream);
    route_offsets_kernel<<<nchunks, 1024, 0, s>>>(counts, chunk_tokens, topk, experts, offsets);
    int err = MOK_LAUNCH_RESULT();
    if (err)
        return err;
    err = (int)cudaMemsetAsync(cursor, 0, sizeof(int32_t) * (size_t)nchunks * experts, s);
    if (err)
        return err;
    route_positions_kernel<<<(routes + 255) / 256, 256, 0, s>>>(topk_ids, routes, topk, chunk_tokens, experts,
                                                               offsets, cursor, send_pos);
    return MOK_LAUNCH_RESULT();
}

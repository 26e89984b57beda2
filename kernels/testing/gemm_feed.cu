/* gemm_feed: stands in for the dispatch in tests of the GEMM's ready counters. One block sleeps (so the GEMM is
 * surely waiting), then writes the rows chunk by chunk, last chunk first, and releases each chunk's counter to
 * its target after its rows: a GEMM that read a chunk before its counter would read the poison left there. */
#include "common/common.cuh"
#include "mok_gemm.h"
#include "testing/mok_test_kernels.h"

__global__ void gemm_feed_kernel(uint16_t *dst, const uint16_t *src, int rows, int row_elems, int chunk_rows,
                                 int32_t *ready, const int32_t *target, long long sleep_ns)
{
    for (long long slept = 0; slept < sleep_ns; slept += 100000)
        __nanosleep(100000);
    int nchunks = (rows + chunk_rows - 1) / chunk_rows;
    for (int c = nchunks - 1; c >= 0; c--) {
        size_t lo = (size_t)c * chunk_rows * row_elems, hi = (size_t)min(rows, (c + 1) * chunk_rows) * row_elems;
        for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
            dst[i] = src[i];
        __syncthreads(); /* every thread's rows, then (fence after the barrier, so it covers them all) the release */
        if (threadIdx.x == 0) {
            __threadfence();
            atomicExch(&ready[c], target[c]);
        }
        __syncthreads();
    }
}

extern "C" int mok_gemm_feed(uint16_t *dst, const uint16_t *src, int rows, int row_elems, int chunk_rows,
                             int32_t *ready, const int32_t *target, long long sleep_ns, mok_stream_t stream)
{
    if (rows <= 0 || chunk_rows <= 0)
        return 0;
    gemm_feed_kernel<<<1, 256, 0, mok_cuda_stream(stream)>>>(dst, src, rows, row_elems, chunk_rows, ready, target,
                                                             sleep_ns);
    return MOK_LAUNCH_RESULT();
}

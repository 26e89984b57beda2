/* peer_bench: a diagnostic, not part of the product. How fast can a few SMs move 14 KiB rows between the two
 * GPUs of this machine when both directions run at once, by warp stores (the lsa push), by warp loads, and by
 * per-warp bulk-copy rings through shared memory pulling from or pushing to the peer? One process, both GPUs,
 * CUDA peer access (no multicast). Build: nvcc -O3 -arch=sm_90a -std=c++17 -I kernels scripts/device/peer_bench.cu
 * Prints one line per (mode, blocks, directions): the median of 9 runs of the slower GPU, GB/s per direction. */
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <vector>
#include <cuda_runtime.h>
#include "bulk.cuh"

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

enum { WARP_PUSH, WARP_PULL, RING_PULL, RING_PUSH };
static const char *mode_name[] = {"warp-push", "warp-pull", "ring-pull", "ring-push"};

/* warp copies: one row per warp at a time, 4 vectors of 16 bytes per lane in flight */
__global__ void __launch_bounds__(1024) warp_copy(const uint4 *src, uint4 *dst, int rows, int vecs)
{
    int lane = threadIdx.x & 31, warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int nwarps = (gridDim.x * blockDim.x) >> 5;
    for (int r = warp; r < rows; r += nwarps) {
        const uint4 *s = src + (size_t)r * vecs;
        uint4 *d = dst + (size_t)r * vecs;
        for (int v0 = lane; v0 < vecs; v0 += 128) {
            uint4 x[4];
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (v0 + 32 * u < vecs) x[u] = s[v0 + 32 * u];
#pragma unroll
            for (int u = 0; u < 4; u++)
                if (v0 + 32 * u < vecs) d[v0 + 32 * u] = x[u];
        }
    }
}

/* bulk rings: each warp owns `depth` row buffers; lane 0 loads row k into buffer k % depth (global -> shared on
 * an mbarrier), stores it (shared -> global, one bulk group) and reloads the buffer of row k - 1 once its store
 * has read it, so depth - 1 loads stay in flight. */
__global__ void ring_copy(const char *src, char *dst, int rows, int row_bytes, int depth)
{
    extern __shared__ __align__(128) char smem[];
    int warp = threadIdx.x >> 5, wpb = blockDim.x >> 5;
    if ((threadIdx.x & 31) != 0)
        return;
    uint64_t *bar = (uint64_t *)smem + warp * 8;
    char *buf = smem + 1024 + (size_t)warp * depth * row_bytes;
    int gw = blockIdx.x * wpb + warp, ngw = gridDim.x * wpb;
    int n = rows > gw ? (rows - gw + ngw - 1) / ngw : 0; /* rows of this warp: gw, gw + ngw, ... */
    for (int d = 0; d < depth; d++)
        mok_mbar_init(&bar[d], 1);
    mok_fence_mbar_init();
    auto load = [&](int k) {
        int d = k % depth;
        mok_mbar_expect_tx(&bar[d], row_bytes);
        mok_bulk_load(buf + (size_t)d * row_bytes, src + (size_t)(gw + (size_t)k * ngw) * row_bytes, row_bytes, &bar[d]);
    };
    for (int k = 0; k < depth - 1 && k < n; k++)
        load(k);
    for (int k = 0; k < n; k++) {
        int d = k % depth;
        mok_mbar_wait(&bar[d], (uint32_t)((k / depth) & 1));
        mok_bulk_store(dst + (size_t)(gw + (size_t)k * ngw) * row_bytes, buf + (size_t)d * row_bytes, row_bytes);
        mok_bulk_commit();
        asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
        if (k + depth - 1 < n)
            load(k + depth - 1);
    }
    mok_bulk_wait(0);
}

int main(int argc, char **argv)
{
    int row_bytes = 14336, rows = argc > 1 ? atoi(argv[1]) : 8192;
    size_t bytes = (size_t)rows * row_bytes;
    char *buf[2][2]; /* [gpu][0 src, 1 dst] */
    cudaStream_t st[2];
    cudaEvent_t ev[2][2];
    for (int g = 0; g < 2; g++) {
        CK(cudaSetDevice(g));
        CK(cudaDeviceEnablePeerAccess(1 - g, 0));
        CK(cudaMalloc(&buf[g][0], bytes));
        CK(cudaMalloc(&buf[g][1], bytes));
        CK(cudaMemset(buf[g][0], 0x5a + g, bytes));
        CK(cudaStreamCreate(&st[g]));
        CK(cudaEventCreate(&ev[g][0]));
        CK(cudaEventCreate(&ev[g][1]));
        CK(cudaFuncSetAttribute(ring_copy, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    }
    int blocks_list[] = {8, 12, 16, 24, 32};
    for (int mode = 0; mode < 4; mode++)
        for (int dirs = 1; dirs <= 2; dirs++)
            for (int bi = 0; bi < 5; bi++) {
                int blocks = blocks_list[bi];
                std::vector<float> t;
                for (int it = 0; it < 11; it++) {
                    for (int g = 0; g < dirs; g++) {
                        CK(cudaSetDevice(g));
                        CK(cudaDeviceSynchronize());
                    }
                    for (int g = 0; g < dirs; g++) {
                        CK(cudaSetDevice(g));
                        bool pull = mode == WARP_PULL || mode == RING_PULL;
                        /* the runs on GPU g: pull = peer's src -> my dst; push = my src -> peer's dst */
                        const char *s = pull ? buf[1 - g][0] : buf[g][0];
                        char *d = pull ? buf[g][1] : buf[1 - g][1];
                        CK(cudaEventRecord(ev[g][0], st[g]));
                        if (mode <= WARP_PULL)
                            warp_copy<<<blocks, 1024, 0, st[g]>>>((const uint4 *)s, (uint4 *)d, rows, row_bytes / 16);
                        else {
                            int warps = 5, depth = 3; /* 5 x 3 x 14 KiB fill the shared memory */
                            ring_copy<<<blocks, warps * 32, 1024 + (size_t)warps * depth * row_bytes, st[g]>>>(
                                s, d, rows, row_bytes, depth);
                        }
                        CK(cudaGetLastError());
                        CK(cudaEventRecord(ev[g][1], st[g]));
                    }
                    float worst = 0;
                    for (int g = 0; g < dirs; g++) {
                        CK(cudaSetDevice(g));
                        CK(cudaEventSynchronize(ev[g][1]));
                        float ms;
                        CK(cudaEventElapsedTime(&ms, ev[g][0], ev[g][1]));
                        worst = std::max(worst, ms);
                    }
                    if (it >= 2)
                        t.push_back(worst);
                }
                std::sort(t.begin(), t.end());
                float med = t[t.size() / 2];
                printf("peer_bench %-9s blocks %2d %s: %7.1f us  %6.1f GB/s per direction\n", mode_name[mode], blocks,
                       dirs == 2 ? "both directions" : "one direction  ", med * 1e3, bytes / (med * 1e-3) / 1e9);
            }
    /* check: the last run of ring-push copied GPU 0's source into GPU 1's destination */
    std::vector<unsigned char> h(4096);
    CK(cudaSetDevice(1));
    CK(cudaMemcpy(h.data(), buf[1][1] + bytes - 4096, 4096, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (unsigned char c : h)
        bad += c != 0x5a;
    printf("peer_bench check: %s\n", bad ? "FAILED" : "ok");
    return bad != 0;
}

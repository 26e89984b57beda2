/* megakernel/sync.cuh: the counters and flags the roles wait on (the row-block counters of done[]), each
 * wait timing out into the failure record (gemm/sm90_core.cuh, common/sm90_ptx.cuh).
 * Part of the fused forward's one translation unit (kernels/megakernel/forward.cu includes it once, in this order:
 * layout, sync, units, comm, compute); its names live in that file's anonymous namespace. */
#pragma once

namespace {

#if MOK_SM90_DEVICE
constexpr int kMaxStages = 8;

__device__ __forceinline__ int32_t *row_counters(int32_t *done, int job, int capacity)
{
    return done + 2 + (size_t)job * (capacity / kTileM);
}

constexpr int kWarps = kThreads / 32; /* 12 copy warps per comm block */
constexpr int kDispatchUnroll = 8;    /* 12 warps per SM: more vectors per lane in flight than the 1024-thread
                                         dispatch kernel's 4 */

/* A scatter warp's rows of chunk c are in (`copied` of them, counted per lane alike): its count into the chunk's
 * ready counter, after a warp barrier so lane 0's fence orders every lane's row writes before it. */
__device__ __forceinline__ void release_chunk_rows(const mok_lsa_args &a, int c, int copied, int lane)
{
    __syncwarp();
    if (lane == 0 && copied) {
        __threadfence();
        atomicAdd(&a.ready[c], copied);
    }
}

/* Until *ctr >= target (acquire at GPU scope), or trap with a record after ~10 s. */
__device__ __forceinline__ void wait_count(const int32_t *ctr, int target, struct mok_sm90_diag *diag, int which,
                                           int index)
{
    int seen;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(ctr) : "memory");
    if (seen >= target)
        return;
    long long start = clock64();
    for (;;) {
        asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(ctr) : "memory");
        if (seen >= target)
            return;
        if (clock64() - start > MOK_SPIN_TIMEOUT_CYCLES)
            mok_sm90_fail(diag, MOK_SM90_DIAG_MEGA, which, 0, index, seen, target);
    }
}

/* Until the 64-bit flag a peer stores into my window reaches target (acquire at system scope). */
__device__ __forceinline__ void wait_flag(const uint64_t *flag, uint64_t target, struct mok_sm90_diag *diag, int index)
{
    long long start = clock64();
    for (;;) {
        uint64_t seen;
        asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(seen) : "l"(flag) : "memory");
        if (seen >= target)
            return;
        if (clock64() - start > MOK_SPIN_TIMEOUT_CYCLES)
            mok_sm90_fail(diag, MOK_SM90_DIAG_MEGA, 2, 0, index, (int)seen, (int)target);
    }
}
#endif

} // namespace

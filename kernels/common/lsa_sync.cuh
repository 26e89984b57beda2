/* lsa_sync: the cross-GPU ordering primitives of the LSA (load/store accessible) path: system-scope
 * release stores and acquire loads on 64-bit flags, and a spin-wait that gives up after a clock64 budget with a
 * diagnostic (rank, block, phase, what it waited for, expected vs seen) and a trap, so a deadlock becomes an
 * error the host reports instead of a hang. */
#pragma once
#include <stdint.h>
#include <stdio.h>

#include "common/bulk.cuh"

/* about 10 s at the H200's 1.98 GHz: far beyond any legitimate wait, short enough to report */
#define MOK_SPIN_TIMEOUT_CYCLES (20000000000ll)

__device__ __forceinline__ uint64_t mok_ld_acquire_sys(const uint64_t *p)
{
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void mok_st_release_sys(uint64_t *p, uint64_t v)
{
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ int mok_ld_acquire_gpu(const int *p)
{
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* Spins until *flag >= target. One thread per block should call it, then __syncthreads(). budget: clock64 cycles
 * before giving up (0: MOK_SPIN_TIMEOUT_CYCLES). */
__device__ __forceinline__ void mok_wait_geq_sys(const uint64_t *flag, uint64_t target, int rank, const char *phase,
                                                 const char *what, int index, long long budget = 0)
{
    long long start = clock64(), limit = budget > 0 ? budget : MOK_SPIN_TIMEOUT_CYCLES;
    uint64_t seen;
    while ((seen = mok_ld_acquire_sys(flag)) < target) {
        if (clock64() - start > limit) {
            printf("mok-bench: TIMEOUT rank %d block %d phase %s: waited for %s[%d] >= %llu, saw %llu\n", rank,
                   (int)blockIdx.x, phase, what, index, (unsigned long long)target, (unsigned long long)seen);
            __trap();
        }
    }
}

/* Same for a local (same GPU) counter, e.g. a chunk's ready count. */
__device__ __forceinline__ void mok_wait_geq_gpu(const int *counter, int target, int rank, const char *phase,
                                                 const char *what, int index)
{
    long long start = clock64();
    int seen;
    while ((seen = mok_ld_acquire_gpu(counter)) < target) {
        if (clock64() - start > MOK_SPIN_TIMEOUT_CYCLES) {
            printf("mok-bench: TIMEOUT rank %d block %d phase %s: waited for %s[%d] >= %d, saw %d\n", rank,
                   (int)blockIdx.x, phase, what, index, target, seen);
            __trap();
        }
    }
}

/* Spins until the phase with this parity of a shared-memory mbarrier completed (a bulk load into this SM), with the
 * same budget: a load that never completes is reported (rank, block, warp, phase, what, index) and traps. */
__device__ __forceinline__ void mok_wait_mbar(uint64_t *bar, uint32_t parity, int rank, const char *phase,
                                              const char *what, int index)
{
    const uint32_t addr = mok_smem_addr(bar);
    long long start = clock64();
    while (!mok_mbar_try_wait(addr, parity)) {
        if (clock64() - start > MOK_SPIN_TIMEOUT_CYCLES) {
            printf("mok-bench: TIMEOUT rank %d block %d warp %d phase %s: waited for %s[%d] (parity %u)\n", rank,
                   (int)blockIdx.x, (int)(threadIdx.x >> 5), phase, what, index, parity);
            __trap();
        }
    }
}

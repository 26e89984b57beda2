/* bulk: Hopper's bulk copy engine (cp.async.bulk, no tensor map) and the mbarriers that complete its loads.
 * One thread issues a whole row: global (local or a peer's, through an LSA pointer) -> shared memory, then
 * shared -> one or more global destinations. The SM's threads stay free, so a few SMs saturate NVLink. */
#pragma once
#include <stdint.h>

__device__ __forceinline__ uint32_t mok_smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mok_mbar_init(uint64_t *bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(mok_smem_addr(bar)), "r"(count) : "memory");
}

/* Makes the mbarrier inits visible to the async proxy (the bulk copy engine) before its first use. */
__device__ __forceinline__ void mok_fence_mbar_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ __forceinline__ void mok_mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(mok_smem_addr(bar)), "r"(bytes)
                 : "memory");
}

/* Raises the barrier's expected transaction bytes without an arrive: a thread that loads bytes by TMA into a slot and
 * also writes part of it itself arms the bytes first and arrives once, after its own writes (mxfp8 mx_scheme 2). */
__device__ __forceinline__ void mok_mbar_expect_tx_only(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(mok_smem_addr(bar)), "r"(bytes)
                 : "memory");
}

/* One probe of the phase with this parity: true once it has completed. try_wait may itself suspend the thread for a
 * short, hardware-chosen time before answering false, so a loop of these is not a hot spin; test_wait answers at once
 * (an inline producer polls a slot between its own work). One asm text, the instruction named by OP. */
#define MOK_MBAR_PROBE(OP, bar, parity, done)                                                                          \
    asm volatile("{\n"                                                                                                \
                 " .reg .pred p;\n"                                                                                   \
                 " mbarrier." OP ".parity.shared::cta.b64 p, [%1], %2;\n"                                             \
                 " selp.u32 %0, 1, 0, p;\n"                                                                           \
                 "}\n"                                                                                                \
                 : "=r"(done)                                                                                         \
                 : "r"(bar), "r"(parity)                                                                              \
                 : "memory")

__device__ __forceinline__ bool mok_mbar_try_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    MOK_MBAR_PROBE("try_wait", bar, parity, done);
    return done != 0;
}

__device__ __forceinline__ bool mok_mbar_test_wait(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    MOK_MBAR_PROBE("test_wait", bar, parity, done);
    return done != 0;
}
#undef MOK_MBAR_PROBE

/* No unbounded wait here: lsa_sync.cuh's mok_wait_mbar spins with a timeout and a diagnostic. */

/* global -> shared, bytes a multiple of 16, both 16-byte aligned; completes on bar (expect_tx first). */
__device__ __forceinline__ void mok_bulk_load(void *smem_dst, const void *gmem_src, uint32_t bytes, uint64_t *bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     mok_smem_addr(smem_dst)),
                 "l"(gmem_src), "r"(bytes), "r"(mok_smem_addr(bar))
                 : "memory");
}

/* shared -> global, in the current bulk group. */
__device__ __forceinline__ void mok_bulk_store(void *gmem_dst, const void *smem_src, uint32_t bytes)
{
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem_dst),
                 "r"(mok_smem_addr(smem_src)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mok_bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

/* Waits until at most n of this thread's bulk groups are pending, their writes complete (visible to this
 * thread). n must be a compile-time constant in PTX, hence the switch. */
__device__ __forceinline__ void mok_bulk_wait(int n)
{
    switch (n) {
    case 0: asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); break;
    case 1: asm volatile("cp.async.bulk.wait_group 1;" ::: "memory"); break;
    case 2: asm volatile("cp.async.bulk.wait_group 2;" ::: "memory"); break;
    case 3: asm volatile("cp.async.bulk.wait_group 3;" ::: "memory"); break;
    case 4: asm volatile("cp.async.bulk.wait_group 4;" ::: "memory"); break;
    case 5: asm volatile("cp.async.bulk.wait_group 5;" ::: "memory"); break;
    case 6: asm volatile("cp.async.bulk.wait_group 6;" ::: "memory"); break;
    default: asm volatile("cp.async.bulk.wait_group 7;" ::: "memory"); break;
    }
}

/* Orders the bulk engine's completed global writes before this thread's following generic operations (the
 * release that publishes them). */
__device__ __forceinline__ void mok_fence_proxy_async_global()
{
    asm volatile("fence.proxy.async.global;" ::: "memory");
}

/* sm90_ptx: the Hopper (sm_90a) instructions the expert GEMM (kernels/gemm/sm90_grouped.cu) is built from: the tensor
 * memory accelerator (TMA, cp.async.bulk.tensor with a CUtensorMap), mbarrier waits that give up with a
 * diagnostic, warpgroup MMA (wgmma.mma_async) and its shared-memory matrix descriptors, setmaxnreg.
 *
 * Everything here exists only in the sm_90a device pass (MOK_SM90_DEVICE): wgmma and setmaxnreg are "a"
 * features, so the sm_100a pass and the host pass see none of it, and the kernel body that uses it is under
 * the same macro. The plain mbarrier helpers (init, expect_tx, fence) come from bulk.cuh. */
#pragma once
#include <stdint.h>
#include <stdio.h>

#include "common/bulk.cuh"
#include "common/lsa_sync.cuh" /* MOK_SPIN_TIMEOUT_CYCLES: the same ~10 s budget as the cross-GPU waits */

/* What a failing gemm_sm90 kernel leaves in mapped host memory (see mok_sm90_fail). */
#define MOK_SM90_DIAG_MAGIC 0x6d6f6b39 /* "mok9" */
#define MOK_SM90_DIAG_PRODUCER 1        /* producer waited on an "empty" barrier */
#define MOK_SM90_DIAG_CONSUMER 2        /* consumer warpgroup 1 (rows 0-63) waited on a "full" barrier; 3: wg 2 */
#define MOK_SM90_DIAG_OFFSETS 4         /* offset[] invalid: tile = g, kb = offset[g], extra = offset[g + 1] */
#define MOK_SM90_DIAG_READY 5           /* rows never ready: tile, slot = chunk, kb = counter seen, extra = target */
#define MOK_SM90_DIAG_WAVE 6            /* lockstep: tile = barrier, kb = arrivals seen, extra = expected */
#define MOK_SM90_DIAG_MEGA 7            /* megakernel wait: slot = which, tile = index, kb = seen, extra = target */
#define MOK_SM90_DIAG_LANDING 8         /* mxfp8 scheme (b): a producer thread waited on a landing stage (slot) */
struct mok_sm90_diag {
    int magic, block, thread, role, slot, parity, tile, kb, extra;
};

#ifndef MOK_GEMM_SM90_PRINTF
#define MOK_GEMM_SM90_PRINTF 0
#endif

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MOK_SM90_DEVICE 1
#else
#define MOK_SM90_DEVICE 0
#endif

#if MOK_SM90_DEVICE

/* ---- mbarrier ----------------------------------------------------------------------------------------- */

/* Ends the kernel with an error the host sees: a store to a misaligned address (cudaErrorMisalignedAddress), then a
 * wait for the fault to take the warp. Not __trap(): a trap reachable where a warpgroup's wgmma accumulators are
 * live makes ptxas spill (CUDA 13.0: with it the fused forward's instances spilled 24-304 bytes, the fused backward
 * 272, the grouped GEMM's fp8_block 128-column instance 52, and consume_tile_fp8_block<256, 2> alone in a test
 * kernel 324; with this store none of them, the backward 12; `exit` and `brkpt` spill nothing either, but exit ends
 * the thread without an error). */
__device__ __forceinline__ void mok_sm90_abort()
{
    asm volatile("st.global.u32 [%0], %1;" ::"l"(1ull), "r"(0u) : "memory");
    for (;;)
        asm volatile("nanosleep.u32 1000000;" ::: "memory");
}

/* A stuck wait or a bad input: record who and what (MOK_SM90_DIAG_* in the role field), then end the kernel with
 * an error (mok_sm90_abort).
 *
 * Why not printf, as kernels/common/lsa_sync.cuh does: printf is a function call, and ptxas serializes every wgmma
 * of a kernel that contains any call at all (warning C7510, seen with CUDA 13.0 even for a printf before the
 * first wgmma), and an out-of-line call also makes it drop setmaxnreg (C7507). So the record goes to mapped
 * host memory (the launcher allocates it; the host prints it at exit, readable even after the fault has killed
 * the context) with system-scope stores, fenced, before the abort. Build with -DMOK_GEMM_SM90_PRINTF=1 to get
 * an immediate printf as well, at the cost of serialized wgmmas: for debugging only. */
__device__ __forceinline__ void mok_sm90_fail(struct mok_sm90_diag *diag, int role, int slot, uint32_t parity,
                                              int tile, int kb, int extra)
{
    if (diag) {
        volatile struct mok_sm90_diag *d = diag;
        if (d->magic == 0) { /* the first to fail (most likely) is the interesting one */
            d->block = (int)blockIdx.x;
            d->thread = (int)threadIdx.x;
            d->role = role;
            d->slot = slot;
            d->parity = (int)parity;
            d->tile = tile;
            d->kb = kb;
            d->extra = extra;
            __threadfence_system();
            d->magic = MOK_SM90_DIAG_MAGIC;
            __threadfence_system();
            /* let the posted writes reach host memory before the trap tears the context down */
            long long t0 = clock64();
            while (clock64() - t0 < 2000000) {
            }
        }
    }
#if MOK_GEMM_SM90_PRINTF
    printf("mok-bench: gemm_sm90 FAIL block %d thread %d role %d slot %d parity %u tile %d kb %d extra %d\n",
           (int)blockIdx.x, (int)threadIdx.x, role, slot, parity, tile, kb, extra);
#endif
    mok_sm90_abort();
}

/* Waits for the phase with this parity of bar; after MOK_SPIN_TIMEOUT_CYCLES (~10 s) records who waited for
 * what and traps, so a pipeline bug becomes an error the host sees instead of a hang. The first probe is
 * outside the timed loop: the common case (already complete) reads no clock. */
/* A tile's A rows written by other SMs (the dispatch) while this kernel runs: wait on their chunks' ready
 * counters (released by the writers at GPU scope), then order those generic-proxy writes before this thread's
 * TMA (async-proxy) reads of them. */
__device__ __forceinline__ void mok_sm90_wait_rows(const int32_t *ready, const int32_t *target, int chunk_rows,
                                                   int row0, int row_end, struct mok_sm90_diag *diag, int tile)
{
    if (!ready || row_end <= row0)
        return;
    for (int c = row0 / chunk_rows; c <= (row_end - 1) / chunk_rows; c++) {
        int want = target[c], seen;
        long long start = clock64();
        for (;;) {
            asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(ready + c) : "memory");
            if (seen >= want)
                break;
            if (clock64() - start > MOK_SPIN_TIMEOUT_CYCLES)
                mok_sm90_fail(diag, MOK_SM90_DIAG_READY, c, 0, tile, seen, want);
        }
    }
    asm volatile("fence.proxy.async.global;" ::: "memory");
}

/* Lockstep (one thread per CTA): arrive at barrier j and wait until every CTA of the grid has, i.e. until the
 * launch's arrival counter reaches ctas * j. A CTA arrives once per barrier and only after passing the previous
 * one, so the count cannot run ahead. All CTAs must be resident (one per SM, grid <= SMs). */
__device__ __forceinline__ void mok_sm90_wave_barrier(int *ctr, int ctas, int wave, struct mok_sm90_diag *diag)
{
    atomicAdd(ctr, 1);
    int want = ctas * wave, seen;
    long long start = clock64();
    for (;;) {
        asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(seen) : "l"(ctr) : "memory");
        if (seen >= want)
            break;
        if (clock64() - start > MOK_SPIN_TIMEOUT_CYCLES)
            mok_sm90_fail(diag, MOK_SM90_DIAG_WAVE, 0, 0, wave, seen, want);
    }
}

__device__ __forceinline__ void mok_sm90_wait(uint64_t *bar, uint32_t parity, struct mok_sm90_diag *diag, int role,
                                              int slot, int tile, int kb)
{
    uint32_t addr = mok_smem_addr(bar);
    if (mok_mbar_try_wait(addr, parity))
        return;
    long long start = clock64();
    while (!mok_mbar_try_wait(addr, parity)) {
        if (clock64() - start > MOK_SPIN_TIMEOUT_CYCLES)
            mok_sm90_fail(diag, role, slot, parity, tile, kb, 0);
    }
}

/* A plain arrive (count 1), no transaction bytes: a consumer warp hands a slot back to the producer. */
__device__ __forceinline__ void mok_mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(mok_smem_addr(bar)) : "memory");
}

/* ---- TMA ------------------------------------------------------------------------------------------------ */

/* Pulls the tensor map (a __grid_constant__ kernel parameter) into the TMA unit's cache ahead of first use. */
__device__ __forceinline__ void mok_tma_prefetch_map(const void *map)
{
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

/* One box of a 2-D tensor map, global -> shared at dst (1024-byte aligned for the 128B swizzle), completing
 * the box's bytes on bar (arrive.expect_tx first). c0 is the inner (K, element) coordinate, c1 the row.
 * Elements outside the tensor are filled with zeros and still count toward the transaction bytes. */
__device__ __forceinline__ void mok_tma_load_2d(void *dst, const void *map, int c0, int c1, uint64_t *bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3}], [%4];" ::"r"(mok_smem_addr(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(mok_smem_addr(bar))
                 : "memory");
}

/* One box of shared memory (dst-shaped, 128B-swizzled like the loads) -> a 2-D tensor map at (c0, c1), in a
 * bulk group of this thread. Boxes past the tensor's edge are clipped by TMA, but nothing clips at a group's
 * end: the caller stores only boxes whose rows are all its own. The shared memory must not be rewritten before
 * mok_bulk_wait_read says the group has read it. */
__device__ __forceinline__ void mok_tma_store_2d(const void *map, int c0, int c1, const void *src)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(c0), "r"(c1), "r"(mok_smem_addr(src))
                 : "memory");
}
/* The same box added element-wise onto the tensor in global memory (the L2 does the read-modify-write; the type is
 * the tensor map's, e.g. fp32 weight gradients accumulated without loading them into the SM). Each element gets
 * exactly one add from one box here, so the result does not depend on timing. */
__device__ __forceinline__ void mok_tma_reduce_add_2d(const void *map, int c0, int c1, const void *src)
{
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                     reinterpret_cast<uint64_t>(map)),
                 "r"(c0), "r"(c1), "r"(mok_smem_addr(src))
                 : "memory");
}
/* This thread's bulk groups have finished reading their shared memory (the writes may still be in flight;
 * bulk.cuh's mok_bulk_wait(0) waits for those too). */
__device__ __forceinline__ void mok_bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }

/* Barrier over `threads` threads (a multiple of 32) of the CTA, id 1..15 (0 is __syncthreads'). */
__device__ __forceinline__ void mok_named_barrier(int id, int threads)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/* ---- thread-block clusters ------------------------------------------------------------------------------
 * With cluster_m = 2 two CTAs (on two SMs of one GPC) compute vertically adjacent tiles that share their B tile:
 * each loads half of B and multicasts it into both CTAs' shared memory, halving the L2 -> SM traffic of B. */

__device__ __forceinline__ uint32_t mok_cluster_rank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ uint32_t mok_cluster_id()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
    return r;
}
__device__ __forceinline__ uint32_t mok_cluster_count()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
    return r;
}

/* Every thread of every CTA of the cluster (not the aligned form: the producer's idle threads arrive from a
 * divergent path). Release/acquire: barrier inits before it are visible to the peer after it. */
__device__ __forceinline__ void mok_cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}

/* Arrive on the barrier at the same shared-memory offset in CTA `cta` of the cluster. Default semantics
 * (release, CTA scope), as for a local arrive: what it orders is the wgmma reads of the slot, complete at the
 * wgmma wait before it; a cluster-scope release would fence every arrive for nothing. */
__device__ __forceinline__ void mok_mbar_arrive_cluster(uint64_t *bar, uint32_t cta)
{
    asm volatile("{\n\t.reg .b32 remote;\n\t"
                 "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}" ::"r"(mok_smem_addr(bar)),
                 "r"(cta)
                 : "memory");
}

/* mok_tma_load_2d into the same offset of every CTA in cta_mask, each completing its bytes on its own barrier
 * at bar's offset. */
__device__ __forceinline__ void mok_tma_load_2d_multicast(void *dst, const void *map, int c0, int c1, uint64_t *bar,
                                                          uint16_t cta_mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(mok_smem_addr(dst)),
                 "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(mok_smem_addr(bar)), "h"(cta_mask)
                 : "memory");
}

/* ---- registers ------------------------------------------------------------------------------------------ */

/* Per-warpgroup register budgets. Take effect only with a register cap at entry (__launch_bounds__(n, 1)) and
 * with every warp of the warpgroup executing the same one. */
template <int N> __device__ __forceinline__ void mok_setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N> __device__ __forceinline__ void mok_setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

/* ---- wgmma -------------------------------------------------------------------------------------------- */

/* Shared-memory matrix descriptor of a K-major operand tile in the 128-byte swizzle layout that TMA wrote
 * (CU_TENSOR_MAP_SWIZZLE_128B, 64 bf16 = 128 bytes of K per row, rows 128 bytes apart):
 *   bits  0-13  start address >> 4 (the tile must sit at a 1024-byte aligned address, plus the K offset below)
 *   bits 16-29  leading dimension byte offset >> 4: unused for swizzled K-major layouts; 1 (16 bytes) by
 *               convention
 *   bits 32-45  stride dimension byte offset >> 4: from one group of 8 rows (8 x 128 B, one swizzle atom) to
 *               the next = 1024 bytes
 *   bits 49-51  base offset: 0, since every atom starts 1024-byte aligned
 *   bits 62-63  layout: 1 = 128-byte swizzle
 * Stepping along K by one k16 instruction (16 bf16 = 32 bytes) adds 32 bytes to the start address: the
 * hardware applies the swizzle XOR to the address it forms, so the unswizzled offset is what goes here. */
__device__ __forceinline__ uint64_t mok_wgmma_desc_sw128(const void *smem)
{
    uint64_t addr = mok_smem_addr(smem);
    uint64_t desc = (addr & 0x3FFFFull) >> 4;
    desc |= (uint64_t)(16 >> 4) << 16;
    desc |= (uint64_t)(1024 >> 4) << 32;
    desc |= (uint64_t)1 << 62;
    return desc;
}

/* The same for an MN-major operand tile (the backward's transposed reads: kernels/gemm/sm90_core.cuh, MnMajor):
 * rows of K, 128 bytes = 64 M (or N) values each, in blocks of 64 columns and 64 K rows (8 KiB) that TMA writes
 * one box each. For MN-major swizzled layouts the leading byte offset is the step from one 64-column block to the
 * next (lbo), the stride byte offset the step from one 8-row group of K to the next (1024 bytes, one atom). */
__device__ __forceinline__ uint64_t mok_wgmma_desc_sw128_mn(const void *smem, uint32_t lbo)
{
    uint64_t addr = mok_smem_addr(smem);
    uint64_t desc = (addr & 0x3FFFFull) >> 4;
    desc |= (uint64_t)((lbo & 0x3FFFFu) >> 4) << 16;
    desc |= (uint64_t)(1024 >> 4) << 32;
    desc |= (uint64_t)1 << 62;
    return desc;
}

/* Orders this thread's earlier register accesses (zeroing, epilogue reads of the last tile) before the
 * following wgmma reads and writes of the accumulators. */
__device__ __forceinline__ void mok_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void mok_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
/* Waits until at most N of this warpgroup's committed wgmma groups are still in flight. */
template <int N> __device__ __forceinline__ void mok_wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/* Tells the compiler the register may change here: keeps it from moving accumulator reads or writes across a
 * wgmma fence or wait (the wgmma itself runs asynchronously, which the compiler cannot see). */
__device__ __forceinline__ void mok_reg_fence(float &r) { asm volatile("" : "+f"(r)::"memory"); }

/* Orders generic-proxy shared-memory accesses with later async-proxy ones (TMA, wgmma operand reads). */
__device__ __forceinline__ void mok_fence_proxy_async_shared()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* 16 bytes from global to shared memory by cp.async through L2 (.cg), the rest of the 16 zero-filled: src_bytes 0
 * reads nothing and writes zeros. Its writes are the generic proxy's (a wgmma reading them needs
 * mok_fence_proxy_async_shared after it has seen them land). */
__device__ __forceinline__ void mok_cp_async_16(void *dst, const void *src, uint32_t src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(mok_smem_addr(dst)), "l"(src), "r"(src_bytes)
                 : "memory");
}

/* One of the mbarrier's expected arrivals, made once this thread's earlier cp.async copies have landed (noinc: the
 * barrier's count includes it). */
__device__ __forceinline__ void mok_cp_async_mbar_arrive(uint64_t *bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(mok_smem_addr(bar)) : "memory");
}

/* A wgmma's fp32 accumulators d[0 .. N / 2) as asm in-out operands (MOK_WGMMA_D*) and their placeholders %0 ..
 * (MOK_WGMMA_P*): each wrapper below lists its other operands after them. */
#define MOK_WGMMA_D8(i)                                                                                                \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]),        \
        "+f"(d[i + 7])
#define MOK_WGMMA_D16 MOK_WGMMA_D8(0), MOK_WGMMA_D8(8)
#define MOK_WGMMA_D32 MOK_WGMMA_D16, MOK_WGMMA_D8(16), MOK_WGMMA_D8(24)
#define MOK_WGMMA_D48 MOK_WGMMA_D32, MOK_WGMMA_D8(32), MOK_WGMMA_D8(40)
#define MOK_WGMMA_D56 MOK_WGMMA_D48, MOK_WGMMA_D8(48)
#define MOK_WGMMA_D64 MOK_WGMMA_D56, MOK_WGMMA_D8(56)
#define MOK_WGMMA_D128                                                                                                 \
    MOK_WGMMA_D64, MOK_WGMMA_D8(64), MOK_WGMMA_D8(72), MOK_WGMMA_D8(80), MOK_WGMMA_D8(88), MOK_WGMMA_D8(96),           \
        MOK_WGMMA_D8(104), MOK_WGMMA_D8(112), MOK_WGMMA_D8(120)
#define MOK_WGMMA_P16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define MOK_WGMMA_P32 MOK_WGMMA_P16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define MOK_WGMMA_P48 MOK_WGMMA_P32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define MOK_WGMMA_P56 MOK_WGMMA_P48 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define MOK_WGMMA_P64 MOK_WGMMA_P56 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define MOK_WGMMA_P128                                                                                                 \
    MOK_WGMMA_P64 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "                 \
                  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "                   \
                  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "       \
                  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

/* D[64 x 64] += A[64 x 16] * B[64 x 16]^T, both from shared memory, fp32 accumulators d[32]: the 64-row tiles'
 * halves (kernels/gemm/sm90_grouped_kernel.cuh, kSplitN). kTa, kTb: 0 for a K-major operand (the forward), 1 for an
 * MN-major one read transposed (the backward's weights in dgrad, both operands of wgrad; bf16 only: FP8 wgmma
 * reads K-major operands only). The same for the n128 and n256 forms below. */
template <int kTa = 0, int kTb = 0>
__device__ __forceinline__ void mok_wgmma_m64n64k16(float (&d)[32], uint64_t desc_a, uint64_t desc_b)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, 1, 0;\n" /* scale-d = 1: D += A*B (accumulators zeroed per tile) */
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{" MOK_WGMMA_P32 "}, "
                 "%32, %33, p, 1, 1, %34, %35;\n" /* scale-a 1, scale-b 1, transposes kTa, kTb (0: K-major) */
                 "}\n"
        : MOK_WGMMA_D32
        : "l"(desc_a), "l"(desc_b), "n"(kTa), "n"(kTb)
        : "memory"); /* ordered after the mbarrier wait that made the operands visible */
}

/* D[64 x 128] += A[64 x 16] * B[128 x 16]^T, both from shared memory (K-major), fp32 accumulators d[64]. */
template <int kTa = 0, int kTb = 0>
__device__ __forceinline__ void mok_wgmma_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, 1, 0;\n" /* scale-d = 1: D += A*B (accumulators zeroed per tile) */
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{" MOK_WGMMA_P64 "}, "
                 "%64, %65, p, 1, 1, %66, %67;\n" /* scale-a 1, scale-b 1, transposes kTa, kTb (0: K-major) */
                 "}\n"
        : MOK_WGMMA_D64
        : "l"(desc_a), "l"(desc_b), "n"(kTa), "n"(kTb)
        : "memory"); /* ordered after the mbarrier wait that made the operands visible */
}

/* D[64 x 256] += A[64 x 16] * B[256 x 16]^T, both from shared memory (K-major), fp32 accumulators d[128]. */
template <int kTa = 0, int kTb = 0>
__device__ __forceinline__ void mok_wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, 1, 0;\n" /* scale-d = 1: D += A*B (accumulators zeroed per tile) */
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                 "{" MOK_WGMMA_P128 "}, "
                 "%128, %129, p, 1, 1, %130, %131;\n" /* scale-a 1, scale-b 1, transposes kTa, kTb (0: K-major) */
                 "}\n"
        : MOK_WGMMA_D128
        : "l"(desc_a), "l"(desc_b), "n"(kTa), "n"(kTb)
        : "memory"); /* ordered after the mbarrier wait that made the operands visible */
}

/* D[64 x 128] += A[64 x 16] * B[128 x 16]^T, A from registers as mok_wgmma_m64n256k16_rs below, d[64]. */
__device__ __forceinline__ void mok_wgmma_m64n128k16_rs(float (&d)[64], uint32_t a0, uint32_t a1, uint32_t a2,
                                                        uint32_t a3, uint64_t desc_b)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, 1, 0;\n" /* scale-d = 1: D += A*B */
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{" MOK_WGMMA_P64 "}, "
                 "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n" /* scale-a 1, scale-b 1, B K-major */
                 "}\n"
        : MOK_WGMMA_D64
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b)
        : "memory");
}

/* D[64 x 256] += A[64 x 16] * B[256 x 16]^T, A from registers (bf16 pairs a0..a3: the m16n8k16 A fragment of this
 * warp's 16 rows, mma's layout), B from shared memory (K-major), fp32 accumulators d[128]. wgmma reads a0..a3
 * asynchronously: they may not change until a wait_group says this wgmma is done (mxfp8 mx_scheme 3's consumers). */
__device__ __forceinline__ void mok_wgmma_m64n256k16_rs(float (&d)[128], uint32_t a0, uint32_t a1, uint32_t a2,
                                                        uint32_t a3, uint64_t desc_b)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, 1, 0;\n" /* scale-d = 1: D += A*B */
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                 "{" MOK_WGMMA_P128 "}, "
                 "{%128, %129, %130, %131}, %132, p, 1, 1, 0;\n" /* scale-a 1, scale-b 1, B K-major */
                 "}\n"
        : MOK_WGMMA_D128
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b)
        : "memory");
}

/* D[64 x 128] (+)= A[64 x 32] * B[128 x 32]^T in e4m3 (FP8 E4M3 values, one byte each), both from shared memory
 * (K-major: the only layout FP8 wgmma reads), fp32 accumulators d[64]. accumulate 0 writes D = A*B (scale-d
 * false: no zeroing pass before a k block's first step), 1 adds. The same 128B-swizzled boxes as bf16: 128 bytes
 * of K per row, now 128 e4m3 values, and a k32 step is again 32 bytes (descriptor + 2). */
__device__ __forceinline__ void mok_wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                          int accumulate)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
                 "{" MOK_WGMMA_P64 "}, "
                 "%64, %65, p, 1, 1;\n" /* scale-a 1, scale-b 1 (FP8 has no transpose: K-major only) */
                 "}\n"
        : MOK_WGMMA_D64
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory"); /* ordered after the mbarrier wait that made the operands visible */
}

/* The same on 64 columns: D[64 x 64] (+)= A[64 x 32] * B[64 x 32]^T in e4m3, fp32 accumulators d[32]. */
__device__ __forceinline__ void mok_wgmma_m64n64k32_e4m3(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                         int accumulate)
{
    asm volatile("{\n"
                 ".reg .pred p;\n"
                 "setp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 "
                 "{" MOK_WGMMA_P32 "}, "
                 "%32, %33, p, 1, 1;\n"
                 "}\n"
        : MOK_WGMMA_D32
        : "l"(desc_a), "l"(desc_b), "r"(accumulate)
        : "memory");
}

#endif /* MOK_SM90_DEVICE */

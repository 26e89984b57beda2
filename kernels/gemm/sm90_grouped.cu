/* gemm_sm90: the expert GEMMs (kernels/mok_gemm.h) on Hopper's own machinery: TMA loads into a shared-memory
 * ring, wgmma from shared memory into fp32 register accumulators, a persistent grid, warp specialization.
 *
 * Work: for every group g (rows [offset[g], offset[g+1]) of A, weights B[g]) and every output column tile, one
 * 128-row tile of C. The group sizes live only in device memory, so each CTA turns offset[] into a prefix of
 * tile counts itself (shared memory, once at start) and then walks the tile indices t = blockIdx.x,
 * t += gridDim.x, finding each tile's group by binary search in that prefix.
 *
 * Roles (384 threads = 3 warpgroups):
 *   warpgroup 0  producer: one thread issues the TMA loads of A (128 rows x 64 K) and B (tile_n rows x 64 K)
 *                for every (tile, k block) into slot s of the ring, after the slot's "empty" barrier says both
 *                consumers are done with it; the "full" barrier completes when the bytes have landed.
 *                Gives its registers away (setmaxnreg.dec 40).
 *   warpgroups 1, 2  consumers: rows [0, 64) and [64, 128) of the tile. For each k block: wait "full", 4
 *                wgmma m64nNk16 (N = tile_n) from shared memory, commit; then wait until only this group is in
 *                flight, so the previous k block's wgmmas are done and its slot goes back ("empty"). After the
 *                last k block: round to bf16 (SwiGLU when asked) into the warpgroup's staging area in shared
 *                memory (128B-swizzled boxes of 64 x 64, conflict-free) and let one thread store the boxes with
 *                TMA, asynchronously: the next tile's wgmmas start while the bytes go out. The last tile of a
 *                group whose rows end inside this warpgroup's 64 is stored by plain guarded stores instead (a
 *                TMA box would overwrite the next group's rows). Take the registers (setmaxnreg.inc 232):
 *                tile_n = 256 holds 128 fp32 accumulators per thread.
 *
 * SwiGLU (GEMM1): B[g] has 2*n_out rows (gate, then up). A tile of tile_n accumulator columns is tile_n/2 gate
 * rows followed by the matching tile_n/2 up rows of B, loaded as two TMA boxes that sit back to back in the
 * slot, so one wgmma with N = tile_n computes both and the epilogue pairs column j with column j + tile_n/2.
 *
 * mxfp8 with mx_scheme 1 (issue 22's scheme (b), sm90_mx_expand.cuh): the producer warpgroup's 128 threads all work.
 * Thread 0 loads the e4m3 rows of each k block into a small landing ring; every thread expands its rows, e4m3 x
 * 2^scale, into the bf16 slot the consumers read, then arrives on the slot's full barrier (128 arrivals). The
 * consumers and the epilogue are the bf16 instance's. mx_scheme 2: B is the weights' MX values already expanded to bf16
 * (at setup, by the caller: mok_dequant_mxfp8_bf16), loaded by TMA as the bf16 instance loads it; only A lands and
 * is expanded, and each slot's full barrier also counts B's TMA bytes (thread 0 adds them before the loads).
 * mx_scheme 3 (sm90_mx_rega.cuh): the bf16 instance's producer loads A's e4m3 rows and B's bf16 (K permuted within
 * each 64-K block at setup: mok_expand_mxfp8_bf16_k64perm), and each consumer thread expands its A fragment into
 * registers, wgmma reading A from there.
 *
 * Rows of a tile past its group's end are loaded anyway (they belong to the next group, or lie outside A and
 * TMA fills them with zeros) and computed, but never stored: every store is guarded by row < offset[g+1].
 *
 * Every mbarrier wait gives up after ~10 s (clock64), and a bad offset[] is caught while building the prefix:
 * either records block, thread, role, slot, parity, tile and k block in mapped host memory and stops the kernel with
 * a misaligned-address fault (sm90_ptx.cuh mok_sm90_abort says why not a trap); the host prints the record at exit
 * or on the next launch (mok_sm90_fail says why not printf).
 *
 * The kernel body exists only in the sm_90a device pass (MOK_SM90_DEVICE, from sm90_ptx.cuh); built for any
 * other target it traps with a message, and the launcher reports cudaErrorNotSupported on a non-Hopper GPU or
 * without a loadable image.
 *
 * Why one file of ~610 lines: check() (~240 lines) names every configuration the kernel instances refuse, beside
 * kernel_for's table of those instances and the launch that both guard. */
#include <cuda.h> /* CUtensorMap and its enums only: the encoder is fetched through the runtime, no -lcuda */
#include <cudaTypedefs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.cuh"
#include "gemm/sm90_core.cuh"
#include "gemm/sm90_fp8.cuh"
#include "gemm/sm90_mx_expand.cuh"
#include "gemm/sm90_mx_rega.cuh"
#include "mok_gemm.h"
#include "common/sm90_ptx.cuh"

#include "gemm/sm90_grouped_kernel.cuh"

namespace {

using namespace mok_sm90;

/* ---- host ------------------------------------------------------------------------------------------------ */

void say(char *why, int why_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void say(char *why, int why_len, const char *fmt, ...)
{
    if (!why || why_len <= 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, (size_t)why_len, fmt, ap);
    va_end(ap);
}

/* The instantiations: 128 x 128, 128 x 256, 256 x 128 (256 x 256 would need 256 accumulators a thread) and 64 x 256
 * (the small groups' tile: the warpgroups split the columns); fp8_block's and mxfp8's 128 x 128 with products of 64
 * or 128 columns, and fp8_block's 128 x 256 in the lean layout (sm90_core.cuh, lean_layout); mxfp8 scheme (b)'s
 * 128 x 128 and 128 x 256 (expand: bf16 slots expanded by the producer warpgroup, sm90_mx_expand.cuh), with B in
 * bf16 (b_bf16: mx_scheme 2) or e4m3; mx_scheme 3's 128 x 128 and 128 x 256 (rega: A in registers). */
const void *kernel_for(int tile_m, int tile_n, bool fp8, int fp8_n, bool mx = false, bool bt = false,
                       bool expand = false, bool lean = false, bool b_bf16 = false, bool rega = false,
                       bool half = false)
{
    if (rega)
        return tile_n == 256 ? reinterpret_cast<const void *>(
                                   &gemm_sm90_kernel<128, 256, 0, false, false, false, false, false, true>)
                             : reinterpret_cast<const void *>(
                                   &gemm_sm90_kernel<128, 128, 0, false, false, false, false, false, true>);
    if (expand && b_bf16)
        return tile_n == 256
                   ? reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 256, 0, false, false, true, false, true>)
                   : reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 128, 0, false, false, true, false, true>);
    if (expand)
        return tile_n == 256 ? reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 256, 0, false, false, true>)
                             : reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 128, 0, false, false, true>);
    if (bt && half) /* kHalfStage: 128 x 256 only (resolve_ring) */
        return reinterpret_cast<const void *>(
            &gemm_sm90_kernel<128, 256, 0, false, true, false, false, false, false, true>);
    if (bt)
        return tile_n == 256 ? reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 256, 0, false, true>)
                             : reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 128, 0, false, true>);
    if (mx)
        return fp8_n == 64 ? reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 128, 64, true>)
                           : reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 128, 128, true>);
    if (fp8 && tile_n == 256 && lean) /* the lean layout (sm90_core.cuh lean_layout) */
        return fp8_n == 64
                   ? reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 256, 64, false, false, false, true>)
                   : reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 256, 128, false, false, false, true>);
    if (fp8 && tile_n == 256)
        return fp8_n == 64 ? reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 256, 64>)
                           : reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 256, 128>);
    if (fp8)
        return fp8_n == 64 ? reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 128, 64>)
                           : reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 128, 128>);
    if (tile_m == 64)
        return reinterpret_cast<const void *>(&gemm_sm90_kernel<64, 256>);
    if (tile_m == 256)
        return reinterpret_cast<const void *>(&gemm_sm90_kernel<256, 128>);
    if (half)
        return reinterpret_cast<const void *>(
            &gemm_sm90_kernel<128, 256, 0, false, false, false, false, false, false, true>);
    return tile_n == 256 ? reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 256>)
                         : reinterpret_cast<const void *>(&gemm_sm90_kernel<128, 128>);
}

/* mxfp8 scheme (b) and mx_scheme 2: the kMxExpand instances, whose slots the producer warpgroup fills with expanded
 * bf16 (all of them, or A's rows while TMA loads B's bf16: mx_b_bf16). */
bool mx_expand(const struct mok_gemm_args *g, const struct mok_gemm_sm90_config *c)
{
    return g->dtype == MOK_GEMM_MXFP8 && (c->mx_scheme == 1 || c->mx_scheme == 2);
}

bool mx_b_bf16(const struct mok_gemm_args *g, const struct mok_gemm_sm90_config *c)
{
    return g->dtype == MOK_GEMM_MXFP8 && c->mx_scheme == 2;
}

/* mx_scheme 3: the kMxRegA instances (A expanded into the consumers' registers, B in bf16). */
bool mx_rega(const struct mok_gemm_args *g, const struct mok_gemm_sm90_config *c)
{
    return g->dtype == MOK_GEMM_MXFP8 && c->mx_scheme == 3;
}

/* The pipeline depth: as configured, or with stages = 0 the deepest ring that fits next to the C staging (GEMM2
 * with 256-column tiles has room for 3 slots of 48 KiB, GEMM1 with SwiGLU's narrower staging for 4). A configured
 * depth that only fits with the staging halved (bf16 128 x 256 without SwiGLU: 4 stages) runs the kHalfStage
 * instance, whose epilogue stores the tile in two rounds of 128 columns (GEMM2 that way: 0.99-1.06x the time of the
 * automatic 3; one H100, results/h100x1/2026-12-07-core-stages).
 * mxfp8 scheme (b) also has its landing ring (sm90_mx_expand.cuh): with land_stages = 0 as deep as fits, up to
 * kMxLandMax, beside a bf16 ring of two (or the configured one); then the bf16 ring as deep as still fits (128 x
 * 256: GEMM1 2 + 3, GEMM2 2 + 2). mx_scheme 2 (A's rows land, B comes by TMA into the slots) the other way round:
 * the bf16 ring as deep as fits beside two landing stages, then the landing ring (128 x 256: GEMM1 3 + 4, GEMM2
 * 3 + 2). */
struct Ring {
    int stages, land; /* bf16 (or fp8) slots; scheme (b)'s landing stages (0 for the other instances) */
    bool half;        /* the C staging halved (kHalfStage) */
};

Ring resolve_ring(const struct mok_gemm_args *g, const struct mok_gemm_sm90_config *c, size_t limit)
{
    const bool rega = mx_rega(g, c), ex = mx_expand(g, c), mx = g->dtype == MOK_GEMM_MXFP8 && !ex && !rega;
    const bool land_a = mx_b_bf16(g, c);
    auto fits = [&](int s, int l) {
        return smem_bytes(c->tile_m, c->tile_n, s, g->groups, g->swiglu, mx, l, land_a, rega) <= limit;
    };
    Ring r = {c->stages, ex ? c->land_stages : 0, false};
    if (land_a) { /* B's TMA wants the slots' lead: the bf16 ring first (beside two landing stages), then the rest */
        if (r.stages == 0) {
            r.stages = kMaxStages;
            while (r.stages > 2 && !fits(r.stages, r.land ? r.land : kMxLandMin))
                r.stages--;
        }
        if (r.land == 0) {
            r.land = kMxLandMax;
            while (r.land > kMxLandMin && !fits(r.stages, r.land))
                r.land--;
        }
        return r;
    }
    if (ex && r.land == 0) {
        r.land = kMxLandMax;
        while (r.land > kMxLandMin && !fits(r.stages ? r.stages : 2, r.land))
            r.land--;
    }
    if (r.stages == 0) {
        r.stages = kMaxStages;
        while (r.stages > 2 && !fits(r.stages, r.land))
            r.stages--;
    } else if (!fits(r.stages, r.land) && g->dtype == MOK_GEMM_BF16 && !ex && !rega && !g->swiglu &&
               c->tile_m == 128 && c->tile_n == 256 &&
               smem_bytes(c->tile_m, c->tile_n, r.stages, g->groups, 0, false, 0, false, false, true) <= limit) {
        r.half = true;
    }
    return r;
}

size_t smem_limit(int optin) { return (size_t)(optin < kSmemLimit ? optin : kSmemLimit); }

int cluster_of(const struct mok_gemm_sm90_config *c)
{
    return c->cluster_m > 1 ? c->cluster_m : c->cluster_n > 1 ? c->cluster_n : 1;
}

/* cudaSuccess, or cudaErrorNotSupported (not a Hopper GPU / no sm_90a image), or cudaErrorInvalidValue (the
 * problem or configuration does not fit), with the reason in why. */
int check(const struct mok_gemm_args *g, const struct mok_gemm_sm90_config *c, char *why, int why_len)
{
    say(why, why_len, "ok");
    if (!g || !c) {
        say(why, why_len, "null args or config");
        return cudaErrorInvalidValue;
    }
    int dev = 0, major = 0, minor = 0, optin = 0, sm_count = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
        cudaGetLastError(); /* do not leave the error for the next launch check to find */
        say(why, why_len, "cannot query the current device");
        return cudaErrorNotSupported;
    }
    if (major != 9) {
        say(why, why_len, "sm_90a only (this GPU is sm_%d%d)", major, minor);
        return cudaErrorNotSupported;
    }
    if (c->tile_n != 128 && c->tile_n != 256) {
        say(why, why_len, "tile_n %d: 128 or 256 only", c->tile_n);
        return cudaErrorInvalidValue;
    }
    if ((c->tile_m != 64 && c->tile_m != 128 && c->tile_m != 256) || (c->tile_m == 256 && c->tile_n != 128) ||
        (c->tile_m == 64 && c->tile_n != 256)) {
        say(why, why_len, "tile %d x %d: 64 x 256, 128 x 128, 128 x 256 or 256 x 128 (a consumer thread holds at most "
            "128 accumulators; 64-row tiles split 256 columns between the warpgroups)", c->tile_m, c->tile_n);
        return cudaErrorInvalidValue;
    }
    if (c->tile_m == 64 && c->cluster_m > 1) {
        say(why, why_len, "tile_m 64 runs without clusters (cluster_m %d)", c->cluster_m);
        return cudaErrorInvalidValue;
    }
    const bool mx = g->dtype == MOK_GEMM_MXFP8, fp8 = g->dtype == MOK_GEMM_FP8_BLOCK || mx;
    if (g->dtype != MOK_GEMM_BF16 && !fp8) {
        say(why, why_len, "dtype %d: bf16 (0), fp8_block (1) or mxfp8 (2)", (int)g->dtype);
        return cudaErrorInvalidValue;
    }
    if (c->mx_scheme < 0 || c->mx_scheme > 3 || (c->mx_scheme && !mx)) {
        say(why, why_len, "mx_scheme %d: 0 (promote per 32 K), or with dtype mxfp8 1 (expand to bf16), 2 (expand A, "
            "B given in bf16) or 3 (A into registers, B given in bf16, K permuted) (dtype %d)", c->mx_scheme,
            (int)g->dtype);
        return cudaErrorInvalidValue;
    }
    const bool ex = mx && (c->mx_scheme == 1 || c->mx_scheme == 2), b_bf16 = mx && c->mx_scheme >= 2;
    const bool rega = mx && c->mx_scheme == 3;
    if (c->land_stages != 0 && (!ex || c->land_stages < kMxLandMin || c->land_stages > kMxLandMax)) {
        say(why, why_len, "land_stages %d: 0 (as many as fit), or %d..%d with mxfp8's mx_scheme 1 or 2 (its landing "
            "ring)", c->land_stages, kMxLandMin, kMxLandMax);
        return cudaErrorInvalidValue;
    }
    if ((ex || rega) &&
        (c->tile_m != 128 || c->lockstep || cluster_of(c) != 1 || (c->fp8_n != 0 && c->fp8_n != 128))) {
        /* scheme (b): thread 0 of the producer loads its own landing stages (no multicast), no lockstep barrier */
        say(why, why_len, "mxfp8 mx_scheme %d runs 128 x 128 or 128 x 256 tiles without lockstep or clusters, fp8_n "
            "unused (tile %d x %d, lockstep %d, cluster_m %d, fp8_n %d)", c->mx_scheme, c->tile_m, c->tile_n,
            c->lockstep, c->cluster_m, c->fp8_n);
        return cudaErrorInvalidValue;
    }
    if (mx) {
        /* one CTA loads its own B scales (no multicast of them is written): no clusters */
        if (!ex && !rega && (c->tile_m != 128 || c->tile_n != 128 || c->lockstep || cluster_of(c) != 1)) {
            say(why, why_len, "mxfp8 runs 128 x 128 tiles without lockstep or clusters (tile %d x %d, lockstep %d, "
                "cluster_m %d)", c->tile_m, c->tile_n, c->lockstep, c->cluster_m);
            return cudaErrorInvalidValue;
        }
        if (c->fp8_n != 0 && c->fp8_n != 64 && c->fp8_n != 128) {
            say(why, why_len, "fp8_n %d: 64 or 128 (0: 128)", c->fp8_n);
            return cudaErrorInvalidValue;
        }
        if (b_bf16 && (!g->a_fp8 || !g->a_mx_scale || !g->b)) {
            say(why, why_len, "mxfp8 mx_scheme %d needs a_fp8, a_mx_scale and b (the weights' MX values in bf16%s)",
                c->mx_scheme, rega ? ", K permuted" : "");
            return cudaErrorInvalidValue;
        }
        if (!b_bf16 && (!g->a_fp8 || !g->b_fp8 || !g->a_mx_scale || !g->b_mx_scale)) {
            say(why, why_len, "mxfp8 needs a_fp8, b_fp8, a_mx_scale and b_mx_scale");
            return cudaErrorInvalidValue;
        }
        if (g->k % kFp8BlockK || g->n_out % 128) {
            say(why, why_len, "mxfp8: k %d and n_out %d must be multiples of 128 (k blocks of 4 scales, 64-row "
                "scale blocks of B)", g->k, g->n_out);
            return cudaErrorInvalidValue;
        }
        if ((uintptr_t)g->a_mx_scale % 4 || (uintptr_t)g->b_mx_scale % 16) { /* (b_mx_scale NULL in schemes 2, 3) */
            say(why, why_len, "mxfp8: a_mx_scale 4-byte and b_mx_scale 16-byte aligned (word loads, bulk copies)");
            return cudaErrorInvalidValue;
        }
        if (g->ready) {
            say(why, why_len, "mxfp8: no ready counters (rows must be complete at launch)");
            return cudaErrorInvalidValue;
        }
    } else if (fp8) {
        if (c->tile_m != 128 || c->lockstep) {
            say(why, why_len, "fp8_block runs 128 x 128 or 128 x 256 tiles without lockstep (tile %d x %d, lockstep "
                "%d)", c->tile_m, c->tile_n, c->lockstep);
            return cudaErrorInvalidValue;
        }
        if (c->tile_n == 256 && cluster_of(c) != 1) { /* the lean layout's inline producer loads no multicast; the
                                                        * 384-thread instances are kept alike */
            say(why, why_len, "fp8_block's 128 x 256 tiles run without clusters (cluster_m %d)", c->cluster_m);
            return cudaErrorInvalidValue;
        }
        if (c->fp8_n != 0 && c->fp8_n != 64 && c->fp8_n != 128) {
            say(why, why_len, "fp8_n %d: 64 or 128 (0: 128)", c->fp8_n);
            return cudaErrorInvalidValue;
        }
        if (!g->a_fp8 || !g->b_fp8 || !g->a_scale || !g->b_scale) {
            say(why, why_len, "fp8_block needs a_fp8, b_fp8, a_scale and b_scale");
            return cudaErrorInvalidValue;
        }
        if (g->k % kFp8BlockK || g->n_out % 128) {
            say(why, why_len, "fp8_block: k %d and n_out %d must be multiples of 128 (the scale blocks)", g->k,
                g->n_out);
            return cudaErrorInvalidValue;
        }
        if (g->ready) {
            say(why, why_len, "fp8_block: no ready counters (rows must be complete at launch)");
            return cudaErrorInvalidValue;
        }
    }
    if (g->b_transposed && (fp8 || g->swiglu || c->tile_m != 128 || cluster_of(c) != 1)) {
        say(why, why_len, "dgrad (b_transposed) runs bf16 128-row tiles without SwiGLU or clusters (dtype %d, swiglu "
            "%d, tile_m %d, cluster_m %d)", (int)g->dtype, g->swiglu, c->tile_m, c->cluster_m);
        return cudaErrorInvalidValue;
    }
    cudaFuncAttributes fa;
    if (cudaFuncGetAttributes(&fa, kernel_for(c->tile_m, c->tile_n, fp8, c->fp8_n, mx, g->b_transposed, ex,
                                              c->lean != 0, b_bf16, rega)) != cudaSuccess) {
        cudaGetLastError();
        say(why, why_len, "no sm_90a image of the kernel in this build (add 90a to gpu_archs)");
        return cudaErrorNotSupported;
    }
    /* setmaxnreg moves registers from the producer (dec 40) to the consumers (inc 232; scheme (b)'s instances 72 /
     * 216, the same total); the pool balances only if every warp starts with 168 (tests/kernel_resources.sh checks
     * the build; this checks the image loaded) */
    if (c->lean < 0 || c->lean > 1 || (c->lean && !lean_layout(c->tile_m, c->tile_n, fp8, mx, true))) {
        say(why, why_len, "lean %d: 0, or 1 with fp8_block's 128 x 256 tiles (tile %d x %d)", c->lean, c->tile_m,
            c->tile_n);
        return cudaErrorInvalidValue;
    }
    const bool lean = lean_layout(c->tile_m, c->tile_n, fp8, mx, c->lean != 0); /* no setmaxnreg there */
    if (!lean && fa.numRegs * kThreads < 128 * kProducerRegs + 256 * kConsumerRegs) {
        say(why, why_len, "the kernel starts with %d registers per thread, setmaxnreg 40/232 (72/216) needs 168",
            fa.numRegs);
        return cudaErrorNotSupported;
    }
    /* a block the image cannot hold fails at launch ("too many resources requested"): say so here instead, where a
     * candidate is refused, not the run aborted (a 288-thread layout of 224 registers once launched that way) */
    const int threads = lean ? kLeanThreads : kThreads;
    if (fa.maxThreadsPerBlock < threads) {
        say(why, why_len, "the kernel's image holds %d threads a block at %d registers each, its layout launches %d",
            fa.maxThreadsPerBlock, fa.numRegs, threads);
        return cudaErrorNotSupported;
    }
    if (c->stages != 0 && (c->stages < 2 || c->stages > kMaxStages)) {
        say(why, why_len, "stages %d: 0 (as many as fit) or 2..%d", c->stages, kMaxStages);
        return cudaErrorInvalidValue;
    }
    if (c->sms < 0) {
        say(why, why_len, "sms %d < 0", c->sms);
        return cudaErrorInvalidValue;
    }
    if (c->cluster_m < 0 || c->cluster_m > 2) {
        say(why, why_len, "cluster_m %d: 1 or 2 (0 means 1)", c->cluster_m);
        return cudaErrorInvalidValue;
    }
    if (c->cluster_n < 0 || c->cluster_n > 2 || (c->cluster_n > 1 && c->cluster_m > 1)) {
        say(why, why_len, "cluster_n %d: 1 or 2 (0 means 1), and 1 with cluster_m %d", c->cluster_n, c->cluster_m);
        return cudaErrorInvalidValue;
    }
    if (c->cluster_n > 1 && (g->dtype != MOK_GEMM_BF16 || g->b_transposed || c->tile_m != 128 ||
                             (g->n_out / tile_cols(c->tile_n, g->swiglu)) % 2)) {
        say(why, why_len, "cluster_n 2 runs bf16 forward 128-row tiles over an even count of column tiles (dtype %d, "
            "dgrad %d, tile_m %d, %d column tiles)", (int)g->dtype, g->b_transposed, c->tile_m,
            g->n_out / tile_cols(c->tile_n, g->swiglu));
        return cudaErrorInvalidValue;
    }
    if (c->raster < 0 || c->raster > 1) {
        say(why, why_len, "raster %d: 0 (m-major) or 1 (n-major)", c->raster);
        return cudaErrorInvalidValue;
    }
    if (c->lockstep < 0) {
        say(why, why_len, "lockstep %d: 0 (off) or k blocks between barriers", c->lockstep);
        return cudaErrorInvalidValue;
    }
    if (c->lockstep && c->sms > sm_count) {
        say(why, why_len, "lockstep needs every CTA resident: sms %d > %d SMs", c->sms, sm_count);
        return cudaErrorInvalidValue;
    }
    if (cluster_of(c) > 1 && c->sms % cluster_of(c)) {
        say(why, why_len, "sms %d: a multiple of cluster_m %d (0: every SM)", c->sms, cluster_of(c));
        return cudaErrorInvalidValue;
    }
    if (g->groups < 1 || g->groups > kMaxGroups) {
        say(why, why_len, "groups %d: 1..%d", g->groups, kMaxGroups);
        return cudaErrorInvalidValue;
    }
    if (g->k < kBlockK || g->k % kBlockK) {
        say(why, why_len, "k %d: a positive multiple of %d", g->k, kBlockK);
        return cudaErrorInvalidValue;
    }
    int cols = g->swiglu ? c->tile_n / 2 : c->tile_n;
    if (g->n_out < 1 || g->n_out % cols) {
        say(why, why_len, "n_out %d: a positive multiple of %d (tile_n %d%s)", g->n_out, cols, c->tile_n,
            g->swiglu ? ", SwiGLU halves it" : "");
        return cudaErrorInvalidValue;
    }
    if (g->rows_capacity < 0) {
        say(why, why_len, "rows_capacity %d < 0", g->rows_capacity);
        return cudaErrorInvalidValue;
    }
    /* int32 coordinates and tile indices in the kernel */
    long long b_rows = g->b_transposed ? (long long)g->groups * g->k
                                       : (long long)g->groups * (g->swiglu ? 2 : 1) * g->n_out;
    long long max_tiles = ((long long)g->rows_capacity / c->tile_m + g->groups) * (g->n_out / cols);
    if (b_rows >= (1ll << 31) || max_tiles >= (1ll << 31) || (long long)g->rows_capacity + c->tile_m >= (1ll << 31)) {
        say(why, why_len, "problem too large for 32-bit tile coordinates");
        return cudaErrorInvalidValue;
    }
    if (g->ready && (!g->ready_target || g->ready_rows < 1)) {
        say(why, why_len, "ready counters need their targets and ready_rows >= 1 (ready_rows %d)", g->ready_rows);
        return cudaErrorInvalidValue;
    }
    if (((uintptr_t)(fp8 ? (const void *)g->a_fp8 : g->a) |
         (uintptr_t)(fp8 && !b_bf16 ? (const void *)g->b_fp8 : g->b) | (uintptr_t)g->c) % 16) {
        say(why, why_len, "a, b and c must be 16-byte aligned (TMA)");
        return cudaErrorInvalidValue;
    }
    size_t limit = smem_limit(optin);
    const Ring ring = resolve_ring(g, c, limit);
    size_t smem = smem_bytes(c->tile_m, c->tile_n, ring.stages, g->groups, g->swiglu, mx && !ex && !rega, ring.land,
                             b_bf16 && !rega, rega, ring.half);
    if (smem > limit) {
        say(why, why_len, "shared memory %zu bytes > %zu (stages %d x %d KiB + C staging %d KiB + %d landing stages "
            "of %d bytes + prefix of %d groups)", smem, limit, ring.stages, (c->tile_m + c->tile_n) * kRowBytes / 1024,
            c->tile_m * tile_cols(c->tile_n, g->swiglu) * 2 / 1024, ring.land,
            b_bf16 && !rega ? kMxLandABytes : mx_land_stage_bytes(c->tile_n), g->groups);
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}

/* The lockstep arrival counter: one int in device memory per process (one GPU per process here), zeroed by a
 * memset before every launch; allocated on the first launch that is not being captured, as the failure record
 * (sm90_diag.cu). */
int *g_wave_ctr = nullptr;

int *wave_counter(cudaStream_t s)
{
    if (g_wave_ctr)
        return g_wave_ctr;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) {
        cudaGetLastError();
        return nullptr;
    }
    if (cudaMalloc(&g_wave_ctr, sizeof(int)) != cudaSuccess) {
        cudaGetLastError();
        g_wave_ctr = nullptr;
    }
    return g_wave_ctr;
}

} // namespace

extern "C" void mok_gemm_sm90_prepare(mok_stream_t stream)
{
    mok_sm90::diag_record(mok_cuda_stream(stream));
    wave_counter(mok_cuda_stream(stream));
}

extern "C" int mok_gemm_sm90_supports(const struct mok_gemm_args *g, const struct mok_gemm_sm90_config *c, char *why,
                                      int why_len)
{
    return check(g, c, why, why_len) == cudaSuccess;
}

extern "C" int mok_gemm_sm90(const struct mok_gemm_args *g, const struct mok_gemm_sm90_config *c, mok_stream_t stream)
{
    mok_sm90::diag_print(); /* a failure of an earlier launch, if any */
    char why[256];
    int rc = check(g, c, why, sizeof why);
    if (rc != cudaSuccess)
        return rc;
    if (g->rows_capacity == 0)
        return cudaSuccess; /* no rows anywhere (and a tensor map cannot have a zero dimension) */

    CUtensorMap map_a, map_b, map_c;
    int b_rows = g->groups * (g->swiglu ? 2 : 1) * g->n_out;
    const bool mx = g->dtype == MOK_GEMM_MXFP8, fp8 = g->dtype == MOK_GEMM_FP8_BLOCK || mx;
    const bool bt = g->b_transposed != 0, ex = mx_expand(g, c), rega = mx_rega(g, c);
    const bool b_bf16 = mx_b_bf16(g, c) || rega;
    const bool b_e4m3 = fp8 && !b_bf16; /* mx_scheme 2 and 3 read B in bf16 */
    const uint64_t rows = (uint64_t)g->rows_capacity, k = (uint64_t)g->k;
    /* B's box: halves for SwiGLU's gate/up, or a cluster_m pair's; A's: halves for a cluster_n pair's */
    const uint32_t b_box = (uint32_t)(g->swiglu || c->cluster_m > 1 ? c->tile_n / 2 : c->tile_n);
    if (!(fp8 ? encode_tile_map_e4m3(&map_a, g->a_fp8, rows, k, (uint32_t)c->tile_m, 0, ex || rega)
              : encode_tile_map(&map_a, g->a, rows, k, (uint32_t)(c->cluster_n > 1 ? c->tile_m / 2 : c->tile_m))) ||
        /* dgrad: W as [groups k][n_out] in boxes of 64 K rows x 64 columns */
        (bt && !encode_tile_map(&map_b, g->b, (uint64_t)g->groups * g->k, (uint64_t)g->n_out, 64)) ||
        (!bt && !(b_e4m3 ? encode_tile_map_e4m3(&map_b, g->b_fp8, (uint64_t)b_rows, k, b_box, 0, ex && !b_bf16)
                         : encode_tile_map(&map_b, g->b, (uint64_t)b_rows, k, b_box))) ||
        !encode_tile_map(&map_c, g->c, rows, (uint64_t)g->n_out, 64)) /* 64 x 64 store boxes */
        return cudaErrorInvalidValue;
    CUtensorMap map_bs = map_c; /* mxfp8's B scales; the other instances never read it */
    if (mx && !ex && !rega &&
        !encode_mx_scale_tile_map(&map_bs, g->b_mx_scale, (uint64_t)b_rows / 64, (uint64_t)g->k / kFp8BlockK))
        return cudaErrorInvalidValue;
    if (ex && !b_bf16 &&
        !encode_mx_scale_tile_map(&map_bs, g->b_mx_scale, (uint64_t)b_rows / 64, (uint64_t)g->k / kFp8BlockK,
                                  (uint32_t)c->tile_n / 64))
        return cudaErrorInvalidValue;

    int dev = 0, grid = c->sms, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        (grid <= 0 && cudaDeviceGetAttribute(&grid, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) ||
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
        return (int)cudaGetLastError();
    const Ring ring = resolve_ring(g, c, smem_limit(optin));
    const int stages = ring.stages;
    size_t smem = smem_bytes(c->tile_m, c->tile_n, stages, g->groups, g->swiglu, mx && !ex && !rega, ring.land,
                             b_bf16 && !rega, rega, ring.half);
    const void *kernel =
        kernel_for(c->tile_m, c->tile_n, fp8, c->fp8_n, mx, bt, ex, c->lean != 0, b_bf16, rega, ring.half);
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return (int)e;
    }
    cudaStream_t s = mok_cuda_stream(stream);
    struct mok_sm90_diag *diag = mok_sm90::diag_record(s);
    const int cm = cluster_of(c);
    int *ctr = nullptr;
    if (c->lockstep) {
        ctr = wave_counter(s);
        if (!ctr)
            return cudaErrorMemoryAllocation; /* first use inside a graph capture: call mok_gemm_sm90_prepare first */
        e = cudaMemsetAsync(ctr, 0, sizeof(int), s); /* a node of its own when captured */
        if (e != cudaSuccess)
            return (int)e;
    }
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute attr[1];
    lc.blockDim = dim3(lean_layout(c->tile_m, c->tile_n, fp8, mx, c->lean != 0) ? kLeanThreads : kThreads);
    lc.dynamicSmemBytes = smem;
    lc.stream = s;
    if (cm > 1) {
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = (unsigned)cm, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
        lc.attrs = attr, lc.numAttrs = 1;
        /* one CTA per SM needs clusters that fit the GPCs: as many pairs as can be resident at once */
        int clusters = 0;
        lc.gridDim = dim3((unsigned)(grid / cm * cm));
        if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &lc) != cudaSuccess || clusters < 1) {
            cudaGetLastError();
            clusters = grid / cm;
        }
        if (c->sms <= 0)
            grid = clusters * cm < grid ? clusters * cm : grid / cm * cm;
        else if (c->lockstep && grid > clusters * cm)
            return cudaErrorInvalidConfiguration; /* not all resident: the lockstep barrier would never open */
    }
    lc.gridDim = dim3((unsigned)grid);
    const int swiglu = g->swiglu ? 1 : 0, share_a = c->cluster_n > 1 ? 1 : 0;
#define MOK_LAUNCH_SM90(TM, TN, FP8N, MX, BT)                                                                    \
    cudaLaunchKernelEx(&lc, gemm_sm90_kernel<TM, TN, FP8N, MX, BT>, map_a, map_b, map_c, g->c, g->offset, g->groups, \
                       g->rows_capacity, g->n_out, g->k, swiglu, stages, g->ready, g->ready_target, g->ready_rows, cm, \
                       share_a, ctr, c->lockstep, c->raster, diag, g->a_scale, g->b_scale, g->a_mx_scale, map_bs, 0)
#define MOK_LAUNCH_SM90_EXPAND(TN)                                                                               \
    cudaLaunchKernelEx(&lc, gemm_sm90_kernel<128, TN, 0, false, false, true>, map_a, map_b, map_c, g->c, g->offset,   \
                       g->groups, g->rows_capacity, g->n_out, g->k, swiglu, stages, g->ready, g->ready_target,       \
                       g->ready_rows, cm, share_a, ctr, c->lockstep, c->raster, diag, g->a_scale, g->b_scale,        \
                       g->a_mx_scale, map_bs, ring.land)
#define MOK_LAUNCH_SM90_EXPAND_A(TN)                                                                             \
    cudaLaunchKernelEx(&lc, gemm_sm90_kernel<128, TN, 0, false, false, true, false, true>, map_a, map_b, map_c, g->c, \
                       g->offset, g->groups, g->rows_capacity, g->n_out, g->k, swiglu, stages, g->ready,             \
                       g->ready_target, g->ready_rows, cm, share_a, ctr, c->lockstep, c->raster, diag, g->a_scale,   \
                       g->b_scale, g->a_mx_scale, map_bs, ring.land)
#define MOK_LAUNCH_SM90_REGA(TN)                                                                                 \
    cudaLaunchKernelEx(&lc, gemm_sm90_kernel<128, TN, 0, false, false, false, false, false, true>, map_a, map_b,      \
                       map_c, g->c, g->offset, g->groups, g->rows_capacity, g->n_out, g->k, swiglu, stages, g->ready, \
                       g->ready_target, g->ready_rows, cm, share_a, ctr, c->lockstep, c->raster, diag, g->a_scale,   \
                       g->b_scale, g->a_mx_scale, map_bs, 0)
#define MOK_LAUNCH_SM90_HALF(BT)                                                                                 \
    cudaLaunchKernelEx(&lc, gemm_sm90_kernel<128, 256, 0, false, BT, false, false, false, false, true>, map_a, map_b,  \
                       map_c, g->c, g->offset, g->groups, g->rows_capacity, g->n_out, g->k, swiglu, stages, g->ready, \
                       g->ready_target, g->ready_rows, cm, share_a, ctr, c->lockstep, c->raster, diag, g->a_scale,   \
                       g->b_scale, g->a_mx_scale, map_bs, 0)
#define MOK_LAUNCH_SM90_LEAN(FP8N)                                                                               \
    cudaLaunchKernelEx(&lc, gemm_sm90_kernel<128, 256, FP8N, false, false, false, true>, map_a, map_b, map_c, g->c,  \
                       g->offset, g->groups, g->rows_capacity, g->n_out, g->k, swiglu, stages, g->ready,             \
                       g->ready_target, g->ready_rows, cm, share_a, ctr, c->lockstep, c->raster, diag, g->a_scale,   \
                       g->b_scale, g->a_mx_scale, map_bs, 0)
    if (rega)
        e = c->tile_n == 256 ? MOK_LAUNCH_SM90_REGA(256) : MOK_LAUNCH_SM90_REGA(128);
    else if (b_bf16)
        e = c->tile_n == 256 ? MOK_LAUNCH_SM90_EXPAND_A(256) : MOK_LAUNCH_SM90_EXPAND_A(128);
    else if (ex)
        e = c->tile_n == 256 ? MOK_LAUNCH_SM90_EXPAND(256) : MOK_LAUNCH_SM90_EXPAND(128);
    else if (ring.half)
        e = bt ? MOK_LAUNCH_SM90_HALF(true) : MOK_LAUNCH_SM90_HALF(false);
    else if (bt)
        e = c->tile_n == 256 ? MOK_LAUNCH_SM90(128, 256, 0, false, true) : MOK_LAUNCH_SM90(128, 128, 0, false, true);
    else if (mx && c->fp8_n == 64)
        e = MOK_LAUNCH_SM90(128, 128, 64, true, false);
    else if (mx)
        e = MOK_LAUNCH_SM90(128, 128, 128, true, false);
    else if (fp8 && c->tile_n == 256)
        e = c->lean ? (c->fp8_n == 64 ? MOK_LAUNCH_SM90_LEAN(64) : MOK_LAUNCH_SM90_LEAN(128))
                    : c->fp8_n == 64 ? MOK_LAUNCH_SM90(128, 256, 64, false, false)
                                     : MOK_LAUNCH_SM90(128, 256, 128, false, false);
    else if (fp8 && c->fp8_n == 64)
        e = MOK_LAUNCH_SM90(128, 128, 64, false, false);
    else if (fp8)
        e = MOK_LAUNCH_SM90(128, 128, 128, false, false);
    else if (c->tile_m == 64)
        e = MOK_LAUNCH_SM90(64, 256, 0, false, false);
    else if (c->tile_m == 256)
        e = MOK_LAUNCH_SM90(256, 128, 0, false, false);
    else if (c->tile_n == 256)
        e = MOK_LAUNCH_SM90(128, 256, 0, false, false);
    else
        e = MOK_LAUNCH_SM90(128, 128, 0, false, false);
#undef MOK_LAUNCH_SM90
#undef MOK_LAUNCH_SM90_EXPAND
#undef MOK_LAUNCH_SM90_EXPAND_A
#undef MOK_LAUNCH_SM90_REGA
#undef MOK_LAUNCH_SM90_LEAN
#undef MOK_LAUNCH_SM90_HALF
    if (e != cudaSuccess)
        return (int)e;
    return MOK_LAUNCH_RESULT();
}

/* megakernel/mx_expand.cuh: mxfp8 scheme (b) in the fused forward (mok_mega_args.mx_scheme 1; issue 22): the e4m3
 * operands are expanded to bf16 in shared memory by the producer warpgroup (gemm/sm90_mx_expand.cuh, as mok-gemm's
 * kMxExpand instances do), and the compute blocks run the bf16 kernel's consumers, tiles and epilogues: GEMM1 128 x
 * 256 (128 gate + 128 up columns, SwiGLU), GEMM2 128 x 256. The communication is mxfp8's (fp8_comm.cuh: the push
 * quantizes each token row once into wire rows; the scatter copies them into the slots, m.xq), so FP8 bytes cross
 * NVLink and sit in memory, bf16 runs on the tensor cores.
 *
 * Producer (all 128 threads of the producer warpgroup), per k block of 64 K:
 *   loader    thread 0 takes the units by the ticket as the bf16 producer does, waits for what each needs (the same
 *             waits), and loads k blocks by TMA into a landing ring of m.land_stages stages (e4m3 A rows, B rows and
 *             B's scale boxes: mx_load_block), writing beside each stage what it holds (LandInfo: the unit, the k
 *             block, the kind) before the stage's arrive. It loads up to land_stages blocks ahead, across units,
 *             but waits for a unit's inputs only when no loaded stage is left to expand: a unit already loaded can
 *             only finish through this warpgroup's expansion, and the inputs of the next unit (GEMM2's h, lockstep's
 *             earlier tickets) may depend on it. Otherwise it probes them and defers the load.
 *   expander  every thread: wait for the stage, read its LandInfo, wait for the bf16 slot, expand its rows
 *             (mx_expand_block: A row pt with its two scale bytes, read through L2 since this kernel wrote them,
 *             and B rows pt and pt + 128), fence, arrive on the slot's full barrier (128 arrivals), and the named
 *             barrier after which the stage may be loaded again. The unit goes beside the slot of its first k
 *             block (slot_unit) as in the bf16 kernel.
 *   shared    the shared experts' units are bf16 (as in the fp8 instances): their k blocks pass through the landing
 *             ring as empty stages (kind kLandDirect, a plain arrive) so that every thread walks the same slot
 *             sequence; in the step thread 0 loads the bf16 A and B boxes straight into the slot by TMA (its
 *             arrive.expect_tx), the other 127 threads arrive.
 * Consumers: the bf16 kernel's (compute.cuh); GEMM1's epilogue quantizes the staged h (fp8_compute.cuh
 * quantize_staged_h<true>) for GEMM2's A and counts the half tile in done1 once hq and hs are written (GEMM2 reads
 * only those; h's TMA store goes to m.h only for the check's export: mok_mega_args.store_h).
 * Part of the fused forward's one translation unit (kernels/megakernel/forward.cu includes it after compute.cuh);
 * its names live in that file's anonymous namespace. */
#pragma once

#include "util/fp8_quant.cuh"

namespace {

#if MOK_SM90_DEVICE
/* What a landing stage holds */
enum : int {
    kLandExpand = 0, /* e4m3 rows and B scales of a routed unit's k block */
    kLandDirect = 1, /* nothing: a shared unit's bf16 k block, loaded into the slot in the step */
    kLandEnd = 2     /* nothing: no unit left */
};

struct LandInfo {
    int unit, kb, kind; /* pack_unit, the k block, kLand* */
};

/* The loader's state (thread 0 only) in shared memory, not registers: the warpgroup runs on kMxProducerRegs, and
 * the expansion needs them. */
struct ExpandLoader {
    int u;        /* the ticket of the unit being loaded; -1: take the next one */
    int unit;     /* its pack_unit */
    int group;    /* its local expert */
    int kb;       /* its next k block */
    int k_blocks; /* its k blocks */
    int ready;    /* its inputs are there */
    int pending;  /* landing stages loaded and not yet expanded */
    int stage;    /* the next landing stage to load */
    int ended;    /* the end is loaded */
};

__device__ __forceinline__ volatile LandInfo *land_info()
{
    __shared__ LandInfo s[kMxLandMax];
    return s;
}

__device__ __forceinline__ ExpandLoader *expand_loader()
{
    __shared__ ExpandLoader s;
    return &s;
}

/* Whether unit u's inputs are there: the bf16 producer's waits (compute.cuh: lockstep's earlier wave, the dispatch's
 * ready counters of its rows, its row block's h quantized for GEMM2, the shared GEMM1 for the shared GEMM2). block:
 * wait until they are (each wait timing out into the failure record) and return true; else probe once. */
__device__ __forceinline__ bool expand_inputs(const mok_mega_args &m, const volatile UnitList &L, const Unit &p,
                                              int u, bool block, struct mok_sm90_diag *diag)
{
    const mok_lsa_args &a = m.lsa;
    const int wave_units = (int)gridDim.x - m.comm_blocks;
    if (m.lockstep && u >= wave_units) {
        const int want = u / wave_units * wave_units;
        if (block)
            wait_count(m.done + 1, want, diag, 4, u);
        else if (mok_ld_acquire_gpu(m.done + 1) < want)
            return false;
    }
    if (p.job == 0) {
        const int row0 = p.rb * kTileM;
        if (block) {
            mok_sm90_wait_rows(a.ready, a.chunk_target, a.chunk_rows, row0, row0 + kTileM, diag, u);
            return true; /* its fence is in the wait */
        }
        if (a.ready)
            for (int c = row0 / a.chunk_rows; c <= (row0 + kTileM - 1) / a.chunk_rows; c++)
                if (mok_ld_acquire_gpu(a.ready + c) < a.chunk_target[c])
                    return false;
    } else if (p.job == 1 || p.job == 3) { /* done1 (every h half tile quantized), or the shared GEMM1's done3 */
        const int32_t *ctr = row_counters(m.done, p.job - 1, a.capacity) + p.rb;
        const int want = 2 * (p.job == 1 ? L.n1 : L.ns1);
        if (block)
            wait_count(ctr, want, diag, p.job == 1 ? 0 : 3, p.rb);
        else if (mok_ld_acquire_gpu(ctr) < want)
            return false;
    }
    mok_fence_proxy_async_global(); /* TMA (the async proxy) reads what generic acquire saw */
    return true;
}

/* Thread 0: load k blocks into the landing ring while stages are free (see the top), the end once no unit is
 * left. Called before the first step and after every step (whose named barrier freed a stage). */
__device__ __forceinline__ void expand_load(const Maps &maps, const mok_mega_args &m, const volatile UnitList &L,
                                            const int *mstart, OwnBlocks own, uint8_t *land, uint64_t *land_full,
                                            struct mok_sm90_diag *diag)
{
    ExpandLoader &ld = *expand_loader();
    volatile LandInfo *info = land_info();
    const int hidden = m.lsa.hidden, inter = m.inter;
    while (ld.pending < m.land_stages && !ld.ended) {
        const int s = ld.stage;
        if (ld.u < 0) {
            ld.u = atomicAdd(m.done, 1); /* the ticket */
            if (ld.u >= L.units) {
                info[s].kind = kLandEnd; /* published by the arrive (release) */
                mok_mbar_arrive(&land_full[s]);
                ld.ended = 1;
                return;
            }
            const Unit p = unit_at(ld.u, L, mstart, m.lsa.local_experts, m.raster, own);
            ld.unit = pack_unit(p), ld.group = p.group, ld.kb = 0, ld.ready = 0;
            ld.k_blocks = (p.job == 0 || p.job == 2 ? hidden : p.job == 1 ? inter : m.shared_inter) / kBlockK;
        }
        Unit p = unpack_unit(ld.unit);
        p.group = ld.group;
        if (!ld.ready) {
            if (!expand_inputs(m, L, p, ld.u, ld.pending == 0, diag))
                return; /* deferred: the loaded stages first */
            ld.ready = 1;
        }
        info[s].unit = ld.unit, info[s].kb = ld.kb;
        if (p.job <= 1) {
            info[s].kind = kLandExpand;
            const bool g1 = p.job == 0;
            /* GEMM1: the gate rows [128 n, +128) of the expert's 2 inter rows and the up rows inter further on, their
             * scale blocks 4 n on in the pairing of the tile layout (gate block j at 2 j, up block j at 2 j + 1);
             * GEMM2: rows [256 n, +256) of its hidden */
            const int b_row = g1 ? p.group * 2 * inter + p.n * (kTileN / 2) : p.group * hidden + p.n * kTileN;
            const int bs_block = g1 ? p.group * 2 * inter / 64 + p.n * (kTileN / 64) : b_row / 64;
            mx_load_block<kTileN>(land + (size_t)s * mx_land_stage_bytes(kTileN), &land_full[s],
                                  g1 ? &maps.x : &maps.ha, g1 ? &maps.w13 : &maps.w2, g1 ? &maps.bs13 : &maps.bs2,
                                  ld.kb, p.rb * kTileM, b_row, bs_block, g1, inter);
        } else {
            info[s].kind = kLandDirect;
            mok_mbar_arrive(&land_full[s]);
        }
        if (ld.kb == 0 && m.lockstep)
            atomicAdd(m.done + 1, 1); /* this unit has started */
        if (++ld.kb == ld.k_blocks)
            ld.u = -1;
        ld.pending++;
        ld.stage = s + 1 == m.land_stages ? 0 : s + 1;
    }
}

/* The producer warpgroup of the expand instances (all 128 threads; see the top). */
template <bool kShared>
__device__ __forceinline__ void produce_units_expand(const Maps &maps, const mok_mega_args &m,
                                                     const volatile UnitList &L, const int *mstart, OwnBlocks own,
                                                     uint8_t *smem_a, uint8_t *smem_b, uint8_t *land,
                                                     uint64_t *land_full, uint64_t *full, uint64_t *empty,
                                                     int *slot_unit, struct mok_sm90_diag *diag)
{
    const int pt = threadIdx.x, stages = m.stages, hidden = m.lsa.hidden, inter = m.inter;
    const volatile LandInfo *info = land_info();
    if (pt == 0) {
        ExpandLoader &ld = *expand_loader();
        ld.u = -1, ld.pending = 0, ld.stage = 0, ld.ended = 0;
        expand_load(maps, m, L, mstart, own, land, land_full, diag);
    }
    RingPos ring = {0, 0};
    int stage = 0;
    uint32_t land_phase = 0;
    for (;;) {
        mok_sm90_wait(&land_full[stage], land_phase, diag, MOK_SM90_DIAG_LANDING, stage, -1, 0);
        const int kind = info[stage].kind, unit = info[stage].unit, kb = info[stage].kb;
        if (kind == kLandEnd)
            break;
        const Unit p = unpack_unit(unit);
        const int row0 = p.rb * kTileM;
        uint8_t *slot_a = smem_a + (size_t)ring.slot * kSlotABytes, *slot_b = smem_b + (size_t)ring.slot * kSlotBBytes;
        if (kShared && kind == kLandDirect) {
            mok_sm90_wait(&empty[ring.slot], ring.phase ^ 1, diag, MOK_SM90_DIAG_PRODUCER, ring.slot, unit, kb);
            if (pt == 0) { /* compute.cuh's bf16 loads of a shared unit */
                if (kb == 0)
                    slot_unit[ring.slot] = unit; /* published by the arrive below (release) */
                uint64_t *bar = producer_arm(ring, full, kSlotABytes + kSlotBBytes);
                const bool g1 = p.job == 2;
                const int kc = kb * kBlockK, b_row = p.n * (g1 ? kTileN / 2 : kTileN);
                mok_tma_load_2d(slot_a, g1 ? &maps.sx : &maps.sha, kc, row0, bar);
                mok_tma_load_2d(slot_b, g1 ? &maps.sw13 : &maps.sw2, kc, b_row, bar);
                if (g1)
                    mok_tma_load_2d(slot_b + (kTileN / 2) * kRowBytes, &maps.sw13, kc, b_row + m.shared_inter, bar);
            } else {
                mok_mbar_arrive(&full[ring.slot]);
            }
            mok_named_barrier(kMxProducerBarrier, 128); /* every thread has read the stage's LandInfo */
        } else {
            const bool g1 = p.job == 0;
            /* row pt's scale bytes of this k block (K [0, 32) in the low byte): behind its wire row's values
             * (GEMM1) or in hs (GEMM2), both written during this kernel, so through L2; issued before the slot's
             * wait and the B rows' expansion, which hide its latency */
            const uint8_t *sa = g1 ? m.xq + (size_t)(row0 + pt) * fp8_row_bytes(hidden) + hidden
                                   : static_cast<const uint8_t *>(m.hs) + (size_t)(row0 + pt) * (inter / 32);
            const uint32_t sa2 = __ldcg(reinterpret_cast<const unsigned short *>(sa) + kb);
            int bs_at[kTileN / 128];
            mx_scale_places<kTileN>(pt, g1, bs_at);
            mok_sm90_wait(&empty[ring.slot], ring.phase ^ 1, diag, MOK_SM90_DIAG_PRODUCER, ring.slot, unit, kb);
            if (pt == 0 && kb == 0)
                slot_unit[ring.slot] = unit; /* published by thread 0's arrive in the expansion (release) */
            mx_expand_block<kTileN>(land + (size_t)stage * mx_land_stage_bytes(kTileN), slot_a, slot_b,
                                    &full[ring.slot], pt, bs_at, sa2);
        }
        ring.advance(stages);
        if (++stage == m.land_stages) {
            stage = 0;
            land_phase ^= 1;
        }
        if (pt == 0) { /* the stage is free again (the step's named barrier) */
            expand_loader()->pending--;
            expand_load(maps, m, L, mstart, own, land, land_full, diag);
        }
    }
    /* the end: the next slot carries -1, once all 128 have arrived (this instance's full barriers count them) */
    mok_sm90_wait(&empty[ring.slot], ring.phase ^ 1, diag, MOK_SM90_DIAG_PRODUCER, ring.slot, -1, 0);
    if (pt == 0)
        slot_unit[ring.slot] = -1;
    mok_mbar_arrive(&full[ring.slot]);
}

#endif

} // namespace

/* megakernel/gather.cuh: `gather` in the bf16 forward (mok_mega_args.gather): GEMM1's A rows read by the producer
 * warpgroup straight from where each route's row is (a rank's own tokens in its x input set, the peers' in its
 * landing rows) into the slot, instead of the scatter copying every route's row into an expert slot first and
 * GEMM1 loading the slots by TMA. The scatter writes and GEMM1 reads back each routed row once more than needed:
 * at one GPU with top-8 and 4096 tokens of 7168 that is 2 x 0.47 GB of DRAM traffic per layer (beside a 34 GB
 * weight stream at 384 experts, ~3% of a layer bound by that stream), and the first GEMM1 tiles wait for it.
 * The same copies from one producer warp ran 1.19-1.28x slower than the scatter at the DeepSeek-V3 / Qwen3-235B
 * shapes on 2 x H200 (results/h200x2/2026-11-30-gather-rows: the copies' completion rate held GEMM1's k blocks,
 * inferred from ncu); this one issues from the whole warpgroup and is meant for small groups, whose k blocks wait
 * on the weights' DRAM stream anyway and whose row blocks are partly padding (zero-filled, nothing loaded).
 *
 * Producer (all 128 threads of the producer warpgroup), per unit:
 *   thread 0  takes the unit by the ticket and waits for its inputs as the TMA producer does (compute.cuh
 *             unit_inputs), a GEMM1 unit for every peer's "landed" flag instead (once: the push lands whole rows
 *             per peer before its flag), then hands the unit to the warpgroup through one of two cells (named barrier
 *             kGatherBarrier; the cells alternate, so a cell is rewritten only after every thread passed the next
 *             barrier, i.e. read it);
 *   per k block every thread waits for the slot; thread 0 writes the unit beside its first k block, arms the full
 *             barrier with the TMA bytes and loads B (and A for GEMM2 and the shared experts' units); in a GEMM1
 *             unit every thread copies 16 bytes of K of each of its 8 rows (rows pt / 8 + 16 i, chunk pt % 8: a
 *             warp reads 4 rows' 128 contiguous bytes per instruction) into the 128B-swizzled slot, padding rows
 *             zero-filled; then every thread's arrival once its copies have landed (cp.async.mbarrier.arrive).
 *             The full barriers expect kGatherArrivals: thread 0's arm and one per thread.
 * Consumers: the bf16 ones, fencing the async proxy after each slot's wait (consume_tile's kProxyFence): cp.async
 * writes through the generic proxy and wgmma reads through the async one.
 * Part of the fused forward's one translation unit (kernels/megakernel/forward.cu includes it after compute.cuh);
 * its names live in that file's anonymous namespace. */
#pragma once

namespace {

#if MOK_SM90_DEVICE
constexpr int kGatherBarrier = 7; /* the producer warpgroup's (1, 2: the consumers' epilogues) */

/* Thread pt's part of k block kb of the GEMM1 row block at slot row row0: 16 bytes of each of its 8 rows. Each
 * row's entry is loaded (L1) and decoded again in every k block: the one-warp producer of
 * results/h200x2/2026-11-30-gather-rows took 1.67-1.77x the layer time doing so against offsets decoded once per
 * unit into a shared-memory table (its runs 4 and 6). Here four warps issue the copies, each a quarter of them;
 * the 8 offsets held in the producer's 40 registers spilled 296-300 bytes (ptxas), and a 1 KiB table fits beside
 * the 4-stage ring and the staging only up to 151 local experts (send=1's 352 bytes of static shared memory;
 * layout.cuh smem_bytes), not at the small-group shapes' 384, where it would cost a ring stage. */
__device__ __forceinline__ void gather_block(const mok_lsa_args &a, const uint8_t *own, const uint8_t *land, int row0,
                                             int kb, uint8_t *slot_a, int pt)
{
    const int q = pt & 7, r = pt >> 3;
    const size_t row_bytes = (size_t)a.hidden * 2, col = (size_t)kb * kRowBytes + q * 16;
    /* the 128B swizzle: chunk q of row r at chunk q ^ (r % 8); r + 16 i has the same r % 8 */
    uint8_t *dst = slot_a + r * kRowBytes + ((q ^ (r & 7)) << 4);
#pragma unroll
    for (int i = 0; i < kTileM / 16; i++) {
        const int32_t e = __ldg(a.entry + row0 + r + 16 * i);
        const int p = (int)((uint32_t)e >> 25), t = (e >> 5) & 0xFFFFF;
        const uint8_t *src = p == a.rank ? own + (size_t)t * row_bytes : land + ((size_t)p * a.t_max + t) * row_bytes;
        mok_cp_async_16(dst + 16 * i * kRowBytes, e < 0 ? own : src + col, e < 0 ? 0u : 16u); /* padding: zeros */
    }
}

/* Thread 0, before the first GEMM1 unit: every peer's rows have landed (their "landed" flags of this epoch) */
__device__ __forceinline__ void wait_landed(const mok_lsa_args &a, struct mok_sm90_diag *diag)
{
    for (int p = 0; p < a.nranks; p++)
        if (p != a.rank)
            wait_flag((const uint64_t *)ncclGetLsaPointer(
                          (ncclWindow_t)a.window, a.off_flags + ((size_t)2 * MOK_LSA_MAX_RANKS + p) * sizeof(uint64_t),
                          a.rank),
                      a.epoch[0], diag, p);
}

__device__ __forceinline__ void produce_units_gather(const Maps &maps, const mok_mega_args &m,
                                                     const volatile UnitList &L, const int *mstart, OwnBlocks own,
                                                     uint8_t *smem_a, uint8_t *smem_b, uint64_t *full,
                                                     uint64_t *empty, int *slot_unit, struct mok_sm90_diag *diag)
{
    const mok_lsa_args &a = m.lsa;
    const int pt = threadIdx.x, stages = m.stages;
    __shared__ int2 cells[2]; /* the unit's ticket and pack_unit, from thread 0 to the warpgroup */
    const uint8_t *own_rows = reinterpret_cast<const uint8_t *>(landed_row(a, a.rank, 0));
    const uint8_t *land_rows =
        static_cast<const uint8_t *>(ncclGetLsaPointer((ncclWindow_t)a.window, a.off_land, a.rank));
    bool landed = m.skip == 1; /* thread 0: the peers' rows are in (skip 1: the last full forward's rows are) */
    RingPos ring = {0, 0};
    for (int cell = 0;; cell ^= 1) {
        UnitLoads ul;
        Unit p;
        if (pt == 0) {
            const int u = atomicAdd(m.done, 1); /* the ticket */
            int packed = -1;
            if (u < L.units) {
                p = unit_at(u, L, mstart, a.local_experts, m.raster, own);
                ul = unit_loads(maps, m, p);
                unit_inputs(m, L, p, u, false, diag);
                if (p.job == 0 && !landed) {
                    wait_landed(a, diag);
                    landed = true;
                }
                packed = pack_unit(p);
            }
            cells[cell] = make_int2(u, packed);
        }
        mok_named_barrier(kGatherBarrier, 128);
        const volatile int2 &vc = cells[cell];
        const int2 c = make_int2(vc.x, vc.y);
        if (c.x >= L.units)
            break;
        const Unit pu = unpack_unit(c.y); /* job, row block, column tile (thread 0 also has the group: p) */
        const int k_blocks = unit_k_blocks(m, pu.job);
        for (int kb = 0; kb < k_blocks; kb++) {
            producer_acquire(ring, empty, diag, c.x, kb);
            uint8_t *a_dst = smem_a + (size_t)ring.slot * kSlotABytes;
            if (pt == 0) {
                if (kb == 0)
                    slot_unit[ring.slot] = c.y; /* published by thread 0's arrivals below (release) */
                uint64_t *bar = producer_arm(ring, full, (pu.job == 0 ? 0 : kSlotABytes) + kSlotBBytes);
                load_unit_block(m, ul, p, kb, a_dst, smem_b + (size_t)ring.slot * kSlotBBytes, bar, pu.job != 0);
            }
            if (pu.job == 0)
                gather_block(a, own_rows, land_rows, pu.rb * kTileM, kb, a_dst, pt);
            mok_cp_async_mbar_arrive(&full[ring.slot]); /* after this thread's copies (none: at once) */
            ring.advance(stages);
        }
    }
    /* the end: the next slot carries -1, once thread 0 has written it and all 128 have arrived (kGatherArrivals) */
    producer_acquire(ring, empty, diag, -1, 0);
    if (pt == 0) {
        slot_unit[ring.slot] = -1;
        mok_mbar_arrive(&full[ring.slot]);
    }
    mok_mbar_arrive(&full[ring.slot]);
}
#endif

} // namespace

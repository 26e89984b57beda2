/* megakernel/compute.cuh: the compute blocks' role: the GEMM core's producer and consumers over the units,
 * and the epilogues (staged TMA stores of h and out, or GEMM2's rows sent from the registers).
 * Part of the fused forward's one translation unit (kernels/megakernel/forward.cu includes it once, in this order:
 * layout, sync, units, comm, compute); its names live in that file's anonymous namespace. */
#pragma once

namespace {

#if MOK_SM90_DEVICE
/* ---- the compute blocks' epilogue ------------------------------------------------------------------------- */
/* Staged rounds of 128 columns (the core's stage_swiglu / stage_bf16): round 0 the SwiGLU of gate columns [0, 128)
 * with up columns [128, 256) (GEMM1), rounds 1 and 2 accumulator columns [0, 128) and [128, 256) (GEMM2); rounds 3
 * and 4 the same GEMM2 columns sent from the registers (send_plain). */

/* One of 4 words by a lane-dependent index s (0..3): two levels of selects, no local memory. */
__device__ __forceinline__ uint32_t pick4(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, int s)
{
    const uint32_t lo = (s & 1) ? w1 : w0, hi = (s & 1) ? w3 : w2;
    return (s & 2) ? hi : lo;
}

/* A quad's 4 x 4 transpose: lane q of the quad holds w_j = its column pair (q) of 8-column group j, j = 0..3; it
 * gets back group q whole (column pairs 0..3, 16 bytes). Step k sends w_(q ^ k) to lane q ^ k and receives that
 * lane's w_q, column pair q ^ k of group q; the two conditional swaps put pair p at position p. */
__device__ __forceinline__ uint4 quad_transpose(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, int q)
{
    uint32_t r0 = pick4(w0, w1, w2, w3, q);
    uint32_t r1 = __shfl_xor_sync(0xffffffffu, pick4(w0, w1, w2, w3, q ^ 1), 1);
    uint32_t r2 = __shfl_xor_sync(0xffffffffu, pick4(w0, w1, w2, w3, q ^ 2), 2);
    uint32_t r3 = __shfl_xor_sync(0xffffffffu, pick4(w0, w1, w2, w3, q ^ 3), 3);
    uint32_t t;
    if (q & 1) {
        t = r0, r0 = r1, r1 = t;
        t = r2, r2 = r3, r3 = t;
    }
    if (q & 2) {
        t = r0, r0 = r2, r2 = t;
        t = r1, r1 = r3, r3 = t;
    }
    return make_uint4(r0, r1, r2, r3);
}

/* send_from_gemm's stores of one round (kRound 3: accumulator columns [0, 128), 4: [128, 256)) straight from the
 * registers to the destination rows (dst_a: row la's 256 bytes of this round, dst_b: row la + 8's; null for rows
 * with no destination, padding). A lane holds column pair q = lane % 4 of every 8-column group of its two rows; each
 * quad transposes 4 groups (quad_transpose) so every lane stores 16 contiguous bytes, a warp 8 rows x 64 bytes per
 * store. No staging, no bulk copy: in the per-tile profile (2 x H200, megakernel-v7) a staged round's send (the
 * barrier, warp 0 loading the 64 rows' entries and issuing one bulk copy per row) took ~4.5k cycles while the
 * warpgroup's tensor cores idled, about a fifth of a GEMM2 tile over the two rounds. The stores are posted; the end
 * of the consumer loop fences them at system scope before the done flag counts them. */
template <int kRound, int N>
__device__ __forceinline__ void send_plain(const float (&acc)[N], uint8_t *dst_a, uint8_t *dst_b, int lane)
{
    constexpr int kBase = kRound == 4 ? kStageCols / 8 : 0;
    const int q = lane & 3;
#pragma unroll
    for (int half = 0; half < 2; half++) { /* row la: accumulators r, r + 1; row la + 8: r + 2, r + 3 */
        uint8_t *row = half ? dst_b : dst_a;
#pragma unroll
        for (int h = 0; h < 2; h++) { /* 64-byte blocks 2h and 2h + 1 (4 groups each) */
#pragma unroll
            for (int b = 0; b < 2; b++) {
                uint32_t w[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int r = 4 * (kBase + 4 * (2 * h + b) + j) + 2 * half;
                    w[j] = pack_bf16x2(acc[r], acc[r + 1]);
                }
                /* every lane shuffles (the quad's row may have no destination): the store alone is skipped */
                const uint4 v = quad_transpose(w[0], w[1], w[2], w[3], q);
                if (row)
                    *reinterpret_cast<uint4 *>(row + 64 * (2 * h + b) + 16 * q) = v;
            }
        }
    }
}

/* Where send_from_gemm's row goes: the routed GEMM2's row straight into the owner's combine row of its route
 * (with communication skipped: into out, locally), the shared GEMM2's into sy (rows below t_max); null for a row
 * with none (padding, shared rows past t_max). */
__device__ __forceinline__ uint8_t *send_row_dst(const mok_mega_args &m, int job, int row, uint8_t *const *comb_base)
{
    const mok_lsa_args &a = m.lsa;
    if (job == 3)
        return row < a.t_max ? (uint8_t *)(m.sy + (size_t)row * a.hidden) : nullptr;
    const int32_t e = a.entry[row];
    if (e < 0)
        return nullptr;
    const int owner = (int)((uint32_t)e >> 25), t = (e >> 5) & 0xFFFFF, j = e & 31;
    return m.skip == 1 ? (uint8_t *)(m.out + (size_t)row * a.hidden)
                       : comb_base[owner] + ((size_t)t * a.topk + j) * a.hidden * 2;
}

/* Before staging: the staging's previous contents have gone out (the bulk reads of the leader's TMA stores), seen
 * by the warpgroup. */
__device__ __forceinline__ void epilogue_begin(bool issuer, int cwg)
{
    if (issuer)
        mok_bulk_wait_read();
    mok_named_barrier(1 + cwg, 128);
}

/* After staging: the leader stores the two 64-column boxes at column col0 of this consumer's 64 rows; after the
 * tile's last round it counts the half tile in done[job][row block] (not the shared GEMM2's: nothing waits on it)
 * once the bytes are in global memory: the bulk writes complete, ordered before the generic release that the
 * waiting producer or comm warp acquires. */
__device__ __forceinline__ void epilogue_store(const Maps &maps, const mok_mega_args &m, const Unit &p, bool leader,
                                               int cwg, uint8_t *stage, int col0, bool last)
{
    staged_ready(1 + cwg);
    if (!leader)
        return;
    const CUtensorMap *mc = p.job == 0 ? &maps.hc : p.job == 1 ? &maps.oc : p.job == 2 ? &maps.shc : &maps.syc;
    store_staged(mc, col0, p.rb * kTileM + cwg * 64, stage, kStageCols / 64);
    if (last && p.job != 3) {
        mok_bulk_wait(0);
        mok_fence_proxy_async_global();
        __threadfence();
        atomicAdd(row_counters(m.done, p.job, m.lsa.capacity) + p.rb, 1); /* done1 | done2 | done3 */
    }
}


/* The split-half unit's store (kSplit): both warpgroups stage the unit's first 64 rows, each `boxes` 64-column boxes
 * from column col0; counted as epilogue_store counts a half tile (each warpgroup once per unit, as before). */
__device__ __forceinline__ void epilogue_store_split(const Maps &maps, const mok_mega_args &m, const Unit &p,
                                                     bool leader, int cwg, uint8_t *stage, int col0, int boxes,
                                                     bool last)
{
    staged_ready(1 + cwg);
    if (!leader)
        return;
    const CUtensorMap *mc = p.job == 0 ? &maps.hc : &maps.oc;
    store_staged(mc, col0, p.rb * kTileM, stage, boxes);
    if (last) {
        mok_bulk_wait(0);
        mok_fence_proxy_async_global();
        __threadfence();
        atomicAdd(row_counters(m.done, p.job, m.lsa.capacity) + p.rb, 1); /* done1 | done2 */
    }
}

/* A routed unit whose second 64 rows are all padding, with kSplit (mok_mega_args.split_half): both consumer
 * warpgroups run its first 64 rows, warpgroup cwg its half of the columns, as mok-gemm's 64-row tiles do
 * (gemm/sm90_grouped_kernel.cuh, kSplitN): two m64n64 wgmmas per k16 over the B slot the producer loads as for any
 * unit. GEMM1: gate rows [64 cwg, +64) with up rows [128 + 64 cwg, +64), so the warpgroup pairs its own gate and up
 * columns into h columns [64 cwg, +64) of the tile; GEMM2: columns [128 cwg, +128). In mok-gemm (gemm mode, one
 * H200) such tiles took 1.07x of the weight stream at 32-43 rows per expert against 1.21x for 128-row tiles with
 * one half of padding (results/h200x1/2026-12-01-groundwork section 4). */
template <bool kSend, bool kGather>
__device__ __forceinline__ void split_half_unit(const Maps &maps, const mok_mega_args &m, const Unit &p, int u,
                                                RingPos &ring, uint64_t *full, uint64_t *empty, float (&acc)[kTileN / 2],
                                                uint8_t *smem_a, uint8_t *smem_b, uint8_t *stage, int k_blocks,
                                                int cwg, int wq, int lane, bool leader, uint8_t *const *comb_base,
                                                struct mok_sm90_diag *diag, int role)
{
    const bool swiglu = p.job == 0;
    float(&half)[1][kTileN / 4] = *reinterpret_cast<float(*)[1][kTileN / 4]>(&acc[0]);
    consume_tile<kTileN / 4, 1, kSlotABytes, kSlotBBytes, 2, KMajor, KMajor, false, false, kGather>(
        ring, m.stages, full, empty, half, k_blocks, smem_a, 0,
        smem_b + cwg * (swiglu ? kTileN / 4 : kTileN / 2) * kRowBytes, 1, lane, 0, diag, role, u,
        (swiglu ? kTileN / 2 : kTileN / 4) * kRowBytes);
    const int la = wq * 16 + lane / 4, lb = la + 8, cq = 2 * (lane % 4);
    if (swiglu) { /* 64 h columns: one box */
        epilogue_begin(leader, cwg);
        stage_swiglu(half[0], stage, la, lb, cq);
        epilogue_store_split(maps, m, p, leader, cwg, stage, p.n * kStageCols + cwg * 64, 1, true);
    } else if (kSend) { /* this warpgroup's 128 columns of the 64 rows, from the registers */
        const int row0 = p.rb * kTileM;
        uint8_t *da = send_row_dst(m, p.job, row0 + la, comb_base);
        uint8_t *db = send_row_dst(m, p.job, row0 + lb, comb_base);
        const int c0 = (p.n * kTileN + cwg * kStageCols) * 2;
        send_plain<3>(acc, da ? da + c0 : nullptr, db ? db + c0 : nullptr, lane);
    } else {
        epilogue_begin(leader, cwg);
        stage_bf16<0, kStageCols / 8>(half[0], stage, la, lb, cq);
        epilogue_store_split(maps, m, p, leader, cwg, stage, p.n * kTileN + cwg * kStageCols, kStageCols / 64, true);
    }
}

/* ---- the producer's unit steps (the TMA producer below and gather.cuh's) ------------------------------------ */
/* A unit's k blocks of 64 K: GEMM1's (routed or shared) over hidden, GEMM2's over its intermediate */
__device__ __forceinline__ int unit_k_blocks(const mok_mega_args &m, int job)
{
    return (job == 0 || job == 2 ? m.lsa.hidden : job == 1 ? m.inter : m.shared_inter) / kBlockK;
}

/* A unit's loads: A's map and B's, B's rows (with SwiGLU the gate half [n * 128, +128) of the group's 2 x n_out
 * rows and the up half n_out further on: two 128-row boxes; without, 256 rows of the group's n_out; b_up -1), and
 * its k blocks */
struct UnitLoads {
    const CUtensorMap *ma, *mb;
    int b_row, b_up, k_blocks;
};

__device__ __forceinline__ UnitLoads unit_loads(const Maps &maps, const mok_mega_args &m, const Unit &p)
{
    const int hidden = m.lsa.hidden, inter = m.inter, sinter = m.shared_inter;
    UnitLoads ul;
    ul.k_blocks = unit_k_blocks(m, p.job);
    ul.ma = p.job == 0 ? &maps.x : p.job == 1 ? &maps.ha : p.job == 2 ? &maps.sx : &maps.sha;
    ul.mb = p.job == 0 ? &maps.w13 : p.job == 1 ? &maps.w2 : p.job == 2 ? &maps.sw13 : &maps.sw2;
    ul.b_up = -1;
    if (p.job == 0)
        ul.b_row = p.group * 2 * inter + p.n * (kTileN / 2), ul.b_up = ul.b_row + inter;
    else if (p.job == 2)
        ul.b_row = p.n * (kTileN / 2), ul.b_up = ul.b_row + sinter;
    else
        ul.b_row = p.group * hidden + p.n * kTileN; /* job 3: group 0 */
    return ul;
}

/* Before a unit's loads (the producer's thread 0): lockstep, then what the unit reads. Lockstep: unit u of wave
 * u / G (G: the compute blocks) starts once every unit of the earlier waves has started, so the blocks that share
 * a weight tile (raster=1: neighbouring tickets) load it together from L2 instead of drifting apart (gemm_sm90's
 * lockstep, per unit). Only lower tickets are waited for, and each of those starts after waiting only for lower
 * ones: no cycle. GEMM1 with rows_in_slots: the dispatch's ready counters of its rows (without: gather.cuh waits
 * for the landed rows itself); GEMM2: its row block's GEMM1 half tiles, all stored. */
__device__ __forceinline__ void unit_inputs(const mok_mega_args &m, const volatile UnitList &L, const Unit &p, int u,
                                            bool rows_in_slots, struct mok_sm90_diag *diag)
{
    const mok_lsa_args &a = m.lsa;
    const int wave_units = (int)gridDim.x - m.comm_blocks;
    if (m.lockstep && u >= wave_units)
        wait_count(m.done + 1, u / wave_units * wave_units, diag, 4, u);
    if (p.job == 0) { /* the dispatch's counters of these rows (padding rows have nothing to wait for) */
        if (rows_in_slots)
            mok_sm90_wait_rows(a.ready, a.chunk_target, a.chunk_rows, p.rb * kTileM, p.rb * kTileM + kTileM, diag,
                               u);
    } else if (p.job == 1 || p.job == 3) { /* the GEMM1 half tiles of this row block, all stored */
        /* job 1 waits on done1, job 3 on the shared GEMM1's done3 (row_counters' job 2) */
        wait_count(row_counters(m.done, p.job - 1, a.capacity) + p.rb, 2 * (p.job == 1 ? L.n1 : L.ns1), diag,
                   p.job == 1 ? 0 : 3, p.rb);
        mok_fence_proxy_async_global(); /* TMA (the async proxy) reads what generic acquire saw */
    }
}

/* k block kb of a unit by TMA into its slot (a_dst, b_dst), completing on bar: A (unless with_a is false: gather's
 * rows), B's rows; the first one counts the unit as started for lockstep. */
__device__ __forceinline__ void load_unit_block(const mok_mega_args &m, const UnitLoads &ul, const Unit &p, int kb,
                                                uint8_t *a_dst, uint8_t *b_dst, uint64_t *bar, bool with_a)
{
    const int kc = kb * kBlockK;
    if (with_a)
        mok_tma_load_2d(a_dst, ul.ma, kc, p.rb * kTileM, bar);
    mok_tma_load_2d(b_dst, ul.mb, kc, ul.b_row, bar);
    if (ul.b_up >= 0)
        mok_tma_load_2d(b_dst + (kTileN / 2) * kRowBytes, ul.mb, kc, ul.b_up, bar);
    if (kb == 0 && m.lockstep)
        atomicAdd(m.done + 1, 1); /* this unit has started */
}

/* ---- compute role ----------------------------------------------------------------------------------------- */
/* The GEMM pipeline of one block over the units the ticket hands out, in ticket order: the producer thread takes
 * a unit (atomicAdd on the ticket), waits for what its rows need, and loads its k blocks into the ring, writing
 * the unit's index beside the slot of its first k block (slot_unit) before that slot's arrive, so the consumers,
 * which acquire the slot, learn it there; -1 there ends the loop. Units go out in list order, so every GEMM1 unit
 * is taken before any GEMM2 unit: a GEMM2 unit's wait is for units already taken by running blocks, and the
 * producer of each block finishes one unit's loads before taking the next (no cycle).
 *
 * joiner: a comm block that has done its part of the dispatch and is not one of the combine's (m.combine_blocks):
 * from then on it is one more compute block (it scatters no landed rows: the first compute blocks do that).
 * kFp8: an FP8 forward (mok_mega_args.fp8; kMx: mxfp8, else fp8_block; kFp8Shared: with the shared experts' bf16
 * tiles; kWide: fp8_block on 128 x 256 tiles): the same prologue and unit list over 128 x 128 tiles (kWide: 128 x
 * 256), the producer and consumer loops of fp8_compute.cuh (declared here, defined there: forward.cu includes it
 * last). */
template <bool kMx, bool kShared, bool kWide>
__device__ __forceinline__ void produce_units_fp8(const Maps &maps, const mok_mega_args &m,
                                                  const volatile UnitList &L, const int *mstart, OwnBlocks own,
                                                  uint8_t *smem_a, uint8_t *smem_b, uint8_t *smem_bs, uint64_t *full,
                                                  uint64_t *empty, int *slot_unit, struct mok_sm90_diag *diag);
template <bool kSend, bool kMx, bool kShared, bool kWide>
__device__ __forceinline__ void consume_units_fp8(const Maps &maps, const mok_mega_args &m, uint64_t *full,
                                                  uint64_t *empty, uint8_t *smem_a, uint8_t *smem_b,
                                                  const uint8_t *smem_bs, uint8_t *stage, const int *slot_unit,
                                                  uint8_t *const *comb_base, int cwg, int wq, int lane, bool leader,
                                                  struct mok_sm90_diag *diag, int role);
/* kExpand: mxfp8 with mx_scheme 1 (mok_mega_args.mx_scheme): the bf16 tiles and consumers, the producer warpgroup
 * expanding e4m3 into the bf16 slots and GEMM1's epilogue quantizing h (mx_expand.cuh, also included last). */
template <bool kShared>
__device__ __forceinline__ void produce_units_expand(const Maps &maps, const mok_mega_args &m,
                                                     const volatile UnitList &L, const int *mstart, OwnBlocks own,
                                                     uint8_t *smem_a, uint8_t *smem_b, uint8_t *land,
                                                     uint64_t *land_full, uint64_t *full, uint64_t *empty,
                                                     int *slot_unit, struct mok_sm90_diag *diag);
template <bool kMx>
__device__ __forceinline__ void quantize_staged_h(const mok_mega_args &m, const Unit &p, const uint8_t *stage,
                                                  int row0, int cwg, int wq, int lane, bool leader);
/* kGather: gather (mok_mega_args.gather): GEMM1's rows read by the producer warpgroup from where they are, no
 * scatter into the slots (gather.cuh, also included last) */
constexpr int kGatherArrivals = 129;
__device__ __forceinline__ void produce_units_gather(const Maps &maps, const mok_mega_args &m,
                                                     const volatile UnitList &L, const int *mstart, OwnBlocks own,
                                                     uint8_t *smem_a, uint8_t *smem_b, uint64_t *full,
                                                     uint64_t *empty, int *slot_unit, struct mok_sm90_diag *diag);
/* kSwap: swap_tail (mok_mega_args.swap_tail): an expert's last row block of at most kSwapMaxRows real rows with the
 * tokens as wgmma's N (swap_tail.cuh, also included last). */
__device__ __forceinline__ int *slot_rows();
__device__ __forceinline__ int block_rows(const mok_lsa_args &a, const Unit &p);
template <bool kSend>
__device__ __forceinline__ void swap_tail_unit(const Maps &maps, const mok_mega_args &m, const Unit &p, int u,
                                               int rows, RingPos &ring, uint64_t *full, uint64_t *empty,
                                               float (&acc)[kTileN / 2], uint8_t *smem_a, uint8_t *smem_b,
                                               uint8_t *stage, int k_blocks, int cwg, int wq, int lane, bool leader,
                                               uint8_t *const *comb_base, struct mok_sm90_diag *diag, int role);

/* The producer's end: the next slot carries no unit, only the -1 that stops the consumers. */
__device__ __forceinline__ void producer_end(RingPos &ring, uint64_t *full, uint64_t *empty, int *slot_unit,
                                             struct mok_sm90_diag *diag)
{
    producer_acquire(ring, empty, diag, -1, 0);
    slot_unit[ring.slot] = -1;
    mok_mbar_arrive(&full[ring.slot]);
}

/* A consumer warpgroup's end: its leader's TMA stores complete (their staging read) before the block ends; with
 * `signal`, its sends are all in place: one of the done flag's contributions. */
__device__ __forceinline__ void consumer_end(const mok_lsa_args &a, const mok_mega_args &m, bool signal, int cwg,
                                             int wq, bool leader)
{
    if (wq == 0)
        mok_bulk_wait(0);
    if (signal) {
        __threadfence_system(); /* each lane's posted stores, some to the peer, before the leader counts them */
        mok_named_barrier(1 + cwg, 128);
        if (leader)
            count_and_signal(a, 1, send_contributions(m));
    }
}

/* kRegA: mxfp8 with mx_scheme 3 (gemm/sm90_mx_rega.cuh): the bf16 kernel's tiles, producer and epilogues; a routed
 * unit's A slot holds its e4m3 rows (8 of its 16 KiB), B the weights' MX values in bf16 (K permuted within each 64-K
 * block, mok_mega_args.w13 / w2), and each consumer thread expands its A fragment into registers. */
template <bool kSend, bool kSplit, bool kSave, bool kFp8 = false, bool kMx = false, bool kFp8Shared = false,
          bool kExpand = false, bool kSwap = false, bool kWide = false, bool kRegA = false, bool kGather = false>
__device__ __forceinline__ void compute_role(const Maps &maps, const mok_mega_args &m, int cta, int nctas,
                                             bool joiner, struct mok_sm90_diag *diag)
{
    constexpr int kAcc = kTileN / 2;
    /* the FP8 policies' 128 x 128 tiles (layout.cuh); kExpand, kWide and kRegA run the bf16 kernel's 128 x 256 */
    constexpr bool kTiles128 = kFp8 && !kExpand && !kWide && !kRegA;
    const mok_lsa_args &a = m.lsa;
    const int stages = m.stages, groups = a.local_experts, hidden = a.hidden, inter = m.inter;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (mok_smem_addr(smem_raw) & 1023)) & 1023);
    uint8_t *smem_a = smem;
    uint8_t *smem_b = smem_a + (size_t)stages * kSlotABytes;
    uint8_t *smem_c = smem_b + (size_t)stages * slot_b_bytes(kTiles128);
    uint8_t *smem_bs = smem_c + kStageBytes; /* kMx: the slots' B scales (layout.cuh smem_bytes); kExpand: the
                                              * landing ring */
    uint64_t *full = reinterpret_cast<uint64_t *>(smem_bs + (kMx && kTiles128 ? (size_t)stages * kMxScaleSlot : 0) +
                                                  (kExpand ? (size_t)m.land_stages * mx_land_stage_bytes(kTileN) : 0));
    uint64_t *empty = full + stages;
    uint64_t *land_full = empty + stages; /* kExpand */
    int *mstart = reinterpret_cast<int *>(land_full + (kExpand ? m.land_stages : 0)); /* first row block of each
                                                                                         * group, [groups + 1] */
    int *own_pack = mstart + groups + 1, *own_start = own_pack + groups; /* own_first's sets (OwnBlocks): there
                                                                               only with own_first */
    /* the unit whose first k block is in each slot: static, so its address is a constant and costs the consumers
     * (at their register limit) no register */
    __shared__ int slot_unit[kMaxStages];

    /* column tiles of GEMM1 (h) and GEMM2 (out) */
    const int n1 = inter / (kTiles128 ? kFp8HCols : kTileN / 2), n2 = gemm2_tiles<kTiles128>(hidden);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            /* kExpand: every producer thread's arrive; kGather: thread 0's and every producer thread's */
            mok_mbar_init(&full[s], kExpand ? 128 : kGather ? kGatherArrivals : 1);
            mok_mbar_init(&empty[s], 8);                /* one arrive per consumer warp */
        }
        if constexpr (kExpand)
            for (int s = 0; s < m.land_stages; s++)
                mok_mbar_init(&land_full[s], 1); /* the loader's arrive (with the TMA bytes) */
        mok_fence_mbar_init();
    }
    if (warp == 0) /* row-block prefix: the schedule pads every expert to a multiple of 128 rows */
        warp_group_prefix(groups, lane, mstart, [&](int g) {
            int r0 = a.offset[g], r1 = a.offset[g + 1];
            if (r0 < 0 || r1 < r0 || r1 > a.capacity || r0 % kTileM || r1 % kTileM)
                mok_sm90_fail(diag, MOK_SM90_DIAG_OFFSETS, 0, 0, g, r0, r1);
            return (r1 - r0) / kTileM;
        });
    const bool own_first = m.own_first && a.push;
    if (own_first) /* own-only row blocks of the first own_first groups (own rows need no push: their GEMM1 tiles
                    * go first); the later groups have none, so their blocks keep the plain order. Only a few groups:
                    * each group's row blocks split in two passes stream its weight tiles twice */
        for (int g = threadIdx.x; g < groups; g += blockDim.x)
            own_pack[g] = g < m.own_first ? own_row_blocks(a, g) : 0;
    __syncthreads(); /* every thread of this block is in this role now */
    if (own_first && warp == 0)
        warp_group_prefix(groups, lane, own_start, [&](int g) { return own_pack[g] >> 16; });
    const int blocks_m = mstart[groups];
    const OwnBlocks own = {own_pack, own_start};
    /* kSend: every rank's combine rows in my view of the window, looked up once (the consumers, at their register
     * limit while they send, then only add an offset) */
    __shared__ uint8_t *comb_base[MOK_LSA_MAX_RANKS];
    if (kSend && (int)threadIdx.x < a.nranks)
        comb_base[threadIdx.x] = (uint8_t *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_comb, threadIdx.x);
    /* shared experts: one MLP of shared_inter columns over this rank's own tokens (rows past them are computed
     * from whatever the buffers hold and never stored) */
    const int sinter = m.shared_inter;
    __shared__ UnitList list;
    const volatile UnitList &L = list;
    if (threadIdx.x == 0) {
        list.n1 = n1, list.n2 = n2, list.ns1 = sinter / (kTiles128 ? kFp8HCols : kTileN / 2);
        list.shared_blocks = sinter ? (a.my_tokens + kTileM - 1) / kTileM : 0;
        list.us1 = list.shared_blocks * list.ns1, list.us2 = list.shared_blocks * n2;
        list.u1 = blocks_m * n1;
        list.units = list.us1 + list.us2 + list.u1 + (m.gemm1_only ? 0 : blocks_m * n2); /* gemm1_only: the
                                                                                          * backward's recompute */
    }
    __syncthreads(); /* own_start (warp 0) and the list */
    if (threadIdx.x == 0)
        list.own_units = own_first ? own_start[groups] * n1 : 0;
    __syncthreads();
    if (!joiner) {
        if (a.push && m.skip != 1 && !kGather) { /* skip 1: the slots still hold the last full forward's rows */
            if (own_first) /* the own rows of the first experts' chunks (the comm blocks copy the rest) */
                scatter_rows<kFp8>(m, 0, own_chunks(a, m), cta, nctas, kScatterOwn, diag);
            else /* one chunk each (the comm blocks copy the rest) */
                scatter_rows<kFp8>(m, 0, first_round(a, m), cta, nctas, kScatterAll, diag);
        }
        if (m.skip == 2) { /* compute skipped: every row block of GEMM2 "done" at once, for the combine */
            if (kSend && !m.gemm1_only) { /* ... which is here: the whole block sends its row blocks from out (the
                                           * backward's recompute sends nothing, as with compute: `signal` below) */
                /* 2 vectors in flight, not 8: this path sits before the roles split, and 8 there made ptxas
                 * spill values the GEMM roles keep (the whole kernel shares one register budget) */
                for (int s = cta * kWarps + warp; s < blocks_m * kTileM; s += nctas * kWarps)
                    send_route_row<2>(m, s, lane);
                __syncthreads();
                if (threadIdx.x == 0) /* both of this block's contributions (one per consumer warpgroup otherwise) */
                    for (int i = 0; i < 2; i++)
                        count_and_signal(a, 1, send_contributions(m));
            } else if (!kSend && threadIdx.x == 0) {
                for (int rb = cta; rb < blocks_m; rb += nctas)
                    atomicAdd(row_counters(m.done, 1, a.capacity) + rb, 2 * n2);
            }
            return;
        }
    }

    if (warp < 4) {
        /* ---- producer: one thread takes the units and issues every TMA load ---- */
        mok_setmaxnreg_dec<kExpand ? kMxProducerRegs : kProducerRegs>();
        if constexpr (kExpand) { /* all 128 threads */
            produce_units_expand<kFp8Shared>(maps, m, L, mstart, own, smem_a, smem_b, smem_bs, land_full, full, empty,
                                             slot_unit, diag);
            return;
        } else if constexpr (kGather) { /* all 128 threads: gather.cuh */
            produce_units_gather(maps, m, L, mstart, own, smem_a, smem_b, full, empty, slot_unit, diag);
            return;
        } else if constexpr (kFp8 && !kRegA) {
            if (threadIdx.x == 0)
                produce_units_fp8<kMx, kFp8Shared, kWide>(maps, m, L, mstart, own, smem_a, smem_b, smem_bs, full,
                                                          empty, slot_unit, diag);
            return;
        }
        if (threadIdx.x == 0) {
            RingPos ring = {0, 0};
            for (;;) {
                const int u = atomicAdd(m.done, 1); /* the ticket */
                if (u >= L.units) /* none left */
                    break;
                Unit p = unit_at(u, L, mstart, groups, m.raster, own);
                const UnitLoads ul = unit_loads(maps, m, p);
                unit_inputs(m, L, p, u, true, diag);
                for (int kb = 0; kb < ul.k_blocks; kb++) {
                    producer_acquire(ring, empty, diag, u, kb);
                    if (kb == 0) {
                        slot_unit[ring.slot] = pack_unit(p); /* published by the arrive below (release) */
                        if constexpr (kSwap)
                            slot_rows()[ring.slot] = block_rows(a, p);
                    }
                    /* kRegA: a routed unit's A is its e4m3 rows, 64 bytes of K a row (the shared units' bf16) */
                    uint64_t *bar = producer_arm(
                        ring, full, (kRegA && p.job <= 1 ? kMxRegASlotBytes : kSlotABytes) + kSlotBBytes);
                    load_unit_block(m, ul, p, kb, smem_a + (size_t)ring.slot * kSlotABytes,
                                    smem_b + (size_t)ring.slot * kSlotBBytes, bar, true);
                    ring.advance(stages);
                }
            }
            producer_end(ring, full, empty, slot_unit, diag);
        }
        return;
    }

    /* ---- consumers: two warpgroups, rows [0, 64) and [64, 128) of each tile ---- */
    mok_setmaxnreg_inc<kExpand ? kMxConsumerRegs : kConsumerRegs>();
    const int cwg = warp / 4 - 1, wq = warp % 4;
    const int role = MOK_SM90_DIAG_CONSUMER + cwg;
    const bool leader = wq == 0 && lane == 0;
    /* the sends are the combine: they count toward its done flag (a recompute sends nothing) */
    const bool signal = kSend && m.skip == 0 && !m.gemm1_only;
    if constexpr (kFp8 && !kExpand && !kRegA) {
        consume_units_fp8<kSend, kMx, kFp8Shared, kWide>(maps, m, full, empty, smem_a, smem_b, smem_bs,
                                                         smem_c + (size_t)cwg * (kStageBytes / 2), slot_unit,
                                                         comb_base, cwg, wq, lane, leader, diag, role);
        consumer_end(a, m, signal, cwg, wq, leader);
        return;
    }
    float acc[1][kAcc];
    RingPos ring = {0, 0};
    for (;;) {
        mok_sm90_wait(&full[ring.slot], ring.phase, diag, role, ring.slot, -1, 0); /* the unit's first k block, or the end */
        /* lane 0 reads it and hands it to the warp: lane 0 is also the one whose arrive releases the slot to the
         * producer, so the read is ordered before the producer's next write by program order plus that release */
        const int u = __shfl_sync(0xffffffffu, lane == 0 ? *(volatile int *)&slot_unit[ring.slot] : 0, 0);
        if (u < 0)
            break;
        const Unit p = unpack_unit(u);
        const int k_blocks = (p.job == 0 || p.job == 2 ? hidden : p.job == 1 ? inter : sinter) / kBlockK;
        if constexpr (kSwap) {
            const int rows = __shfl_sync(0xffffffffu, lane == 0 ? *(volatile int *)&slot_rows()[ring.slot] : 0, 0);
            if (p.job <= 1 && rows > 0 && rows <= kSwapMaxRows) { /* rows 0: all padding, skipped below */
                swap_tail_unit<kSend>(maps, m, p, u, rows, ring, full, empty, acc[0], smem_a, smem_b,
                                      smem_c + (size_t)cwg * (kStageBytes / 2), k_blocks, cwg, wq, lane, leader,
                                      comb_base, diag, role);
                continue;
            }
        }
        if (kSplit && (p.job == 0 || p.job == 1) && a.entry[p.rb * kTileM + 64] < 0) {
            split_half_unit<kSend, kGather>(maps, m, p, u, ring, full, empty, acc[0], smem_a, smem_b,
                                   smem_c + (size_t)cwg * (kStageBytes / 2), k_blocks, cwg, wq, lane, leader,
                                   comb_base, diag, role);
            continue;
        }
        if ((p.job == 0 || p.job == 1) && a.entry[p.rb * kTileM + cwg * 64] < 0) {
            /* A routed half tile that starts with padding is all padding (each expert's rows are padded to 128 at
             * its end, and row blocks never cross experts): nobody reads its rows, so no wgmma and no epilogue,
             * only the slots passed back and the half tile counted where the epilogue would have counted it. With
             * rows per expert spread evenly modulo 128, about half of the experts' last row blocks hold such a half.
             * Measured 1-3% faster (2 x H200, DeepSeek-V3 and Qwen3 at 4096-8192 tokens,
             * results/h200x2/2026-11-30-megakernel-v4), less than the skipped tensor work: such a tile still streams
             * its weights and its other half. */
            skip_tile(ring, stages, full, empty, k_blocks, lane, diag, role, u);
            if (leader && (p.job == 0 || !kSend)) /* done1, or done2 that the comm blocks' sends wait for */
                atomicAdd(row_counters(m.done, p.job, m.lsa.capacity) + p.rb, 1);
            continue;
        }
        /* this warpgroup's 64 rows of A in the slot; the first k block's wait completes at once (one probe) */
        if (kRegA && (!kFp8Shared || p.job <= 1)) { /* (without shared experts every unit is routed) */
            /* rows r0 and r0 + 8 of the tile, chunk q (gemm/sm90_mx_rega.cuh); their scale bytes behind the slot's
             * wire row (GEMM1) or in hs (GEMM2), both written during this kernel: read through L2 */
            const int r0 = cwg * 64 + wq * 16 + lane / 4, q = lane % 4, row = p.rb * kTileM + r0;
            const uint8_t *s0 = p.job == 0 ? m.xq + (size_t)row * fp8_row_bytes(hidden) + hidden
                                           : static_cast<const uint8_t *>(m.hs) + (size_t)row * (inter / 32);
            const size_t s_step = p.job == 0 ? (size_t)8 * fp8_row_bytes(hidden) : (size_t)8 * (inter / 32);
            const MxRegA mt = {(uint32_t)(r0 * kMxLandRowBytes + ((q ^ ((r0 >> 1) & 3)) << 4)),
                               (uint32_t)((r0 + 8) * kMxLandRowBytes + ((q ^ (((r0 + 8) >> 1) & 3)) << 4)),
                               s0 + q / 2, s0 + s_step + q / 2};
            consume_tile_mx_rega<kTileN, true, kSlotABytes>(ring, stages, full, empty, acc[0], k_blocks, smem_a,
                                                            smem_b, mt, lane, diag, role, u);
        } else {
            consume_tile<kTileN, 1, kSlotABytes, kSlotBBytes, 1, KMajor, KMajor, false, false, kGather>(
                ring, stages, full, empty, acc, k_blocks, smem_a, cwg * 64 * kRowBytes, smem_b, 1, lane, 0, diag,
                role, u);
        }

        /* Epilogue: staged boxes and TMA stores, 128 columns per round: GEMM1's SwiGLU output in one, GEMM2's 256
         * columns in two (send_from_gemm's GEMM2: no staging, stores from the registers). The routed jobs' row
         * blocks are whole (padded groups); the shared jobs' maps end at t_max rows, so TMA drops what lies past
         * them, and rows between the own token count and t_max get values nobody reads. While the accumulators are
         * live (staging), registers are at the limit: everything else after. */
        uint8_t *stage = smem_c + (size_t)cwg * (kStageBytes / 2);
        const int la = wq * 16 + lane / 4, lb = la + 8, cq = 2 * (lane % 4);
        if (p.job == 0 || p.job == 2) {
            epilogue_begin(leader, cwg);
            stage_swiglu(acc[0], stage, la, lb, cq);
            if ((kExpand || kRegA) && p.job == 0) { /* h stored for the export, quantized from the staging for GEMM2 */
                const int row0 = p.rb * kTileM + cwg * 64;
                staged_ready(1 + cwg);
                if (leader && (!m.store_h || __ldg(m.store_h) != 0)) /* only when asked (mok_mega_args.store_h) */
                    store_staged(&maps.hc, p.n * kStageCols, row0, stage, kStageCols / 64);
                quantize_staged_h<true>(m, p, stage, row0, cwg, wq, lane, leader);
            } else {
                epilogue_store(maps, m, p, leader, cwg, stage, p.n * kStageCols, true);
            }
            if (kSave) { /* the gate columns, then the up columns, as bf16 into gu (sgu: the shared GEMM1's) for the
                          * backward; nothing in this kernel waits for them */
                const CUtensorMap *mg = p.job == 0 ? &maps.guc : &maps.sguc;
                const int up = p.job == 0 ? inter : sinter;
                epilogue_begin(leader, cwg);
                stage_bf16<0, kStageCols / 8>(acc[0], stage, la, lb, cq);
                staged_ready(1 + cwg);
                if (leader)
                    store_staged(mg, p.n * kStageCols, p.rb * kTileM + cwg * 64, stage, kStageCols / 64);
                epilogue_begin(leader, cwg);
                stage_bf16<kStageCols / 8, kStageCols / 8>(acc[0], stage, la, lb, cq);
                staged_ready(1 + cwg);
                if (leader)
                    store_staged(mg, up + p.n * kStageCols, p.rb * kTileM + cwg * 64, stage, kStageCols / 64);
            }
        } else if (kSend) { /* GEMM2 rows straight to where they go (the combine rows of their routes, or sy) */
            const int row0 = p.rb * kTileM + cwg * 64;
            uint8_t *da = send_row_dst(m, p.job, row0 + la, comb_base);
            uint8_t *db = send_row_dst(m, p.job, row0 + lb, comb_base);
            const int c0 = p.n * kTileN * 2, c1 = c0 + kStageCols * 2; /* the two rounds' byte offsets in a row */
            send_plain<3>(acc[0], da ? da + c0 : nullptr, db ? db + c0 : nullptr, lane);
            send_plain<4>(acc[0], da ? da + c1 : nullptr, db ? db + c1 : nullptr, lane);
        } else {
            epilogue_begin(leader, cwg);
            stage_bf16<0, kStageCols / 8>(acc[0], stage, la, lb, cq);
            epilogue_store(maps, m, p, leader, cwg, stage, p.n * kTileN, false);
            epilogue_begin(leader, cwg);
            stage_bf16<kStageCols / 8, kStageCols / 8>(acc[0], stage, la, lb, cq);
            epilogue_store(maps, m, p, leader, cwg, stage, p.n * kTileN + kStageCols, true);
        }
    }
    consumer_end(a, m, signal, cwg, wq, leader);
}
#endif

} // namespace

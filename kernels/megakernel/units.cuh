/* megakernel/units.cuh: the compute blocks' list of units (GEMM1, GEMM2 and the shared experts' tiles), handed
 * out by one ticket: their order, packing and lookup, and own_first's own-row blocks.
 * Part of the fused forward's one translation unit (kernels/megakernel/forward.cu includes it once, in this order:
 * layout, sync, units, comm, compute); its names live in that file's anonymous namespace. */
#pragma once

#include "megakernel/group_search.cuh"

namespace {

#if MOK_SM90_DEVICE
/* Unit u of the compute blocks' list: GEMM1's units [0, u1) (m-tile major, then h column tile), then GEMM2's. */
struct Unit {
    int job;   /* 0: GEMM1 + SwiGLU, 1: GEMM2, 2: shared GEMM1 + SwiGLU, 3: shared GEMM2 */
    int group; /* local expert (0 for the shared jobs) */
    int rb;    /* row block: rows [rb * 128, +128) of the slots (groups are padded to 128 rows), or of own tokens */
    int n;     /* column tile */
};

/* The unit list: the shared jobs' units first (they need no dispatch: they fill its time), us1 of shared GEMM1
 * then us2 of shared GEMM2, then the routed GEMM1's u1 and GEMM2's units. Kept in shared memory and read through
 * a volatile reference where used: held in registers across the main loop they made the consumers spill. */
struct UnitList {
    int us1, us2, u1, n1, n2, ns1, shared_blocks, units;
    int own_units; /* own_first: the routed GEMM1's units over own-row blocks, which go first (0: no such split) */
};

/* The row-block sets of the routed GEMM1 with own_first: per group g, own_pack[g] = first own-only row block
 * (within the group) | their count << 16, own_start[g] = own-only blocks of the groups before g ([groups + 1]). */
struct OwnBlocks {
    const int *own_pack, *own_start;
};

/* A unit as the producer hands it to the consumers (slot_unit): job | column tile << 2 | row block << 10, >= 0
 * (rb < 2^21), so -1 can say "no more". The consumers need no group and no unit list. */
__device__ __forceinline__ int pack_unit(const Unit &p) { return p.job | p.n << 2 | p.rb << 10; }
__device__ __forceinline__ Unit unpack_unit(int v)
{
    Unit p;
    p.job = v & 3, p.n = (v >> 2) & 0xFF, p.rb = v >> 10, p.group = -1;
    return p;
}

/* own_first: group g's row blocks that hold only this rank's own rows (its tokens need no push). A group's rows
 * are in (source rank, token, k) order, so the own ones are one range: found by two binary searches over the
 * entries' source ranks; the blocks wholly inside it (with the padding after the last real row, if the range
 * ends there) are own-only. Returns first block (within the group) | count << 16. A wrong guess here would only
 * cost time: every tile still waits for its rows' ready counters. */
__device__ __forceinline__ int own_row_blocks(const mok_lsa_args &a, int g)
{
    const int r0 = a.offset[g], n = a.rows[g], blocks = (a.offset[g + 1] - r0) / kTileM;
    auto first_at_least = [&](int rank) { /* first row in [r0, r0 + n) whose source rank is >= rank */
        int lo = r0, hi = r0 + n;
        while (lo < hi) {
            int mid = (lo + hi) >> 1;
            if ((int)((uint32_t)a.entry[mid] >> 25) < rank)
                lo = mid + 1;
            else
                hi = mid;
        }
        return lo;
    };
    const int lo = first_at_least(a.rank), hi = first_at_least(a.rank + 1);
    if (hi <= lo)
        return 0;
    const int b0 = (lo - r0 + kTileM - 1) / kTileM;
    const int b1 = hi == r0 + n ? blocks : (hi - r0) / kTileM;
    return b1 > b0 ? b0 | (b1 - b0) << 16 : 0;
}

__device__ __forceinline__ Unit unit_at(int u, const volatile UnitList &L, const int *mstart, int groups,
                                        int n_major, OwnBlocks own)
{
    const int us1 = L.us1, us2 = L.us2, u1 = L.u1, n1 = L.n1, n2 = L.n2, ns1 = L.ns1, shared_blocks = L.shared_blocks;
    const int own_units = L.own_units;
    Unit p;
    if (u < us1 + us2) { /* shared: one group of shared_blocks row blocks */
        p.job = u < us1 ? 2 : 3;
        int local = u < us1 ? u : u - us1, nt = u < us1 ? ns1 : n2;
        p.group = 0;
        p.rb = n_major ? local % shared_blocks : local / nt;
        p.n = n_major ? local / shared_blocks : local % nt;
        return p;
    }
    u -= us1 + us2;
    p.job = u >= u1;
    int local = p.job ? u - u1 : u, nt = p.job ? n2 : n1;
    if (!p.job && own_units) { /* own_first: the own-only row blocks of every group, then the others */
        const bool mine = local < own_units;
        if (!mine)
            local -= own_units;
        /* group g's blocks in this part start at own_start[g] (mine) or mstart[g] - own_start[g] (the rest) */
        auto part_start = [&](int g) { return mine ? own.own_start[g] : mstart[g] - own.own_start[g]; };
        const int lo = mok_group_of(local, part_start, groups, nt);
        const int own0 = own.own_pack[lo] & 0xFFFF, own_n = own.own_pack[lo] >> 16;
        const int start = part_start(lo);
        const int blocks = mine ? own_n : mstart[lo + 1] - mstart[lo] - own_n;
        const int in_group = local - start * nt;
        int b = n_major ? in_group % blocks : in_group / nt; /* the b-th block of this part within the group */
        if (mine)
            b += own0;
        else if (b >= own0)
            b += own_n; /* the rest: the blocks before the own ones, then those after */
        p.group = lo;
        p.rb = mstart[lo] + b;
        p.n = n_major ? in_group / blocks : in_group % nt;
        return p;
    }
    /* the group whose first unit (row block x column tiles) is <= local */
    int lo = mok_group_of(local, [&](int g) { return mstart[g]; }, groups, nt);
    p.group = lo;
    /* within the group: m-major (neighbouring units share the A rows) or n-major (they share the weight tile) */
    int in_group = local - mstart[lo] * nt, blocks = mstart[lo + 1] - mstart[lo];
    p.rb = mstart[lo] + (n_major ? in_group % blocks : in_group / nt);
    p.n = n_major ? in_group / blocks : in_group % nt;
    return p;
}
#endif

} // namespace

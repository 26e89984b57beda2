/* megakernel/bwd_units.cuh: the fused backward's unit list (GEMM2 dgrad, GEMM1 dgrad, dW2, dW13 tiles), handed
 * out by one ticket: its order, packing and lookup. Host and device (tests/test_bwd_units.cu checks on the CPU that
 * the list covers every tile once and in dependency order). Part of the fused backward's translation unit
 * (kernels/megakernel/backward.cu), in its anonymous namespace there. */
#pragma once

#include "megakernel/group_search.cuh"

namespace {

enum { kJobDgrad2 = 0, kJobDgrad1 = 1, kJobWgrad2 = 2, kJobWgrad13 = 3 };

/* The unit list: GEMM2 dgrad's u0 units (row block x I / 256 column tiles) first, then GEMM1 dgrad's u1 (x H / 256)
 * and the weight gradients' tiles (dW2's EL x (H / 128) x (I / 256), then dW13's EL x (2I / 128) x (H / 256)):
 * after GEMM1 dgrad, or with `mix` interleaved with it in proportion (a Bresenham merge of the two lists), so that the
 * weight-gradient tiles (DRAM-bound with fp32 gradients) run beside GEMM1 dgrad's (tensor-bound) on other SMs.
 * Every unit waits only for GEMM2-dgrad units, all handed out by the ticket before it to running blocks: no cycle. */
struct BwdList {
    int n2, n1;        /* column tiles of GEMM2 dgrad (over I) and GEMM1 dgrad (over H) */
    int w2m, w2n, w13m, w13n; /* output tiles of dW2 (H / 128 x I / 256) and dW13 (2I / 128 x H / 256) */
    int u0, u1, uw2, units;
    int mix;           /* 1: GEMM1 dgrad and the weight gradients interleaved after GEMM2 dgrad */
};

/* The list of a layer: blocks_m row blocks over `groups` experts (the slots' 128-row blocks), hidden H, inter I
 * (tiles of 128 x 256: H a multiple of 256, I of 256). */
MOK_HOST_DEVICE BwdList bwd_list(int blocks_m, int groups, int H, int I, int mix)
{
    BwdList l;
    l.mix = mix;
    l.n2 = I / 256, l.n1 = H / 256;
    l.w2m = H / 128, l.w2n = I / 256, l.w13m = 2 * I / 128, l.w13n = H / 256;
    l.u0 = blocks_m * l.n2, l.u1 = blocks_m * l.n1;
    l.uw2 = groups * l.w2m * l.w2n;
    l.units = l.u0 + l.u1 + l.uw2 + groups * l.w13m * l.w13n;
    return l;
}

struct BwdUnit {
    int job, group, rb, n; /* dgrad: row block and column tile; wgrad: rb = the m tile */
};

/* dgrad units: job | n << 2 | rb << 10 (as the forward's); wgrad units: job | local << 2, local = the tile's index
 * in its job's list (group-major, then m, then n), decoded again by the consumers. */
MOK_HOST_DEVICE int pack_bwd_unit(const BwdUnit &p, int local)
{
    return p.job <= kJobDgrad1 ? p.job | p.n << 2 | p.rb << 10 : p.job | local << 2;
}

MOK_HOST_DEVICE void wgrad_tile_of(int local, int tm, int tn, int &g, int &mt, int &nt)
{
    const int per = tm * tn;
    g = local / per;
    mt = local % per / tn;
    nt = local % tn;
}

MOK_HOST_DEVICE BwdUnit bwd_unit_at(int u, const volatile BwdList &L, const int *mstart, int groups, int n_major,
                                    int &local)
{
    BwdUnit p;
    int w = u - L.u0 - L.u1; /* the weight gradients' index, when u is one of theirs */
    bool dgrad = u < L.u0 + L.u1;
    if (L.mix && u >= L.u0) { /* position v of the merged tail: GEMM1 dgrad's unit c(v) when c(v + 1) > c(v), with
                               * c(v) = floor(v u1 / tail) of them among the first v; else weight unit v - c(v) */
        const long long v = u - L.u0, tail = L.units - L.u0;
        const int c = (int)(v * L.u1 / tail), c1 = (int)((v + 1) * L.u1 / tail);
        dgrad = c1 > c;
        if (dgrad)
            u = L.u0 + c;
        else
            w = (int)v - c;
    }
    if (dgrad) { /* dgrad: the group whose first unit is <= local, then m- or n-major inside it */
        p.job = u < L.u0 ? kJobDgrad2 : kJobDgrad1;
        local = p.job == kJobDgrad2 ? u : u - L.u0;
        const int nt = p.job == kJobDgrad2 ? L.n2 : L.n1;
        const int g = mok_group_of(local, [&](int x) { return mstart[x]; }, groups, nt);
        const int in_group = local - mstart[g] * nt, blocks = mstart[g + 1] - mstart[g];
        p.group = g;
        p.rb = mstart[g] + (n_major ? in_group % blocks : in_group / nt);
        p.n = n_major ? in_group / blocks : in_group % nt;
        return p;
    }
    const bool w2 = w < L.uw2;
    p.job = w2 ? kJobWgrad2 : kJobWgrad13;
    local = w - (w2 ? 0 : L.uw2);
    wgrad_tile_of(local, w2 ? L.w2m : L.w13m, w2 ? L.w2n : L.w13n, p.group, p.rb, p.n);
    return p;
}

/* The shared experts' backward inside the kernel (the kShared instances; struct mok_mega_bwd_args.sh): one group of
 * `blocks` row blocks (the own tokens), intermediate SI, tiles as the routed ones'. Their units go around the routed
 * list: GEMM2 dgrad's s2 first (they read dy's own rows, which need no dispatch: they fill its time), then the routed
 * GEMM2 dgrad, the shared GEMM1 dgrad's s1 and the shared dW2 and dW13 tiles, then the routed rest (GEMM1 dgrad and
 * the weight gradients, mixed or not). The shared weight-gradient tiles run K = all own tokens (64 k blocks at 4096
 * tokens, against the routed ones' few): ahead of the routed rest, not at the end, where the longest tiles would
 * set the kernel's tail. Each shared unit waits only for shared GEMM2-dgrad units before it. */
struct BwdShared {
    int blocks, n2, n1;       /* row blocks; column tiles of GEMM2 dgrad (over SI) and GEMM1 dgrad (over H) */
    int w2m, w2n, w13m, w13n; /* output tiles of dW2 (H / 128 x SI / 256) and dW13 (2 SI / 128 x H / 256) */
    int s2, s1, sw2, units;
};

/* A packed unit of the shared experts: this bit beside pack_bwd_unit's fields (row blocks stay below 2^20). */
enum { kSharedUnit = 1 << 30 };

MOK_HOST_DEVICE BwdShared bwd_shared_list(int blocks, int H, int SI)
{
    BwdShared s;
    s.blocks = blocks;
    s.n2 = SI / 256, s.n1 = H / 256;
    s.w2m = H / 128, s.w2n = SI / 256, s.w13m = 2 * SI / 128, s.w13n = H / 256;
    s.s2 = SI ? blocks * s.n2 : 0, s.s1 = SI ? blocks * s.n1 : 0;
    s.sw2 = SI ? s.w2m * s.w2n : 0;
    s.units = s.s2 + s.s1 + s.sw2 + (SI ? s.w13m * s.w13n : 0);
    return s;
}

/* Unit u of the list with the shared experts' units (L.units + S.units of them); `shared` says whose it is. A shared
 * unit's group is 0, its rb the row block of own tokens (dgrad) or the m tile (wgrad); `local` as bwd_unit_at's. */
MOK_HOST_DEVICE BwdUnit bwd_unit_with_shared(int u, const volatile BwdList &L, const volatile BwdShared &S,
                                             const int *mstart, int groups, int n_major, int &local, bool &shared)
{
    const int shared_rest = S.units - S.s2; /* the shared GEMM1 dgrad and weight gradients, after the routed GEMM2 */
    shared = true;
    BwdUnit p;
    p.group = 0;
    if (u >= S.s2 && (u < S.s2 + L.u0 || u >= S.s2 + L.u0 + shared_rest)) { /* a routed unit */
        shared = false;
        const int r = u < S.s2 + L.u0 ? u - S.s2 : u - S.s2 - shared_rest;
        return bwd_unit_at(r, L, mstart, groups, n_major, local);
    }
    const int v = u < S.s2 ? u : u - L.u0; /* the index in the shared list: s2, s1, then the weight tiles */
    if (v < S.s2 + S.s1) { /* a shared dgrad tile */
        const bool d2 = v < S.s2;
        p.job = d2 ? kJobDgrad2 : kJobDgrad1;
        local = d2 ? v : v - S.s2;
        const int nt = d2 ? S.n2 : S.n1;
        p.rb = n_major ? local % S.blocks : local / nt;
        p.n = n_major ? local / S.blocks : local % nt;
        return p;
    }
    const int w = v - S.s2 - S.s1; /* a shared weight-gradient tile */
    const bool w2 = w < S.sw2;
    p.job = w2 ? kJobWgrad2 : kJobWgrad13;
    local = w - (w2 ? 0 : S.sw2);
    int g;
    wgrad_tile_of(local, w2 ? S.w2m : S.w13m, w2 ? S.w2n : S.w13n, g, p.rb, p.n);
    return p;
}

} // namespace

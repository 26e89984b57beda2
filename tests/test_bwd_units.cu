/* test_bwd_units: the fused backward's unit list (kernels/megakernel/bwd_units.cuh) on the CPU. For expert row
 * blocks drawn at random (empty experts included) and both tile orders: every GEMM2-dgrad and GEMM1-dgrad tile
 * (row block x column tile, inside its expert's blocks) and every dW2 / dW13 output tile (expert x m tile x n tile)
 * comes out exactly once; every GEMM2-dgrad unit comes before every other (the others wait only for those: what
 * keeps the persistent kernel free of deadlock), and without `mix` the jobs come strictly in order (GEMM2 dgrad,
 * GEMM1 dgrad, dW2, dW13), with it GEMM1 dgrad's units spread evenly over the tail; the packed unit the producer
 * writes beside the slot decodes in the consumers to the same tile; and the same list with the shared experts' units
 * around it (check_shared_list). Exit 0 pass, 1 fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "megakernel/bwd_units.cuh"

static int failures = 0;
#define CHECK(cond, ...)                                                                                             \
    do {                                                                                                             \
        if (!(cond)) {                                                                                               \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                    \
            fprintf(stderr, __VA_ARGS__);                                                                            \
            fprintf(stderr, "\n");                                                                                   \
            failures++;                                                                                              \
            return;                                                                                                  \
        }                                                                                                            \
    } while (0)

static unsigned lcg(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* One layer: `groups` experts with blocks[g] row blocks each, hidden H, intermediate I, tile order n_major. */
static void check_list(const std::vector<int> &blocks, int H, int I, int n_major, int mix)
{
    const int groups = (int)blocks.size();
    std::vector<int> mstart(groups + 1, 0);
    for (int g = 0; g < groups; g++)
        mstart[g + 1] = mstart[g] + blocks[g];
    const int blocks_m = mstart[groups];
    const BwdList L = bwd_list(blocks_m, groups, H, I, mix);
    CHECK(L.units == blocks_m * (I / 256 + H / 256) + groups * (H / 128 * (I / 256) + 2 * I / 128 * (H / 256)),
          "unit count %d", L.units);
    std::vector<int> seen2(blocks_m * L.n2, 0), seen1(blocks_m * L.n1, 0);
    std::vector<int> seenw2(groups * L.w2m * L.w2n, 0), seenw13(groups * L.w13m * L.w13n, 0);
    int last_job = 0, dgrad1_seen = 0;
    for (int u = 0; u < L.units; u++) {
        int local = -1;
        const BwdUnit p = bwd_unit_at(u, L, mstart.data(), groups, n_major, local);
        CHECK((u < L.u0) == (p.job == kJobDgrad2), "unit %d: job %d (GEMM2 dgrad's %d units come first)", u, p.job,
              L.u0);
        if (!mix)
            CHECK(p.job >= last_job, "unit %d: job %d after job %d (ticket order)", u, p.job, last_job);
        last_job = p.job;
        if (mix && u >= L.u0 && L.u1) { /* GEMM1 dgrad's units in their own order, spread over the tail */
            const long long v = u - L.u0, tail = L.units - L.u0;
            CHECK(dgrad1_seen == (int)(v * L.u1 / tail), "unit %d: %d GEMM1-dgrad units before it, not %lld", u,
                  dgrad1_seen, v * L.u1 / tail);
            if (p.job == kJobDgrad1)
                CHECK(local == dgrad1_seen, "unit %d: GEMM1-dgrad unit %d out of order (%d)", u, local, dgrad1_seen);
        }
        dgrad1_seen += p.job == kJobDgrad1;
        CHECK(p.group >= 0 && p.group < groups, "unit %d: group %d of %d", u, p.group, groups);
        const int v = pack_bwd_unit(p, local);
        CHECK(v >= 0 && (v & 3) == p.job, "unit %d: packed %d", u, v);
        if (p.job <= kJobDgrad1) {
            const int nt = p.job == kJobDgrad2 ? L.n2 : L.n1;
            CHECK(p.rb >= mstart[p.group] && p.rb < mstart[p.group + 1], "unit %d: row block %d outside expert %d's "
                  "[%d, %d)", u, p.rb, p.group, mstart[p.group], mstart[p.group + 1]);
            CHECK(p.n >= 0 && p.n < nt, "unit %d: column tile %d of %d", u, p.n, nt);
            CHECK(v >> 10 == p.rb && ((v >> 2) & 0xFF) == p.n, "unit %d: packed %d decodes to rb %d n %d", u, v,
                  v >> 10, (v >> 2) & 0xFF);
            int &slot = (p.job == kJobDgrad2 ? seen2 : seen1)[p.rb * nt + p.n];
            CHECK(slot == 0, "unit %d: job %d tile (%d, %d) twice", u, p.job, p.rb, p.n);
            slot = 1;
        } else {
            const bool w2 = p.job == kJobWgrad2;
            const int tm = w2 ? L.w2m : L.w13m, tn = w2 ? L.w2n : L.w13n;
            CHECK(p.rb >= 0 && p.rb < tm && p.n >= 0 && p.n < tn, "unit %d: weight tile (%d, %d) of %d x %d", u,
                  p.rb, p.n, tm, tn);
            int g, mt, nt;
            wgrad_tile_of(v >> 2, tm, tn, g, mt, nt);
            CHECK(g == p.group && mt == p.rb && nt == p.n, "unit %d: consumers decode (%d, %d, %d), producer (%d, %d, "
                  "%d)", u, g, mt, nt, p.group, p.rb, p.n);
            int &slot = (w2 ? seenw2 : seenw13)[(p.group * tm + p.rb) * tn + p.n];
            CHECK(slot == 0, "unit %d: weight tile (%d, %d, %d) twice", u, p.group, p.rb, p.n);
            slot = 1;
        }
    }
    for (size_t i = 0; i < seen2.size(); i++)
        CHECK(seen2[i], "GEMM2-dgrad tile %zu never handed out", i);
    for (size_t i = 0; i < seen1.size(); i++)
        CHECK(seen1[i], "GEMM1-dgrad tile %zu never handed out", i);
    for (size_t i = 0; i < seenw2.size(); i++)
        CHECK(seenw2[i], "dW2 tile %zu never handed out", i);
    for (size_t i = 0; i < seenw13.size(); i++)
        CHECK(seenw13[i], "dW13 tile %zu never handed out", i);
}

/* The list with the shared experts' units (bwd_unit_with_shared): the routed units come out in bwd_unit_at's order
 * (as the list without them), every shared tile exactly once, the shared GEMM2-dgrad units first, the other shared
 * units (which wait for them) between the routed GEMM2 dgrad and the routed rest, and the packed unit (with
 * kSharedUnit) decodes to the same tile in the consumers. */
static void check_shared_list(const std::vector<int> &blocks, int H, int I, int SI, int tokens, int n_major, int mix)
{
    const int groups = (int)blocks.size();
    std::vector<int> mstart(groups + 1, 0);
    for (int g = 0; g < groups; g++)
        mstart[g + 1] = mstart[g] + blocks[g];
    const BwdList L = bwd_list(mstart[groups], groups, H, I, mix);
    const BwdShared S = bwd_shared_list((tokens + 127) / 128, H, SI);
    const int sb = (tokens + 127) / 128;
    CHECK(S.units == sb * (SI / 256 + H / 256) + H / 128 * (SI / 256) + 2 * SI / 128 * (H / 256), "shared units %d",
          S.units);
    std::vector<int> seen2(sb * S.n2, 0), seen1(sb * S.n1, 0), seenw2(S.w2m * S.w2n, 0), seenw13(S.w13m * S.w13n, 0);
    int routed = 0, shared_d2 = 0;
    for (int u = 0; u < L.units + S.units; u++) {
        int local = -1, rlocal = -1;
        bool shared = false;
        const BwdUnit p = bwd_unit_with_shared(u, L, S, mstart.data(), groups, n_major, local, shared);
        if (!shared) { /* the routed list in its own order */
            const BwdUnit q = bwd_unit_at(routed, L, mstart.data(), groups, n_major, rlocal);
            CHECK(p.job == q.job && p.group == q.group && p.rb == q.rb && p.n == q.n && local == rlocal,
                  "unit %d: routed unit %d out of order", u, routed);
            routed++;
            continue;
        }
        CHECK((u < S.s2) == (p.job == kJobDgrad2), "unit %d: shared job %d (its GEMM2 dgrad's %d units come first)",
              u, p.job, S.s2);
        if (p.job != kJobDgrad2) /* after the routed GEMM2 dgrad, before the routed rest */
            CHECK(shared_d2 == S.s2 && routed == L.u0, "unit %d: shared job %d after %d shared GEMM2-dgrad units of "
                  "%d and %d routed units (not the routed GEMM2 dgrad's %d)", u, p.job, shared_d2, S.s2, routed, L.u0);
        shared_d2 += p.job == kJobDgrad2;
        const int v = pack_bwd_unit(p, local) | kSharedUnit;
        CHECK(v >= 0 && (v & 3) == p.job && p.group == 0, "unit %d: packed %d, group %d", u, v, p.group);
        if (p.job <= kJobDgrad1) {
            const int nt = p.job == kJobDgrad2 ? S.n2 : S.n1;
            CHECK(p.rb >= 0 && p.rb < sb && p.n >= 0 && p.n < nt, "unit %d: shared tile (%d, %d) of %d x %d", u, p.rb,
                  p.n, sb, nt);
            CHECK(((v >> 10) & 0xFFFFF) == p.rb && ((v >> 2) & 0xFF) == p.n, "unit %d: packed %d decodes wrong", u,
                  v);
            int &slot = (p.job == kJobDgrad2 ? seen2 : seen1)[p.rb * nt + p.n];
            CHECK(slot == 0, "unit %d: shared job %d tile (%d, %d) twice", u, p.job, p.rb, p.n);
            slot = 1;
        } else {
            const bool w2 = p.job == kJobWgrad2;
            const int tm = w2 ? S.w2m : S.w13m, tn = w2 ? S.w2n : S.w13n;
            int g, mt, nt;
            wgrad_tile_of((v & ~kSharedUnit) >> 2, tm, tn, g, mt, nt);
            CHECK(g == 0 && mt == p.rb && nt == p.n, "unit %d: consumers decode (%d, %d, %d), producer (0, %d, %d)", u,
                  g, mt, nt, p.rb, p.n);
            int &slot = (w2 ? seenw2 : seenw13)[p.rb * tn + p.n];
            CHECK(slot == 0, "unit %d: shared weight tile (%d, %d) twice", u, p.rb, p.n);
            slot = 1;
        }
    }
    CHECK(routed == L.units, "%d routed units of %d", routed, L.units);
    for (auto *v : {&seen2, &seen1, &seenw2, &seenw13})
        for (size_t i = 0; i < v->size(); i++)
            CHECK((*v)[i], "a shared tile (%zu) never handed out", i);
}

int main()
{
    unsigned s = 7;
    const int shapes[][2] = {{256, 256}, {512, 512}, {7168, 2048}, {4096, 1536}};
    int lists = 0;
    for (int trial = 0; trial < 200; trial++) {
        const int groups = 1 + (int)(lcg(&s) % (trial < 150 ? 12 : 300));
        std::vector<int> blocks(groups);
        for (int g = 0; g < groups; g++) /* a third of the experts empty, the rest 1..4 row blocks */
            blocks[g] = lcg(&s) % 3 == 0 ? 0 : 1 + (int)(lcg(&s) % 4);
        const int *shape = shapes[trial % 4];
        for (int n_major = 0; n_major < 2; n_major++)
            for (int mix = 0; mix < 2; mix++) {
                const int before = failures;
                check_list(blocks, shape[0], shape[1], n_major, mix);
                if (failures != before) {
                    fprintf(stderr, "  (trial %d: %d experts, H %d, I %d, n_major %d, mix %d)\n", trial, groups,
                            shape[0], shape[1], n_major, mix);
                    return 1;
                }
                lists++;
                const int SI = 256 * (1 + (int)(lcg(&s) % 8)), tokens = (int)(lcg(&s) % 1200); /* 0 tokens too */
                check_shared_list(blocks, shape[0], shape[1], SI, tokens, n_major, mix);
                if (failures != before) {
                    fprintf(stderr, "  (trial %d with shared experts: SI %d, %d tokens, n_major %d, mix %d)\n", trial,
                            SI, tokens, n_major, mix);
                    return 1;
                }
                lists++;
            }
    }
    printf("test_bwd_units: %d unit lists checked, %s\n", lists, failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}

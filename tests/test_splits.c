/* test_splits: the NCCL baselines' split and offset arithmetic on hand-built and random counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "splits.h"

#include "check.h"

/* counts[p][c][e] for P ranks, C chunks, E experts, from per-rank routes drawn with a simple LCG */
static void random_counts(int32_t *counts, int P, int C, int E, int tokens, int chunk_tokens, int k, unsigned seed)
{
    memset(counts, 0, sizeof(int32_t) * (size_t)P * C * E);
    for (int p = 0; p < P; p++)
        for (int t = 0; t < tokens; t++)
            for (int j = 0; j < k; j++) {
                seed = seed * 1103515245u + 12345u;
                int e = (int)((seed >> 8) % (unsigned)E);
                if ((seed >> 3) % 5 == 0)
                    e = 0; /* skew: expert 0 hot, some experts may stay empty */
                counts[((size_t)p * C + t / chunk_tokens) * E + e]++;
            }
}

static void test_hand_example(void)
{
    /* 2 ranks, 1 chunk, 4 experts (2 per rank), 3 tokens top-2 each = 6 routes per rank */
    int32_t counts[2 * 1 * 4] = {/* rank 0 */ 1, 2, 3, 0, /* rank 1 */ 0, 1, 1, 4};
    struct mok_splits s;
    CHECK(mok_splits_build(counts, 2, 1, 1, 4, 0, 3, 3, 2, &s) == 0, "build rank 0");
    CHECK(s.send_count[0] == 3 && s.send_count[1] == 3, "send counts %d %d", s.send_count[0], s.send_count[1]);
    CHECK(s.send_offset[0] == 0 && s.send_offset[1] == 3, "send offsets");
    CHECK(s.recv_count[0] == 3 && s.recv_count[1] == 1, "recv counts %d %d", s.recv_count[0], s.recv_count[1]);
    CHECK(s.recv_offset[0] == 0 && s.recv_offset[1] == 3, "recv offsets");
    CHECK(s.expert_rows[0] == 1 && s.expert_rows[1] == 3, "expert rows %d %d", s.expert_rows[0], s.expert_rows[1]);
    CHECK(s.expert_offset[0] == 0 && s.expert_offset[1] == 1, "expert offsets");
    CHECK(s.recv_total == 4 && s.remote_send_rows == 3 && s.remote_recv_rows == 1, "totals");
    int32_t em_from_recv[4], recv_from_em[4];
    mok_splits_maps(&s, counts, em_from_recv, recv_from_em);
    /* recv: [p0 e0][p0 e1 x2][p1 e1] -> em: [e0: p0][e1: p0 p0 p1] = identity here */
    for (int i = 0; i < 4; i++)
        CHECK(em_from_recv[i] == i, "em_from_recv[%d] = %d", i, em_from_recv[i]);
    mok_splits_free(&s);
    CHECK(mok_splits_build(counts, 2, 1, 1, 4, 1, 3, 3, 2, &s) == 0, "build rank 1");
    /* rank 1 receives expert 2: p0 3 rows, p1 1 row; expert 3: p0 0, p1 4 rows */
    CHECK(s.recv_count[0] == 3 && s.recv_count[1] == 5, "rank1 recv %d %d", s.recv_count[0], s.recv_count[1]);
    CHECK(s.expert_rows[0] == 4 && s.expert_rows[1] == 4, "rank1 expert rows");
    /* recv layout: [p0 e2 x3][p1 e2][p1 e3 x4]; em: [e2: p0 x3, p1][e3: p1 x4] = identity again */
    int32_t em8[8], rv8[8];
    mok_splits_maps(&s, counts, em8, rv8);
    for (int i = 0; i < 8; i++)
        CHECK(em8[i] == i && rv8[i] == i, "rank1 map %d: %d %d", i, em8[i], rv8[i]);
    mok_splits_free(&s);
    /* inconsistent counts (a chunk that does not sum to its routes) are rejected */
    counts[0] = 5;
    CHECK(mok_splits_build(counts, 2, 1, 1, 4, 0, 3, 3, 2, &s) != 0, "inconsistent counts accepted");
}

static void test_random_invariants(void)
{
    const int P = 4, E = 16, k = 3, tokens = 50;
    for (int C = 1; C <= 7; C += 3) {
        int chunk_tokens = (tokens + C - 1) / C;
        int nchunks = (tokens + chunk_tokens - 1) / chunk_tokens;
        int32_t *counts = malloc(sizeof(int32_t) * (size_t)P * nchunks * E);
        random_counts(counts, P, nchunks, E, tokens, chunk_tokens, k, 7u + (unsigned)C);
        long long sent_to[4] = {0}, received[4] = {0};
        for (int r = 0; r < P; r++) {
            struct mok_splits s;
            CHECK(mok_splits_build(counts, P, nchunks, 1, E, r, tokens, chunk_tokens, k, &s) == 0, "build C=%d r=%d", C, r);
            /* every row sent to rank q is received by q from r */
            for (int c = 0; c < nchunks; c++)
                for (int q = 0; q < P; q++) {
                    sent_to[q] += s.send_count[c * P + q];
                    received[r] += s.recv_count[c * P + q];
                    CHECK(s.send_offset[c * P + q] >= c * chunk_tokens * k, "send offset before chunk base");
                }
            int32_t *a = malloc(sizeof(int32_t) * (size_t)(s.recv_total + 1));
            int32_t *b = malloc(sizeof(int32_t) * (size_t)(s.recv_total + 1));
            mok_splits_maps(&s, counts, a, b);
            /* the maps are inverse permutations */
            for (int i = 0; i < s.recv_total; i++)
                CHECK(a[i] >= 0 && a[i] < s.recv_total && b[a[i]] == i, "maps not inverse at %d", i);
            /* expert-major rows of one expert are contiguous and sized by expert_rows */
            int sum = 0;
            for (int i = 0; i < nchunks * s.local_experts; i++)
                sum += s.expert_rows[i];
            CHECK(sum == s.recv_total, "expert rows %d != recv total %d", sum, s.recv_total);
            free(a);
            free(b);
            mok_splits_free(&s);
        }
        for (int q = 0; q < P; q++)
            CHECK(sent_to[q] == received[q], "rank %d: %lld sent to it, %lld received", q, sent_to[q], received[q]);
        free(counts);
    }
}


/* End to end on the host: emulate the route kernels (counts, offsets, send positions), build every rank's
 * splits and maps, move row *labels* through dispatch, expert-major permutation, the reverse permutation and
 * combine, and check that every route's row comes back to its own send slot having visited the right expert. */
static void emulate_pipeline(int P, int E, int k, int tokens, int chunks, int G, unsigned seed)
{
    int chunk_tokens = (tokens + chunks - 1) / chunks;
    int C = (tokens + chunk_tokens - 1) / chunk_tokens, el = E / P, routes = tokens * k;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)P * routes);
    int32_t *allcounts = calloc((size_t)P * C * E, sizeof(int32_t));
    int32_t *send_pos = malloc(sizeof(int32_t) * (size_t)P * routes);
    for (int p = 0; p < P; p++)
        for (int r = 0; r < routes; r++) {
            seed = seed * 1664525u + 1013904223u;
            ids[p * routes + r] = (int32_t)((seed >> 9) % (unsigned)E);
            allcounts[((size_t)p * C + (r / k) / chunk_tokens) * E + ids[p * routes + r]]++;
        }
    for (int p = 0; p < P; p++) { /* route_offsets + route_positions */
        int32_t *cursor = calloc((size_t)C * E, sizeof(int32_t));
        for (int r = 0; r < routes; r++) {
            int c = (r / k) / chunk_tokens, e = ids[p * routes + r];
            int off = c * chunk_tokens * k;
            for (int e2 = 0; e2 < e; e2++)
                off += allcounts[((size_t)p * C + c) * E + e2];
            send_pos[p * routes + r] = off + cursor[c * E + e]++;
        }
        free(cursor);
    }
    struct mok_splits *sp = calloc((size_t)P, sizeof(*sp));
    int32_t **emr = calloc((size_t)P, sizeof(int32_t *)), **rem = calloc((size_t)P, sizeof(int32_t *));
    for (int p = 0; p < P; p++) {
        CHECK(mok_splits_build(allcounts, P, C, G, E, p, tokens, chunk_tokens, k, &sp[p]) == 0, "build");
        emr[p] = malloc(sizeof(int32_t) * (size_t)(sp[p].recv_total + 1));
        rem[p] = malloc(sizeof(int32_t) * (size_t)(sp[p].recv_total + 1));
        mok_splits_maps(&sp[p], allcounts, emr[p], rem[p]);
    }
    /* labels: send slot s of rank p holds (p, route) */
    long long *send = malloc(sizeof(long long) * (size_t)P * routes);
    for (int p = 0; p < P; p++)
        for (int r = 0; r < routes; r++)
            send[(size_t)p * routes + send_pos[p * routes + r]] = (long long)p * routes + r;
    long long **recv = calloc((size_t)P, sizeof(long long *)), **ret = calloc((size_t)P, sizeof(long long *));
    for (int q = 0; q < P; q++) {
        recv[q] = malloc(sizeof(long long) * (size_t)(sp[q].recv_total + 1));
        ret[q] = malloc(sizeof(long long) * (size_t)(sp[q].recv_total + 1));
    }
    int S = C * G;
    for (int c = 0; c < S; c++) /* dispatch, stage c: rank p's run for q lands at q's recv offset for p */
        for (int p = 0; p < P; p++)
            for (int q = 0; q < P; q++) {
                int n = sp[p].send_count[c * P + q];
                CHECK(n == sp[q].recv_count[c * P + p], "count mismatch c%d %d->%d", c, p, q);
                for (int i = 0; i < n; i++)
                    recv[q][sp[q].recv_offset[c * P + p] + i] = send[(size_t)p * routes + sp[p].send_offset[c * P + q] + i];
            }
    for (int q = 0; q < P; q++) { /* expert-major rows must belong to the right expert */
        for (int c = 0; c < C; c++)
            for (int le = 0; le < el; le++)
                for (int i = 0; i < sp[q].expert_rows[c * el + le]; i++) {
                    long long label = recv[q][emr[q][sp[q].expert_offset[c * el + le] + i]];
                    CHECK(ids[label] == q * el + le, "rank %d chunk %d expert %d row %d holds expert %d", q, c, le, i,
                           ids[label]);
                }
        for (int i = 0; i < sp[q].recv_total; i++) /* em -> recv layout again */
            ret[q][i] = recv[q][emr[q][rem[q][i]]];
    }
    long long *comb = malloc(sizeof(long long) * (size_t)P * routes);
    for (int c = 0; c < S; c++)
        for (int q = 0; q < P; q++)
            for (int p = 0; p < P; p++)
                for (int i = 0; i < sp[q].recv_count[c * P + p]; i++)
                    comb[(size_t)p * routes + sp[p].send_offset[c * P + q] + i] = ret[q][sp[q].recv_offset[c * P + p] + i];
    for (int p = 0; p < P; p++)
        for (int r = 0; r < routes; r++)
            CHECK(comb[(size_t)p * routes + send_pos[p * routes + r]] == (long long)p * routes + r,
                   "P=%d C=%d: rank %d route %d came back wrong", P, C, p, r);
    for (int p = 0; p < P; p++) {
        mok_splits_free(&sp[p]);
        free(emr[p]);
        free(rem[p]);
        free(recv[p]);
        free(ret[p]);
    }
    free(sp), free(emr), free(rem), free(recv), free(ret), free(send), free(comb), free(ids), free(allcounts);
    free(send_pos);
}

/* The gathered wgrad layout: a permutation of the expert-major rows, each expert's rows contiguous from its
 * expert_first in chunk order, every row of the right expert; too small a capacity is refused. */
static void test_gathered(int P, int E, int k, int tokens, int chunks, int G, unsigned seed)
{
    const int chunk_tokens = (tokens + chunks - 1) / chunks, el = E / P;
    int32_t *counts = malloc(sizeof(int32_t) * (size_t)P * chunks * E);
    random_counts(counts, P, chunks, E, tokens, chunk_tokens, k, seed);
    for (int rank = 0; rank < P; rank++) {
        struct mok_splits s;
        CHECK(mok_splits_build(counts, P, chunks, G, E, rank, tokens, chunk_tokens, k, &s) == 0, "build");
        const int n = s.recv_total;
        int32_t *plan = malloc(sizeof(int32_t) * (size_t)(n + 1)), *first = malloc(sizeof(int32_t) * (size_t)(el + 1));
        char *seen = calloc((size_t)n + 1, 1);
        CHECK(n == 0 || mok_splits_gathered(&s, n - 1, plan, first) == -1, "capacity %d accepted for %d rows", n - 1,
              n);
        CHECK(mok_splits_gathered(&s, n, plan, first) == n, "gathered rows");
        CHECK(first[0] == 0 && first[el] == n, "expert_first ends %d %d of %d", first[0], first[el], n);
        for (int e = 0, i = 0; e < el; e++) {
            int rows = 0;
            for (int c = 0; c < chunks; c++)
                rows += s.expert_rows[c * el + e];
            CHECK(first[e + 1] - first[e] == rows, "expert %d: %d gathered rows, %d in its chunks", e,
                  first[e + 1] - first[e], rows);
            for (int c = 0; c < chunks; c++) /* in chunk order, each chunk's run in expert-major order */
                for (int r = 0; r < s.expert_rows[c * el + e]; r++, i++)
                    CHECK(i < n && plan[i] == s.expert_offset[c * el + e] + r, "row %d: %d", i, i < n ? plan[i] : -1);
        }
        for (int i = 0; i < n; i++) {
            CHECK(plan[i] >= 0 && plan[i] < n && !seen[plan[i]], "row %d: %d repeated or out of range", i, plan[i]);
            if (plan[i] >= 0 && plan[i] < n)
                seen[plan[i]] = 1;
        }
        free(plan), free(first), free(seen);
        mok_splits_free(&s);
    }
    free(counts);
}

int main(void)
{
    test_hand_example();
    test_random_invariants();
    test_gathered(2, 8, 2, 37, 3, 2, 7u);
    test_gathered(4, 16, 3, 100, 5, 3, 9u);
    test_gathered(1, 12, 2, 20, 2, 5, 3u); /* hot expert 0, some experts empty */
    for (int C = 1; C <= 5; C++) {
        for (int G = 1; G <= 4; G += 3) {
            emulate_pipeline(2, 8, 2, 37, C, G, 11u + (unsigned)C);
            emulate_pipeline(4, 16, 3, 100, C, G, 5u + (unsigned)C);
        }
        emulate_pipeline(2, 12, 2, 20, C, 5, 3u); /* 6 local experts in 5 uneven groups */
    }
    printf("test_splits: %s (%d failures)\n", failures ? "FAILED" : "all passed", failures);
    return failures ? 1 : 0;
}

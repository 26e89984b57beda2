/* routing: seeded Gumbel top-k router of one rank's tokens.
 *
 * Randomness is counter-based: every draw is mix64 of a key built from (seed, rank, token) plus a counter, so a
 * token's experts never depend on which tokens were generated before it, nor in what order. Token t of rank r
 * is the same whether 1 or 1M tokens are generated, on any machine, threaded or not.
 *
 * Gumbel top-k is run in its equivalent "exponential race" form. With u uniform in (0,1), x = -log(u) is
 * Exp(1), and the logit log(p) - log(-log(u)) = -log(x / p). So descending logit is ascending score
 * s = x / p, and the softmax of the kept logits, exp(-log s_i) / sum_j exp(-log s_j), is (1/s_i) / sum_j (1/s_j):
 * no log or exp beyond the one -log(u) per expert. That one is mostly skipped too: -log(u) >= 1 - u, so an
 * expert with (1 - u) / p >= the current k-th score cannot enter the top-k, whatever its exact score. Once the
 * k slots fill, nearly every expert is rejected by that multiply and compare. */
#include "routing.h"

#include <math.h>
#include <stdlib.h>

#define GOLDEN 0x9e3779b97f4a7c15ULL
/* Domain constants keep the zipf permutation's stream apart from the per-token streams of the same seed. */
#define DOMAIN_PERM 0x5045524d55544531ULL  /* "PERMUTE1" */
#define DOMAIN_TOKEN 0x544f4b454e535452ULL /* "TOKENSTR" */

/* splitmix64's output function: a bijection with full avalanche, so consecutive counters give independent-
 * looking 64-bit values. */
static uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z;
}

/* Draw n of the stream `key`, as splitmix64 would produce it from state key. */
static uint64_t draw(uint64_t key, uint64_t n) { return mix64(key + GOLDEN * (n + 1)); }

/* 53 random bits, centred in their cell: strictly inside (0, 1), so -log(u) is finite and positive. */
static double unit(uint64_t r) { return ((double)(r >> 11) + 0.5) * 0x1.0p-53; }

static uint64_t token_key(uint64_t seed, int rank, int token)
{
    uint64_t k = mix64(seed ^ DOMAIN_TOKEN);
    k = mix64(k + GOLDEN * ((uint64_t)rank + 1));
    return mix64(k + GOLDEN * ((uint64_t)token + 1));
}

/* Which popularity rank each expert holds under zipf: a Fisher-Yates shuffle keyed by the seed alone, so all
 * ranks of a run agree on which experts are hot, and the hot ones are scattered rather than all on rank 0. */
static void zipf_ranks(uint64_t seed, int experts, int *rank_of)
{
    uint64_t key = mix64(seed ^ DOMAIN_PERM);
    for (int i = 0; i < experts; i++)
        rank_of[i] = i;
    for (int i = experts - 1; i > 0; i--) {
        /* High 32 bits scaled into [0, i]: bias below 2^-22 for i < 1024, invisible next to sampling noise. */
        uint64_t j = ((draw(key, (uint64_t)i) >> 32) * (uint64_t)(i + 1)) >> 32;
        int t = rank_of[i];
        rank_of[i] = rank_of[j];
        rank_of[j] = t;
    }
}

void mok_routing_popularity(const struct mok_routing *routing, int experts, double *probs)
{
    if (!routing || experts < 1 || !probs)
        return;
    /* hot keeps a flat p: its skew comes from forcing tokens, not from the logits. */
    if (routing->dist != MOK_ROUTING_ZIPF) {
        for (int e = 0; e < experts; e++)
            probs[e] = 1.0 / experts;
        return;
    }
    int *rank_of = malloc((size_t)experts * sizeof *rank_of);
    if (!rank_of) {
        for (int e = 0; e < experts; e++)
            probs[e] = NAN; /* visibly wrong rather than silently flat */
        return;
    }
    zipf_ranks(routing->seed, experts, rank_of);
    double sum = 0.0;
    for (int e = 0; e < experts; e++) {
        probs[e] = pow((double)rank_of[e] + 1.0, -routing->zipf_s);
        sum += probs[e];
    }
    for (int e = 0; e < experts; e++)
        probs[e] /= sum;
    free(rank_of);
}

static int valid(const struct mok_routing *r, int experts, int topk, int rank, int tokens)
{
    if (!r || experts < 1 || topk < 1 || topk > experts || tokens < 0 || rank < 0)
        return 0;
    switch (r->dist) {
    case MOK_ROUTING_UNIFORM:
        return 1;
    case MOK_ROUTING_ZIPF:
        return r->zipf_s > 0.0 && isfinite(r->zipf_s);
    case MOK_ROUTING_HOT:
        return r->hot_expert >= 0 && r->hot_expert < experts && r->hot_fraction >= 0.0 && r->hot_fraction <= 1.0;
    }
    return 0;
}

int mok_routing_generate(const struct mok_routing *routing, int experts, int topk, int rank, int tokens,
                         int32_t *ids, float *weights)
{
    if (!valid(routing, experts, topk, rank, tokens))
        return -1;
    if (tokens == 0)
        return 0;
    if (!ids || !weights)
        return -1;

    /* inv_p[e] = 1/p_e turns scores into multiplies; score[] holds one token's kept scores, ascending. Both
     * are allocated once per call, never per token. */
    double *inv_p = malloc((size_t)experts * sizeof *inv_p);
    double *score = malloc((size_t)topk * sizeof *score);
    if (!inv_p || !score) {
        free(inv_p);
        free(score);
        return -1;
    }
    mok_routing_popularity(routing, experts, inv_p);
    for (int e = 0; e < experts; e++)
        inv_p[e] = 1.0 / inv_p[e];

    const int hot = routing->dist == MOK_ROUTING_HOT;
    for (int t = 0; t < tokens; t++) {
        int32_t *id = ids + (size_t)t * (size_t)topk;
        float *w = weights + (size_t)t * (size_t)topk;
        uint64_t key = token_key(routing->seed, rank, t);

        /* Counter 0 decides the hot forcing; counters 1..E are the experts' noise. u < 1 always, so a fraction
         * of 1 forces every token and 0 none. */
        int forced = hot && unit(draw(key, 0)) < routing->hot_fraction;
        int skip = forced ? routing->hot_expert : -1;
        int first = forced; /* slot where the race's winners start */
        int need = topk - first, n = 0;
        double *s = score + first;
        int32_t *sid = id + first;

        for (int e = 0; e < experts && need > 0; e++) {
            if (e == skip)
                continue;
            double u = unit(draw(key, (uint64_t)e + 1));
            /* Cheap lower bound on the score: if even it cannot beat the k-th, skip the log. */
            if (n == need && (1.0 - u) * inv_p[e] >= s[n - 1])
                continue;
            double sc = -log(u) * inv_p[e];
            if (n == need && sc >= s[n - 1])
                continue; /* ties keep the lower expert id, which came first */
            /* Insert into the ascending array; the last entry falls off once full. Equal scores stay behind
             * the earlier (lower) expert ids. */
            int i = n < need ? n++ : n - 1;
            while (i > 0 && s[i - 1] > sc) {
                s[i] = s[i - 1];
                sid[i] = sid[i - 1];
                i--;
            }
            s[i] = sc;
            sid[i] = (int32_t)e;
        }

        /* Softmax of logits -log(s) is proportional to 1/s. The forced expert's logit is the best other kept
         * logit + 1, i.e. 1/s scaled by e; alone (k = 1) it simply takes all the weight. */
        double sum = 0.0;
        if (forced) {
            id[0] = (int32_t)routing->hot_expert;
            score[0] = topk > 1 ? score[1] * exp(-1.0) : 1.0;
        }
        for (int i = 0; i < topk; i++)
            sum += 1.0 / score[i];
        for (int i = 0; i < topk; i++)
            w[i] = (float)(1.0 / score[i] / sum);
    }
    free(inv_p);
    free(score);
    return 0;
}

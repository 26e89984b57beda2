/* test_routing: determinism, validity and the statistics of each routing distribution. Exit 0 on pass, 1 on
 * any failure; every failure says what differed and by how much. The statistical bounds are 5 sigma or
 * wider, and the seeds are fixed, so a pass or fail is reproducible rather than flaky. */
#include "routing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"

struct route {
    int tokens, topk;
    int32_t *ids;
    float *w;
};

static struct route gen(const struct mok_routing *r, int experts, int topk, int rank, int tokens)
{
    struct route o = {tokens, topk, NULL, NULL};
    size_t n = (size_t)tokens * (size_t)topk;
    o.ids = malloc((n ? n : 1) * sizeof *o.ids);
    o.w = malloc((n ? n : 1) * sizeof *o.w);
    if (!o.ids || !o.w) {
        printf("FAIL: out of memory\n");
        exit(1);
    }
    int rc = mok_routing_generate(r, experts, topk, rank, tokens, o.ids, o.w);
    CHECK(rc == 0, "generate(E=%d k=%d rank=%d T=%d) returned %d", experts, topk, rank, tokens, rc);
    return o;
}

static void drop(struct route *o)
{
    free(o->ids);
    free(o->w);
}

static struct mok_routing uniform(uint64_t seed) { return (struct mok_routing){MOK_ROUTING_UNIFORM, 1.0, 0.0, 0, seed}; }
static struct mok_routing zipf(double s, uint64_t seed) { return (struct mok_routing){MOK_ROUTING_ZIPF, s, 0.0, 0, seed}; }
static struct mok_routing hot(double f, int e, uint64_t seed) { return (struct mok_routing){MOK_ROUTING_HOT, 1.0, f, e, seed}; }

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* ids in range and distinct, weights positive, descending and summing to 1. Reports the first bad token. */
static void check_valid(const char *what, const struct route *o, int experts)
{
    char *seen = calloc((size_t)experts, 1);
    for (int t = 0; t < o->tokens; t++) {
        const int32_t *id = o->ids + (size_t)t * o->topk;
        const float *w = o->w + (size_t)t * o->topk;
        double sum = 0.0;
        int bad = 0;
        for (int i = 0; i < o->topk; i++) {
            if (id[i] < 0 || id[i] >= experts) {
                printf("FAIL %s: token %d slot %d: id %d not in [0, %d)\n", what, t, i, id[i], experts);
                bad = 1;
                break;
            }
            if (seen[id[i]]) {
                printf("FAIL %s: token %d: expert %d appears twice\n", what, t, id[i]);
                bad = 1;
            }
            seen[id[i]] = 1;
            if (!(w[i] > 0.0f) || !isfinite(w[i])) {
                printf("FAIL %s: token %d slot %d: weight %g not positive and finite\n", what, t, i, w[i]);
                bad = 1;
            }
            if (i > 0 && w[i] > w[i - 1]) {
                printf("FAIL %s: token %d: weight[%d]=%.9g > weight[%d]=%.9g (not descending)\n", what, t, i, w[i],
                       i - 1, w[i - 1]);
                bad = 1;
            }
            sum += w[i];
        }
        for (int i = 0; i < o->topk; i++)
            if (id[i] >= 0 && id[i] < experts)
                seen[id[i]] = 0;
        if (fabs(sum - 1.0) > 1e-5) {
            printf("FAIL %s: token %d: weights sum to %.9f (off by %.3g)\n", what, t, sum, sum - 1.0);
            bad = 1;
        }
        if (bad) {
            failures++;
            break;
        }
    }
    free(seen);
}

static int same(const struct route *a, const struct route *b, int tokens)
{
    size_t n = (size_t)tokens * a->topk;
    return memcmp(a->ids, b->ids, n * sizeof *a->ids) == 0 && memcmp(a->w, b->w, n * sizeof *a->w) == 0;
}

static void test_determinism(void)
{
    const int E = 64, K = 8, N = 4096;
    struct mok_routing dists[3] = {uniform(42), zipf(1.2, 42), hot(0.3, 7, 42)};
    for (int d = 0; d < 3; d++) {
        struct mok_routing r = dists[d];
        struct route a = gen(&r, E, K, 3, N), b = gen(&r, E, K, 3, N);
        CHECK(same(&a, &b, N), "dist %d: two identical calls differ", d);

        struct route big = gen(&r, E, K, 3, 2 * N);
        CHECK(same(&a, &big, N), "dist %d: first %d of %d tokens differ from a %d-token call", d, N, 2 * N, N);

        struct mok_routing r2 = r;
        r2.seed = 43;
        struct route c = gen(&r2, E, K, 3, N);
        CHECK(memcmp(a.ids, c.ids, (size_t)N * K * sizeof *a.ids) != 0, "dist %d: seeds 42 and 43 give same ids", d);

        /* Other ranks must see other tokens: count tokens whose ids coincide exactly (chance ~ 1/C(64,8)). */
        struct route e = gen(&r, E, K, 4, N);
        int equal = 0;
        for (int t = 0; t < N; t++)
            equal += memcmp(a.ids + (size_t)t * K, e.ids + (size_t)t * K, K * sizeof *a.ids) == 0;
        CHECK(equal < N / 10, "dist %d: ranks 3 and 4 share %d of %d tokens' ids", d, equal, N);

        drop(&a), drop(&b), drop(&big), drop(&c), drop(&e);
    }
}

static void test_validity(void)
{
    struct { int E, K; } shapes[] = {{1, 1}, {2, 2}, {8, 1}, {8, 8}, {64, 8}, {256, 8}, {1024, 32}, {40, 6}};
    struct mok_routing dists[4] = {uniform(1), zipf(1.2, 2), zipf(4.0, 3), hot(0.5, 0, 4)};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int d = 0; d < 4; d++) {
            char what[64];
            snprintf(what, sizeof what, "validity E=%d k=%d dist=%d", shapes[s].E, shapes[s].K, d);
            struct route o = gen(&dists[d], shapes[s].E, shapes[s].K, 1, 2000);
            check_valid(what, &o, shapes[s].E);
            drop(&o);
        }
    /* Zero tokens is valid and touches nothing. */
    struct mok_routing u = uniform(1);
    CHECK(mok_routing_generate(&u, 8, 2, 0, 0, NULL, NULL) == 0, "tokens=0 with NULL outputs should return 0");
}

/* Per-expert counts against binomial(T, k/E): each within 5 sigma, and a chi-square over all experts. */
static void check_counts(const char *what, const struct route *o, int E, const double *expect_p)
{
    long *count = calloc((size_t)E, sizeof *count);
    for (size_t i = 0; i < (size_t)o->tokens * o->topk; i++)
        count[o->ids[i]]++;
    double chi2 = 0.0;
    for (int e = 0; e < E; e++) {
        double p = expect_p[e], m = o->tokens * p, sigma = sqrt(o->tokens * p * (1.0 - p));
        double z = (count[e] - m) / sigma;
        CHECK(fabs(z) < 5.0, "%s: expert %d count %ld, expected %.1f (%.2f sigma)", what, e, count[e], m, z);
        chi2 += (count[e] - m) * (count[e] - m) / m;
    }
    double bound = E + 6.0 * sqrt(2.0 * E);
    printf("  %s: chi-square %.1f over %d experts (bound %.1f)\n", what, chi2, E, bound);
    CHECK(chi2 < bound, "%s: chi-square %.1f >= %.1f", what, chi2, bound);
    free(count);
}

static void test_uniform(void)
{
    const int E = 64, K = 4, T = 65536;
    struct mok_routing r = uniform(12345);
    struct route o = gen(&r, E, K, 0, T);
    double p[64];
    for (int e = 0; e < E; e++)
        p[e] = (double)K / E;
    check_counts("uniform E=64 k=4", &o, E, p);

    double pop[64], psum = 0.0;
    mok_routing_popularity(&r, E, pop);
    for (int e = 0; e < E; e++) {
        psum += pop[e];
        CHECK(pop[e] == 1.0 / E, "uniform popularity[%d] = %g, not 1/%d", e, pop[e], E);
    }
    CHECK(fabs(psum - 1.0) < 1e-12, "uniform popularity sums to %.15f", psum);
    drop(&o);
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static void test_zipf(void)
{
    const int E = 64, T = 100000;
    const double s = 1.2;
    struct mok_routing r = zipf(s, 777);
    double p[64], p1[64], sorted[64], psum = 0.0, h = 0.0;
    mok_routing_popularity(&r, E, p);
    struct mok_routing r1 = r; /* popularity takes no rank; a different call must still agree bit for bit */
    mok_routing_popularity(&r1, E, p1);
    CHECK(memcmp(p, p1, sizeof p) == 0, "zipf popularity differs between two calls");
    for (int e = 0; e < E; e++)
        psum += p[e], h += pow(e + 1.0, -s);
    CHECK(fabs(psum - 1.0) < 1e-12, "zipf popularity sums to %.15f", psum);

    /* The popularity is a permutation of 1/(r+1)^s / H, and the permutation is not the identity. */
    memcpy(sorted, p, sizeof p);
    qsort(sorted, (size_t)E, sizeof *sorted, cmp_desc);
    for (int i = 0; i < E; i++) {
        double want = pow(i + 1.0, -s) / h;
        CHECK(fabs(sorted[i] - want) < 1e-12 * want + 1e-15, "zipf popularity rank %d = %.12g, want %.12g", i,
              sorted[i], want);
    }
    int identity = 1;
    for (int e = 1; e < E; e++)
        identity &= p[e] < p[e - 1];
    CHECK(!identity, "zipf permutation is the identity: the popular experts all sit on the first ranks");
    CHECK(sorted[0] > 5.0 * sorted[E / 2], "zipf top share %.4f not > 5x median %.4f", sorted[0], sorted[E / 2]);

    /* Both ranks sample from the same popularity: check k = 1 frequencies of rank 0 and rank 1. */
    for (int rank = 0; rank < 2; rank++) {
        struct route o = gen(&r, E, 1, rank, T);
        long count[64] = {0};
        for (int t = 0; t < T; t++)
            count[o.ids[t]]++;
        for (int e = 0; e < E; e++) {
            double f = (double)count[e] / T, rel = (f - p[e]) / p[e];
            double z = (count[e] - T * p[e]) / sqrt(T * p[e] * (1.0 - p[e]));
            CHECK(fabs(rel) < 0.10 || fabs(z) < 5.0,
                  "zipf rank %d expert %d: frequency %.5f vs popularity %.5f (%.1f%%, %.2f sigma)", rank, e, f, p[e],
                  100.0 * rel, z);
        }
        if (rank == 0) {
            char what[64];
            snprintf(what, sizeof what, "zipf s=%.1f E=%d k=1", s, E);
            check_counts(what, &o, E, p);
        }
        drop(&o);
    }
}

/* Gumbel top-k must sample without replacement in proportion to p (Plackett-Luce): the ordered pair (a, b)
 * comes first and second with probability p_a * p_b / (1 - p_a). */
static void test_without_replacement(void)
{
    const int E = 4, T = 200000;
    struct mok_routing r = zipf(1.0, 31);
    double p[4];
    mok_routing_popularity(&r, E, p);
    struct route o = gen(&r, E, 2, 0, T);
    long count[4][4] = {{0}};
    for (int t = 0; t < T; t++)
        count[o.ids[2 * t]][o.ids[2 * t + 1]]++;
    for (int a = 0; a < E; a++)
        for (int b = 0; b < E; b++) {
            if (a == b)
                continue;
            double q = p[a] * p[b] / (1.0 - p[a]), m = T * q, z = (count[a][b] - m) / sqrt(m * (1.0 - q));
            CHECK(fabs(z) < 5.0, "pair (%d,%d): %ld tokens, Plackett-Luce expects %.1f (%.2f sigma)", a, b,
                  count[a][b], m, z);
        }
    drop(&o);
}

static void test_hot(void)
{
    const int E = 32, K = 4, T = 100000, H = 5;
    struct mok_routing r = hot(0.3, H, 99);
    struct route o = gen(&r, E, K, 0, T);
    check_valid("hot 0.3", &o, E);
    int first = 0;
    for (int t = 0; t < T; t++)
        first += o.ids[(size_t)t * K] == H;
    double f = (double)first / T;
    printf("  hot f=0.3: first id is %d in %.4f of tokens (expected 0.3 + 0.7/%d = %.4f)\n", H, f, E, 0.3 + 0.7 / E);
    CHECK(f >= 0.28 && f <= 0.34, "hot 0.3: first-id share %.4f outside [0.28, 0.34]", f);
    drop(&o);

    /* Fraction 0 forces nothing: the race is then the same as uniform's, token for token. */
    struct mok_routing r0 = hot(0.0, H, 99), u = uniform(99);
    struct route a = gen(&r0, E, K, 2, T), b = gen(&u, E, K, 2, T);
    CHECK(same(&a, &b, T), "hot fraction 0 differs from uniform with the same seed");
    first = 0;
    for (int t = 0; t < T; t++)
        first += a.ids[(size_t)t * K] == H;
    double z = (first - T / (double)E) / sqrt(T * (1.0 / E) * (1.0 - 1.0 / E));
    CHECK(fabs(z) < 5.0, "hot fraction 0: first id %d in %d tokens, expected %.0f (%.2f sigma)", H, first,
          (double)T / E, z);
    drop(&a), drop(&b);

    /* Fraction 1 forces every token; k = 1 gives the hot expert all the weight. */
    for (int k = 1; k <= K; k += K - 1) {
        struct mok_routing r1 = hot(1.0, H, 99);
        struct route c = gen(&r1, E, k, 0, T);
        check_valid("hot 1.0", &c, E);
        int miss = 0;
        for (int t = 0; t < T; t++)
            miss += c.ids[(size_t)t * k] != H;
        CHECK(miss == 0, "hot fraction 1, k=%d: %d of %d tokens do not pick expert %d first", k, miss, T, H);
        drop(&c);
    }
}

static void test_invalid(void)
{
    int32_t ids[64];
    float w[64];
    struct mok_routing u = uniform(1), zs = zipf(0.0, 1), h = hot(0.5, 8, 1);
    struct {
        const char *what;
        const struct mok_routing *r;
        int E, K, rank, T;
    } cases[] = {
        {"topk > experts", &u, 4, 5, 0, 1},  {"topk 0", &u, 4, 0, 0, 1},      {"experts 0", &u, 0, 1, 0, 1},
        {"tokens < 0", &u, 4, 1, 0, -1},     {"rank < 0", &u, 4, 1, -1, 1},   {"hot_expert >= experts", &h, 8, 1, 0, 1},
        {"zipf s 0", &zs, 8, 1, 0, 1},        {"NULL routing", NULL, 8, 1, 0, 1},
    };
    struct mok_routing hneg = hot(0.5, -1, 1), hf = hot(1.5, 0, 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = mok_routing_generate(cases[i].r, cases[i].E, cases[i].K, cases[i].rank, cases[i].T, ids, w);
        CHECK(rc == -1, "%s: returned %d, want -1", cases[i].what, rc);
    }
    CHECK(mok_routing_generate(&hneg, 8, 1, 0, 1, ids, w) == -1, "hot_expert -1 accepted");
    CHECK(mok_routing_generate(&hf, 8, 1, 0, 1, ids, w) == -1, "hot_fraction 1.5 accepted");
    CHECK(mok_routing_generate(&h, 9, 1, 0, 1, ids, w) == 0, "hot_expert 8 of 9 rejected");
}

static void test_timing(void)
{
    const int T = 8192, E = 256, K = 8;
    struct mok_routing dists[3] = {uniform(5), zipf(1.2, 5), hot(0.3, 3, 5)};
    const char *names[3] = {"uniform", "zipf(1.2)", "hot(0.3)"};
    int32_t *ids = malloc((size_t)T * K * sizeof *ids);
    float *w = malloc((size_t)T * K * sizeof *w);
    for (int d = 0; d < 3; d++) {
        double t0 = now_ms();
        int rc = mok_routing_generate(&dists[d], E, K, 0, T, ids, w);
        double ms = now_ms() - t0;
        printf("  timing %s: %d tokens x %d experts x top-%d in %.2f ms\n", names[d], T, E, K, ms);
        CHECK(rc == 0, "timing %s: returned %d", names[d], rc);
        /* Generous: sanitizer builds run several times slower than -O2. */
        CHECK(ms < 2000.0, "timing %s: %.1f ms", names[d], ms);
    }
    free(ids);
    free(w);
}

int main(void)
{
    test_determinism();
    test_validity();
    test_uniform();
    test_zipf();
    test_without_replacement();
    test_hot();
    test_invalid();
    test_timing();
    if (failures) {
        printf("test_routing: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_routing: all passed\n");
    return 0;
}

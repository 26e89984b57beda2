/* test_schedule: the host reference of the megakernel's expert schedule, on a hand-built example and on
 * random tables checked against brute force (every property the GPU build is later compared on). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

#include "check.h"

#define PAD MOK_SCHED_PAD
#define R(p, t, j) mok_route_pack(p, t, j)

static void test_pack(void)
{
    int32_t v = R(63, (1 << 20) - 1, 31);
    CHECK(v >= 0, "packed route must stay non-negative (PAD is -1): %d", v);
    CHECK(mok_route_rank(v) == 63 && mok_route_token(v) == (1 << 20) - 1 && mok_route_k(v) == 31, "unpack max");
    v = R(5, 12345, 7);
    CHECK(mok_route_rank(v) == 5 && mok_route_token(v) == 12345 && mok_route_k(v) == 7, "unpack 5/12345/7");
    /* packing keeps lexicographic (p, t, j) order: the sorted-block check below relies on it */
    CHECK(R(0, 1, 0) > R(0, 0, 31) && R(1, 0, 0) > R(0, (1 << 20) - 1, 31), "pack order");
}

static void expect_ints(const char *what, int rank, const int *got, const int *want, int n)
{
    for (int i = 0; i < n; i++)
        CHECK(got[i] == want[i], "rank %d %s[%d] = %d, want %d", rank, what, i, got[i], want[i]);
}

static void test_hand_example(void)
{
    /* 2 ranks, 4 experts (rank 0 owns 0-1, rank 1 owns 2-3), top-2, 3 tokens each, tile 4, chunk 3 */
    const int32_t ids0[] = {0, 2, /**/ 1, 0, /**/ 3, 1};
    const int32_t ids1[] = {2, 0, /**/ 0, 3, /**/ 1, 2};
    const int32_t *ids[] = {ids0, ids1};
    int tokens[] = {3, 3};
    struct mok_schedule s;

    CHECK(mok_schedule_build(&s, 2, 0, 4, 2, 3, tokens, ids, 4, 3, 8) == 0, "build rank 0");
    /* expert 0: (0,0,0) (0,1,1) (1,0,1) (1,1,0); expert 1: (0,1,0) (0,2,1) (1,2,0) + 1 padding slot */
    int rows0[] = {4, 3}, off0[] = {0, 4, 8};
    int32_t ent0[] = {R(0, 0, 0), R(0, 1, 1), R(1, 0, 1), R(1, 1, 0), R(0, 1, 0), R(0, 2, 1), R(1, 2, 0), PAD};
    int32_t slot0[] = {0, -1, 4, 1, -1, 5, /* p1 */ -1, 2, 3, -1, 6, -1};
    int chunks0[] = {3, 3, 1}, touched0[] = {3, 1, 3};
    expect_ints("rows", 0, s.rows, rows0, 2);
    expect_ints("offset", 0, s.offset, off0, 3);
    expect_ints("entry", 0, s.entry, ent0, 8);
    expect_ints("route_slot", 0, s.route_slot, slot0, 12);
    CHECK(s.nchunks == 3, "rank 0 nchunks %d", s.nchunks);
    expect_ints("chunk_rows_valid", 0, s.chunk_rows_valid, chunks0, 3);
    expect_ints("ranks_touched", 0, s.ranks_touched, touched0, 3);
    /* rank 1's tokens 0, 1, 2 all reach rank 0 (token 1 twice: still one row over NVLink) */
    CHECK(s.remote_tokens_in == 3 && s.routes_in == 7, "rank 0 remote %lld routes %lld", s.remote_tokens_in,
           s.routes_in);
    CHECK(s.overflow_expert == -1 && s.overflow_needed_rows == 0, "rank 0 overflow %d", s.overflow_expert);
    mok_schedule_free(&s);

    CHECK(mok_schedule_build(&s, 2, 1, 4, 2, 3, tokens, ids, 4, 3, 8) == 0, "build rank 1");
    /* expert 2: (0,0,1) (1,0,0) (1,2,1) + 1 pad; expert 3: (0,2,0) (1,1,1) + 2 pad */
    int rows1[] = {3, 2}, off1[] = {0, 4, 8};
    int32_t ent1[] = {R(0, 0, 1), R(1, 0, 0), R(1, 2, 1), PAD, R(0, 2, 0), R(1, 1, 1), PAD, PAD};
    int32_t slot1[] = {-1, 0, -1, -1, 4, -1, /* p1 */ 1, -1, -1, 5, -1, 2};
    int chunks1[] = {3, 2, 0}, touched1[] = {3, 3, 3};
    expect_ints("rows", 1, s.rows, rows1, 2);
    expect_ints("offset", 1, s.offset, off1, 3);
    expect_ints("entry", 1, s.entry, ent1, 8);
    expect_ints("route_slot", 1, s.route_slot, slot1, 12);
    CHECK(s.nchunks == 3, "rank 1 nchunks %d", s.nchunks);
    expect_ints("chunk_rows_valid", 1, s.chunk_rows_valid, chunks1, 3);
    expect_ints("ranks_touched", 1, s.ranks_touched, touched1, 3);
    /* rank 0's token 1 ({1, 0}) never reaches rank 1 */
    CHECK(s.remote_tokens_in == 2 && s.routes_in == 5, "rank 1 remote %lld routes %lld", s.remote_tokens_in,
           s.routes_in);
    mok_schedule_free(&s);
}

/* Random tables: a small LCG, ids distinct per token by redrawing collisions. With hot >= 0 three quarters of
 * the tokens route their first choice to expert hot (skew); expert cold (if >= 0) is never drawn, so its
 * block must come out empty. */
struct tables {
    int P, E, k, t_max, tokens[64];
    int32_t *ids[64];
};

static unsigned lcg(unsigned *seed)
{
    *seed = *seed * 1103515245u + 12345u;
    return *seed >> 8;
}

static void make_tables(struct tables *tb, int P, int E, int k, const int *tokens, int hot, int cold, unsigned seed)
{
    memset(tb, 0, sizeof(*tb));
    tb->P = P, tb->E = E, tb->k = k;
    for (int p = 0; p < P; p++) {
        tb->tokens[p] = tokens[p];
        if (tokens[p] > tb->t_max)
            tb->t_max = tokens[p];
        tb->ids[p] = malloc(sizeof(int32_t) * (size_t)(tokens[p] * k + 1));
        for (int t = 0; t < tokens[p]; t++) {
            int32_t *row = tb->ids[p] + (size_t)t * k;
            for (int j = 0; j < k; j++) {
                int again;
                do {
                    row[j] = (int32_t)(lcg(&seed) % (unsigned)E);
                    if (j == 0 && hot >= 0 && lcg(&seed) % 4 != 0)
                        row[j] = hot;
                    again = row[j] == cold;
                    for (int i = 0; i < j; i++)
                        again |= row[i] == row[j];
                } while (again);
            }
        }
    }
}

static void free_tables(struct tables *tb)
{
    for (int p = 0; p < tb->P; p++)
        free(tb->ids[p]);
}

static int same_arrays(const struct mok_schedule *a, const struct mok_schedule *b)
{
    size_t el = (size_t)a->local_experts, nr = (size_t)a->nranks * a->t_max * a->topk;
    return a->nchunks == b->nchunks && a->overflow_expert == b->overflow_expert &&
           a->remote_tokens_in == b->remote_tokens_in && a->routes_in == b->routes_in &&
           !memcmp(a->rows, b->rows, el * sizeof(int)) && !memcmp(a->offset, b->offset, (el + 1) * sizeof(int)) &&
           !memcmp(a->entry, b->entry, (size_t)a->capacity_rows * sizeof(int32_t)) &&
           !memcmp(a->route_slot, b->route_slot, nr * sizeof(int32_t)) &&
           !memcmp(a->chunk_rows_valid, b->chunk_rows_valid, (size_t)a->nchunks * sizeof(int)) &&
           !memcmp(a->ranks_touched, b->ranks_touched, (size_t)a->t_max * sizeof(int));
}

/* Every property of one rank's schedule against brute force over the tables; seen[] (all routes) counts how
 * often each route appears over all ranks, so the caller can check the union. */
static void check_rank(const struct tables *tb, const struct mok_schedule *s, int tile, int cold, int *seen,
                       const char *name)
{
    int r = s->rank, el = s->local_experts, k = tb->k, tm = tb->t_max;
    long long sum = 0, remote = 0;
    for (int le = 0; le < el; le++) {
        int a = s->offset[le], b = s->offset[le + 1], n = s->rows[le];
        int want = 0;
        for (int p = 0; p < tb->P; p++)
            for (int i = 0; i < tb->tokens[p] * k; i++)
                want += tb->ids[p][i] == r * el + le;
        CHECK(n == want, "%s rank %d expert %d rows %d, brute force %d", name, r, le, n, want);
        CHECK(a % tile == 0 && b - a == (n + tile - 1) / tile * tile, "%s rank %d expert %d block [%d, %d) for %d rows",
               name, r, le, a, b, n);
        if (r * el + le == cold)
            CHECK(n == 0 && a == b, "%s cold expert %d rows %d block [%d, %d)", name, cold, n, a, b);
        sum += n;
        for (int i = a; i < b; i++) {
            int32_t v = s->entry[i];
            if (i >= a + n) {
                CHECK(v == PAD, "%s rank %d slot %d (padding of expert %d) holds %d", name, r, i, le, v);
                continue;
            }
            int p = mok_route_rank(v), t = mok_route_token(v), j = mok_route_k(v);
            CHECK(v != PAD && p < tb->P && t < tb->tokens[p] && j < k && tb->ids[p][t * k + j] == r * el + le,
                   "%s rank %d slot %d: route (%d, %d, %d) is not for expert %d", name, r, i, p, t, j, r * el + le);
            CHECK(i == a || v > s->entry[i - 1], "%s rank %d slot %d not after slot %d in (p, t, j) order", name, r,
                   i, i - 1);
            if (v != PAD && p < tb->P && t < tm)
                seen[(p * tm + t) * k + j]++;
        }
    }
    CHECK(s->routes_in == sum, "%s rank %d routes_in %lld, rows add up to %lld", name, r, s->routes_in, sum);
    for (int i = s->offset[el]; i < s->capacity_rows; i++)
        CHECK(s->entry[i] == PAD, "%s rank %d unused slot %d holds %d", name, r, i, s->entry[i]);
    /* route_slot points back at the entry, and nowhere for routes elsewhere or past T_p */
    for (int p = 0; p < tb->P; p++)
        for (int t = 0; t < tm; t++) {
            int touches = 0;
            unsigned mask = 0;
            for (int j = 0; j < k; j++) {
                int e = t < tb->tokens[p] ? tb->ids[p][t * k + j] : -1;
                int32_t sl = s->route_slot[(p * tm + t) * k + j];
                int mine = e >= 0 && e / el == r;
                touches |= mine;
                if (e >= 0)
                    mask |= 1u << (e / el);
                CHECK(mine ? sl >= 0 && sl < s->capacity_rows && s->entry[sl] == R(p, t, j) : sl == -1,
                       "%s rank %d route_slot(%d, %d, %d) = %d", name, r, p, t, j, sl);
            }
            remote += p != r && touches;
            if (p == r)
                CHECK((unsigned)s->ranks_touched[t] == mask, "%s rank %d ranks_touched[%d] = %#x, want %#x", name, r, t,
                       (unsigned)s->ranks_touched[t], mask);
        }
    CHECK(s->remote_tokens_in == remote, "%s rank %d remote_tokens_in %lld, brute force %lld", name, r,
           s->remote_tokens_in, remote);
    int nch = (s->offset[el] + s->chunk_rows - 1) / s->chunk_rows;
    CHECK(s->nchunks == nch, "%s rank %d nchunks %d, want %d", name, r, s->nchunks, nch);
    for (int c = 0; c < s->nchunks && c < nch; c++) {
        int valid = 0;
        for (int i = c * s->chunk_rows; i < (c + 1) * s->chunk_rows && i < s->offset[el]; i++)
            valid += s->entry[i] != PAD;
        CHECK(s->chunk_rows_valid[c] == valid, "%s rank %d chunk %d valid %d, want %d", name, r, c,
               s->chunk_rows_valid[c], valid);
    }
}

/* All P schedules of one table: each checked alone, the union is every route exactly once, and a second build
 * is bit-identical. The capacity is the worst case (every route on one rank), so nothing overflows. */
static void check_all_ranks(const char *name, int P, int E, int k, const int *tokens, int hot, int cold, int tile,
                            int chunk, unsigned seed)
{
    struct tables tb;
    make_tables(&tb, P, E, k, tokens, hot, cold, seed);
    int total = 0;
    for (int p = 0; p < P; p++)
        total += tokens[p] * k;
    int cap = total + (E / P) * (tile - 1), nall = P * tb.t_max * k;
    int *seen = calloc((size_t)(nall + 1), sizeof(int));
    for (int r = 0; r < P; r++) {
        struct mok_schedule s, again;
        if (mok_schedule_build(&s, P, r, E, k, tb.t_max, tb.tokens, (const int32_t *const *)tb.ids, tile, chunk,
                               cap)) {
            CHECK(0, "%s rank %d build failed", name, r);
            continue;
        }
        check_rank(&tb, &s, tile, cold, seen, name);
        CHECK(s.overflow_expert == -1, "%s rank %d overflow at capacity %d", name, r, cap);
        CHECK(mok_schedule_build(&again, P, r, E, k, tb.t_max, tb.tokens, (const int32_t *const *)tb.ids, tile,
                                  chunk, cap) == 0 &&
                   same_arrays(&s, &again),
               "%s rank %d second build differs", name, r);
        mok_schedule_free(&again);
        mok_schedule_free(&s);
    }
    for (int p = 0; p < P; p++)
        for (int t = 0; t < tb.t_max; t++)
            for (int j = 0; j < k; j++) {
                int n = seen[(p * tb.t_max + t) * k + j], want = t < tokens[p];
                CHECK(n == want, "%s route (%d, %d, %d) scheduled %d times over all ranks, want %d", name, p, t, j,
                       n, want);
            }
    free(seen);
    free_tables(&tb);
}

static void test_random(void)
{
    int ragged[] = {0, 1, 37, 300};
    check_all_ranks("ragged", 4, 16, 4, ragged, -1, -1, 4, 7, 1u);
    /* skew: expert 5 (rank 1) takes most first choices; expert 10 (rank 2) none; tile 128 pads heavily */
    check_all_ranks("skewed", 4, 16, 4, ragged, 5, 10, 128, 100, 2u);
    int even[] = {64, 64, 64, 64, 64, 64, 64, 64};
    check_all_ranks("8 ranks top-8", 8, 64, 8, even, -1, 3, 16, 48, 3u);
    int single[] = {50};
    check_all_ranks("one rank", 1, 8, 8, single, 0, -1, 1, 1, 4u);
    int many[32];
    for (int p = 0; p < 32; p++)
        many[p] = p % 5;
    /* P = 32: rank 31 sets bit 31 of ranks_touched */
    check_all_ranks("32 ranks", 32, 64, 6, many, 63, -1, 2, 5, 5u);
    int empty[] = {0, 0};
    check_all_ranks("no tokens", 2, 4, 2, empty, -1, -1, 8, 3, 6u);
}

/* A capacity cutting into expert le's block: overflow_expert is the first that does not fit, the message
 * names its rows, and the slots that exist match the full schedule. entry has exactly capacity slots, so ASan
 * catches any write past it. */
static void test_overflow(void)
{
    int tokens[] = {40, 0, 200, 77};
    struct tables tb;
    make_tables(&tb, 4, 16, 4, tokens, 9, -1, 7u);
    const int32_t *const *ids = (const int32_t *const *)tb.ids;
    struct mok_schedule full, s;
    int r = 2, el = 4, tile = 8;
    if (mok_schedule_build(&full, 4, r, 16, 4, tb.t_max, tb.tokens, ids, tile, 16, 100000)) {
        CHECK(0, "overflow: full build failed");
        free_tables(&tb);
        return;
    }
    int total = full.offset[el];
    int caps[] = {0, 1, full.offset[1] - 1, full.offset[1], full.offset[2] + 3, total - 1, total};
    for (size_t ci = 0; ci < sizeof(caps) / sizeof(caps[0]); ci++) {
        int cap = caps[ci];
        if (mok_schedule_build(&s, 4, r, 16, 4, tb.t_max, tb.tokens, ids, tile, 16, cap)) {
            CHECK(0, "overflow: build at capacity %d failed", cap);
            continue;
        }
        int want = -1;
        for (int le = 0; le < el && want < 0; le++)
            if (full.offset[le + 1] > cap)
                want = r * el + le;
        CHECK(s.overflow_expert == want, "capacity %d: overflow_expert %d, want %d", cap, s.overflow_expert, want);
        CHECK(s.overflow_needed_rows == (want >= 0 ? total : 0), "capacity %d: needed %d, total %d", cap,
               s.overflow_needed_rows, total);
        /* sizes describe the full schedule, whatever the capacity */
        CHECK(!memcmp(s.offset, full.offset, sizeof(int) * (size_t)(el + 1)) && s.nchunks == full.nchunks &&
                   !memcmp(s.chunk_rows_valid, full.chunk_rows_valid, sizeof(int) * (size_t)s.nchunks) &&
                   s.routes_in == full.routes_in && s.remote_tokens_in == full.remote_tokens_in,
               "capacity %d: sizes differ from the full schedule", cap);
        for (int i = 0; i < cap; i++)
            CHECK(s.entry[i] == full.entry[i], "capacity %d: slot %d = %d, full schedule %d", cap, i, s.entry[i],
                   full.entry[i]);
        for (int i = 0; i < 4 * tb.t_max * 4; i++) {
            int32_t w = full.route_slot[i] < cap ? full.route_slot[i] : -1;
            CHECK(s.route_slot[i] == w, "capacity %d: route_slot[%d] = %d, want %d", cap, i, s.route_slot[i], w);
        }
        char buf[256], wantmsg[256];
        mok_schedule_overflow_message(&s, 1.25, buf, (int)sizeof(buf));
        if (want >= 0) {
            int le = want - r * el;
            snprintf(wantmsg, sizeof(wantmsg),
                     "rank 2: local expert %d (global %d) needs rows [%d, %d) but the capacity is %d rows "
                     "(capacity_factor 1.25 too small for this routing)",
                     le, want, full.offset[le], full.offset[le + 1], cap);
            CHECK(!strcmp(buf, wantmsg), "capacity %d: message\n  %s\nwant\n  %s", cap, buf, wantmsg);
        } else {
            CHECK(!strstr(buf, "needs rows"), "capacity %d fits but the message says: %s", cap, buf);
        }
        mok_schedule_free(&s);
    }
    /* a short buffer truncates, never overruns */
    char tiny[8];
    CHECK(mok_schedule_build(&s, 4, r, 16, 4, tb.t_max, tb.tokens, ids, tile, 16, 0) == 0, "capacity 0 build");
    mok_schedule_overflow_message(&s, 1.0, tiny, (int)sizeof(tiny));
    CHECK(strlen(tiny) == sizeof(tiny) - 1, "truncated message '%s'", tiny);
    mok_schedule_free(&s);
    mok_schedule_free(&full);
    free_tables(&tb);
}

static void test_capacity(void)
{
    CHECK(mok_schedule_capacity(1.0, 4096, 8, 32, 128) == 32768 + 32 * 127, "capacity 1.0: %d",
           mok_schedule_capacity(1.0, 4096, 8, 32, 128));
    CHECK(mok_schedule_capacity(1.25, 3, 2, 2, 4) == 8 + 6, "capacity 1.25 x 6 = 7.5 rounds up: %d",
           mok_schedule_capacity(1.25, 3, 2, 2, 4));
    CHECK(mok_schedule_capacity(2.0, 0, 8, 4, 1) == 0, "no tokens, tile 1: %d", mok_schedule_capacity(2.0, 0, 8, 4, 1));
    CHECK(mok_schedule_capacity(0.0, 10, 2, 2, 4) == -1, "factor 0");
    CHECK(mok_schedule_capacity(-1.0, 10, 2, 2, 4) == -1, "factor < 0");
    CHECK(mok_schedule_capacity(1.0, 10, 2, 2, 0) == -1, "tile 0");
    CHECK(mok_schedule_capacity(1e12, 1 << 19, 32, 2, 4) == -1, "above INT_MAX");
}

static void test_bad_arguments(void)
{
    int32_t a[] = {0, 1, 2, 3}, dup[] = {1, 1, 2, 3}, neg[] = {0, -1, 2, 3}, big[] = {0, 4, 2, 3};
    const int32_t *ok[] = {a, a}, *d[] = {a, dup}, *n[] = {neg, a}, *b[] = {a, big}, *nul[] = {a, NULL};
    int tok[] = {2, 2}, over[] = {2, 3}, negtok[] = {-1, 2};
    struct mok_schedule s;
    CHECK(mok_schedule_build(&s, 2, 0, 4, 2, 2, tok, ok, 4, 3, 16) == 0, "good arguments");
    mok_schedule_free(&s);
    struct {
        const char *what;
        int P, rank, E, k, tmax;
        const int *tokens;
        const int32_t *const *ids;
        int tile, chunk, cap;
    } cases[] = {
        {"P 0", 0, 0, 4, 2, 2, tok, ok, 4, 3, 16},
        {"P 33", 33, 0, 66, 2, 2, tok, ok, 4, 3, 16},
        {"rank -1", 2, -1, 4, 2, 2, tok, ok, 4, 3, 16},
        {"rank P", 2, 2, 4, 2, 2, tok, ok, 4, 3, 16},
        {"experts % P", 2, 0, 5, 2, 2, tok, ok, 4, 3, 16},
        {"experts 0", 2, 0, 0, 2, 2, tok, ok, 4, 3, 16},
        {"topk 0", 2, 0, 4, 0, 2, tok, ok, 4, 3, 16},
        {"topk 33", 2, 0, 64, 33, 2, tok, ok, 4, 3, 16},
        {"topk > experts", 2, 0, 4, 5, 2, tok, ok, 4, 3, 16},
        {"t_max 2^20", 2, 0, 4, 2, 1 << 20, tok, ok, 4, 3, 16},
        {"t_max < 0", 2, 0, 4, 2, -1, tok, ok, 4, 3, 16},
        {"tokens > t_max", 2, 0, 4, 2, 2, over, ok, 4, 3, 16},
        {"tokens < 0", 2, 0, 4, 2, 2, negtok, ok, 4, 3, 16},
        {"tokens NULL", 2, 0, 4, 2, 2, NULL, ok, 4, 3, 16},
        {"ids NULL", 2, 0, 4, 2, 2, tok, NULL, 4, 3, 16},
        {"ids[p] NULL", 2, 0, 4, 2, 2, tok, nul, 4, 3, 16},
        {"id -1", 2, 0, 4, 2, 2, tok, n, 4, 3, 16},
        {"id experts", 2, 0, 4, 2, 2, tok, b, 4, 3, 16},
        {"id repeated in a token", 2, 0, 4, 2, 2, tok, d, 4, 3, 16},
        {"tile 0", 2, 0, 4, 2, 2, tok, ok, 0, 3, 16},
        {"chunk 0", 2, 0, 4, 2, 2, tok, ok, 4, 0, 16},
        {"capacity -1", 2, 0, 4, 2, 2, tok, ok, 4, 3, -1},
        {"padded total above INT_MAX", 2, 0, 4, 2, 2, tok, ok, 1 << 30, 3, 16},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(&s, 0x5a, sizeof(s));
        int rc = mok_schedule_build(&s, cases[i].P, cases[i].rank, cases[i].E, cases[i].k, cases[i].tmax,
                                    cases[i].tokens, cases[i].ids, cases[i].tile, cases[i].chunk, cases[i].cap);
        CHECK(rc == -1, "%s: returned %d, want -1", cases[i].what, rc);
        CHECK(!s.rows && !s.entry && !s.route_slot, "%s: struct not zeroed on failure", cases[i].what);
        mok_schedule_free(&s); /* safe on the zeroed struct */
    }
}

int main(void)
{
    test_pack();
    test_hand_example();
    test_random();
    test_overflow();
    test_capacity();
    test_bad_arguments();
    if (failures) {
        printf("test_schedule: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_schedule: all passed\n");
    return 0;
}

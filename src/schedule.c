/* schedule: host reference of the megakernel's expert schedule (layout and overflow rules in schedule.h).
 * Two passes over every rank's routing table: the first validates and counts rows per local expert, the
 * second, in (p, t, j) order, drops each route into its expert's next slot, so every block comes out sorted
 * without a sort. */
#include "schedule.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *alloc_zero(size_t n, size_t size) { return calloc(n > 0 ? n : 1, size); }

void mok_schedule_free(struct mok_schedule *s)
{
    free(s->rows);
    free(s->offset);
    free(s->entry);
    free(s->route_slot);
    free(s->chunk_rows_valid);
    free(s->ranks_touched);
    memset(s, 0, sizeof(*s));
}

static int args_ok(int P, int rank, int E, int k, int t_max, const int *tokens, const int32_t *const *ids,
                   int tile_rows, int chunk_rows, int capacity_rows)
{
    if (P < 1 || P > MOK_SCHED_MAX_RANKS || rank < 0 || rank >= P || E < P || E % P || k < 1 ||
        k > MOK_SCHED_MAX_TOPK || k > E || t_max < 0 || t_max >= MOK_SCHED_MAX_TOKENS || !tokens ||
        tile_rows < 1 || chunk_rows < 1 || capacity_rows < 0)
        return 0;
    for (int p = 0; p < P; p++)
        if (tokens[p] < 0 || tokens[p] > t_max || (tokens[p] > 0 && (!ids || !ids[p])))
            return 0;
    return 1;
}

/* Pass 1: every id in range and distinct within its token (the GPU relies on both, so the reference refuses
 * tables that break them), rows per local expert, and the per-token counters. seen[e] holds the serial of the
 * last token that used e: a duplicate check in O(1) per route without clearing anything between tokens. */
static int count_routes(struct mok_schedule *s, const int *tokens, const int32_t *const *ids, int *seen)
{
    int P = s->nranks, k = s->topk, el = s->local_experts, first = s->rank * el;
    int serial = 0;
    for (int p = 0; p < P; p++)
        for (int t = 0; t < tokens[p]; t++) {
            const int32_t *row = ids[p] + (size_t)t * k;
            int mine = 0;
            unsigned mask = 0;
            serial++;
            for (int j = 0; j < k; j++) {
                int32_t e = row[j];
                if (e < 0 || e >= s->experts || seen[e] == serial)
                    return -1;
                seen[e] = serial;
                mask |= 1u << (e / el);
                if (e >= first && e < first + el) {
                    s->rows[e - first]++;
                    mine = 1;
                }
            }
            if (p == s->rank)
                s->ranks_touched[t] = (int)mask;
            else if (mine)
                s->remote_tokens_in++; /* once per token: the row crosses NVLink once, however many experts */
        }
    return 0;
}

/* Padded offsets; the overflow expert is the first block that ends past the capacity (a block that fits is
 * wholly inside it, since blocks are contiguous and ascending). -1 when the total does not fit an int. */
static int place_blocks(struct mok_schedule *s)
{
    long long off = 0;
    s->overflow_expert = -1;
    for (int le = 0; le < s->local_experts; le++) {
        s->offset[le] = (int)off;
        s->routes_in += s->rows[le];
        off += (s->rows[le] + (long long)s->tile_rows - 1) / s->tile_rows * s->tile_rows;
        if (off > INT_MAX)
            return -1;
        if (off > s->capacity_rows && s->overflow_expert < 0)
            s->overflow_expert = s->rank * s->local_experts + le;
    }
    s->offset[s->local_experts] = (int)off;
    s->overflow_needed_rows = s->overflow_expert >= 0 ? (int)off : 0;
    return 0;
}

/* Pass 2: slot of each route to this rank, in (p, t, j) order; slots past the capacity are neither written
 * nor recorded (route_slot stays -1), which is exactly what the GPU does with a too small buffer. */
static void fill_slots(struct mok_schedule *s, const int *tokens, const int32_t *const *ids, int *cursor)
{
    int el = s->local_experts, first = s->rank * el, k = s->topk;
    memcpy(cursor, s->offset, sizeof(int) * (size_t)el);
    for (int p = 0; p < s->nranks; p++)
        for (int t = 0; t < tokens[p]; t++)
            for (int j = 0; j < k; j++) {
                int e = ids[p][(size_t)t * k + j] - first;
                if (e < 0 || e >= el)
                    continue;
                int slot = cursor[e]++;
                if (slot < s->capacity_rows) {
                    s->entry[slot] = mok_route_pack(p, t, j);
                    s->route_slot[((size_t)p * s->t_max + t) * k + j] = slot;
                }
            }
}

/* Valid slots per chunk from the blocks' [offset, offset + rows) intervals: O(EL + nchunks), independent of
 * the capacity, so the counts describe the full schedule even when it overflows. */
static void count_chunks(struct mok_schedule *s)
{
    int cr = s->chunk_rows;
    for (int le = 0; le < s->local_experts; le++) {
        int a = s->offset[le], b = a + s->rows[le];
        while (a < b) {
            int c = a / cr, end = (c + 1) * cr < b ? (c + 1) * cr : b;
            s->chunk_rows_valid[c] += end - a;
            a = end;
        }
    }
}

int mok_schedule_build(struct mok_schedule *s, int nranks, int rank, int experts, int topk, int t_max,
                       const int *tokens, const int32_t *const *ids, int tile_rows, int chunk_rows,
                       int capacity_rows)
{
    memset(s, 0, sizeof(*s));
    if (!args_ok(nranks, rank, experts, topk, t_max, tokens, ids, tile_rows, chunk_rows, capacity_rows))
        return -1;
    int el = experts / nranks;
    *s = (struct mok_schedule){.nranks = nranks, .rank = rank, .experts = experts, .local_experts = el,
                               .topk = topk, .t_max = t_max, .tile_rows = tile_rows, .chunk_rows = chunk_rows,
                               .capacity_rows = capacity_rows, .overflow_expert = -1};
    size_t nroutes = (size_t)nranks * t_max * topk;
    s->rows = alloc_zero((size_t)el, sizeof(int));
    s->offset = alloc_zero((size_t)el + 1, sizeof(int));
    s->entry = malloc(sizeof(int32_t) * (capacity_rows > 0 ? (size_t)capacity_rows : 1));
    s->route_slot = malloc(sizeof(int32_t) * (nroutes > 0 ? nroutes : 1));
    s->ranks_touched = alloc_zero((size_t)t_max, sizeof(int));
    int *scratch = alloc_zero((size_t)(experts > el ? experts : el), sizeof(int)); /* seen, then cursor */
    if (!s->rows || !s->offset || !s->entry || !s->route_slot || !s->ranks_touched || !scratch ||
        count_routes(s, tokens, ids, scratch) || place_blocks(s))
        goto fail;
    for (int i = 0; i < capacity_rows; i++)
        s->entry[i] = MOK_SCHED_PAD;
    for (size_t i = 0; i < nroutes; i++)
        s->route_slot[i] = -1;
    fill_slots(s, tokens, ids, scratch);
    s->nchunks = (int)(((long long)s->offset[el] + chunk_rows - 1) / chunk_rows);
    s->chunk_rows_valid = alloc_zero((size_t)s->nchunks, sizeof(int));
    if (!s->chunk_rows_valid)
        goto fail;
    count_chunks(s);
    free(scratch);
    return 0;
fail:
    free(scratch);
    mok_schedule_free(s);
    return -1;
}

int mok_schedule_capacity(double factor, int t_max, int topk, int local_experts, int tile_rows)
{
    /* !(factor > 0) also refuses NaN */
    if (!(factor > 0) || t_max < 0 || topk < 0 || local_experts < 0 || tile_rows < 1)
        return -1;
    double want = factor * (double)t_max * (double)topk;
    if (want > (double)INT_MAX)
        return -1;
    long long c = (long long)want; /* ceil without libm: want is non-negative and fits */
    if ((double)c < want)
        c++;
    c += (long long)local_experts * (tile_rows - 1);
    return c > INT_MAX ? -1 : (int)c;
}

const char *mok_schedule_overflow_message(const struct mok_schedule *s, double factor, char *buf, int len)
{
    if (!buf || len <= 0)
        return buf;
    if (s->overflow_expert < 0) {
        snprintf(buf, (size_t)len, "rank %d: schedule fits (%d of %d rows)", s->rank,
                 s->offset ? s->offset[s->local_experts] : 0, s->capacity_rows);
        return buf;
    }
    int le = s->overflow_expert - s->rank * s->local_experts;
    snprintf(buf, (size_t)len,
             "rank %d: local expert %d (global %d) needs rows [%d, %d) but the capacity is %d rows "
             "(capacity_factor %g too small for this routing)",
             s->rank, le, s->overflow_expert, s->offset[le], s->offset[le + 1], s->capacity_rows, factor);
    return buf;
}

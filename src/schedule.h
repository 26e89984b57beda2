/* schedule: the host reference of the expert schedule the megakernel builds on the GPU.
 *
 * P ranks each hold T_p tokens (0 <= T_p <= t_max) routed to topk distinct experts out of E; rank r owns the
 * global experts [r*EL, (r+1)*EL), EL = E/P, and every rank sees every rank's routing table. The schedule of
 * rank r lists, for each local expert le (global r*EL + le), the routes (p, t, j) with ids_p[t][j] == r*EL + le
 * in ascending lexicographic (p, t, j) order; each expert's block is padded up to a multiple of tile_rows so
 * a GEMM tile never spans two experts. Slots are rows of the receive buffer: slot i holds the route entry[i].
 * The GPU builds the same arrays; this version is what it is tested against. Pure function of the tables.
 *
 * Capacity: the receive buffer is sized before routing is known (capacity_rows slots). When the padded
 * schedule needs more (offset[EL] > capacity_rows) the build still succeeds but reports the overflow: only
 * slots < capacity_rows are written, routes that did not fit read -1 in route_slot, and overflow_expert names
 * the first local expert whose block does not fit. The sizes (rows, offset, nchunks, chunk_rows_valid and the
 * counters) always describe the full, unclipped schedule. */
#ifndef MOK_SCHEDULE_H
#define MOK_SCHEDULE_H

#include <stdint.h>

#define MOK_SCHED_PAD (-1)
#define MOK_SCHED_MAX_RANKS 32       /* ranks_touched is a 32-bit mask per token */
#define MOK_SCHED_MAX_TOKENS (1 << 20) /* t_max must be below this: t gets 20 bits of a packed route */
#define MOK_SCHED_MAX_TOPK 32        /* j gets 5 bits */

/* A route packed in 31 bits (never negative, so MOK_SCHED_PAD cannot collide): p < 64, t < 2^20, j < 32. */
static inline int32_t mok_route_pack(int p, int t, int j)
{
    return (int32_t)(((uint32_t)p << 25) | ((uint32_t)t << 5) | (uint32_t)j);
}
static inline int mok_route_rank(int32_t v) { return (int)(((uint32_t)v >> 25) & 63u); }
static inline int mok_route_token(int32_t v) { return (int)(((uint32_t)v >> 5) & 0xFFFFFu); }
static inline int mok_route_k(int32_t v) { return (int)((uint32_t)v & 31u); }

struct mok_schedule {
    int nranks, rank, experts, local_experts, topk, t_max, tile_rows, chunk_rows;
    int capacity_rows;     /* slots available */
    int *rows;             /* [EL] routes of each local expert */
    int *offset;           /* [EL + 1] padded start of each expert's block; offset[EL] = total padded rows */
    int32_t *entry;        /* [capacity_rows] packed route per slot, MOK_SCHED_PAD for padding and unused slots */
    int32_t *route_slot;   /* [P][t_max*topk]: slot of route (p, t, j) if it is routed to this rank (and fit), else -1 */
    int nchunks;           /* ceil(offset[EL] / chunk_rows) */
    int *chunk_rows_valid; /* [nchunks]: non-padding slots in chunk c = slots [c*chunk_rows, (c+1)*chunk_rows) */
    /* overflow: offset[EL] > capacity_rows. Then entry/route_slot hold only slots < capacity_rows and
     * overflow_expert is the global id of the first local expert whose block does not fit (offset[le+1] >
     * capacity_rows), else -1. overflow_needed_rows = offset[EL] when overflowing, else 0. */
    int overflow_expert, overflow_needed_rows;
    long long remote_tokens_in; /* distinct (p != rank, t) with at least one route to this rank: rows that cross
                                 * NVLink into this rank once per token */
    long long routes_in;        /* all routes to this rank, local ones included (= sum of rows) */
    int *ranks_touched;         /* [t_max] for this rank's OWN tokens: bit q set when rank q owns at least one of
                                 * token t's experts; 0 for t >= tokens[rank]. Why P <= 32. */
};

/* tokens[p] tokens of rank p; ids[p] -> [tokens[p] * topk] global expert ids, distinct per token (ids[p] may be
 * NULL when tokens[p] == 0). Returns 0 (an overflow is not an error: it is reported in the struct), or -1 on bad
 * arguments: P outside 1..32, rank outside [0, P), experts not a positive multiple of P, topk outside
 * 1..min(32, experts), t_max outside [0, 2^20), tokens[p] outside [0, t_max], an id out of [0, experts) or
 * repeated within a token, tile_rows or chunk_rows < 1, capacity_rows < 0, a padded total above INT_MAX, or no
 * memory. Prints nothing. On -1 the struct is zeroed; otherwise free it with mok_schedule_free.
 * O(P * t_max * topk + capacity_rows + experts) time. */
int mok_schedule_build(struct mok_schedule *s, int nranks, int rank, int experts, int topk, int t_max,
                       const int *tokens, const int32_t *const *ids, int tile_rows, int chunk_rows,
                       int capacity_rows);
void mok_schedule_free(struct mok_schedule *s);

/* Slots for a capacity factor: ceil(factor * t_max * topk) + local_experts * (tile_rows - 1), the expected
 * routes into one rank under uniform routing times the factor, plus the worst-case padding. -1 on bad
 * arguments (factor not > 0, negative sizes, tile_rows < 1) or a result above INT_MAX. */
int mok_schedule_capacity(double factor, int t_max, int topk, int local_experts, int tile_rows);

/* One line into buf (len bytes), returned: "rank R: local expert LE (global G) needs rows [A, B) but the
 * capacity is C rows (capacity_factor F too small for this routing)", or a "no overflow" line. */
const char *mok_schedule_overflow_message(const struct mok_schedule *s, double factor, char *buf, int len);

#endif

/* splits: send/receive counts, offsets and row maps of the NCCL baselines (layouts in splits.h). */
#include "splits.h"

#include <stdlib.h>
#include <string.h>

static int *alloc_ints(int n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(int)); }

static inline int32_t count_at(const int32_t *allcounts, int nchunks, int experts, int p, int c, int e)
{
    return allcounts[((size_t)p * nchunks + c) * experts + e];
}

void mok_splits_group(int local_experts, int ngroups, int g, int *begin, int *end)
{
    *begin = (int)((long long)g * local_experts / ngroups);
    *end = (int)((long long)(g + 1) * local_experts / ngroups);
}

void mok_splits_free(struct mok_splits *s)
{
    free(s->send_count);
    free(s->send_offset);
    free(s->recv_count);
    free(s->recv_offset);
    free(s->expert_rows);
    free(s->expert_offset);
    free(s->stage_base);
    memset(s, 0, sizeof(*s));
}

/* Every rank's chunk c must hold exactly its tokens' routes: catches corrupted or mismatched counts. */
static int counts_consistent(const struct mok_splits *s, const int32_t *allcounts)
{
    for (int p = 0; p < s->nranks; p++)
        for (int c = 0; c < s->nchunks; c++) {
            long long sum = 0;
            for (int e = 0; e < s->experts; e++) {
                int32_t v = count_at(allcounts, s->nchunks, s->experts, p, c, e);
                if (v < 0)
                    return 0;
                sum += v;
            }
            long long begin = (long long)c * s->chunk_tokens;
            long long end = begin + s->chunk_tokens < s->tokens ? begin + s->chunk_tokens : s->tokens;
            if (sum != (end > begin ? (end - begin) * s->topk : 0))
                return 0;
        }
    return 1;
}

int mok_splits_build(const int32_t *allcounts, int nranks, int nchunks, int ngroups, int experts, int rank,
                     int tokens, int chunk_tokens, int topk, struct mok_splits *s)
{
    memset(s, 0, sizeof(*s));
    if (nranks < 1 || experts % nranks || rank < 0 || rank >= nranks || chunk_tokens < 1 || nchunks < 1 ||
        ngroups < 1 || ngroups > experts / nranks)
        return -1;
    int el = experts / nranks, P = nranks;
    *s = (struct mok_splits){.nranks = P, .nchunks = nchunks, .ngroups = ngroups, .nstages = nchunks * ngroups,
                             .experts = experts, .local_experts = el, .rank = rank, .chunk_tokens = chunk_tokens,
                             .topk = topk, .tokens = tokens};
    int sp = s->nstages * P;
    s->send_count = alloc_ints(sp);
    s->send_offset = alloc_ints(sp);
    s->recv_count = alloc_ints(sp);
    s->recv_offset = alloc_ints(sp);
    s->expert_rows = alloc_ints(nchunks * el);
    s->expert_offset = alloc_ints(nchunks * el);
    s->stage_base = alloc_ints(s->nstages + 1);
    int *prefix = alloc_ints(experts + 1);
    if (!s->send_count || !s->send_offset || !s->recv_count || !s->recv_offset || !s->expert_rows ||
        !s->expert_offset || !s->stage_base || !prefix || !counts_consistent(s, allcounts)) {
        free(prefix);
        mok_splits_free(s);
        return -1;
    }
    int row = 0;
    for (int c = 0; c < nchunks; c++) {
        /* my send rows of chunk c are sorted by global expert: a prefix sum finds any expert range */
        prefix[0] = c * chunk_tokens * topk;
        for (int e = 0; e < experts; e++)
            prefix[e + 1] = prefix[e] + count_at(allcounts, nchunks, experts, rank, c, e);
        for (int g = 0; g < ngroups; g++) {
            int gb, ge, st = c * ngroups + g;
            mok_splits_group(el, ngroups, g, &gb, &ge);
            s->stage_base[st] = row;
            for (int p = 0; p < P; p++) {
                s->send_offset[st * P + p] = prefix[p * el + gb];
                s->send_count[st * P + p] = prefix[p * el + ge] - prefix[p * el + gb];
                int n = 0;
                for (int le = gb; le < ge; le++)
                    n += count_at(allcounts, nchunks, experts, p, c, rank * el + le);
                s->recv_offset[st * P + p] = row;
                s->recv_count[st * P + p] = n;
                row += n;
                if (p != rank) {
                    s->remote_send_rows += s->send_count[st * P + p];
                    s->remote_recv_rows += n;
                }
            }
            int em_row = s->stage_base[st];
            for (int le = gb; le < ge; le++) {
                int n = 0;
                for (int p = 0; p < P; p++)
                    n += count_at(allcounts, nchunks, experts, p, c, rank * el + le);
                s->expert_offset[c * el + le] = em_row;
                s->expert_rows[c * el + le] = n;
                em_row += n;
            }
        }
    }
    s->stage_base[s->nstages] = row;
    s->recv_total = row;
    free(prefix);
    return 0;
}

void mok_splits_maps(const struct mok_splits *s, const int32_t *allcounts, int32_t *em_from_recv,
                     int32_t *recv_from_em)
{
    int el = s->local_experts, P = s->nranks;
    for (int c = 0; c < s->nchunks; c++)
        for (int g = 0; g < s->ngroups; g++) {
            int gb, ge, st = c * s->ngroups + g;
            mok_splits_group(el, s->ngroups, g, &gb, &ge);
            /* walk the recv layout [peer][expert] and drop each run at its expert-major place [expert][peer];
             * expert le's next free row is its offset plus what earlier peers already put there */
            for (int p = 0; p < P; p++) {
                int recv_row = s->recv_offset[st * P + p];
                for (int le = gb; le < ge; le++) {
                    int em = s->expert_offset[c * el + le];
                    for (int q = 0; q < p; q++)
                        em += count_at(allcounts, s->nchunks, s->experts, q, c, s->rank * el + le);
                    int n = count_at(allcounts, s->nchunks, s->experts, p, c, s->rank * el + le);
                    for (int i = 0; i < n; i++, em++, recv_row++) {
                        em_from_recv[em] = recv_row;
                        recv_from_em[recv_row] = em;
                    }
                }
            }
        }
}

int mok_splits_gathered(const struct mok_splits *s, int cap, int32_t *plan, int32_t *expert_first)
{
    const int el = s->local_experts;
    if (s->recv_total > cap)
        return -1;
    int n = 0;
    for (int e = 0; e < el; e++) {
        expert_first[e] = n;
        for (int c = 0; c < s->nchunks; c++)
            for (int r = 0; r < s->expert_rows[c * el + e]; r++)
                plan[n++] = s->expert_offset[c * el + e] + r;
    }
    expert_first[el] = n;
    return n;
}

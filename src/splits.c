/* splits: send/receive counts, offsets and row maps of the NCCL baselines (layouts in splits.h). */
#include "splits.h"

#include <stdlib.h>
#include <string.h>

static int *alloc_ints(int n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(int)); }

static inline int32_t count_at(const int32_t *allcounts, int nchunks, int experts, int p, int c, int e)
{
    return allcounts[((size_t)p * nchunks + c) * experts + e];
}

void mok_splits_free(struct mok_splits *s)
{
    free(s->send_count);
    free(s->send_offset);
    free(s->recv_count);
    free(s->recv_offset);
    free(s->expert_rows);
    free(s->expert_offset);
    free(s->chunk_recv_base);
    memset(s, 0, sizeof(*s));
}

int mok_splits_build(const int32_t *allcounts, int nranks, int nchunks, int experts, int rank, int tokens,
                     int chunk_tokens, int topk, struct mok_splits *s)
{
    memset(s, 0, sizeof(*s));
    if (nranks < 1 || experts % nranks || rank < 0 || rank >= nranks || chunk_tokens < 1 || nchunks < 1)
        return -1;
    int el = experts / nranks;
    *s = (struct mok_splits){.nranks = nranks, .nchunks = nchunks, .experts = experts, .local_experts = el,
                             .rank = rank, .chunk_tokens = chunk_tokens, .topk = topk, .tokens = tokens};
    int cp = nchunks * nranks, ce = nchunks * el;
    s->send_count = alloc_ints(cp);
    s->send_offset = alloc_ints(cp);
    s->recv_count = alloc_ints(cp);
    s->recv_offset = alloc_ints(cp);
    s->expert_rows = alloc_ints(ce);
    s->expert_offset = alloc_ints(ce);
    s->chunk_recv_base = alloc_ints(nchunks + 1);
    if (!s->send_count || !s->send_offset || !s->recv_count || !s->recv_offset || !s->expert_rows ||
        !s->expert_offset || !s->chunk_recv_base) {
        mok_splits_free(s);
        return -1;
    }

    /* Every rank's chunk c must hold exactly its tokens' routes: catches corrupted or mismatched counts. */
    for (int p = 0; p < nranks; p++)
        for (int c = 0; c < nchunks; c++) {
            long long sum = 0;
            for (int e = 0; e < experts; e++) {
                int32_t v = count_at(allcounts, nchunks, experts, p, c, e);
                if (v < 0)
                    goto bad;
                sum += v;
            }
            int chunk_begin = c * chunk_tokens;
            int chunk_end = chunk_begin + chunk_tokens < tokens ? chunk_begin + chunk_tokens : tokens;
            long long expect = chunk_end > chunk_begin ? (long long)(chunk_end - chunk_begin) * topk : 0;
            if (sum != expect)
                goto bad;
        }

    int recv_row = 0;
    for (int c = 0; c < nchunks; c++) {
        s->chunk_recv_base[c] = recv_row;
        int send_row = c * chunk_tokens * topk;
        for (int p = 0; p < nranks; p++) {
            int n = 0;
            for (int e = p * el; e < (p + 1) * el; e++)
                n += count_at(allcounts, nchunks, experts, rank, c, e);
            s->send_offset[c * nranks + p] = send_row;
            s->send_count[c * nranks + p] = n;
            send_row += n;
            if (p != rank)
                s->remote_send_rows += n;
        }
        for (int p = 0; p < nranks; p++) {
            int n = 0;
            for (int le = 0; le < el; le++)
                n += count_at(allcounts, nchunks, experts, p, c, rank * el + le);
            s->recv_offset[c * nranks + p] = recv_row;
            s->recv_count[c * nranks + p] = n;
            recv_row += n;
            if (p != rank)
                s->remote_recv_rows += n;
        }
        int em_row = s->chunk_recv_base[c];
        for (int le = 0; le < el; le++) {
            int n = 0;
            for (int p = 0; p < nranks; p++)
                n += count_at(allcounts, nchunks, experts, p, c, rank * el + le);
            s->expert_offset[c * el + le] = em_row;
            s->expert_rows[c * el + le] = n;
            em_row += n;
        }
    }
    s->chunk_recv_base[nchunks] = recv_row;
    s->recv_total = recv_row;
    return 0;
bad:
    mok_splits_free(s);
    return -1;
}

void mok_splits_maps(const struct mok_splits *s, const int32_t *allcounts, int32_t *em_from_recv,
                     int32_t *recv_from_em)
{
    int el = s->local_experts;
    for (int c = 0; c < s->nchunks; c++) {
        /* walk the recv layout [peer][expert] and drop each run at its expert-major place [expert][peer] */
        int *em_cursor = alloc_ints(el);
        if (!em_cursor)
            return;
        for (int le = 0; le < el; le++)
            em_cursor[le] = s->expert_offset[c * el + le];
        for (int p = 0; p < s->nranks; p++) {
            int recv_row = s->recv_offset[c * s->nranks + p];
            for (int le = 0; le < el; le++) {
                int n = count_at(allcounts, s->nchunks, s->experts, p, c, s->rank * el + le);
                for (int i = 0; i < n; i++) {
                    int em = em_cursor[le]++;
                    em_from_recv[em] = recv_row;
                    recv_from_em[recv_row] = em;
                    recv_row++;
                }
            }
        }
        free(em_cursor);
    }
}

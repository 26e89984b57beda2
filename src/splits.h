/* splits: the host-side arithmetic of the NCCL baselines, once the per-expert counts of every rank reached
 * the host. Pure functions of the counts, unit tested.
 *
 * The layer runs in stages: tokens are split into nchunks chunks of chunk_tokens, and each rank's local experts
 * into ngroups groups (group g holds local experts [g*El/G, (g+1)*El/G)); stage s = c * ngroups + g moves and
 * computes the rows of token chunk c for expert group g. Chunking tokens re-reads every expert's weights once
 * per chunk; grouping experts does not, which is why both exist and the sweep picks.
 * Layouts (rows of hidden bf16), per rank:
 *   send buffer   chunk-major; inside chunk c, rows sorted by global expert, so the rows for (peer p, group g)
 *                 are one contiguous run (rank p owns experts [p*El, (p+1)*El)). Chunk c starts at c*chunk_tokens*k.
 *   recv buffer   stage-major; inside stage s, [source peer][local expert of g][rows].
 *   expert-major  stage-major with the same row ranges; inside stage s, [local expert of g][source peer][rows]:
 *                 what the expert GEMMs read. Combine sends rows back in the recv layout, and they land in the
 *                 sender's send layout, where send_pos finds each route's row. */
#ifndef MOK_SPLITS_H
#define MOK_SPLITS_H

#include <stdint.h>

struct mok_splits {
    int nranks, nchunks, ngroups, nstages, experts, local_experts, rank;
    int chunk_tokens, topk, tokens;
    /* [nstages][nranks] */
    int *send_count, *send_offset;
    int *recv_count, *recv_offset;
    /* [nchunks][local_experts]: rows of each local expert in a chunk, and their first expert-major row */
    int *expert_rows, *expert_offset;
    int *stage_base; /* [nstages + 1]: first recv (and expert-major) row of each stage; last = recv_total */
    int recv_total;
    long long remote_send_rows; /* rows sent to other ranks (dispatch); combine returns as many */
    long long remote_recv_rows;
};

/* Local experts [*begin, *end) of group g. */
void mok_splits_group(int local_experts, int ngroups, int g, int *begin, int *end);

/* allcounts[p][c][e]: rows rank p sends to global expert e in chunk c (what every rank counted on its GPU and
 * all-gathered). Returns 0, or -1 when the arguments or counts are inconsistent (a chunk's counts must add up
 * to its routes). Allocates the arrays; free with mok_splits_free. */
int mok_splits_build(const int32_t *allcounts, int nranks, int nchunks, int ngroups, int experts, int rank,
                     int tokens, int chunk_tokens, int topk, struct mok_splits *out);
void mok_splits_free(struct mok_splits *s);

/* em_from_recv[i] = recv row that expert-major row i comes from; recv_from_em is its inverse. Both have
 * recv_total entries. */
void mok_splits_maps(const struct mok_splits *s, const int32_t *allcounts, int32_t *em_from_recv,
                     int32_t *recv_from_em);

/* The backward's gathered wgrad layout under token chunks (src/impl/nccl_backward.c): each local expert's rows of
 * every chunk, contiguous, expert after expert (so each expert group's rows are contiguous too), chunk after chunk.
 * plan[i] = the expert-major row that gathered row i comes from; expert_first[e] = the first gathered row of local
 * expert e, expert_first[local_experts] = recv_total (an expert group's grouped-GEMM offsets are its experts'
 * expert_first less its first expert's). Returns recv_total, or -1 when it exceeds cap (nothing written then). */
int mok_splits_gathered(const struct mok_splits *s, int cap, int32_t *plan, int32_t *expert_first);

#endif

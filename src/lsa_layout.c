/* lsa_layout: see lsa_layout.h. */
#include "lsa_layout.h"

#include <stdint.h>

#define ALIGN(x) (((x) + 255) & ~(size_t)255)
#define ROUTES_PER_SCHED_BLOCK 256 /* short stable-placement loops: a warp ranks 8 x 32 routes */

size_t mok_lsa_layout(struct mok_lsa_args *a, int input_slots)
{
    size_t row = (size_t)a->hidden * 2, tmax = (size_t)a->t_max, P = (size_t)a->nranks, k = (size_t)a->topk;
    a->sched_blocks = (int)((tmax * k + ROUTES_PER_SCHED_BLOCK - 1) / ROUTES_PER_SCHED_BLOCK);
    if (a->sched_blocks < 1)
        a->sched_blocks = 1;
    if (a->reduce_chunk < MOK_LSA_REDUCE_CHUNK_MIN) /* not set (paths without reduce=overlap) */
        a->reduce_chunk = MOK_LSA_REDUCE_CHUNK;
    size_t reduce_chunks = (tmax + MOK_LSA_REDUCE_CHUNK_MIN - 1) / MOK_LSA_REDUCE_CHUNK_MIN; /* for any chunk size */
    a->off_flags = 0;
    a->off_cflags = ALIGN(sizeof(uint64_t) * 3 * MOK_LSA_MAX_RANKS);
    a->off_table = a->off_cflags + ALIGN(sizeof(uint64_t) * P * (reduce_chunks ? reduce_chunks : 1));
    a->off_x = a->off_table + ALIGN(sizeof(int32_t) + tmax * k * 8);
    a->x_set_bytes = ALIGN(tmax * row);
    a->off_comb = a->off_x + (size_t)input_slots * a->x_set_bytes;
    size_t comb_rows = a->combine_per_rank ? tmax * P : tmax * k;
    a->off_dr = a->off_comb + ALIGN(comb_rows * row);
    a->off_land = a->off_dr + ALIGN(tmax * k * sizeof(float));
    return a->off_land + (a->landing ? ALIGN(P * tmax * row) : 0);
}

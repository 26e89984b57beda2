/* libmok_bwd_ref: test_libmok_bwd's problem and its host reference (libmok_bwd_ref.c): the layer's shape, the
 * tuning variants, every rank's inputs made from seeds, and the references of y, dx, d_router and the weight
 * gradients. */
#ifndef MOK_TESTS_LIBMOK_BWD_REF_H
#define MOK_TESTS_LIBMOK_BWD_REF_H

#include <stdint.h>

#define H 256
#define I 256 /* the backward's GEMM2-dgrad tiles are 256 columns of the intermediate */
#define E 8
#define K 2
#define T_MAX 300

/* A train variant: tuning fields, the input slot it routes (of input_slots), the token counts (rank 0; the other
 * ranks `t1` less 7 per rank) and whether 3 in 4 tokens' first expert is expert 0 (several row blocks there). */
struct variant {
    int comm_sms, raster, chunk_rows, input_slots, slot, t0, t1, hot, wgrad_reduce;
};

/* One rank's problem for one variant: its inputs and the references. */
struct problem {
    int T;
    uint16_t *x, *dy;
    int32_t *ids;
    float *w;
    float *y, *dx, *dr;  /* references: y (fp32), dx (fp32 sum of the routes' bf16 rows), d_router */
    double *dw13, *dw2;  /* references: the sums over every rank's routes to this rank's experts */
    int rows[E];         /* routes to each local expert */
};

/* Who makes the problem: this rank, the ranks, the experts per rank, every expert's weights (host). */
struct bwd_ref_ctx {
    int rank, nranks, EL;
    const uint16_t *w13, *w2;
};

/* Every expert's weights, seeded: w13 [E][2I][H], w2 [E][H][I]. */
void make_weights(uint16_t *w13, uint16_t *w2);
/* Rank `rank`'s token count in variant v. */
int tokens_of(const struct variant *v, int rank);
/* The variant's inputs on this rank and its references (libmok_bwd_ref.c); 1 when out of host memory. */
int make_problem(const struct bwd_ref_ctx *c, const struct variant *v, int vi, struct problem *P);
void free_problem(struct problem *P);

#endif

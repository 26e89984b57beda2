/* routing: the seeded top-k router of one rank's tokens, generated on the host.
 *
 * Each token draws router logits log(p_e) + Gumbel noise over all experts and keeps the top-k (Gumbel top-k
 * samples k distinct experts without replacement in proportion to p); its weights are the softmax of the k
 * kept logits. p is flat (uniform), zipf over a seeded permutation of the experts (so the popular experts do
 * not all sit on rank 0), or uniform with a fraction of tokens forced to one hot expert. Every token's draw
 * is a pure function of (seed, rank, token), so the same seed gives the same problem on any machine. */
#ifndef MOK_ROUTING_H
#define MOK_ROUTING_H

#include <stdint.h>

#include "config.h"

/* ids [tokens][topk] (distinct per token, in descending logit order), weights [tokens][topk] (sum to 1).
 * Returns 0, or -1 if the arguments are out of range (topk > experts, ...). */
int mok_routing_generate(const struct mok_routing *routing, int experts, int topk, int rank, int tokens,
                         int32_t *ids, float *weights);

/* Expert popularity p_e of the distribution (sums to 1), for tests and reports. probs has `experts` entries. */
void mok_routing_popularity(const struct mok_routing *routing, int experts, double *probs);

#endif

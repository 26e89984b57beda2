/* lsa_layout: the host-side sizing of the LSA path's state (struct mok_lsa_args), shared by mok-bench's lsa
 * implementations (src/impl/lsa.c) and libmok, so both lay out the symmetric window the kernels read the same way. */
#ifndef MOK_LSA_LAYOUT_H
#define MOK_LSA_LAYOUT_H

#include <stddef.h>

#include "mok_kernels.h"

/* From a's shape and mode fields (nranks, topk, t_max, hidden, combine_per_rank, landing): sched_blocks, and the
 * window layout flags | chunk flags | routing table | token rows of input_slots slots | rows pushed back | landing
 * rows (layout=landing) in off_flags .. off_land and x_set_bytes. Returns the window's size in bytes. */
size_t mok_lsa_layout(struct mok_lsa_args *a, int input_slots);

#endif

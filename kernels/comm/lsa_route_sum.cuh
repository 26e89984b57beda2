/* comm/lsa_route_sum: the owner's per-route sums' launcher (kernels/comm/lsa_route_sum.cu), for mok_lsa_reduce in
 * kernels/comm/lsa_transfer.cu. */
#pragma once
#include "mok_kernels.h"

/* Waits for every rank's done flag, then the owner's fixed-order sum over k of its routes' combine rows into a.y
 * (plus a.shared_y): weighted by the router weights (the forward), or unweighted with a.d_router copied from the
 * window's off_dr (grad: the fused backward's dx and d_router). */
int mok_lsa_route_sum(const struct mok_lsa_args *a, bool grad, mok_stream_t stream);

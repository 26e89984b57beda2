/* comm/lsa_combine_overlap: reduce=overlap's launcher (kernels/comm/lsa_combine_overlap.cu), for mok_lsa_combine
 * in kernels/comm/lsa_transfer.cu. */
#pragma once
#include <cuda_runtime.h>

#include "mok_kernels.h"

/* The per-rank combine on `blocks` blocks beside a reduce block on every other SM that sums each token once its
 * chunks are in (one cooperative launch). cudaErrorCooperativeLaunchTooLarge when no reduce block fits. */
int mok_lsa_combine_overlap(const mok_lsa_args *a, int blocks, cudaStream_t s);

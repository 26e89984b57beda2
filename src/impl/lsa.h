/* lsa: accessors of the LSA implementation's state for the GPU tests (the bench uses it only through impl.h). */
#ifndef MOK_IMPL_LSA_H
#define MOK_IMPL_LSA_H

#include "mok_kernels.h"

/* The kernel arguments of a set-up lsa state: device buffers (xin, entry, ready, status, ...), layout, sizes. */
const struct mok_lsa_args *mok_lsa_state_args(const void *state);
/* This rank's base of the state's symmetric window (device memory), for checks of what landed there. */
void *mok_lsa_state_window_base(const struct mok_lsa_args *a);
/* Overrides the spin-wait budget (clock64 cycles) of the state's kernels; 0 restores the default. */
void mok_lsa_state_set_timeout(void *state, long long cycles);

#endif

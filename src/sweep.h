/* sweep: candidate enumeration, the cartesian product of an implementation's tune lists. */
#ifndef MOK_SWEEP_H
#define MOK_SWEEP_H

#include "config.h"
#include "desc.h"

int mok_sweep_count(const struct mok_impl_desc *desc, const struct mok_tune *tune);
/* params[j] of candidate `index`; the last parameter varies fastest. */
void mok_sweep_at(const struct mok_impl_desc *desc, const struct mok_tune *tune, int index, int *params);
/* Total candidates over all problems and implementations of a config. */
long long mok_sweep_total(const struct mok_config *cfg);

#endif

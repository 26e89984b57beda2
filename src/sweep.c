/* sweep: candidates of each implementation (cartesian product of its tune lists). */
#include "sweep.h"

int mok_sweep_count(const struct mok_impl_desc *desc, const struct mok_tune *tune)
{
    int n = 1;
    for (int j = 0; j < desc->nparams; j++)
        n *= tune->nvalues[j] > 0 ? tune->nvalues[j] : 1;
    return n;
}

void mok_sweep_at(const struct mok_impl_desc *desc, const struct mok_tune *tune, int index, int *params)
{
    for (int j = desc->nparams - 1; j >= 0; j--) {
        int nv = tune->nvalues[j] > 0 ? tune->nvalues[j] : 1;
        params[j] = tune->nvalues[j] > 0 ? tune->values[j][index % nv] : desc->params[j].default_value;
        index /= nv;
    }
}

long long mok_sweep_total(const struct mok_config *cfg)
{
    long long per_problem = 0;
    for (int i = 0; i < cfg->nimpls; i++) {
        const struct mok_impl_desc *d = mok_impl_desc_find(cfg->impls[i]);
        if (d)
            per_problem += mok_sweep_count(d, &cfg->tune[i]);
    }
    return per_problem * mok_config_problem_count(cfg);
}

/* desc: what each implementation is called and which tuning parameters it takes. Pure data with no CUDA, so
 * the config parser, --dry-run and the unit tests can validate "impls" and "tune" on a machine without a GPU.
 * The code of each implementation lives in its own file and is looked up by the same name (impl.h). */
#ifndef MOK_IMPL_DESC_H
#define MOK_IMPL_DESC_H

struct mok_param_def {
    const char *name;
    const char *help;
    /* Enumerated parameters list their choices (config values are these strings, stored as the index);
     * numeric ones have choices == NULL and accept integers in [min, max]. */
    const char *const *choices;
    int nchoices;
    int min, max;
    int default_value;
};

struct mok_impl_desc {
    const char *name;
    const char *mode; /* the config mode it belongs to: "layer" or "comm" */
    const char *summary;
    int nparams;
    const struct mok_param_def *params;
};

int mok_impl_desc_count(void);
const struct mok_impl_desc *mok_impl_desc_at(int i);
const struct mok_impl_desc *mok_impl_desc_find(const char *name);
/* Index of param `name` in desc, or -1. */
int mok_impl_param_index(const struct mok_impl_desc *desc, const char *name);
/* Writes "name=value,name=value" (choice names for enumerated params) into buf. */
const char *mok_impl_params_label(const struct mok_impl_desc *desc, const int *values, char *buf, int len);

#endif

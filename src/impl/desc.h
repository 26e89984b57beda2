/* desc: what each implementation is called and which tuning parameters it takes. Pure data with no CUDA, so
 * the config parser, --dry-run and the unit tests can validate "impls" and "tune" on a machine without a GPU.
 * The code of each implementation lives in its own file and is looked up by the same name (impl.h). */
#ifndef MOK_IMPL_DESC_H
#define MOK_IMPL_DESC_H

#include <stdbool.h>
#include <stdio.h>

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

struct mok_problem_spec;

/* Checks that need no GPU (parameter combinations, dtype and pass, the problem's shape against the parameters):
 * 1 = may run, 0 = not (why says so). The driver asks it before the implementation's own supports(), which adds
 * only what needs the GPU, and the dry-run shows what it rejects. */
typedef int (*mok_host_supports_fn)(const struct mok_problem_spec *spec, int nranks, const int *params, char *why,
                                    int why_len);

struct mok_impl_desc {
    const char *name;
    const char *mode; /* the config mode it belongs to: "layer", "comm" or "gemm" */
    const char *summary;
    int nparams;
    const struct mok_param_def *params;
    mok_host_supports_fn host_supports;
    bool bwd_one_forward; /* pass bwd replays one saved forward (libmok's): problems of one input set only */
};

/* A parameter's former name, refused with its new one (names mean one thing across implementations). */
struct mok_param_rename {
    const char *impl, *old_name, *new_name;
};

/* A parameter taken out, refused with the reason (an old config gets that rather than "unknown parameter"). */
struct mok_param_removal {
    const char *impl, *name, *why;
};

int mok_impl_desc_count(void);
const struct mok_impl_desc *mok_impl_desc_at(int i);
const struct mok_impl_desc *mok_impl_desc_find(const char *name);
/* Index of param `name` in desc, or -1. */
int mok_impl_param_index(const struct mok_impl_desc *desc, const char *name);
/* The new name of a renamed parameter of impl, or NULL. */
const char *mok_impl_param_renamed(const char *impl, const char *old_name);
/* The values a numeric parameter takes where its range holds others that no kernel runs (tile sizes): their count,
 * *values pointing at them in ascending order; 0 for a parameter whose whole [min, max] is allowed. Keyed by name:
 * a name means one thing in every implementation. */
int mok_param_value_set(const char *name, const int **values);
/* Why a removed parameter of impl was taken out, or NULL. */
const char *mok_impl_param_removed(const char *impl, const char *name);
/* host_supports of the implementation (1 when it has none), and for one that keeps one saved forward, pass bwd
 * on one input set (sets: the count the run rotates, as mok_plan_input_sets gives it). */
int mok_impl_host_supports(const struct mok_impl_desc *desc, const struct mok_problem_spec *spec, int nranks,
                           int sets, const int *params, char *why, int why_len);
/* The parameter table of every implementation as Markdown (the README's, and `mok-bench --list-params`). */
void mok_impl_params_markdown(FILE *out);
/* Room for the longest label any implementation can write (tests/test_params.c checks every table against it);
 * the report's, the tuning database's and the dry-run plan's params fields are this size. */
#define MOK_PARAMS_LABEL_LEN 512
/* Writes "name=value,name=value" (choice names for enumerated params) into buf; the length it needed (as snprintf:
 * a label of len or more was cut). */
int mok_impl_params_label_len(const struct mok_impl_desc *desc, const int *values, char *buf, int len);
/* Writes "name=value,name=value" (choice names for enumerated params) into buf. */
const char *mok_impl_params_label(const struct mok_impl_desc *desc, const int *values, char *buf, int len);

#endif

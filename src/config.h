/* config: the JSON benchmark config, parsed by cJSON into a validated struct mok_config.
 *
 * Every error names its JSON path ("model[1].hidden"), the offending value and what is allowed. All errors
 * are collected, not just the first, so a user fixes a config in one pass. Nothing here touches a GPU or MPI:
 * the same code runs in unit tests, under sanitizers and in the fuzz smoke test. */
#ifndef MOK_CONFIG_H
#define MOK_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"

#define MOK_MAX_MODELS 16
#define MOK_MAX_TOKENS 32
#define MOK_MAX_ROUTINGS 8
#define MOK_MAX_INPUTS 8
#define MOK_MAX_INPUT_SCALE 64.0
#define MOK_MAX_SETS 16 /* input copies a problem rotates through (timing.input_sets) */
#define MOK_MAX_IMPLS 16
#define MOK_MAX_PARAMS 24
#define MOK_MAX_VALUES 16
/* candidates of one implementation's tune block (the product of its lists' lengths) */
#define MOK_MAX_CANDIDATES 100000
#define MOK_NAME_LEN 64
#define MOK_PATH_LEN 512
#define MOK_CONFIG_MAX_DEPTH 16 /* JSON nesting of objects and arrays; a config needs 4 */

/* hidden and intermediate must be multiples of this: 16-byte vector rows, TMA boxes and GEMM K tiles of 64
 * bf16 elements all rely on it. */
#define MOK_ALIGN_ELEMS 64
#define MOK_MAX_HIDDEN 65536
#define MOK_MAX_INTERMEDIATE 65536
#define MOK_MAX_EXPERTS 1024
#define MOK_MAX_TOPK 32
#define MOK_MAX_SHARED_EXPERTS 8
#define MOK_MAX_TOKENS_PER_RANK (1 << 20)

/* Operand precision of the expert GEMMs (src/fp8.h defines the two FP8 formats). The values index
 * mok_cfg_dtype_names; the first MOK_DTYPES_IMPLEMENTED are accepted by the config (all three; which
 * implementations run each is host_supports.c's: the FP8 ones in gemm mode only so far). */
enum mok_dtype { MOK_DTYPE_BF16 = 0, MOK_DTYPE_FP8_BLOCK = 1, MOK_DTYPE_MXFP8 = 2 };
#define MOK_NDTYPES 3
#define MOK_DTYPES_IMPLEMENTED 3
/* fwd: the forward; bwd: the backward alone, from the forward's saved context; fwd_bwd: one training step of the
 * layer, the forward and then the backward from what it saved. */
enum mok_pass { MOK_PASS_FWD = 0, MOK_PASS_BWD = 1, MOK_PASS_FWD_BWD = 2 };
#define MOK_NPASSES 3
/* How the backward writes the weight gradients: fp32_accumulate, dW += into fp32 buffers that start non-zero (as
 * Megatron's gradient-accumulation fusion does); bf16, dW written in bf16. */
enum mok_wgrad { MOK_WGRAD_FP32_ACCUMULATE = 0, MOK_WGRAD_BF16 = 1 };
#define MOK_NWGRADS 2
enum mok_routing_dist { MOK_ROUTING_UNIFORM = 0, MOK_ROUTING_ZIPF = 1, MOK_ROUTING_HOT = 2 };
/* The values of the activations and weights every implementation gets (the same tensors for all of them). */
enum mok_input_dist { MOK_INPUTS_UNIFORM = 0, MOK_INPUTS_NORMAL = 1 };
/* layer: the whole MoE layer forward; comm: dispatch + combine only (no expert compute: experts return their
 * input), to measure the communication path on its own; gemm: the expert GEMMs only (GEMM1 + SwiGLU, GEMM2) on
 * the expert-major rows of each rank's own routes over all experts, no communication. */
enum mok_mode { MOK_MODE_LAYER = 0, MOK_MODE_COMM = 1, MOK_MODE_GEMM = 2 };

struct mok_model {
    char name[MOK_NAME_LEN]; /* free text, for reports; defaults to "HxIxEkK" */
    int hidden;
    int intermediate;
    int experts; /* routed experts, spread evenly over ranks */
    int topk;
    int shared_experts; /* each with the routed experts' intermediate size, run on every rank's own tokens */
};

struct mok_routing {
    enum mok_routing_dist dist;
    double zipf_s;       /* zipf: P(expert rank r) ~ 1 / r^s, s in (0, 4] */
    double hot_fraction; /* hot: this fraction of tokens always pick hot_expert, [0, 1] */
    int hot_expert;
    uint64_t seed;
};

/* How the activations x and the expert weights are drawn. uniform: x in [-scale, scale), every element's 24
 * random bits spread over the range (the bench's default from the start); normal: x from N(0, (scale / sqrt 3)^2),
 * the same standard deviation as the uniform of the same scale, so switching the distribution changes only the
 * shape. Weights follow the same distribution at the bench's fixed spread (uniform +-3 / sqrt(K) or the normal
 * of its standard deviation), not scaled. mantissa_bits rounds every value of both to that many of bf16's 7
 * mantissa bits (3: the precision of fp8 e4m3 values). At the power cap the GEMMs' time depends on the values
 * (tensor-core power), so a capacity planner can match their activations' statistics. */
struct mok_inputs {
    enum mok_input_dist dist;
    double scale;      /* (0, MOK_MAX_INPUT_SCALE], default 1 */
    int mantissa_bits; /* 0..7, default 7 (bf16 as is) */
};

/* Tuning values of one implementation, in the order of its mok_impl_desc params. A param absent from the
 * config's "tune" object holds just its default value. */
struct mok_tune {
    int nvalues[MOK_MAX_PARAMS];
    int values[MOK_MAX_PARAMS][MOK_MAX_VALUES];
};

struct mok_config {
    char source[MOK_PATH_LEN]; /* file name, for messages and reports */
    enum mok_mode mode;
    double capacity_factor; /* receive buffers hold factor x (tokens x topk) rows per rank, plus tile padding */

    int nmodels;
    struct mok_model models[MOK_MAX_MODELS];
    int ntokens;
    int tokens_per_rank[MOK_MAX_TOKENS];
    int nroutings;
    struct mok_routing routings[MOK_MAX_ROUTINGS];
    int ninputs;
    struct mok_inputs inputs[MOK_MAX_INPUTS];
    int ndtypes;
    enum mok_dtype dtypes[MOK_NDTYPES];
    int npasses;
    enum mok_pass passes[MOK_NPASSES];
    int nwgrads; /* the wgrad axis: expanded for the passes with a backward only */
    enum mok_wgrad wgrads[MOK_NWGRADS];

    int nimpls;
    char impls[MOK_MAX_IMPLS][MOK_NAME_LEN]; /* validated against the implementation registry */
    struct mok_tune tune[MOK_MAX_IMPLS];      /* tune[i] belongs to impls[i] */

    int warmup;
    int warmup_ms; /* the warm-up also lasts at least this long (0: warmup iterations only) */
    int iters;
    int timed_ms;   /* the timed iterations also last at least this long: more than iters where needed (0: iters) */
    int input_sets; /* 0: as many as exceed L2 twice (the default); n: n sets, whatever their size */
    bool check_enabled;
    double rtol;

    char output_dir[MOK_PATH_LEN];
    char output_name[MOK_NAME_LEN];

    /* how candidates are chosen per problem and implementation (search.h) */
    int search_strategy;      /* enum mok_search_strategy: exhaustive (default), coordinate, halving */
    int search_max_measurements; /* 0: no cap */
    double search_budget_s;   /* 0: no wall-clock budget per problem and implementation */
    uint64_t search_seed;
    int moe_layers;           /* planning: MoE layers per training step in the summary (default 1) */
};

/* One point of the cartesian product model x tokens x routing x inputs x dtype x pass (x wgrad for the passes with
 * a backward). */
struct mok_problem_spec {
    int index;
    enum mok_mode mode;
    double capacity_factor;
    struct mok_model model;
    int tokens_per_rank;
    struct mok_routing routing;
    struct mok_inputs inputs;
    enum mok_dtype dtype;
    enum mok_pass pass;
    enum mok_wgrad wgrad; /* fp32_accumulate for the forward (unused there) */
    int input_sets;       /* timing.input_sets: 0 sizes them to exceed L2 */
};

/* Parses and validates text. Returns the number of errors (0: cfg is complete and valid). The defaults of
 * every optional key are filled in. source_name only labels messages. */
int mok_config_parse(const char *text, const char *source_name, struct mok_config *cfg, struct mok_errors *errs);

/* Reads the file (a missing or unreadable file is an error naming the path) and parses it. */
int mok_config_load(const char *path, struct mok_config *cfg, struct mok_errors *errs);

/* Checks what depends on the number of ranks (experts divisible by ranks). Returns the number of errors. */
int mok_config_check_ranks(const struct mok_config *cfg, int nranks, struct mok_errors *errs);

/* Canonical JSON of the validated config (every default spelled out), malloc'ed; the caller frees it. Ranks
 * compare its hash to prove they hold the same config, and reports echo it. */
char *mok_config_to_json(const struct mok_config *cfg);

int mok_config_problem_count(const struct mok_config *cfg);
void mok_config_problem_at(const struct mok_config *cfg, int index, struct mok_problem_spec *out);

const char *mok_dtype_name(enum mok_dtype d);
const char *mok_mode_name(enum mok_mode m);
const char *mok_pass_name(enum mok_pass p);
const char *mok_wgrad_name(enum mok_wgrad w);
/* whether a pass runs the forward, the backward */
static inline int mok_pass_has_fwd(enum mok_pass p) { return p != MOK_PASS_BWD; }
static inline int mok_pass_has_bwd(enum mok_pass p) { return p != MOK_PASS_FWD; }
const char *mok_routing_dist_name(enum mok_routing_dist d);
const char *mok_input_dist_name(enum mok_input_dist d);
/* "uniform", "normal", "uniform(scale=0.5)", "normal(bits=3)": scale and bits only when not the default. */
const char *mok_inputs_label(const struct mok_inputs *in, char *buf, size_t len);
/* "uniform", "zipf(s=1.2)", "hot(f=0.3,e=0)", written into buf. */
const char *mok_routing_label(const struct mok_routing *r, char *buf, size_t len);

/* FNV-1a 64-bit, for comparing configs across ranks. */
uint64_t mok_hash64(const void *data, size_t len);

#endif

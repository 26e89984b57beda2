/* desc: the table of implementations and their tuning parameters (see desc.h); the parameters themselves are
 * named once, in params.h, and their definitions here are generated from it. */
#include "desc.h"

#include <stdio.h>
#include <string.h>

#include "config.h"
#include "host_supports.h"
#include "params.h"

#define MOK_PARAM_DEF(name, kind, lo, hi, def, help) {#name, help, kind, lo, hi, def},
static const struct mok_param_def nccl_params[] = {MOK_PARAMS_NCCL(MOK_PARAM_DEF)};
static const struct mok_param_def nccl_overlap_params[] = {MOK_PARAMS_NCCL_OVERLAP(MOK_PARAM_DEF)};
static const struct mok_param_def cublas_gemm_params[] = {MOK_PARAMS_CUBLAS(MOK_PARAM_DEF)};
static const struct mok_param_def lsa_params[] = {MOK_PARAMS_LSA(MOK_PARAM_DEF)};
static const struct mok_param_def mok_gemm_params[] = {MOK_PARAMS_MOK_GEMM(MOK_PARAM_DEF)};
static const struct mok_param_def lsa_layer_params[] = {MOK_PARAMS_LSA_LAYER(MOK_PARAM_DEF)};
static const struct mok_param_def megakernel_params[] = {MOK_PARAMS_MEGAKERNEL(MOK_PARAM_DEF)};
#undef MOK_PARAM_DEF

/* Every limit the tables must keep, checked where they are compiled rather than clamped where they are used. */
#define MOK_PARAMS_FIT(impl) _Static_assert(MOK_NPARAMS_##impl <= MOK_MAX_PARAMS, #impl ": raise MOK_MAX_PARAMS");
MOK_PARAMS_FIT(nccl)
MOK_PARAMS_FIT(nccl_overlap)
MOK_PARAMS_FIT(cublas_gemm)
MOK_PARAMS_FIT(lsa)
MOK_PARAMS_FIT(mok_gemm)
MOK_PARAMS_FIT(lsa_layer)
MOK_PARAMS_FIT(megakernel)
#undef MOK_PARAMS_FIT

/* one_fwd: pass bwd replays one saved forward (mok_impl_desc.bwd_one_forward) */
#define IMPL(name, mode, impl, one_fwd, summary)                                                                  \
    {name, mode, summary, MOK_NPARAMS_##impl, impl##_params, impl##_host_supports, one_fwd}
static const struct mok_impl_desc impl_descs[] = {
    IMPL("nccl", "layer", nccl, false,
         "host-orchestrated: counts to host, grouped ncclSend/Recv, cuBLAS expert GEMMs, NCCL combine"),
    IMPL("nccl-overlap", "layer", nccl_overlap, false,
         "nccl in stages (token chunks x expert groups): the all-to-all of one stage overlaps the GEMMs of another"),
    IMPL("lsa", "comm", lsa, false,
         "mok's dispatch + combine: device-built schedule, NVLink loads/stores through LSA pointers, no host sync"),
    {"nccl-p2p", "comm", "the nccl baseline's dispatch + combine alone: counts to host, grouped ncclSend/Recv each way",
     0, NULL, nccl_p2p_host_supports, false},
    IMPL("cublas-gemm", "gemm", cublas_gemm, false,
         "the expert GEMMs on cuBLAS (grouped or per expert over streams), GEMM1 and GEMM2 timed apart"),
    IMPL("mok-gemm", "gemm", mok_gemm, false,
         "mok's expert GEMMs: GEMM1 with SwiGLU fused, GEMM2, group sizes read on the device"),
    IMPL("lsa-layer", "layer", lsa_layer, true,
         "the whole layer with no host sync: lsa dispatch, mok's expert GEMMs, lsa combine (unfused kernels)"),
    IMPL("megakernel", "layer", megakernel, true,
         "the fused forward: dispatch, GEMM1 + SwiGLU, GEMM2 and combine in one persistent kernel (comm and compute "
         "blocks, ready counters), then the owner's sum"),
};
#undef IMPL
_Static_assert(sizeof(impl_descs) / sizeof(impl_descs[0]) <= MOK_MAX_IMPLS, "raise MOK_MAX_IMPLS");

/* Former names: `sms` was comm SMs in lsa, lsa-layer and megakernel but persistent CTAs in mok-gemm; `lockstep`
 * a k-block count in mok-gemm but a flag in megakernel. */
static const struct mok_param_rename renames[] = {
    {"lsa", "sms", "comm_sms"},           {"lsa-layer", "sms", "comm_sms"}, {"megakernel", "sms", "comm_sms"},
    {"mok-gemm", "sms", "ctas"},          {"mok-gemm", "lockstep", "lockstep_k"},
    {"megakernel", "lockstep", "wave_lockstep"},
};

/* Parameters taken out, with why: variants that measured slower (NOTES.md, "Tried and not merged"). */
static const struct mok_param_removal removals[] = {
    {"mok-gemm", "wgrad_prefetch", "wgrad's L2 prefetch measured slower than the plain kernel (see NOTES.md)"},
    {"mok-gemm", "wgrad_pingpong",
     "wgrad's ping-pong measured slower than the plain kernel and deadlocked at 2 stages (see NOTES.md)"},
};

int mok_impl_desc_count(void) { return (int)(sizeof(impl_descs) / sizeof(impl_descs[0])); }

const struct mok_impl_desc *mok_impl_desc_at(int i)
{
    return (i >= 0 && i < mok_impl_desc_count()) ? &impl_descs[i] : NULL;
}

const struct mok_impl_desc *mok_impl_desc_find(const char *name)
{
    for (int i = 0; i < mok_impl_desc_count(); i++)
        if (strcmp(impl_descs[i].name, name) == 0)
            return &impl_descs[i];
    return NULL;
}

int mok_impl_param_index(const struct mok_impl_desc *desc, const char *name)
{
    for (int i = 0; i < desc->nparams; i++)
        if (strcmp(desc->params[i].name, name) == 0)
            return i;
    return -1;
}

const char *mok_impl_param_renamed(const char *impl, const char *old_name)
{
    for (size_t i = 0; i < sizeof(renames) / sizeof(renames[0]); i++)
        if (!strcmp(renames[i].impl, impl) && !strcmp(renames[i].old_name, old_name))
            return renames[i].new_name;
    return NULL;
}

const char *mok_impl_param_removed(const char *impl, const char *name)
{
    for (size_t i = 0; i < sizeof(removals) / sizeof(removals[0]); i++)
        if (!strcmp(removals[i].impl, impl) && !strcmp(removals[i].name, name))
            return removals[i].why;
    return NULL;
}

int mok_param_value_set(const char *name, const int **values)
{
    static const int tile_n[] = {128, 256}, tile_m[] = {64, 128, 256}, fp8_n[] = {64, 128};
    static const struct {
        const char *name;
        const int *values;
        int n;
    } sets[] = {{"tile_n", tile_n, 2}, {"tile_m", tile_m, 3}, {"fp8_n", fp8_n, 2}, {"fp8_tile_n", tile_n, 2}};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        if (!strcmp(sets[i].name, name)) {
            *values = sets[i].values;
            return sets[i].n;
        }
    *values = NULL;
    return 0;
}

int mok_impl_host_supports(const struct mok_impl_desc *desc, const struct mok_problem_spec *spec, int nranks,
                           int sets, const int *params, char *why, int why_len)
{
    if (why_len > 0)
        why[0] = '\0';
    if (desc->host_supports && !desc->host_supports(spec, nranks, params, why, why_len))
        return 0;
    if (desc->bwd_one_forward && spec->pass == MOK_PASS_BWD && sets != 1) {
        snprintf(why, (size_t)why_len, "pass bwd runs on one saved forward: problems of one input set (inputs "
                 "larger than L2, or timing.input_sets 1; this one rotates %d); pass fwd_bwd runs any", sets);
        return 0;
    }
    return 1;
}

void mok_impl_params_markdown(FILE *out)
{
    fprintf(out, "| implementation | parameter | values | default | meaning |\n|---|---|---|---|---|\n");
    for (int i = 0; i < mok_impl_desc_count(); i++) {
        const struct mok_impl_desc *d = &impl_descs[i];
        if (d->nparams == 0)
            fprintf(out, "| `%s` | - | - | - | no tuning parameters |\n", d->name);
        for (int k = 0; k < d->nparams; k++) {
            const struct mok_param_def *p = &d->params[k];
            fprintf(out, "| `%s` | `%s` | ", d->name, p->name);
            if (p->choices) {
                for (int c = 0; c < p->nchoices; c++)
                    fprintf(out, "%s`%s`", c ? ", " : "", p->choices[c]);
                fprintf(out, " | `%s` | ", p->choices[p->default_value]);
            } else {
                const int *set = NULL;
                const int nset = mok_param_value_set(p->name, &set);
                for (int v = 0; v < nset; v++)
                    fprintf(out, "%s%d", v ? ", " : "", set[v]);
                if (!nset)
                    fprintf(out, "%d..%d", p->min, p->max);
                fprintf(out, " | %d | ", p->default_value);
            }
            for (const char *c = p->help; *c; c++) /* a '|' would end the cell */
                fputs(*c == '|' ? "\\|" : (char[2]){*c, 0}, out);
            fprintf(out, " |\n");
        }
    }
}

int mok_impl_params_label_len(const struct mok_impl_desc *desc, const int *values, char *buf, int len)
{
    int used = 0;
    buf[0] = '\0';
    for (int i = 0; i < desc->nparams; i++) {
        const struct mok_param_def *p = &desc->params[i];
        const char *sep = i ? "," : "";
        size_t room = used < len ? (size_t)(len - used) : 0;
        char *at = used < len ? buf + used : NULL;
        if (p->choices && values[i] >= 0 && values[i] < p->nchoices)
            used += snprintf(at, room, "%s%s=%s", sep, p->name, p->choices[values[i]]);
        else
            used += snprintf(at, room, "%s%s=%d", sep, p->name, values[i]);
    }
    return used;
}

const char *mok_impl_params_label(const struct mok_impl_desc *desc, const int *values, char *buf, int len)
{
    mok_impl_params_label_len(desc, values, buf, len);
    return buf;
}

/* desc: the table of implementations and their tuning parameters (see desc.h). */
#include "desc.h"
#include "megakernel.h"  /* MOK_OWN_FIRST_MAX */
#include "mok_kernels.h" /* MOK_LSA_REDUCE_CHUNK (the lsa reduce_chunk default) */

#include <stdio.h>
#include <string.h>

static const char *const gemm_choices[] = {"grouped", "per_expert"};

/* cuBLAS offers a grouped GEMM and plain per-expert calls, which can run side by side on several streams;
 * which is fastest depends on the shape, so all are candidates and the sweep keeps the fastest. */
#define GEMM_PARAMS                                                                                           \
    {"gemm", "cuBLAS expert GEMMs: one grouped call per GEMM, or one call per expert", gemm_choices, 2, 0, 1, 1}, \
    {"gemm_streams", "per_expert: streams the experts' GEMMs are spread over (grouped: must be 1)", NULL, 0, 1, 16, 4}

static const struct mok_param_def nccl_params[] = {GEMM_PARAMS};

static const struct mok_param_def nccl_overlap_params[] = {
    {"chunks", "token chunks, each a separate dispatch/GEMM/combine (re-reads expert weights per chunk)", NULL, 0, 1,
     64, 1},
    {"expert_groups", "local expert groups, each a separate dispatch/GEMM/combine stage", NULL, 0, 1, 1024, 4},
    GEMM_PARAMS,
    {"reserve_sms", "SMs cuBLAS leaves free for NCCL's kernels (cublasSetSmCountTarget); 0: none", NULL, 0, 0, 128, 0},
};

static const char *const combine_choices[] = {"per_route", "per_rank"};
static const char *const copy_choices[] = {"warp", "bulk"};
static const char *const layout_choices[] = {"slots", "landing"};
static const char *const dispatch_choices[] = {"pull", "push"};
static const char *const launch_choices[] = {"stream", "graph"};
static const char *const overlap_choices[] = {"none", "gemm1"};
static const char *const small_choices[] = {"auto", "off", "v1"};
static const char *const reduce_choices[] = {"after", "overlap"};

/* At a few hundred tokens launch latency dominates: small problems fuse launches unless told not to, so a
 * config can measure what the fusion gains in the same run. */
#define SMALL_PARAM                                                                                           \
    {"small", "auto: small problems take fused variants (push dispatch in one launch and one-block "          \
     "schedule <= 8192 routes, combine+sum on a block per token <= 512 tokens); off: always the general "     \
     "kernels; v1: the first variants (table+publish, one-warp placement <= 4096 routes, combine+sum on "     \
     "the sms blocks)",                                                                                       \
     small_choices, 3, 0, 2, 0}

/* Launch latency dominates small token counts (a dozen dependent kernels); training frameworks replay MoE layers
 * as CUDA graphs, so the graph launch is what they would see. */
#define LAUNCH_PARAM                                                                                          \
    {"launch", "stream: kernels launched one by one each run; graph: dispatch, (experts,) combine each replayed " \
     "from a CUDA graph captured once per input set", launch_choices, 2, 0, 1, 0}

/* The LSA transfers' first four knobs, the same in lsa and lsa-layer (the first four indices of both). */
#define LSA_TRANSFER_PARAMS                                                                                    \
    {"sms", "blocks (SMs) of 1024 threads that run dispatch and combine", NULL, 0, 1, 132, 16},              \
    {"combine", "combine sends one row per (token, k) or one partial sum per (token, rank)", combine_choices, \
     2, 0, 1, 1},                                                                                              \
    {"tile_rows", "each expert's rows are padded to a multiple of this (the GEMM's M tile)", NULL, 0, 1, 1024, \
     128},                                                                                                     \
    {"chunk_rows", "schedule rows per ready counter", NULL, 0, 1, 1 << 20, 256}

/* The LSA path's knobs: how many SMs move data, how combine sends (a row per route, or one fp32-summed partial
 * per token and rank, which moves fewer bytes), the GEMM tile the schedule pads each expert to, and the rows
 * per ready counter (the overlap granularity a consumer waits on). */
static const struct mok_param_def lsa_params[] = {
    LSA_TRANSFER_PARAMS,
    {"copy", "rows move by warp 16-byte loads/stores or by the bulk copy engine: layout=slots: the pull dispatch and "
     "the per-route combine; layout=landing: the push and the per-rank combine through per-warp rings of rows in "
     "shared memory (general paths; the small one-launch paths copy with warps)",
     copy_choices, 2, 0, 1, 0},
    {"layout", "slots: a copy of the row per expert slot; landing: one row per token and rank, slots read it there",
     layout_choices, 2, 0, 1, 0},
    {"dispatch", "pull: destinations load rows from the owners; push: owners store rows into the destinations",
     dispatch_choices, 2, 0, 1, 0},
    LAUNCH_PARAM,
    SMALL_PARAM,
    {"reduce", "combine=per_rank, general path (not the small fused ones): after: the owner sums once every rank's "
     "done flag is in (a separate kernel); overlap: one cooperative launch, reduce blocks on the SMs the combine "
     "leaves sum each chunk of reduce_chunk tokens as soon as every peer flagged it (same order, bitwise the same y)",
     reduce_choices, 2, 0, 1, 0},
    {"reduce_chunk", "reduce=overlap: owner tokens per chunk flag; finer chunks leave less of the sum after the last "
     "flag but cost a barrier and a flag each", NULL, 0, MOK_LSA_REDUCE_CHUNK_MIN, 1024, MOK_LSA_REDUCE_CHUNK},
};

static const char *const kernel_choices[] = {"sm90", "portable"};

/* mok-gemm: the Hopper kernel's tile width (output columns per tile before SwiGLU), pipeline depth and
 * persistent CTA count (0: every SM); the portable kernel ignores them. */
static const struct mok_param_def mok_gemm_params[] = {
    {"kernel", "sm90: wgmma + TMA, warp-specialized, persistent; portable: mma.sync", kernel_choices, 2, 0, 1, 0},
    {"tile_n", "output columns per tile before SwiGLU (128 or 256)", NULL, 0, 128, 256, 128},
    {"stages", "shared-memory pipeline stages, 0: as many as fit", NULL, 0, 0, 8, 0},
    {"sms", "persistent CTAs, 0: one per SM", NULL, 0, 0, 1024, 0},
    {"cluster", "CTAs per thread-block cluster along M: 2 multicasts each B tile to a pair", NULL, 0, 1, 2, 1},
    {"lockstep", "k blocks between grid barriers of the loads, so CTAs sharing A or B tiles meet in L2; 0: off", NULL,
     0, 0, 4096, 0},
    {"raster", "tile order within an expert: 0 m-major (neighbouring CTAs share A), 1 n-major (they share B)", NULL, 0,
     0, 1, 0},
    {"tile_m", "rows per tile: 128, or 256 with tile_n 128 (each consumer warpgroup runs two 64-row wgmmas)", NULL, 0,
     128, 256, 128},
};

/* lsa-layer: the transfers' knobs and the GEMM's (see mok-gemm); layout is slots and dispatch pull, since the
 * GEMMs read contiguous expert-major rows. */
static const struct mok_param_def lsa_layer_params[] = {
    LSA_TRANSFER_PARAMS,
    {"kernel", "sm90: wgmma + TMA expert GEMMs; portable: mma.sync", kernel_choices, 2, 0, 1, 0},
    {"tile_n", "GEMM output columns per tile before SwiGLU (128 or 256)", NULL, 0, 128, 256, 128},
    {"stages", "GEMM shared-memory pipeline stages, 0: as many as fit", NULL, 0, 0, 8, 0},
    LAUNCH_PARAM,
    {"overlap", "none: GEMMs after the dispatch; gemm1: GEMM1 (sm90) runs beside the dispatch on the other SMs, each "
     "tile waiting on its rows' ready counters", overlap_choices, 2, 0, 1, 0},
};

/* megakernel: dispatch, expert GEMMs and combine sends in one persistent launch; the GEMM tiles are 128 x 256 and
 * experts are padded to 128 rows (fixed: the row blocks its counters track). */
static const struct mok_param_def megakernel_params[] = {
    {"sms", "SMs whose blocks dispatch and combine; the others run GEMM tiles", NULL, 0, 1, 131, 16},
    {"combine", "per_route: each row back as soon as its GEMM2 row block is stored; per_rank: partial sums once "
     "GEMM2 is done", combine_choices, 2, 0, 1, 1},
    {"chunk_rows", "dispatched rows per ready counter (GEMM1 tiles wait on the counters of their rows)", NULL, 0, 1,
     1 << 20, 128},
    {"stages", "GEMM shared-memory pipeline stages, 0: as many as fit (4 beside the C staging)", NULL, 0, 0, 8, 0},
    LAUNCH_PARAM,
    {"dispatch", "pull: comm blocks pull each row into every local expert slot; push: owners push each row once per "
     "rank into landing rows, the compute blocks copy them into the slots", dispatch_choices, 2, 0, 1, 0},
    {"breakdown", "1: after timing, also time the same kernel with communication skipped and with compute skipped "
     "(report: gemm_alone_us, dispatch_alone_us, the exposed communication in the note)", NULL, 0, 0, 1, 0},
    {"raster", "GEMM tile order within an expert: 0 m-major, 1 n-major (neighbouring CTAs share the weight tile)",
     NULL, 0, 0, 1, 0},
    {"combine_sms", "of the comm SMs, those that also send the combine; the others run GEMM tiles once their share "
     "of the dispatch is done (0: all comm SMs)", NULL, 0, 0, 131, 0},
    {"send", "1: each GEMM2 tile's rows go to their owners straight from the GEMM epilogue's registers (per_route "
     "only) and every comm SM runs GEMM tiles after the dispatch; 0: the comm SMs send", NULL, 0, 0, 1, 0},
    {"lockstep", "1: a GEMM tile starts once every tile of the previous wave (one per compute SM) has started, so the "
     "SMs that share a weight tile stay in step", NULL, 0, 0, 1, 0},
    {"own_first", "dispatch=push only, K >= 1: the own rows of the first K local experts are copied into the slots "
     "first and those GEMM1 tiles run while the peers' rows are still arriving (K >= local experts: all)", NULL, 0, 0,
     MOK_OWN_FIRST_MAX, 0},
};

static const struct mok_impl_desc impl_descs[] = {
    {"nccl", "layer", "host-orchestrated: counts to host, grouped ncclSend/Recv, cuBLAS expert GEMMs, NCCL combine", 2,
     nccl_params},
    {"nccl-overlap", "layer",
     "nccl in stages (token chunks x expert groups): the all-to-all of one stage overlaps the GEMMs of another", 5,
     nccl_overlap_params},
    {"lsa", "comm", "mok's dispatch + combine: device-built schedule, NVLink loads/stores through LSA pointers, no host "
     "sync", 11, lsa_params},
    {"nccl-p2p", "comm", "the nccl baseline's dispatch + combine alone: counts to host, grouped ncclSend/Recv each way",
     0, NULL},
    {"cublas-gemm", "gemm", "the expert GEMMs on cuBLAS (grouped or per expert over streams), GEMM1 and GEMM2 timed apart",
     2, nccl_params},
    {"mok-gemm", "gemm", "mok's expert GEMMs: GEMM1 with SwiGLU fused, GEMM2, group sizes read on the device", 8,
     mok_gemm_params},
    {"lsa-layer", "layer",
     "the whole layer with no host sync: lsa dispatch, mok's expert GEMMs, lsa combine (unfused kernels)", 9,
     lsa_layer_params},
    {"megakernel", "layer",
     "the fused forward: dispatch, GEMM1 + SwiGLU, GEMM2 and combine in one persistent kernel (comm and compute "
     "blocks, ready counters), then the owner's sum",
     12, megakernel_params},
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

const char *mok_impl_params_label(const struct mok_impl_desc *desc, const int *values, char *buf, int len)
{
    int used = 0;
    buf[0] = '\0';
    for (int i = 0; i < desc->nparams && used < len; i++) {
        const struct mok_param_def *p = &desc->params[i];
        const char *sep = i ? "," : "";
        if (p->choices && values[i] >= 0 && values[i] < p->nchoices)
            used += snprintf(buf + used, (size_t)(len - used), "%s%s=%s", sep, p->name, p->choices[values[i]]);
        else
            used += snprintf(buf + used, (size_t)(len - used), "%s%s=%d", sep, p->name, values[i]);
    }
    return buf;
}

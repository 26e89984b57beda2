/* test_gpu_lsa: the LSA dispatch/combine path on real GPUs, one rank per GPU.
 *   mok test_gpu_lsa          dispatched rows equal the source rows bit for bit; every chunk counter reached its
 *                             target; combine equals the reference bit for bit (both combine modes, both copy
 *                             engines, the small-problem variants on and off); repeated runs are bitwise
 *                             identical; a CUDA graph of the whole path
 *                             replays to the same y; an undersized capacity is reported with the expert.
 *   mok test_gpu_lsa timeout  rank 1 never publishes: rank 0's wait must time out with a diagnostic and fail,
 *                             not hang (run by tests/gpu_lsa_timeout.sh, which checks the message). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "impl.h"
#include "lsa.h"
#include "mok_kernels.h"
#include "testing/mok_test_kernels.h"
#include "problem.h"
#include "schedule.h"
#include "timing.h"

static int failures;
#define EXPECT(cond, ...)                                                                                     \
    do {                                                                                                      \
        if (!(cond)) {                                                                                        \
            failures++;                                                                                       \
            printf("FAIL rank %d %s:%d: ", g_rank, __FILE__, __LINE__);                                       \
            printf(__VA_ARGS__);                                                                              \
            printf("\n");                                                                                     \
        }                                                                                                     \
    } while (0)
static int g_rank;

static struct mok_problem_spec comm_spec(int tokens, int hidden, int experts, int topk, double capacity)
{
    struct mok_problem_spec s;
    memset(&s, 0, sizeof(s));
    s.mode = MOK_MODE_COMM;
    s.capacity_factor = capacity;
    s.model = (struct mok_model){.hidden = hidden, .intermediate = 64, .experts = experts, .topk = topk};
    snprintf(s.model.name, sizeof(s.model.name), "test");
    s.tokens_per_rank = tokens;
    s.routing.dist = MOK_ROUTING_ZIPF; /* skewed: uneven experts, some empty */
    s.routing.zipf_s = 1.2;
    s.routing.seed = 11;
    return s;
}

static uint16_t *to_host(const void *dev, size_t bytes)
{
    uint16_t *h = malloc(bytes + 16);
    cudaMemcpy(h, dev, bytes, cudaMemcpyDeviceToHost);
    return h;
}

/* Every valid slot of the schedule holds the row of its (source rank, token), bit for bit. */
static void check_dispatched_rows(const struct mok_lsa_args *a, const struct mok_problem *p)
{
    size_t row = (size_t)a->hidden * 2;
    uint16_t *all_x = malloc((size_t)a->nranks * a->t_max * row + 16);
    uint16_t *mine = calloc((size_t)a->t_max * a->hidden + 8, 2);
    cudaMemcpy(mine, p->x[0], (size_t)p->tokens * row, cudaMemcpyDeviceToHost);
    MPI_Allgather(mine, (int)(a->t_max * row), MPI_BYTE, all_x, (int)(a->t_max * row), MPI_BYTE, MPI_COMM_WORLD);
    int32_t *entry = (int32_t *)to_host(a->entry, sizeof(int32_t) * (size_t)a->capacity);
    /* slots layout: every slot holds its row; landing layout: every remote token's row landed once */
    uint16_t *xin = NULL;
    if (a->landing) { /* the landing rows live in this rank's window */
        xin = malloc((size_t)a->nranks * a->t_max * row + 16);
        cudaMemcpy(xin, (char *)mok_lsa_state_window_base(a) + a->off_land, (size_t)a->nranks * a->t_max * row,
                   cudaMemcpyDeviceToHost);
    } else {
        xin = to_host(a->xin, (size_t)a->capacity * row);
    }
    int32_t offset_end;
    cudaMemcpy(&offset_end, a->offset + a->local_experts, sizeof(int32_t), cudaMemcpyDeviceToHost);
    int checked = 0;
    for (int s = 0; s < offset_end && s < a->capacity; s++) {
        if (entry[s] < 0)
            continue;
        int q = mok_route_rank(entry[s]), t = mok_route_token(entry[s]);
        const uint16_t *want = all_x + ((size_t)q * a->t_max + t) * a->hidden;
        if (a->landing && q == a->rank)
            continue; /* own tokens are read in place */
        size_t at = a->landing ? ((size_t)q * a->t_max + t) : (size_t)s;
        if (memcmp(xin + at * a->hidden, want, row) != 0 && failures < 20)
            EXPECT(0, "slot %d (rank %d token %d) differs from the source row", s, q, t);
        checked++;
    }
    EXPECT(checked > 0, "no dispatched rows checked");
    int nchunks = (a->capacity + a->chunk_rows - 1) / a->chunk_rows;
    int32_t *ready = (int32_t *)to_host(a->ready, sizeof(int32_t) * nchunks);
    int32_t *target = (int32_t *)to_host(a->chunk_target, sizeof(int32_t) * nchunks);
    for (int c = 0; c < nchunks; c++)
        EXPECT(ready[c] == target[c], "chunk %d ready %d target %d", c, ready[c], target[c]);
    free(all_x), free(mine), free(entry), free(xin), free(ready), free(target);
}

/* small_off: the `small` parameter's value: 0 (auto) lets this small problem take the fused variants, 1 (off)
 * forces the general kernels (multi-kernel schedule, separate combine and sum), 2 (v1) the first one-launch
 * variants; reduce_overlap: the `reduce` parameter (1: the owner's sum inside the combine launch, general per-rank
 * path only); all must give the reference bit for bit. */
static void run_variant(struct mok_cluster *cl, int combine_per_rank, int bulk, int landing, int push, int small_off,
                        int reduce_overlap, int reduce_chunk)
{
    struct mok_problem_spec spec = comm_spec(300, 512, 16, 4, 4.0);
    struct mok_problem p;
    char err[512];
    if (mok_problem_create(&p, &spec, cl, 1, false, err, sizeof(err))) {
        EXPECT(0, "problem: %s", err);
        return;
    }
    const struct mok_impl_ops *ops = mok_impl_find("lsa");
    /* sms combine tile chunk copy layout dispatch launch small reduce reduce_chunk (0: the default) */
    int params[MOK_MAX_PARAMS] = {3, combine_per_rank, 64, 7, bulk, landing, push, 0, small_off, reduce_overlap,
                                  reduce_chunk};
    void *st = NULL;
    if (ops->setup(&st, &p, cl, params, 4, err, sizeof(err))) {
        EXPECT(0, "setup: %s", err);
        return;
    }
    size_t ybytes = (size_t)p.tokens * p.hidden * 2;
    uint16_t *ref;
    cudaMalloc((void **)&ref, ybytes + 16);
    mok_lsa_reference(p.x[0], p.ids, p.w, p.tokens, p.topk, p.hidden, p.local_experts, p.nranks, combine_per_rank,
                      ref, (mok_stream_t)cl->stream);
    mok_poison_bf16(p.y, (size_t)p.tokens * p.hidden, (mok_stream_t)cl->stream);
    EXPECT(ops->run(st, 0, &p.out, -1, err, sizeof(err)) == 0, "run: %s", err);
    EXPECT(cudaStreamSynchronize(cl->stream) == cudaSuccess, "sync: %s", cudaGetErrorString(cudaGetLastError()));
    check_dispatched_rows(mok_lsa_state_args(st), &p);
    uint16_t *h_ref = to_host(ref, ybytes), *first = to_host(p.y, ybytes);
    EXPECT(memcmp(first, h_ref, ybytes) == 0,
           "combine (per_rank=%d bulk=%d landing=%d push=%d small_off=%d reduce_overlap=%d) differs from the reference",
           combine_per_rank, bulk, landing, push, small_off, reduce_overlap);
    for (int rep = 0; rep < 3; rep++) { /* repeated runs: bitwise identical */
        mok_poison_bf16(p.y, (size_t)p.tokens * p.hidden, (mok_stream_t)cl->stream);
        ops->run(st, 0, &p.out, -1, err, sizeof(err));
        cudaStreamSynchronize(cl->stream);
        uint16_t *again = to_host(p.y, ybytes);
        EXPECT(memcmp(first, again, ybytes) == 0, "run %d differs from the first", rep + 2);
        free(again);
    }
    /* the whole path captured in a CUDA graph and replayed: no host synchronization inside, same y */
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    mok_poison_bf16(p.y, (size_t)p.tokens * p.hidden, (mok_stream_t)cl->stream);
    cudaStreamSynchronize(cl->stream);
    EXPECT(cudaStreamBeginCapture(cl->stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
    EXPECT(ops->run(st, 0, &p.out, -1, err, sizeof(err)) == 0, "run in capture: %s", err);
    EXPECT(cudaStreamEndCapture(cl->stream, &graph) == cudaSuccess, "end capture: %s",
           cudaGetErrorString(cudaGetLastError()));
    EXPECT(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
    for (int rep = 0; rep < 3; rep++)
        EXPECT(cudaGraphLaunch(exec, cl->stream) == cudaSuccess, "graph launch");
    EXPECT(cudaStreamSynchronize(cl->stream) == cudaSuccess, "graph sync: %s", cudaGetErrorString(cudaGetLastError()));
    uint16_t *graphed = to_host(p.y, ybytes);
    EXPECT(memcmp(first, graphed, ybytes) == 0, "graph replay differs");
    free(graphed);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    struct mok_row row;
    mok_row_init(&row);
    EXPECT(ops->extras(st, &row, &(struct mok_alone_timing){3, 0}, err, sizeof(err)) == 0,
           "extras (schedule vs host, counters): %s", err);
    free(h_ref), free(first);
    cudaFree(ref);
    ops->teardown(st);
    mok_problem_destroy(&p);
}

/* An undersized capacity: the device flags the overflow and the extras report the expert. */
static void run_overflow(struct mok_cluster *cl)
{
    struct mok_problem_spec spec = comm_spec(300, 256, 16, 4, 0.05);
    struct mok_problem p;
    char err[512];
    if (mok_problem_create(&p, &spec, cl, 1, false, err, sizeof(err))) {
        EXPECT(0, "problem: %s", err);
        return;
    }
    const struct mok_impl_ops *ops = mok_impl_find("lsa");
    int params[MOK_MAX_PARAMS] = {2, 1, 64, 64, 0};
    void *st = NULL;
    if (ops->setup(&st, &p, cl, params, 1, err, sizeof(err))) {
        EXPECT(0, "setup: %s", err);
        return;
    }
    ops->run(st, 0, &p.out, -1, err, sizeof(err));
    EXPECT(cudaStreamSynchronize(cl->stream) == cudaSuccess, "overflow run must not fault");
    struct mok_row row;
    mok_row_init(&row);
    int rc = ops->extras(st, &row, &(struct mok_alone_timing){1, 0}, err, sizeof(err));
    EXPECT(rc != 0 && strstr(err, "overflow") && strstr(err, "expert"), "overflow not reported: rc %d '%s'", rc, err);
    if (g_rank == 0)
        printf("overflow reported as: %s\n", err);
    ops->teardown(st);
    mok_problem_destroy(&p);
}

/* Rank 1 never publishes; rank 0 must trap after its (shortened) wait with a diagnostic. */
static int run_timeout(struct mok_cluster *cl)
{
    struct mok_problem_spec spec = comm_spec(64, 256, 8, 2, 4.0);
    struct mok_problem p;
    char err[512];
    if (mok_problem_create(&p, &spec, cl, 1, false, err, sizeof(err)))
        return 1;
    const struct mok_impl_ops *ops = mok_impl_find("lsa");
    int params[MOK_MAX_PARAMS] = {2, 1, 64, 64, 0};
    void *st = NULL;
    if (ops->setup(&st, &p, cl, params, 1, err, sizeof(err)))
        return 1;
    mok_lsa_state_set_timeout(st, 200000000ll); /* 0.1 s */
    int rc = 0;
    if (cl->rank == 0) {
        ops->run(st, 0, &p.out, -1, err, sizeof(err));
        cudaError_t e = cudaStreamSynchronize(cl->stream);
        printf("timeout test: rank 0 stream ended with: %s\n", cudaGetErrorString(e));
        rc = e == cudaSuccess; /* success would mean it did not wait at all */
    }
    fflush(stdout);
    /* no CUDA teardown after a trapped kernel (the context is gone); MPI is fine. 0: timed out as it must */
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    exit(rc);
}

int main(int argc, char **argv)
{
    struct mok_cluster cl;
    char err[512];
    if (mok_cluster_init_mpi(&argc, &argv, &cl) || mok_cluster_init_gpu(&cl, err, sizeof(err))) {
        fprintf(stderr, "test_gpu_lsa: init: %s\n", err);
        return 1;
    }
    g_rank = cl.rank;
    if (cl.lsa_size != cl.nranks || cl.nranks < 2) {
        if (cl.rank == 0)
            printf("SKIP: needs >= 2 ranks in one LSA team (have %d ranks, LSA %d)\n", cl.nranks, cl.lsa_size);
        mok_cluster_finalize(&cl);
        return 77;
    }
    if (argc > 1 && !strcmp(argv[1], "timeout"))
        return run_timeout(&cl);
    for (int small_off = 0; small_off < 3; small_off++) /* small = auto, off, v1 */
        for (int per_rank = 0; per_rank < 2; per_rank++) {
            for (int bulk = 0; bulk < 2; bulk++)
                run_variant(&cl, per_rank, bulk, 0, 0, small_off, 0, 0);
            run_variant(&cl, per_rank, 0, 1, 0, small_off, 0, 0);
            run_variant(&cl, per_rank, 0, 1, 1, small_off, 0, 0);
        }
    for (int small_off = 0; small_off < 3; small_off++) /* the bulk rings: push + per-rank combine, landing */
        for (int overlap = 0; overlap < 2; overlap++)
            run_variant(&cl, 1, 1, 1, 1, small_off, overlap, 0);
    /* reduce=overlap with the warp combine, chunk flags per 16 (the smallest) and 48 tokens (300 tokens: a partial
     * last chunk); the bulk ring supports 64 only (lsa_supports) */
    for (int chunk = 16; chunk <= 48; chunk += 32)
        run_variant(&cl, 1, 0, 1, 1, 1, 1, chunk);
    run_overflow(&cl);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (cl.rank == 0)
        printf("test_gpu_lsa: %s (%d failures over %d ranks)\n", total ? "FAILED" : "all passed", total, cl.nranks);
    mok_cluster_finalize(&cl);
    return total ? 1 : 0;
}

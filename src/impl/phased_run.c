/* phased_run: see phased_run.h. */
#include "phased_run.h"

#include <math.h>
#include <stdlib.h>

#include "check_call.h"
#include "fail.h"

int phased_run_init(struct phased_run *r, phase_fn enqueue, void *ctx, int sets, bool use_graphs, int max_slots,
                    char *err, int err_len)
{
    *r = (struct phased_run){.enqueue = enqueue, .ctx = ctx, .sets = sets, .use_graphs = use_graphs};
    MOK_CHECK(cuda, mok_slot_events_create(&r->ev, max_slots, PHASED_RUN_PHASES + 1), return -1);
    return 0;
}

static void destroy_graphs(struct phased_run *r)
{
    for (int i = 0; r->graphs && i < r->sets * PHASED_RUN_PHASES; i++)
        if (r->graphs[i])
            cudaGraphExecDestroy(r->graphs[i]);
    free(r->graphs);
    r->graphs = NULL;
}

/* One phase of one set into *exec; an empty capture leaves it NULL (nothing to launch). */
static int capture_phase(struct phased_run *r, int phase, int set, uint16_t *y, cudaStream_t st,
                         cudaGraphExec_t *exec, char *err, int err_len)
{
    cudaGraph_t g = NULL;
    MOK_CHECK(cuda, cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed), return -1);
    int rc = r->enqueue(r->ctx, phase, set, y, st, err, err_len);
    cudaError_t e = cudaStreamEndCapture(st, &g); /* always end it, even after a failure */
    if (rc || e != cudaSuccess) {
        if (g)
            cudaGraphDestroy(g);
        if (rc)
            return -1;
        FAIL("capture of phase %d, set %d: %s", phase, set, cudaGetErrorString(e));
    }
    size_t nodes = 0;
    e = cudaGraphGetNodes(g, NULL, &nodes);
    if (e == cudaSuccess && nodes)
        e = cudaGraphInstantiate(exec, g, 0);
    cudaGraphDestroy(g);
    if (e != cudaSuccess)
        FAIL("instantiate phase %d, set %d: %s", phase, set, cudaGetErrorString(e));
    return 0;
}

/* Captures every input set's phases for output y (all at once, so that only the first run pays for it: the
 * driver's check run, before warm-up and timing). The kernel arguments (set, y, pointers; epoch counters live on
 * the device) are fixed per set and output, which is why a graph per set. */
static int capture_graphs(struct phased_run *r, uint16_t *y, cudaStream_t st, char *err, int err_len)
{
    destroy_graphs(r);
    r->graphs = calloc((size_t)r->sets * PHASED_RUN_PHASES, sizeof(cudaGraphExec_t));
    if (!r->graphs)
        FAIL("out of host memory");
    for (int set = 0; set < r->sets; set++)
        for (int phase = 0; phase < PHASED_RUN_PHASES; phase++)
            if (capture_phase(r, phase, set, y, st, &r->graphs[set * PHASED_RUN_PHASES + phase], err, err_len))
                return -1;
    r->graphs_y = y;
    return 0;
}

int phased_run(struct phased_run *r, int set, uint16_t *y, int slot, cudaStream_t st, char *err, int err_len)
{
    if (r->use_graphs && (!r->graphs || r->graphs_y != y) && capture_graphs(r, y, st, err, err_len))
        return -1;
    bool timed = mok_slot_events_timed(&r->ev, slot);
    if (timed)
        MOK_CHECK(cuda, mok_slot_events_record(&r->ev, slot, 0, st), return -1);
    for (int phase = 0; phase < PHASED_RUN_PHASES; phase++) {
        cudaGraphExec_t g = r->use_graphs ? r->graphs[set * PHASED_RUN_PHASES + phase] : NULL;
        if (g)
            MOK_CHECK(cuda, cudaGraphLaunch(g, st), return -1);
        if (!r->use_graphs && r->enqueue(r->ctx, phase, set, y, st, err, err_len))
            return -1;
        if (timed)
            MOK_CHECK(cuda, mok_slot_events_record(&r->ev, slot, 1 + phase, st), return -1);
    }
    return 0;
}

void phased_run_ms(const struct phased_run *r, int slot, bool experts, double out[MOK_NPHASES])
{
    out[MOK_PHASE_DISPATCH] = out[MOK_PHASE_GEMM] = out[MOK_PHASE_COMBINE] = NAN;
    float d = 0, g = 0, c = 0;
    if (mok_slot_events_ms(&r->ev, slot, 0, &d) && mok_slot_events_ms(&r->ev, slot, 1, &g) &&
        mok_slot_events_ms(&r->ev, slot, 2, &c)) {
        out[MOK_PHASE_DISPATCH] = d;
        out[MOK_PHASE_COMBINE] = c;
        if (experts)
            out[MOK_PHASE_GEMM] = g;
    }
}

void phased_run_destroy(struct phased_run *r)
{
    destroy_graphs(r);
    mok_slot_events_destroy(&r->ev);
}

/* sched_check: see sched_check.h. */
#include "sched_check.h"

#include <mpi.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "check_call.h"
#include "fail.h"

int sched_check_build(const struct mok_problem *p, int t_max, int tile_rows, int chunk_rows, int capacity,
                      struct mok_schedule *out, char *err, int err_len)
{
    int P = p->nranks, k = p->topk;
    int32_t *gathered = calloc((size_t)P * t_max * k + 1, sizeof(int32_t));
    int *tokens = calloc((size_t)P, sizeof(int));
    const int32_t **ids = calloc((size_t)P, sizeof(int32_t *));
    int32_t *mine = calloc((size_t)t_max * k + 1, sizeof(int32_t)); /* padded to t_max: one gather size for all */
    bool allocated = gathered && tokens && ids && mine;
    int rc = -1;
    if (allocated) {
        memcpy(mine, p->h_ids, sizeof(int32_t) * (size_t)p->tokens * k);
        MPI_Allgather(mine, t_max * k, MPI_INT32_T, gathered, t_max * k, MPI_INT32_T, MPI_COMM_WORLD);
        MPI_Allgather(&p->tokens, 1, MPI_INT, tokens, 1, MPI_INT, MPI_COMM_WORLD);
        for (int q = 0; q < P; q++)
            ids[q] = gathered + (size_t)q * t_max * k;
        rc = mok_schedule_build(out, P, p->rank, p->experts, k, t_max, tokens, ids, tile_rows, chunk_rows, capacity);
    }
    free(gathered), free(tokens), free(ids), free(mine);
    if (!allocated)
        FAIL("out of host memory");
    if (rc)
        FAIL("host schedule: invalid routing");
    return 0;
}

/* The device arrays, copied to the host. */
struct dev_copy {
    int32_t *rows, *offset, *entry, *ready, *target;
};

static void free_copy(struct dev_copy *c) { free(c->rows), free(c->offset), free(c->entry), free(c->ready), free(c->target); }

static int copy_back(const struct mok_schedule_view *v, struct dev_copy *c, char *err, int err_len)
{
    size_t EL = (size_t)v->local_experts, n = (size_t)v->chunks;
    c->rows = malloc(sizeof(int32_t) * EL), c->offset = malloc(sizeof(int32_t) * (EL + 1));
    c->entry = malloc(sizeof(int32_t) * (size_t)v->capacity);
    c->ready = v->ready ? malloc(sizeof(int32_t) * n) : NULL, c->target = malloc(sizeof(int32_t) * n);
    if (!c->rows || !c->offset || !c->entry || (v->ready && !c->ready) || !c->target)
        FAIL("out of host memory");
    MOK_CHECK(cuda, cudaMemcpy(c->rows, v->rows, sizeof(int32_t) * EL, cudaMemcpyDeviceToHost), return -1);
    MOK_CHECK(cuda, cudaMemcpy(c->offset, v->offset, sizeof(int32_t) * (EL + 1), cudaMemcpyDeviceToHost), return -1);
    MOK_CHECK(cuda, cudaMemcpy(c->entry, v->entry, sizeof(int32_t) * (size_t)v->capacity, cudaMemcpyDeviceToHost),
              return -1);
    MOK_CHECK(cuda, cudaMemcpy(c->target, v->chunk_target, sizeof(int32_t) * n, cudaMemcpyDeviceToHost), return -1);
    if (v->ready) /* NULL: nothing counts rows into them (the megakernel's gather); only the targets are compared */
        MOK_CHECK(cuda, cudaMemcpy(c->ready, v->ready, sizeof(int32_t) * n, cudaMemcpyDeviceToHost), return -1);
    return 0;
}

/* 1 with msg where the copied device schedule differs from the host's, else 0. */
static int differs(const struct mok_schedule_view *v, const struct dev_copy *c, const struct mok_schedule *h,
                   int rank, char *msg, size_t len)
{
    int EL = v->local_experts, used = h->offset[EL];
    for (int le = 0; le < EL; le++)
        if (c->rows[le] != h->rows[le] || c->offset[le] != h->offset[le])
            return snprintf(msg, len, "rank %d: device schedule differs from the host's at expert %d: rows %d vs %d, "
                            "offset %d vs %d", rank, le, c->rows[le], h->rows[le], c->offset[le], h->offset[le]) > 0;
    for (int i = 0; i < used && i < v->capacity; i++)
        if (c->entry[i] != h->entry[i])
            return snprintf(msg, len, "rank %d: device schedule slot %d holds %08x, host %08x", rank, i,
                            (unsigned)c->entry[i], (unsigned)h->entry[i]) > 0;
    for (int k = 0; k < v->chunks; k++)
        if ((c->ready && c->ready[k] != c->target[k]) || (k < h->nchunks && c->target[k] != h->chunk_rows_valid[k]))
            return snprintf(msg, len, "rank %d: chunk %d ready %d, target %d, host target %d", rank, k,
                            c->ready ? c->ready[k] : -1,
                            c->target[k], k < h->nchunks ? h->chunk_rows_valid[k] : -1) > 0;
    return 0;
}

int sched_check_compare(const struct mok_schedule_view *dev, const struct mok_schedule *host, int rank,
                        const char *overflow, char *err, int err_len)
{
    char msg[512] = "";
    int bad = 0;
    if (overflow) {
        bad = snprintf(msg, sizeof msg, "%s", overflow) >= 0;
    } else {
        struct dev_copy c = {0};
        int rc = copy_back(dev, &c, err, err_len);
        if (!rc)
            bad = differs(dev, &c, host, rank, msg, sizeof msg);
        free_copy(&c);
        if (rc)
            return -1;
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any)
        FAIL("%s", bad ? msg : "another rank's schedule check failed");
    return 0;
}

void sched_check_report(struct mok_row *row, const struct mok_problem *p, const struct mok_schedule *host,
                        int capacity, int combine_per_rank, int comm_sms)
{
    double rowb = (double)p->hidden * 2;
    long long local_routes = 0; /* routes of my own tokens to my own experts never cross NVLink */
    for (int t = 0; t < p->tokens; t++)
        for (int j = 0; j < p->topk; j++)
            local_routes += p->h_ids[t * p->topk + j] / p->local_experts == p->rank;
    row->dispatch_bytes = (double)mok_allreduce_max_ll(host->remote_tokens_in) * rowb;
    row->combine_bytes = (double)mok_allreduce_max_ll(combine_per_rank ? host->remote_tokens_in
                                                                       : host->routes_in - local_routes) * rowb;
    row->comm_sms = comm_sms;
    snprintf(row->note, sizeof row->note, "capacity=%d used=%d rows_in=%lld remote_tokens_in=%lld", capacity,
             host->offset[host->local_experts], host->routes_in, host->remote_tokens_in);
}

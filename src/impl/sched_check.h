/* sched_check: what the implementations with a device-built schedule (lsa, lsa-layer, megakernel) check and report
 * after timing: the device's schedule against the same one built on the host from every rank's routing, every
 * chunk counter at its target, and the bytes that crossed NVLink. The device side is described by libmok's
 * struct mok_schedule_view (the megakernel gets it from libmok, lsa fills one from its own arguments). */
#ifndef MOK_IMPL_SCHED_CHECK_H
#define MOK_IMPL_SCHED_CHECK_H

#include "libmok.h"
#include "problem.h"
#include "report.h"
#include "schedule.h"

/* Collective (MPI): this rank's schedule built on the host from every rank's routing, outside the timed path;
 * free it with mok_schedule_free. 0, or -1 with err. */
int sched_check_build(const struct mok_problem *p, int t_max, int tile_rows, int chunk_rows, int capacity,
                      struct mok_schedule *out, char *err, int err_len);
/* Collective: fails on every rank when any rank overflowed (overflow: this rank's message, NULL when it did not)
 * or its device schedule (rows, offsets, slots, chunk targets, ready counters unless dev->ready is NULL) differs
 * from its host schedule. */
int sched_check_compare(const struct mok_schedule_view *dev, const struct mok_schedule *host, int rank,
                        const char *overflow, char *err, int err_len);
/* Collective: the row's dispatch and combine bytes (max over ranks; a token once per remote rank, back once per
 * rank with combine_per_rank, else once per route that is not local), comm_sms, and the note (capacity, used
 * slots, rows in, remote tokens in). */
void sched_check_report(struct mok_row *row, const struct mok_problem *p, const struct mok_schedule *host,
                        int capacity, int combine_per_rank, int comm_sms);

#endif

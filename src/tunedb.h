/* tunedb: the tuning database, the fastest parameters found per (machine, problem, implementation).
 *
 * A JSON file, {"schema_version": 1, "tool": "mok-bench", "entries": [{"key": {...}, "impl": "lsa",
 * "params": "sms=16,combine=per_rank,...", "time_us": 1241.9, "measured_utc": "...", "commit": "..."}]},
 * read and written whole and replaced atomically (temp file, then rename: unlike reports, the database IS
 * meant to be updated in place). Parameters are stored as the label mok_impl_params_label writes, so a file
 * stays readable and diffable, and mok_tunedb_check tells when an entry no longer fits its implementation
 * (a renamed parameter, a narrowed range). */
#ifndef MOK_TUNEDB_H
#define MOK_TUNEDB_H

#include "desc.h"

#define MOK_TUNEDB_SCHEMA_VERSION 1

/* Everything the best parameters depend on: the machine (GPU model, SMs, ranks, how many reach each other by
 * load/store) and the problem. Strings are NUL-terminated within their arrays. */
struct mok_tune_key {
    char gpu[64];
    int sm_count, ranks, lsa_size, hidden, intermediate, experts, topk, shared_experts, tokens_per_rank;
    char routing[48], dtype[12], pass[24], mode[8]; /* mok_routing_label, mok_dtype_name, mok_pass_name (with the
                                                     * backward's wgrad: "bwd/bf16"), ... */
    char inputs[48]; /* mok_inputs_label; files written before it existed read as "uniform" (their only inputs) */
};

struct mok_tune_entry {
    struct mok_tune_key key;
    char impl[32];
    char params[MOK_PARAMS_LABEL_LEN];      /* "sms=16,combine=per_rank,..." (mok_impl_params_label) */
    double time_us;        /* finite; round-trips exactly through the file */
    char measured_utc[32]; /* ISO 8601 UTC, "2026-11-29T14:03:00Z": compares as text in time order */
    char commit[48];
};

struct mok_tunedb {
    int n, cap;
    struct mok_tune_entry *e;
};

/* A missing file gives an empty db and 0. Malformed JSON, a newer schema_version, a missing field or one of the
 * wrong type or too long: -1, db left empty, and err names the path and the field ("db.json: entries[2].key.
 * sm_count: expected an integer"). db must be zero-initialized or freed; it is overwritten. */
int mok_tunedb_load(const char *path, struct mok_tunedb *db, char *err, int err_len);
/* Writes the whole db atomically (temp file in the same directory, fsync, rename over path). 0 or -1. */
int mok_tunedb_save(const char *path, const struct mok_tunedb *db, char *err, int err_len);

/* The entry of this key and impl (every key field equal), or NULL. */
const struct mok_tune_entry *mok_tunedb_find(const struct mok_tunedb *db, const struct mok_tune_key *key,
                                             const char *impl);
/* Inserts e, or replaces the entry of the same key and impl in place. -1: a string not terminated within its
 * array, a time that is not finite, or out of memory. */
int mok_tunedb_put(struct mok_tunedb *db, const struct mok_tune_entry *e);
/* Puts every entry of from whose key+impl is absent from into, or present with an older measured_utc (on a
 * tie into's entry stays). Returns the number of entries added or replaced, or -1. */
int mok_tunedb_merge(struct mok_tunedb *into, const struct mok_tunedb *from);

/* Validates an entry against today's registry: the impl exists and belongs to the key's mode, and its params
 * parse (mok_tunedb_params_parse). 0, or -1 with "stale: ..." in why. */
int mok_tunedb_check(const struct mok_tune_entry *e, char *why, int why_len);
/* "a=1,b=grouped" -> values[d->nparams] (choice index or integer), in the descriptor's order whatever the
 * label's order. Rejects unknown, repeated and missing params, bad choices, non-integers and values out of
 * [min, max]: -1 with the reason in why. */
int mok_tunedb_params_parse(const struct mok_impl_desc *d, const char *label, int *values, char *why,
                            int why_len);

void mok_tunedb_free(struct mok_tunedb *db);

#endif

/* tunedb: the tuning database file (see tunedb.h). */
#include "tunedb.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h" /* MOK_MAX_PARAMS */
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

static int set_err(char *err, int len, const char *fmt, ...)
{
    if (err && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, (size_t)len, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* One table drives load, save and key comparison, so a key field added later cannot be forgotten by one of
 * them. */
struct field {
    const char *name;
    int is_str;
    size_t off, size;
    const char *absent; /* a string field added later: its value in files written before it, else NULL */
};
#define KS(f) {#f, 1, offsetof(struct mok_tune_key, f), sizeof(((struct mok_tune_key *)0)->f), NULL}
#define KS_SINCE(f, absent) {#f, 1, offsetof(struct mok_tune_key, f), sizeof(((struct mok_tune_key *)0)->f), absent}
#define KI(f) {#f, 0, offsetof(struct mok_tune_key, f), sizeof(int), NULL}
#define ES(f) {#f, 1, offsetof(struct mok_tune_entry, f), sizeof(((struct mok_tune_entry *)0)->f), NULL}
static const struct field key_fields[] = {
    KS(gpu),  KI(sm_count),       KI(ranks),      KI(lsa_size), KI(hidden), KI(intermediate), KI(experts),
    KI(topk), KI(shared_experts), KI(tokens_per_rank), KS(routing), KS(dtype), KS(pass),      KS(mode),
    KS_SINCE(inputs, "uniform")};
static const struct field entry_fields[] = {ES(impl), ES(params), ES(measured_utc), ES(commit)};
#define NKEY (int)(sizeof key_fields / sizeof key_fields[0])
#define NENTRY (int)(sizeof entry_fields / sizeof entry_fields[0])

static int key_equal(const struct mok_tune_key *a, const struct mok_tune_key *b)
{
    for (int i = 0; i < NKEY; i++) {
        const char *pa = (const char *)a + key_fields[i].off, *pb = (const char *)b + key_fields[i].off;
        if (key_fields[i].is_str ? strcmp(pa, pb) != 0 : *(const int *)pa != *(const int *)pb)
            return 0;
    }
    return 1;
}

const struct mok_tune_entry *mok_tunedb_find(const struct mok_tunedb *db, const struct mok_tune_key *key,
                                             const char *impl)
{
    for (int i = 0; i < db->n; i++)
        if (strcmp(db->e[i].impl, impl) == 0 && key_equal(&db->e[i].key, key))
            return &db->e[i];
    return NULL;
}

/* Every string of the entry ends inside its array: find and save rely on it. */
static int terminated(const struct mok_tune_entry *e)
{
    for (int i = 0; i < NKEY; i++)
        if (key_fields[i].is_str && !memchr((const char *)&e->key + key_fields[i].off, 0, key_fields[i].size))
            return 0;
    for (int i = 0; i < NENTRY; i++)
        if (!memchr((const char *)e + entry_fields[i].off, 0, entry_fields[i].size))
            return 0;
    return 1;
}

int mok_tunedb_put(struct mok_tunedb *db, const struct mok_tune_entry *e)
{
    if (!terminated(e) || !isfinite(e->time_us))
        return -1;
    const struct mok_tune_entry *old = mok_tunedb_find(db, &e->key, e->impl);
    if (old) { /* in place: the file keeps its order, so a re-tune shows as a one-entry diff */
        db->e[old - db->e] = *e;
        return 0;
    }
    if (db->n == db->cap) {
        int cap = db->cap ? 2 * db->cap : 16;
        struct mok_tune_entry *p = realloc(db->e, sizeof *p * (size_t)cap);
        if (!p)
            return -1;
        db->e = p;
        db->cap = cap;
    }
    db->e[db->n++] = *e;
    return 0;
}

int mok_tunedb_merge(struct mok_tunedb *into, const struct mok_tunedb *from)
{
    if (into == from)
        return 0; /* put may move into->e, which from would then point into */
    int changed = 0;
    for (int i = 0; i < from->n; i++) {
        const struct mok_tune_entry *e = &from->e[i], *old = mok_tunedb_find(into, &e->key, e->impl);
        /* ISO 8601 UTC stamps of one format sort as text in time order. */
        if (old && strcmp(e->measured_utc, old->measured_utc) <= 0)
            continue;
        if (mok_tunedb_put(into, e) != 0)
            return -1;
        changed++;
    }
    return changed;
}

void mok_tunedb_free(struct mok_tunedb *db)
{
    free(db->e);
    db->e = NULL;
    db->n = db->cap = 0;
}

/* ---- load ------------------------------------------------------------------------------------------- */

/* Reads one field into dst; on error names it as "<where>.<name>". */
static int get_field(const cJSON *obj, const struct field *f, void *base, const char *path, const char *where,
                     char *err, int err_len)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, f->name);
    char *dst = (char *)base + f->off;
    if (!it && f->absent) {
        snprintf(dst, f->size, "%s", f->absent);
        return 0;
    }
    if (!it)
        return set_err(err, err_len, "%s: %s.%s: missing", path, where, f->name);
    if (f->is_str) {
        if (!cJSON_IsString(it) || !it->valuestring)
            return set_err(err, err_len, "%s: %s.%s: expected a string", path, where, f->name);
        if (strlen(it->valuestring) >= f->size) /* truncating would silently change the key */
            return set_err(err, err_len, "%s: %s.%s: longer than %zu characters", path, where, f->name,
                           f->size - 1);
        strcpy(dst, it->valuestring);
        return 0;
    }
    double v = cJSON_IsNumber(it) ? it->valuedouble : NAN;
    if (!(v >= INT_MIN && v <= INT_MAX) || v != floor(v))
        return set_err(err, err_len, "%s: %s.%s: expected an integer", path, where, f->name);
    *(int *)(void *)dst = (int)v;
    return 0;
}

static int parse_entry(const cJSON *it, int i, struct mok_tune_entry *e, const char *path, char *err, int err_len)
{
    char where[48];
    memset(e, 0, sizeof *e);
    snprintf(where, sizeof where, "entries[%d]", i);
    if (!cJSON_IsObject(it))
        return set_err(err, err_len, "%s: %s: expected an object", path, where);
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(it, "key");
    if (!cJSON_IsObject(key))
        return set_err(err, err_len, "%s: %s.key: %s", path, where, key ? "expected an object" : "missing");
    char kwhere[56];
    snprintf(kwhere, sizeof kwhere, "%s.key", where);
    for (int k = 0; k < NKEY; k++)
        if (get_field(key, &key_fields[k], &e->key, path, kwhere, err, err_len) != 0)
            return -1;
    for (int k = 0; k < NENTRY; k++)
        if (get_field(it, &entry_fields[k], e, path, where, err, err_len) != 0)
            return -1;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "time_us");
    if (!cJSON_IsNumber(t) || !isfinite(t->valuedouble))
        return set_err(err, err_len, "%s: %s.time_us: %s", path, where, t ? "expected a finite number" : "missing");
    e->time_us = t->valuedouble;
    return 0;
}

static int parse_db(const cJSON *root, struct mok_tunedb *db, const char *path, char *err, int err_len)
{
    if (!cJSON_IsObject(root))
        return set_err(err, err_len, "%s: (top level): expected an object", path);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "schema_version");
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return set_err(err, err_len, "%s: schema_version: %s", path, v ? "expected an integer" : "missing");
    if (v->valuedouble > MOK_TUNEDB_SCHEMA_VERSION)
        return set_err(err, err_len, "%s: schema_version: %g is newer than this build reads (%d); update mok-bench",
                       path, v->valuedouble, MOK_TUNEDB_SCHEMA_VERSION);
    if (v->valuedouble < 1)
        return set_err(err, err_len, "%s: schema_version: %g is not a version", path, v->valuedouble);
    const cJSON *tool = cJSON_GetObjectItemCaseSensitive(root, "tool");
    if (!cJSON_IsString(tool) || strcmp(tool->valuestring, "mok-bench") != 0)
        return set_err(err, err_len, "%s: tool: expected \"mok-bench\"", path);
    const cJSON *entries = cJSON_GetObjectItemCaseSensitive(root, "entries");
    if (!cJSON_IsArray(entries))
        return set_err(err, err_len, "%s: entries: %s", path, entries ? "expected an array" : "missing");
    struct mok_tune_entry e;
    struct mok_tunedb one = {.n = 1, .cap = 1, .e = &e};
    int i = 0;
    for (const cJSON *it = entries->child; it; it = it->next, i++) {
        if (parse_entry(it, i, &e, path, err, err_len) != 0)
            return -1;
        /* A repeated key+impl (a hand-merged file) resolves as merge does: the newer measurement stays. */
        if (mok_tunedb_merge(db, &one) < 0)
            return set_err(err, err_len, "%s: out of memory", path);
    }
    return 0;
}

int mok_tunedb_load(const char *path, struct mok_tunedb *db, char *err, int err_len)
{
    mok_tunedb_free(db);
    FILE *f = fopen(path, "rb");
    if (!f) /* no database yet: nothing tuned, not an error */
        return errno == ENOENT ? 0 : set_err(err, err_len, "%s: cannot open: %s", path, strerror(errno));
    /* The whole file: a database is small (one entry per machine, problem and impl). */
    struct stat sb;
    char *text = fstat(fileno(f), &sb) == 0 ? malloc((size_t)sb.st_size + 1) : NULL;
    size_t len = text ? fread(text, 1, (size_t)sb.st_size, f) : 0;
    int rd_err = !text || ferror(f) || len != (size_t)sb.st_size;
    fclose(f);
    int rc = -1;
    cJSON *root = NULL;
    if (rd_err)
        set_err(err, err_len, "%s: cannot read: %s", path, text ? "short read" : "out of memory");
    else if (!(root = cJSON_ParseWithLength(text, len)))
        set_err(err, err_len, "%s: malformed JSON near byte %ld", path,
                cJSON_GetErrorPtr() ? (long)(cJSON_GetErrorPtr() - text) : -1L);
    else
        rc = parse_db(root, db, path, err, err_len);
    cJSON_Delete(root);
    free(text);
    if (rc != 0)
        mok_tunedb_free(db);
    return rc;
}

/* ---- save ------------------------------------------------------------------------------------------- */

static int add_fields(cJSON *obj, const struct field *fs, int n, const void *base)
{
    for (int i = 0; i < n; i++) {
        const char *p = (const char *)base + fs[i].off;
        if (!(fs[i].is_str ? cJSON_AddStringToObject(obj, fs[i].name, p)
                           : cJSON_AddNumberToObject(obj, fs[i].name, *(const int *)(const void *)p)))
            return -1;
    }
    return 0;
}

static char *to_json(const struct mok_tunedb *db)
{
    cJSON *root = cJSON_CreateObject(), *entries = NULL;
    int ok = root && cJSON_AddNumberToObject(root, "schema_version", MOK_TUNEDB_SCHEMA_VERSION) &&
             cJSON_AddStringToObject(root, "tool", "mok-bench") &&
             (entries = cJSON_AddArrayToObject(root, "entries"));
    for (int i = 0; ok && i < db->n; i++) {
        const struct mok_tune_entry *e = &db->e[i];
        cJSON *it = cJSON_CreateObject(), *key, *t;
        if (!it || !cJSON_AddItemToArray(entries, it)) {
            cJSON_Delete(it);
            ok = 0;
            break;
        }
        /* Every item is attached as soon as it is made, so deleting root frees everything on any failure. */
        char num[40];
        /* cJSON prints doubles with 15 digits when they compare equal within an epsilon, which can lose the
         * last bit; 17 significant digits always read back as the same double. */
        snprintf(num, sizeof num, "%.17g", e->time_us);
        ok = (key = cJSON_AddObjectToObject(it, "key")) && add_fields(key, key_fields, NKEY, &e->key) == 0 &&
             cJSON_AddStringToObject(it, "impl", e->impl) && cJSON_AddStringToObject(it, "params", e->params) &&
             (t = cJSON_CreateRaw(num)) && (cJSON_AddItemToObject(it, "time_us", t) || (cJSON_Delete(t), 0)) &&
             cJSON_AddStringToObject(it, "measured_utc", e->measured_utc) &&
             cJSON_AddStringToObject(it, "commit", e->commit);
    }
    char *text = ok ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    return text;
}

/* The rename itself is durable only once the directory is synced. */
static void fsync_parent(const char *path)
{
    char d[PATH_MAX];
    const char *slash = strrchr(path, '/');
    snprintf(d, sizeof d, "%.*s", slash ? (int)(slash - path) + (slash == path) : 1, slash ? path : ".");
    int fd = open(d, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int mok_tunedb_save(const char *path, const struct mok_tunedb *db, char *err, int err_len)
{
    for (int i = 0; i < db->n; i++)
        if (!terminated(&db->e[i]) || !isfinite(db->e[i].time_us))
            return set_err(err, err_len, "%s: entries[%d]: unterminated string or non-finite time", path, i);
    char *text = to_json(db);
    if (!text)
        return set_err(err, err_len, "%s: out of memory building the JSON", path);
    /* The temp file sits next to the target so rename(2) stays within one file system and replaces the old
     * file in one step: a reader sees the old database or the new one, never half of either. */
    char tmp[PATH_MAX];
    int rc = -1, fd = -1;
    FILE *f = NULL;
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld.XXXXXX", path, (long)getpid()) >= (int)sizeof tmp) {
        tmp[0] = '\0'; /* never unlink a truncated name */
        set_err(err, err_len, "%s: path too long", path);
    } else if ((fd = mkstemp(tmp)) < 0 || !(f = fdopen(fd, "w"))) {
        set_err(err, err_len, "%s: cannot create a temporary file: %s", path, strerror(errno));
        if (fd < 0)
            tmp[0] = '\0';
        else
            close(fd);
    } else {
        (void)fchmod(fd, 0644); /* mkstemp makes it 0600; the database is meant to be shared */
        /* Data on disk before the name points at it: a crash leaves the old database or the new one. */
        int bad = fputs(text, f) < 0 || fputc('\n', f) == EOF || fflush(f) != 0 || fsync(fd) != 0;
        bad |= fclose(f) != 0;
        if (bad)
            set_err(err, err_len, "%s: cannot write %s: %s", path, tmp, strerror(errno));
        else if (rename(tmp, path) != 0)
            set_err(err, err_len, "%s: cannot replace: %s", path, strerror(errno));
        else {
            tmp[0] = '\0';
            fsync_parent(path);
            rc = 0;
        }
    }
    if (tmp[0])
        unlink(tmp);
    free(text);
    return rc;
}

/* ---- validation ---------------------------------------------------------------------------------------- */

int mok_tunedb_params_parse(const struct mok_impl_desc *d, const char *label, int *values, char *why,
                            int why_len)
{
    int seen[MOK_MAX_PARAMS] = {0};
    for (const char *s = label; *s;) { /* "" is the label of an impl without params */
        const char *end = s + strcspn(s, ","), *eq = memchr(s, '=', (size_t)(end - s));
        int nlen = eq ? (int)(eq - s) : 0, vlen = eq ? (int)(end - eq - 1) : 0, j = -1;
        if (!eq)
            return set_err(why, why_len, "%s: '%.*s' is not name=value", d->name, (int)(end - s), s);
        char name[64];
        snprintf(name, sizeof name, "%.*s", nlen, s);
        const char *renamed = mok_impl_param_renamed(d->name, name); /* databases written before a rename */
        j = mok_impl_param_index(d, renamed ? renamed : name);
        const char *removed = j < 0 ? mok_impl_param_removed(d->name, name) : NULL;
        if (removed)
            return set_err(why, why_len, "%s: param %s was removed: %s", d->name, name, removed);
        if (j < 0)
            return set_err(why, why_len, "%s: unknown param '%.*s'", d->name, nlen, s);
        const struct mok_param_def *p = &d->params[j];
        if (seen[j]++)
            return set_err(why, why_len, "%s: param %s given twice", d->name, p->name);
        if (p->choices) {
            values[j] = -1;
            for (int c = 0; c < p->nchoices; c++)
                if ((int)strlen(p->choices[c]) == vlen && strncmp(p->choices[c], eq + 1, (size_t)vlen) == 0)
                    values[j] = c;
            if (values[j] < 0) {
                char list[128] = "";
                for (int c = 0, n = 0; c < p->nchoices && n < (int)sizeof list; c++)
                    n += snprintf(list + n, sizeof list - (size_t)n, "%s%s", c ? " | " : "", p->choices[c]);
                return set_err(why, why_len, "%s: %s=%.*s is not one of %s", d->name, p->name, vlen, eq + 1, list);
            }
        } else {
            char num[24], *rest;
            long v = 0;
            if (vlen > 0 && vlen < (int)sizeof num) {
                memcpy(num, eq + 1, (size_t)vlen);
                num[vlen] = '\0';
                errno = 0;
                v = strtol(num, &rest, 10);
            }
            if (vlen <= 0 || vlen >= (int)sizeof num || *rest || errno)
                return set_err(why, why_len, "%s: %s=%.*s is not an integer", d->name, p->name, vlen, eq + 1);
            if (v < p->min || v > p->max)
                return set_err(why, why_len, "%s: %s=%ld is out of [%d, %d]", d->name, p->name, v, p->min, p->max);
            values[j] = (int)v;
        }
        if (!*end)
            break;
        s = end + 1;
        if (!*s) /* a trailing comma: an empty item */
            return set_err(why, why_len, "%s: '%s' ends with a comma", d->name, label);
    }
    for (int k = 0; k < d->nparams; k++)
        if (!seen[k])
            return set_err(why, why_len, "%s: missing param %s", d->name, d->params[k].name);
    return 0;
}

int mok_tunedb_check(const struct mok_tune_entry *e, char *why, int why_len)
{
    const struct mok_impl_desc *d = mok_impl_desc_find(e->impl);
    if (!d)
        return set_err(why, why_len, "stale: impl '%s' no longer exists", e->impl);
    if (strcmp(d->mode, e->key.mode) != 0)
        return set_err(why, why_len, "stale: impl %s belongs to mode %s, the entry to mode %s", d->name, d->mode,
                       e->key.mode);
    int values[64];
    char reason[200];
    if (mok_tunedb_params_parse(d, e->params, values, reason, sizeof reason) != 0)
        return set_err(why, why_len, "stale: %s", reason);
    return 0;
}

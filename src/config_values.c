/* config_values: the config parser's JSON value checks (see config_values.h): messages that name the path, the
 * value and what is allowed; typed values with their ranges; lists; names; the text checks before parsing. */
#include "config_values.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define SHOWN_LEN 60 /* values longer than this are cut in messages, so a huge array cannot hide the reason */

/* ---- messages ----------------------------------------------------------------------------------------- */

void cfg_fail(struct mok_errors *e, const char *path, const cJSON *v, const char *fmt, ...)
{
    if (e->count >= MOK_MAX_ERRORS) { /* only counted from here on: don't print values nobody will see */
        e->count++;
        return;
    }
    char what[MOK_ERROR_LEN], shown[SHOWN_LEN + 4] = "", msg[2 * MOK_ERROR_LEN]; /* cut by mok_errors_add */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (v && cJSON_IsNumber(v) && !isfinite(v->valuedouble)) {
        snprintf(shown, sizeof shown, "%s", v->valuedouble < 0 ? "-inf" : "inf"); /* cJSON would print null */
    } else if (v) {
        char *json = cJSON_PrintUnformatted(v);
        snprintf(shown, sizeof shown, "%.*s%s", SHOWN_LEN, json ? json : "?",
                 json && strlen(json) > SHOWN_LEN ? "..." : "");
        cJSON_free(json);
    }
    if (v)
        snprintf(msg, sizeof msg, "%s = %s: %s", path, shown, what);
    else
        snprintf(msg, sizeof msg, "%s: %s", path, what);
    for (char *c = msg; *c; c++) /* keys and strings may hold newlines; each message stays one line */
        if ((unsigned char)*c < 0x20)
            *c = '?';
    mok_errors_add(e, "%s", msg);
}

/* Paths longer than PATHLEN (only from absurd keys) end in "..." rather than being silently cut. */
static const char *mark_cut(char *buf, int written)
{
    if (written >= PATHLEN)
        memcpy(buf + PATHLEN - 4, "...", 4);
    return buf;
}

const char *cfg_join(char *buf, const char *path, const char *key)
{
    return mark_cut(buf, snprintf(buf, PATHLEN, "%s%s%s", path, *path ? "." : "", key));
}

const char *cfg_indexed(char *buf, const char *path, int i)
{
    return mark_cut(buf, snprintf(buf, PATHLEN, "%s[%d]", path, i));
}

/* '"a", "b"' (quoted) or 'a, b', for "allowed: ..." lists. */
const char *cfg_list_names(char *buf, size_t len, const char *const *names, int n, bool quoted)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, quoted ? "%s\"%s\"" : "%s%s", i ? ", " : "", names[i]);
    return buf;
}

int cfg_find_name(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* Reports keys outside `allowed`, and repeated keys: cJSON keeps both, and silently ignoring one is a trap. */
void cfg_check_keys(struct mok_errors *e, const cJSON *obj, const char *path, const char *const *allowed, int n)
{
    bool seen[16] = {false};
    char list[256], p[PATHLEN];
    cfg_list_names(list, sizeof list, allowed, n, false);
    for (const cJSON *c = obj->child; c; c = c->next) {
        int k = cfg_find_name(c->string, allowed, n);
        if (k < 0)
            cfg_fail(e, cfg_join(p, path, c->string), c, "unknown key (allowed: %s)", list);
        else if (seen[k])
            cfg_fail(e, cfg_join(p, path, c->string), NULL, "duplicate key");
        else
            seen[k] = true;
    }
}

/* ---- typed values --------------------------------------------------------------------------------------- */

/* Checks that v is an integer in [lo, hi] (and a multiple of `multiple` when > 1); on success stores it. */
bool cfg_int_value(struct mok_errors *e, const cJSON *v, const char *path, long long lo, long long hi,
                      int multiple, long long *out)
{
    if (!cJSON_IsNumber(v) || (isfinite(v->valuedouble) && v->valuedouble != floor(v->valuedouble))) {
        cfg_fail(e, path, v, "must be an integer");
        return false;
    }
    double d = v->valuedouble; /* compare as double first: 1e300 or inf must not overflow a cast */
    bool ok = d >= (double)lo && d <= (double)hi && (multiple <= 1 || fmod(d, multiple) == 0);
    if (!ok && multiple > 1)
        cfg_fail(e, path, v, "must be a positive multiple of %d (kernel alignment), at most %lld", multiple, hi);
    else if (!ok)
        cfg_fail(e, path, v, "must be an integer in [%lld, %lld]", lo, hi);
    else
        *out = (long long)d;
    return ok;
}

/* obj[key] as an int; an absent key is an error when required, else *out keeps its default. */
bool cfg_get_int(struct mok_errors *e, const cJSON *obj, const char *path, const char *key, bool required,
                    long long lo, long long hi, int multiple, int *out)
{
    char p[PATHLEN];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    cfg_join(p, path, key);
    if (!v) {
        if (required && multiple > 1)
            cfg_fail(e, p, NULL, "missing (required: positive multiple of %d)", multiple);
        else if (required)
            cfg_fail(e, p, NULL, "missing (required: integer in [%lld, %lld])", lo, hi);
        return !required;
    }
    long long x;
    if (!cfg_int_value(e, v, p, lo, hi, multiple, &x))
        return false;
    *out = (int)x;
    return true;
}

/* obj[key] as a number in [lo, hi], or (lo, hi] when lo_open. */
bool cfg_get_num(struct mok_errors *e, const cJSON *obj, const char *path, const char *key, bool required,
                    double lo, bool lo_open, double hi, double *out)
{
    char p[PATHLEN];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    cfg_join(p, path, key);
    if (!v) {
        if (required)
            cfg_fail(e, p, NULL, "missing (required: number in %c%g, %g])", lo_open ? '(' : '[', lo, hi);
        return !required;
    }
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!cJSON_IsNumber(v) || !(lo_open ? d > lo : d >= lo) || !(d <= hi)) {
        cfg_fail(e, p, v, "must be a number in %c%g, %g]", lo_open ? '(' : '[', lo, hi);
        return false;
    }
    *out = d;
    return true;
}

/* Zero-fills the rest of dst so overwriting a default leaves no stale bytes: ranks compare configs bytewise. */
void cfg_set_str(char *dst, size_t len, const char *src)
{
    memset(dst, 0, len);
    strncpy(dst, src, len - 1);
}

/* obj[key] as a string of 1..len-1 characters copied into out (len bytes); absent: out is left alone. */
bool cfg_get_str(struct mok_errors *e, const cJSON *obj, const char *path, const char *key, char *out, size_t len)
{
    char p[PATHLEN];
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v)
        return true;
    if (!cJSON_IsString(v) || !v->valuestring[0] || strlen(v->valuestring) >= len) {
        cfg_fail(e, cfg_join(p, path, key), v, "must be a non-empty string of at most %zu characters", len - 1);
        return false;
    }
    cfg_set_str(out, len, v->valuestring);
    return true;
}

/* Most keys take one value or a list of 1..max of them. Fills items[] and returns how many (-1: bad list);
 * *is_list says whether element paths get "[i]". */
int cfg_as_list(struct mok_errors *e, const cJSON *v, const char *path, int max, const cJSON **items,
                   bool *is_list)
{
    *is_list = cJSON_IsArray(v);
    if (!*is_list) {
        items[0] = v;
        return 1;
    }
    int n = cJSON_GetArraySize(v);
    if (n < 1 || n > max) {
        cfg_fail(e, path, v, "must be a list of 1 to %d entries", max);
        return -1;
    }
    int i = 0;
    for (const cJSON *c = v->child; c; c = c->next)
        items[i++] = c;
    return n;
}

/* A string value out of names[], of which only the first `implemented` are supported so far. */
int cfg_choice(struct mok_errors *e, const cJSON *v, const char *path, const char *const *names, int n,
                  int implemented)
{
    char list[256];
    int k = cJSON_IsString(v) ? cfg_find_name(v->valuestring, names, n) : -1;
    if (k < 0 && implemented < n) { /* the allowed list is what runs; the rest are named as not there yet */
        char later[128];
        cfg_fail(e, path, v, "must be one of %s (%s: not implemented yet)",
             cfg_list_names(list, sizeof list, names, implemented, true),
             cfg_list_names(later, sizeof later, names + implemented, n - implemented, true));
    } else if (k < 0) {
        cfg_fail(e, path, v, "must be one of %s", cfg_list_names(list, sizeof list, names, n, true));
    } else if (k >= implemented) {
        cfg_fail(e, path, v, "not implemented yet (allowed: %s)", cfg_list_names(list, sizeof list, names, implemented, true));
        k = -1;
    }
    return k;
}

/* Valid UTF-8 without control characters (C0, DEL, C1) and without overlong or surrogate encodings. */
bool cfg_printable_utf8(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        unsigned c = *s;
        int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
        if (n < 0)
            return false;
        unsigned cp = n == 0 ? c : c & (0x3fu >> n);
        for (int i = 1; i <= n; i++) {
            if ((s[i] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i] & 0x3f);
        }
        static const unsigned min_cp[] = {0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp < 0x20 ||
            (cp >= 0x7f && cp < 0xa0))
            return false;
        s += n + 1;
    }
    return true;
}

/* ---- the text, before parsing ------------------------------------------------------------------------------ */

/* cJSON reports where parsing stopped as a pointer; people want a line and a column. */
void cfg_malformed(struct mok_errors *e, const char *label, const char *text, const char *at)
{
    int line = 1, col = 1;
    for (const char *s = text; s < at && *s; s++, col++)
        if (*s == '\n') {
            line++;
            col = 0;
        }
    char near[21];
    int n = 0;
    for (; n < 20 && at[n]; n++)
        near[n] = (unsigned char)at[n] < 0x20 || (unsigned char)at[n] >= 0x7f ? ' ' : at[n];
    near[n] = '\0';
    if (n == 0)
        mok_errors_add(e, "%s:%d:%d: malformed JSON at end of input", label, line, col);
    else
        mok_errors_add(e, "%s:%d:%d: malformed JSON near '%s'", label, line, col, near);
}

/* The deepest nesting of objects and arrays outside strings. cJSON stops at its own limit (1000) with a
 * "malformed JSON" that names no reason; configs need 4 levels, so a small limit with its own message. */
int cfg_json_depth(const char *text)
{
    int depth = 0, deepest = 0;
    bool in_string = false;
    for (const char *c = text; *c; c++) {
        if (in_string) {
            if (*c == '\\' && c[1])
                c++;
            else if (*c == '"')
                in_string = false;
        } else if (*c == '"') {
            in_string = true;
        } else if (*c == '{' || *c == '[') {
            deepest = ++depth > deepest ? depth : deepest;
        } else if (*c == '}' || *c == ']') {
            depth--;
        }
    }
    return deepest;
}

/* config_values: the JSON value checks behind the config parser (config.c), internal to the config module. Each
 * check that fails adds "PATH = VALUE: WHAT ALLOWED" to the errors and leaves its output alone. */
#ifndef MOK_CONFIG_VALUES_H
#define MOK_CONFIG_VALUES_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#include "errors.h"

#define PATHLEN 256 /* JSON paths in messages ("model[1].hidden"); longer ones end in "..." */

void cfg_fail(struct mok_errors *e, const char *path, const cJSON *v, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* path.key and path[i] into buf (PATHLEN bytes). */
const char *cfg_join(char *buf, const char *path, const char *key);
const char *cfg_indexed(char *buf, const char *path, int i);
/* '"a", "b"' (quoted) or 'a, b', for "allowed: ..." lists; the index of s in names, or -1. */
const char *cfg_list_names(char *buf, size_t len, const char *const *names, int n, bool quoted);
int cfg_find_name(const char *s, const char *const *names, int n);
/* Keys of obj outside allowed, and repeated keys (cJSON keeps both), are errors. */
void cfg_check_keys(struct mok_errors *e, const cJSON *obj, const char *path, const char *const *allowed, int n);
/* v an integer in [lo, hi] (a multiple of `multiple` when > 1) into *out. */
bool cfg_int_value(struct mok_errors *e, const cJSON *v, const char *path, long long lo, long long hi, int multiple,
                   long long *out);
/* obj[key] as an int / a number in [lo, hi] ((lo, hi] when lo_open) / a string of 1..len-1 characters; an absent
 * key is an error when required, else *out keeps its default. */
bool cfg_get_int(struct mok_errors *e, const cJSON *obj, const char *path, const char *key, bool required,
                 long long lo, long long hi, int multiple, int *out);
bool cfg_get_num(struct mok_errors *e, const cJSON *obj, const char *path, const char *key, bool required, double lo,
                 bool lo_open, double hi, double *out);
bool cfg_get_str(struct mok_errors *e, const cJSON *obj, const char *path, const char *key, char *out, size_t len);
/* Zero-fills the rest of dst so overwriting a default leaves no stale bytes: ranks compare configs bytewise. */
void cfg_set_str(char *dst, size_t len, const char *src);
/* One value or a list of 1..max: items[] and their count (-1: bad list); *is_list says whether paths get "[i]". */
int cfg_as_list(struct mok_errors *e, const cJSON *v, const char *path, int max, const cJSON **items, bool *is_list);
/* A string out of names[], of which only the first `implemented` are supported so far: its index, or -1. */
int cfg_choice(struct mok_errors *e, const cJSON *v, const char *path, const char *const *names, int n,
               int implemented);
/* Valid UTF-8 without control characters. */
bool cfg_printable_utf8(const char *str);
/* Before parsing: where cJSON stopped, as line and column; the deepest nesting of objects and arrays. */
void cfg_malformed(struct mok_errors *e, const char *label, const char *text, const char *at);
int cfg_json_depth(const char *text);

#endif

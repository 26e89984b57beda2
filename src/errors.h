/* errors: a list of user-facing error messages, collected so every problem is reported at once. */
#ifndef MOK_ERRORS_H
#define MOK_ERRORS_H

#include <stdio.h>

#define MOK_MAX_ERRORS 64
#define MOK_ERROR_LEN 320

struct mok_errors {
    int count;   /* errors added, may exceed MOK_MAX_ERRORS; only the first are kept */
    char msg[MOK_MAX_ERRORS][MOK_ERROR_LEN];
};

void mok_errors_init(struct mok_errors *e);
/* Adds "PATH = VALUE: WHAT" style messages; fmt is printf-like. */
void mok_errors_add(struct mok_errors *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "prefix: msg" per error and a trailing count line when some were dropped. */
void mok_errors_print(const struct mok_errors *e, FILE *out, const char *prefix);

#endif

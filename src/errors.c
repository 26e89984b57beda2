/* errors: collected user-facing error messages. */
#include "errors.h"

#include <stdarg.h>
#include <string.h>

void mok_errors_init(struct mok_errors *e) { memset(e, 0, sizeof(*e)); }

void mok_errors_add(struct mok_errors *e, const char *fmt, ...)
{
    if (e->count < MOK_MAX_ERRORS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg[e->count], MOK_ERROR_LEN, fmt, ap);
        va_end(ap);
    }
    e->count++;
}

void mok_errors_print(const struct mok_errors *e, FILE *out, const char *prefix)
{
    int kept = e->count < MOK_MAX_ERRORS ? e->count : MOK_MAX_ERRORS;
    for (int i = 0; i < kept; i++)
        fprintf(out, "%s: %s\n", prefix, e->msg[i]);
    if (e->count > kept)
        fprintf(out, "%s: ... and %d more errors\n", prefix, e->count - kept);
}

/* fuzz_config: a smoke fuzzer of the config parser. Usage: fuzz_config DIR ITERATIONS SEED.
 *
 * Seeds are every .json under DIR/valid and DIR/invalid. Each iteration mutates one seed a few times (byte
 * flips, deletions, JSON-ish token insertions, truncation, duplicated spans), parses it, and for a config that
 * parses also checks that its canonical JSON parses back to the same text. Run under ASan/UBSan, the test is
 * that nothing crashes, leaks or trips a sanitizer; the same SEED replays the same inputs. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

struct buf {
    char *p;
    size_t len, cap;
};

static uint64_t rng_state;

static uint64_t rng(void) /* xorshift64*: small, deterministic across platforms */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ULL;
}

static size_t below(size_t n) { return n ? (size_t)(rng() % n) : 0; }

static void reserve(struct buf *b, size_t extra)
{
    if (b->len + extra + 1 > b->cap) {
        b->cap = (b->len + extra + 1) * 2;
        b->p = realloc(b->p, b->cap);
    }
}

static void insert(struct buf *b, size_t at, const char *s, size_t n)
{
    reserve(b, n);
    memmove(b->p + at + n, b->p + at, b->len - at);
    memcpy(b->p + at, s, n);
    b->len += n;
}

static const char *const tokens[] = {"{",     "}",    "[",    "]",   ",",          ":",     "\"",  "1e309",
                                     "-0",    "null", "true", "1.5", "\"model\"",  "\"x\"", "[]",  "{}",
                                     "-1",    "0",    "4096", "64",  "2147483648", "\\u00", "\n",  "\"hot\"",
                                     "\"nccl\"", "\"tune\"", "1e-400", "9007199254740993"};

static void mutate(struct buf *b)
{
    size_t at = below(b->len + 1), n;
    switch (rng() % 6) {
    case 0: /* flip a bit */
        if (b->len)
            b->p[below(b->len)] ^= (char)(1u << (rng() % 8));
        break;
    case 1: /* delete a span */
        n = below(b->len - at < 16 ? b->len - at + 1 : 17);
        memmove(b->p + at, b->p + at + n, b->len - at - n);
        b->len -= n;
        break;
    case 2: { /* insert a token */
        const char *t = tokens[below(sizeof tokens / sizeof tokens[0])];
        insert(b, at, t, strlen(t));
        break;
    }
    case 3: /* truncate */
        b->len = at;
        break;
    case 4: { /* duplicate a span somewhere else */
        n = below(b->len - at < 64 ? b->len - at + 1 : 65);
        char tmp[64];
        memcpy(tmp, b->p + at, n);
        insert(b, below(b->len + 1), tmp, n);
        break;
    }
    default: /* overwrite a byte with a JSON-significant one */
        if (b->len)
            b->p[below(b->len)] = "{}[],:\"0-.e \\"[rng() % 13];
        break;
    }
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    *len = fread(s, 1, (size_t)n, f);
    s[*len] = '\0';
    fclose(f);
    return s;
}

static int add_seeds(const char *dir, char ***seeds, size_t **lens, int n)
{
    DIR *d = opendir(dir);
    char path[2048];
    if (!d)
        return n;
    for (struct dirent *de; (de = readdir(d));) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 5, ".json") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        *seeds = realloc(*seeds, (size_t)(n + 1) * sizeof(char *));
        *lens = realloc(*lens, (size_t)(n + 1) * sizeof(size_t));
        if (((*seeds)[n] = read_file(path, &(*lens)[n])))
            n++;
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s DIR ITERATIONS SEED\n", argv[0]);
        return 2;
    }
    char sub[1024], **seeds = NULL;
    size_t *lens = NULL;
    int nseeds = 0;
    snprintf(sub, sizeof sub, "%s/valid", argv[1]);
    nseeds = add_seeds(sub, &seeds, &lens, nseeds);
    int nvalid = nseeds; /* valid seeds come first; half the inputs start from one, so successes are not rare */
    snprintf(sub, sizeof sub, "%s/invalid", argv[1]);
    nseeds = add_seeds(sub, &seeds, &lens, nseeds);
    if (nseeds == 0) {
        fprintf(stderr, "no seeds under %s/valid or %s/invalid\n", argv[1], argv[1]);
        return 2;
    }
    long iters = atol(argv[2]);
    rng_state = strtoull(argv[3], NULL, 0) * 0x9E3779B97F4A7C15ULL + 1; /* never 0: xorshift would stick */

    static struct mok_config cfg, again;
    static struct mok_errors errs;
    struct buf b = {NULL, 0, 0};
    long ok = 0, rejected = 0, bad = 0;
    for (long it = 0; it < iters; it++) {
        int s = (int)below((size_t)((rng() & 1) && nvalid ? nvalid : nseeds));
        b.len = 0;
        insert(&b, 0, seeds[s], lens[s]);
        for (int m = (rng() & 1) ? 1 : 1 + (int)below(4); m > 0; m--)
            mutate(&b);
        b.p[b.len] = '\0';

        mok_errors_init(&errs);
        if (mok_config_parse(b.p, (rng() & 1) ? "fuzz.json" : NULL, &cfg, &errs) != 0) {
            rejected++;
            for (int i = 0; i < errs.count && i < MOK_MAX_ERRORS; i++)
                if (strchr(errs.msg[i], '\n') || errs.msg[i][0] == '\0') {
                    fprintf(stderr, "iteration %ld: bad message '%s'\n", it, errs.msg[i]);
                    bad++;
                }
            continue;
        }
        ok++;
        mok_config_check_ranks(&cfg, 1 + (int)below(8), &errs);
        struct mok_problem_spec ps;
        mok_config_problem_at(&cfg, mok_config_problem_count(&cfg) - 1, &ps);
        char *j1 = mok_config_to_json(&cfg);
        mok_errors_init(&errs);
        int n = mok_config_parse(j1, NULL, &again, &errs);
        char *j2 = n == 0 ? mok_config_to_json(&again) : NULL;
        if (n != 0 || strcmp(j1, j2) != 0) {
            fprintf(stderr, "iteration %ld: round trip failed (%s)\ninput: %s\ncanonical: %s\n", it,
                    n ? errs.msg[0] : "text differs", b.p, j1);
            bad++;
        }
        free(j1);
        free(j2);
    }
    printf("fuzz_config: %ld iterations, %ld parsed ok, %ld rejected, %ld problems\n", iters, ok, rejected, bad);
    for (int i = 0; i < nseeds; i++)
        free(seeds[i]);
    free(seeds);
    free(lens);
    free(b.p);
    return bad ? 1 : 0;
}

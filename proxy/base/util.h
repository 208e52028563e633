/* util.h -- allocation that never fails (it aborts, as redis's zmalloc
 * does, so no call site checks for NULL), checks, and small helpers. */
#ifndef SHARDIS_UTIL_H
#define SHARDIS_UTIL_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
FILE *xopen_memstream(char **buf, size_t *len);

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* A function off the per-request path that such a path calls rarely:
 * kept out of line, so that its caller saves no register for it. */
#define COLD __attribute__((noinline, cold))

#define container_of(ptr, type, field) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, field)))

/* ASSERT is for invariants (compiled out with NDEBUG); CHECK aborts always. */
#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__,  \
                    #cond);                                                    \
            abort();                                                           \
        }                                                                      \
    } while (0)

#ifdef NDEBUG
#define ASSERT(cond) ((void)0)
#else
#define ASSERT(cond) CHECK(cond)
#endif

#endif

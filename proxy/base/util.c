/* util.c -- see util.h. */
#include <string.h>

#include "proxy/base/util.h"

static void oom(size_t n)
{
    fprintf(stderr, "shardis: out of memory allocating %zu bytes\n", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        oom(n * size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

char *xstrndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = memcpy(xmalloc(len + 1), s, len);
    p[len] = '\0';
    return p;
}

/* open_memstream fails only when it cannot allocate its buffer: abort, as
 * xmalloc does, so no caller ever writes to a NULL stream. */
FILE *xopen_memstream(char **buf, size_t *len)
{
    FILE *f = open_memstream(buf, len);
    if (f == NULL) {
        fprintf(stderr, "shardis: out of memory opening a memory stream\n");
        abort();
    }
    return f;
}

/* test_mbuf.c -- what a chunk costs the allocator the shardis binary
 * links (jemalloc): exactly its size, no size class rounding, no padding.
 * Built without jemalloc (sanitizer builds) there is nothing to measure. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdbool.h>
#include <stdint.h>

#include "proxy/base/mbuf.h"

#ifdef SHARDIS_JEMALLOC
#include <jemalloc/jemalloc.h>

/* Bytes in pages jemalloc has handed out (stats are refreshed by "epoch"). */
static size_t active_bytes(void)
{
    uint64_t epoch = 1;
    size_t v, len = sizeof(epoch);

    cr_assert(eq(int, mallctl("epoch", &epoch, &len, &epoch, len), 0));
    len = sizeof(v);
    cr_assert(eq(int, mallctl("stats.active", &v, &len, NULL, 0), 0));
    return v;
}
#endif

Test(mbuf, chunk_fills_its_size_class)
{
#ifdef SHARDIS_JEMALLOC
    struct mbuf *m = mbuf_get();

    /* Nothing of the class is left over past the struct ... */
    cr_assert(eq(sz, malloc_usable_size(m), sizeof(struct mbuf)));
    mbuf_unref(m);
    mbuf_pool_trim();
#else
    cr_skip_test("not linked with jemalloc");
#endif
}

Test(mbuf, chunk_costs_its_size)
{
#ifdef SHARDIS_JEMALLOC
    /* ... and nothing is added around it: 1,024 chunks take 1,024 chunks'
     * pages (a large size class would take a page more each). Without the
     * thread cache, which would fetch chunks ahead of use. */
    enum { N = 1024 };
    static struct mbuf *m[N];
    bool off = false;

    cr_assert(eq(int, mallctl("thread.tcache.enabled", NULL, NULL, &off, sizeof(off)), 0));
    size_t before = active_bytes();
    for (int i = 0; i < N; i++)
        m[i] = mbuf_get();
    size_t grew = active_bytes() - before;
    for (int i = 0; i < N; i++)
        mbuf_unref(m[i]);
    mbuf_pool_trim();
    /* one slab's rounding at most */
    cr_assert(le(sz, grew, N * sizeof(struct mbuf) + 64 * 1024),
              "%d chunks of %zu bytes took %zu bytes (%.0f each)", N, sizeof(struct mbuf),
              grew, (double)grew / N);
#else
    cr_skip_test("not linked with jemalloc");
#endif
}

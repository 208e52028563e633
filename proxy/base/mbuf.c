/* mbuf.c -- the chunk pool and slice lists (see mbuf.h).
 *
 * The free list is the one piece of loop state not reached through struct
 * proxy, on purpose: it is per thread (_Thread_local), the way an
 * allocator's thread cache is. A chunk is taken and given back by the loop
 * that reads into it, and a loop is a thread; handing the loop's pool to
 * every mbuf_get and mbuf_unref (a hundred calls, many in code that never
 * sees the loop) would cost every call an argument and buy nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/base/mbuf.h"
#include "proxy/base/util.h"

#define MBUF_FREE_MAX   256     /* 3.5 MiB of chunks kept for reuse */

static _Thread_local struct mbuf *free_list;
static _Thread_local size_t nfree, nalloc;

struct mbuf *mbuf_get(void)
{
    struct mbuf *m = free_list;

    if (m != NULL) {
        free_list = m->next;
        nfree--;
    } else {
        m = xmalloc(sizeof(*m));
        nalloc++;
    }
    m->next = NULL;
    m->base = 0;
    m->refs = 1;
    m->len = 0;
    return m;
}

void mbuf_ref(struct mbuf *m)
{
    m->refs++;
}

void mbuf_unref(struct mbuf *m)
{
    ASSERT(m->refs > 0);
    if (--m->refs > 0)
        return;
    if (nfree < MBUF_FREE_MAX) {
        m->next = free_list;
        free_list = m;
        nfree++;
    } else {
        free(m);
        nalloc--;
    }
}

size_t mbuf_nalloc(void) { return nalloc; }

void mbuf_counts_at(const size_t **a, const size_t **f)
{
    *a = &nalloc;
    *f = &nfree;
}
size_t mbuf_nfree(void) { return nfree; }

/* Give the pooled chunks back to the allocator (when the proxy is idle). */
void mbuf_pool_trim(void)
{
    while (free_list != NULL) {
        struct mbuf *m = free_list;
        free_list = m->next;
        free(m);
        nalloc--;
    }
    nfree = 0;
}

struct slice *msg_slice(struct msg *g, uint32_t i)
{
    return i < 2 ? &g->inl[i] : &g->more[i - 2];
}

int msg_append(struct msg *g, struct mbuf *m, uint32_t off, uint32_t len)
{
    struct slice *last = g->n > 0 ? msg_slice(g, g->n - 1) : NULL;

    if (len == 0)
        return 0;
    g->len += len;
    if (last != NULL && last->m == m && last->off + last->len == off) {
        last->len += len;           /* contiguous in the same chunk */
        return 0;
    }
    if (g->n >= 2 && g->n - 2 == g->cap) {
        uint32_t cap = g->cap ? g->cap * 2 : 8;
        g->more = xrealloc(g->more, cap * sizeof(*g->more));
        g->cap = cap;
    }
    mbuf_ref(m);
    *msg_slice(g, g->n++) = (struct slice){m, off, len};
    return 0;
}

void msg_release(struct msg *g)
{
    for (uint32_t i = 0; i < g->n; i++)
        mbuf_unref(msg_slice(g, i)->m);
    if (g->more != NULL)        /* rarely: free(NULL) is a call into the allocator */
        free(g->more);
    memset(g, 0, sizeof(*g));
}

void msg_copy(const struct msg *g, size_t off, size_t len, char *out)
{
    for (uint32_t i = 0; i < g->n && len > 0; i++) {
        const struct slice *s = i < 2 ? &g->inl[i] : &g->more[i - 2];
        if (off >= s->len) {
            off -= s->len;
            continue;
        }
        size_t n = s->len - off < len ? s->len - off : len;
        memcpy(out, s->m->data + s->off + off, n);
        out += n;
        len -= n;
        off = 0;
    }
}

/* Append slices of g's bytes [off, off+len) to out. */
void msg_sub(const struct msg *g, size_t off, size_t len, struct msg *out)
{
    for (uint32_t i = 0; i < g->n && len > 0; i++) {
        const struct slice *s = i < 2 ? &g->inl[i] : &g->more[i - 2];
        if (off >= s->len) {
            off -= s->len;
            continue;
        }
        uint32_t n = (uint32_t)(s->len - off < len ? s->len - off : len);
        msg_append(out, s->m, s->off + (uint32_t)off, n);
        len -= n;
        off = 0;
    }
}

void msg_write(struct msg *g, struct mbuf **cur, const void *data, size_t len)
{
    const char *p = data;

    while (len > 0) {
        if (*cur == NULL || (*cur)->len == MBUF_SIZE) {
            if (*cur != NULL)
                mbuf_unref(*cur);
            *cur = mbuf_get();
        }
        struct mbuf *m = *cur;
        size_t n = MBUF_SIZE - m->len < len ? MBUF_SIZE - m->len : len;
        memcpy(m->data + m->len, p, n);
        msg_append(g, m, m->len, (uint32_t)n);
        m->len += (uint32_t)n;
        p += n;
        len -= n;
    }
}

char *msg_reserve(struct msg *g, struct mbuf **cur, size_t len)
{
    ASSERT(len <= MBUF_SIZE);
    if (*cur == NULL || MBUF_SIZE - (*cur)->len < len) {
        if (*cur != NULL)
            mbuf_unref(*cur);
        *cur = mbuf_get();
    }
    struct mbuf *m = *cur;
    char *at = m->data + m->len;
    msg_append(g, m, m->len, (uint32_t)len);
    m->len += (uint32_t)len;
    return at;
}

/* stream.c -- a connection's bytes: reading into chunks (struct rstream:
 * from the oldest byte still needed to the newest), and writing slices
 * out, now when the socket takes them. Clients and backends share it. */
#include <errno.h>
#include <string.h>

#include "proxy/base/stream.h"

void rstream_buf(struct rstream *s, uv_buf_t *buf)
{
    struct mbuf *t = s->tail;

    if (t == NULL || t->len == MBUF_SIZE) {
        t = mbuf_get();
        t->base = s->rx;
        if (s->tail != NULL)
            s->tail->next = t;
        else
            s->head = t;
        s->tail = t;
    }
    *buf = uv_buf_init(t->data + t->len, MBUF_SIZE - t->len);
}

/* A request's arguments are looked up one after the other; walking from
 * the head each time made a request of n arguments over c chunks cost
 * n * c (seconds for a DEL of a million keys). */
struct mbuf *rstream_find(struct rstream *s, uint64_t off)
{
    struct mbuf *m = s->seek != NULL && s->seek->base <= off ? s->seek : s->head;

    while (m != NULL && m->base + m->len <= off)
        m = m->next;
    if (m != NULL)
        s->seek = m;
    return m;
}

void rstream_slice(struct rstream *s, uint64_t start, uint64_t end, struct msg *g)
{
    for (struct mbuf *m = rstream_find(s, start); m != NULL && start < end; m = m->next) {
        uint64_t mend = m->base + m->len;
        if (mend <= start)
            continue;
        uint64_t to = end < mend ? end : mend;
        msg_append(g, m, (uint32_t)(start - m->base), (uint32_t)(to - start));
        start = to;
    }
}

void rstream_trim(struct rstream *s, uint64_t keep)
{
    while (s->head != NULL) {
        struct mbuf *m = s->head;
        if (keep < s->rx && m->base + m->len > keep)
            break;
        s->head = m->next;
        if (s->head == NULL)
            s->tail = NULL;
        if (s->seek == m)
            s->seek = NULL;
        m->next = NULL;
        mbuf_unref(m);
    }
}

/* ---- writes -------------------------------------------------------------------- */

int stream_try_write(uv_stream_t *s, uv_buf_t **iov, unsigned *niov, size_t total)
{
    int n = uv_try_write(s, *iov, *niov);

    if (n == UV_EAGAIN || n == UV_ENOSYS)
        n = 0;
    if (n < 0)
        return n;
    if ((size_t)n == total)
        return 1;
    /* Skip what went out; the rest waits for the socket. */
    size_t skip = (size_t)n;
    while (skip >= (*iov)->len) {
        skip -= (*iov)->len;
        (*iov)++;
        (*niov)--;
    }
    (*iov)->base += skip;
    (*iov)->len -= skip;
    return 0;
}

unsigned msg_bufs(struct msg *g, uv_buf_t *out)
{
    for (uint32_t i = 0; i < g->n; i++) {
        const struct slice *s = msg_slice(g, i);
        out[i] = uv_buf_init(s->m->data + s->off, s->len);
    }
    return g->n;
}


/* head.h -- the head of each request (its first REQ_HEAD_BYTES), kept
 * as it is routed where the pool logs slow requests: what a slow log
 * entry shows of it (slowlog.c reads it, from req.head). Here, below the
 * slow log, because route.c copies it on the path of every request,
 * inline (head.c: the rare copy out of line). */
#ifndef SHARDIS_HEAD_H
#define SHARDIS_HEAD_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "proxy/base/mbuf.h"
#include "proxy/core/pool.h"
#include "proxy/transport/client.h"
#include "proxy/transport/req.h"

/* Whether p logs slow requests: then route.c keeps each request's head
 * (head_keep), which an entry shows (slowlog.c). */
static inline bool head_wanted(const struct pool *p)
{
    return p->conf->slowlog_log_slower_than >= 0 && p->conf->slowlog_max_len > 0;
}
/* head_keep's copy of a head spread over chunks (out of line: rare). */
void head_keep_spread(struct req_head *h, struct rstream *in, uint64_t off, uint64_t end);
/* Copy r's head (the request c's framer just completed), on the path of
 * every request: inline. */
static inline void head_keep(struct req *r, struct client *c)
{
    struct req_head *h = &r->head;
    const struct resp_req *s = &c->scan;
    const struct mbuf *m = c->in.tail;
    uint64_t off = s->start, len = s->end - s->start;

    if (s->is_inline) {
        h->len = 0;                 /* (a human's: its command's name will do) */
        return;
    }
    h->len = (uint32_t)(len < UINT32_MAX ? len : UINT32_MAX);
    h->kept = (uint8_t)(len < REQ_HEAD_BYTES ? len : REQ_HEAD_BYTES);
    /* Most requests are whole in the chunk being read (the request is
     * complete, so all of it is there once its start is): one copy, of a
     * constant size (inlined) when the chunk holds that much. */
    if (m == NULL || off < m->base)
        head_keep_spread(h, &c->in, off, off + h->kept);
    else if (off + REQ_HEAD_BYTES <= m->base + m->len)
        memcpy(h->raw, m->data + (off - m->base), REQ_HEAD_BYTES);
    else
        memcpy(h->raw, m->data + (off - m->base), h->kept);
}

#endif

/* slowlog.h -- SLOWLOG: the requests of a pool that took longer than
 * slowlog_log_slower_than, as the application saw them (slowlog.c). */
#ifndef SHARDIS_SLOWLOG_H
#define SHARDIS_SLOWLOG_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "proxy/transport/client.h"
#include "proxy/base/mbuf.h"
#include "proxy/core/pool.h"
#include "proxy/transport/req.h"

struct args;

/* A pool's log (pool.slowlog): made on the first entry, freed by
 * slowlog_free. */
struct slowlog;

/* Whether p logs slow requests: then route.c keeps each request's head
 * (slowlog_keep), which an entry shows. */
static inline bool slowlog_on(const struct pool *p)
{
    return p->conf->slowlog_log_slower_than >= 0 && p->conf->slowlog_max_len > 0;
}
/* slowlog_keep's copy of a head spread over chunks (out of line: rare). */
void slowlog_keep_spread(struct req_head *h, struct rstream *in, uint64_t off, uint64_t end);
/* Copy r's head (the request c's framer just completed), on the path of
 * every request: inline. */
static inline void slowlog_keep(struct req *r, struct client *c)
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
        slowlog_keep_spread(h, &c->in, off, off + h->kept);
    else if (off + REQ_HEAD_BYTES <= m->base + m->len)
        memcpy(h->raw, m->data + (off - m->base), REQ_HEAD_BYTES);
    else
        memcpy(h->raw, m->data + (off - m->base), h->kept);
}
/* r, c's request, has its whole reply after us microseconds: logged if
 * it is a command (not a message pushed: its t0 is 0), not a blocking one
 * (its time is mostly waiting), and slow enough. From req_done: the tests
 * inline, the logging not. */
void slowlog_reply(struct pool *p, struct client *c, const struct req *r, uint64_t us);
static inline void slowlog_maybe(struct pool *p, struct client *c, const struct req *r,
                                 uint64_t us)
{
    if (r->cmd != 0 && !r->blocking && p->conf->slowlog_log_slower_than >= 0 &&
        us >= (uint64_t)p->conf->slowlog_log_slower_than)
        slowlog_reply(p, c, r, us);
}
/* SLOWLOG GET [n] | LEN | RESET | HELP. */
void slowlog_command(struct client *c, struct req *r, struct args *a);
void slowlog_free(struct pool *p);
/* Slow requests not logged: over slowlog_max_len in one second (INFO). */
uint64_t slowlog_skipped(const struct pool *p);

#endif

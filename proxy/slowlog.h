/* slowlog.h -- SLOWLOG: the requests of a pool that took longer than
 * slowlog_log_slower_than, as the application saw them (slowlog.c). */
#ifndef SHARDIS_SLOWLOG_H
#define SHARDIS_SLOWLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "proxy/pool.h"
#include "proxy/req.h"

struct args;
struct client;
struct req;

/* A pool's log (pool.slowlog): made on the first entry, freed by
 * slowlog_free. */
struct slowlog;

/* Whether p logs slow requests: then route.c keeps each request's head
 * (slowlog_keep), which an entry shows. */
static inline bool slowlog_on(const struct pool *p)
{
    return p->conf->slowlog_log_slower_than >= 0 && p->conf->slowlog_max_len > 0;
}
void slowlog_keep(struct req *r, struct client *c);
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

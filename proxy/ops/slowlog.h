/* slowlog.h -- SLOWLOG: the requests of a pool that took longer than
 * slowlog_log_slower_than, as the application saw them (slowlog.c). */
#ifndef SHARDIS_SLOWLOG_H
#define SHARDIS_SLOWLOG_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "proxy/transport/client.h"
#include "proxy/base/mbuf.h"
#include "proxy/core/head.h"
#include "proxy/core/pool.h"
#include "proxy/transport/req.h"

struct args;

/* A pool's log (pool.slowlog): made on the first entry, freed by
 * slowlog_free. */
struct slowlog;

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

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module slowlog_module;

#endif

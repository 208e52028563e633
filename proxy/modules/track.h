/* track.h -- client-side caching through the proxy: CLIENT TRACKING and
 * the invalidations of every server (track.c). */
#ifndef SHARDIS_TRACK_H
#define SHARDIS_TRACK_H

#include <stdbool.h>
#include <stdint.h>

#include "proxy/core/module.h"

struct args;
struct backend;
struct client;
struct msg;
struct pool;
struct req;

extern const struct module track_module;

/* CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO (a is CLIENT's
 * arguments, the subcommand at 1), as redis-server answers them: r's
 * reply written, or true when r is answered later (TRACKING ON BCAST
 * waits for its connections). */
bool track_command(struct client *c, struct req *r, struct args *a);
/* RESET: tracking off, as redis-server's RESET turns it off. */
void track_reset(struct client *c);
/* Whether c may SELECT another database than its pool's redis_db: not
 * while it tracks keys (an error answered on r: false). */
bool track_may_select(struct client *c, struct req *r);

/* What INFO says of client-side caching: the clients that track, the
 * keys the table holds and its entries (a key for a client), the BCAST
 * prefixes. */
struct track_figures {
    uint64_t clients, keys, items, prefixes;
};
/* p's (this loop's copy), added to *f. */
void track_figures(const struct pool *p, struct track_figures *f);

/* The transport's hooks (backend_hooks: tracked, invalidate, untracked,
 * tracking_hello) and the client's (gone). */
void track_answered(struct backend *b, struct req *r);
void track_invalidate(struct backend *b, const struct msg *frame);
void track_untracked(struct backend *b);
void track_hello(struct backend *b);
void track_client_gone(struct client *c);

#endif

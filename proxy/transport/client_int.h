/* client_int.h -- what the client's three files share, and nothing else
 * includes: client.c (lifecycle, reading and framing), client_limits.c
 * (what a client holds, its limits), client_write.c (replies, writing). */
#ifndef SHARDIS_CLIENT_INT_H
#define SHARDIS_CLIENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/transport/client.h"

/* The layers above's hooks (client_set_hooks): set once, before any
 * client, read on every request and reply. */
extern struct client_hooks client_on;

/* Stop reading c (its reads wait), and read it again where nothing holds
 * it back: not closing, doomed or quitting, few enough requests in flight,
 * not stalled for what it holds (client.c). */
void client_pause(struct client *c);
void client_resume(struct client *c);

/* c holds delta bytes more (or fewer): it, and its pool's sum. A closed
 * or doomed client holds nothing (client_doom and client_close took what
 * it held off the sum). */
static inline void client_hold(struct client *c, int64_t delta)
{
    if (!c->closing && !c->doomed) {
        c->mem += (size_t)delta;
        c->front->clients_mem += (uint64_t)delta;
    }
}

/* client_limits.c: client_limit's slow path, and the pool's quiet bounds. */
int client_limit_slow(struct client *c, size_t added, bool reply);
void client_quiet_of(struct front *f);

/* c's holding grew, by added (a reply's bytes, or a request's): apply the
 * limits. Returns -1 if c is doomed (client_doom: closed at the loop's
 * next flush, read no more). Below what a client and all clients may hold
 * before any limit has a word to say, two tests (client_limits.c). */
static inline int client_limit(struct client *c, size_t added, bool reply)
{
    struct front *f = c->front;
    size_t held = c->mem - c->qbuf;

    if (held > f->peak_out[0])
        f->peak_out[0] = held;
    if (f->quiet_gen != f->conf_gen)
        client_quiet_of(f);
    if (held <= f->quiet_held && f->clients_mem <= f->quiet_total && !c->doomed)
        return 0;
    return client_limit_slow(c, added, reply);
}

/* c's holding fell: its soft clock and its stall end where it is low
 * enough (the caller reads it again: client_resume). */
void client_relieved(struct client *c);
/* c is closing: off the tick's watch. */
void client_unwatch(struct client *c);

/* A TLS client's write is done (tls_new's callback; client_write.c). */
void client_tls_sent(void *data, int status);

#endif

/* gate.h -- when a client's request may be sent (gate.c): the ordering
 * rules in one place, and the queue of each client's requests that wait. */
#ifndef SHARDIS_GATE_H
#define SHARDIS_GATE_H

#include <stdbool.h>

struct backend;
struct client;
struct pool;
struct req;

/* How a waiting request reaches its server (struct req.via). */
enum gate_via {
    GATE_SERVER,        /* the client's usual connection there (a replica's for a
                           read, pool_backend_read), looked up when sent */
    GATE_PIN,           /* the client's pinned connection there, and no other */
    GATE_CONN,          /* a one-off connection its client holds (r->backend) */
    GATE_OWN,           /* shardis's own connection there (pool_own: SHARD.GENKEY) */
};

/* Send r (its bytes in r->out) on b, which routing chose, now or once
 * nothing holds it back. r->pinned: it must run on the client's pinned
 * connection; r->front: it is sent again, ahead of what waits. */
void gate_send(struct client *c, struct req *r, struct backend *b);
/* Subscriptions a PUBLISH may wait for were confirmed (pubsub.c), or time
 * passed (the tick): send what may go now. Costs nothing unless one
 * waited. */
void gate_kick_publishers(struct pool *p);
/* c is given a connection of its own for r (or gives one back, r NULL):
 * nothing of c sent after this runs before c's requests before r (all of
 * them) are answered. */
void gate_hold(struct client *c, struct req *r);
/* r, one of c's requests, is answered (req_done). */
void gate_answered(struct client *c, struct req *r);
/* Something that held c's requests may have changed: send what may go. */
void gate_kick(struct client *c);
/* c's pin b is to be retired (pin.c): what waits to go on it is to go on
 * it still, as on a one-off connection. False, and nothing changed, if a
 * blocking command waits for it (it stays the pin). */
bool gate_retire_pin(struct client *c, struct backend *b);
/* r cannot go as routed: -TRYAGAIN (its transaction aborts). */
void gate_tryagain(struct client *c, struct req *r);
/* b, a one-off connection of c's, fails and is freed: what waits for it
 * is answered with its failure. */
void gate_conn_gone(struct client *c, struct backend *b);
/* Whether one of c's waiting requests is to go on b, a one-off
 * connection of c's (which is not given back meanwhile). */
bool gate_waits_on(const struct client *c, const struct backend *b);
/* A waiting request whose client went away, once nothing else holds it. */
void gate_drop(struct req *r);
void gate_client_gone(struct client *c);

/* CLIENT NO-TOUCH ON or OFF on b for c (a request of shardis's own,
 * its reply read by nobody); b->notouch follows. */
void gate_notouch(struct client *c, struct backend *b, bool on);

#endif

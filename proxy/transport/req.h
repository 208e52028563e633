/* req.h -- a request: one command of a client (or of the proxy itself) on its
 * way to a backend and back (req.c keeps the free list).
 *
 * Who keeps a request alive: its client's queue (r->client), a backend's
 * queues (r->queued, r->pending), its split parent or fragments, the
 * ordering gate (r->gated) and mig.c's moves (r->migs). Each lets go by
 * clearing its mark and calling req_maybe_free, which frees the request
 * when no mark is left; nothing else frees one.
 *
 * The objects, and one request's path through them:
 *
 *   proxy (one per process) -- pools -- listener
 *                                    \-- ring (swappable: looked up per request)
 *                                    \-- backends[server][conn]   shared, pipelined
 *                                    \-- dedicated backends       one client's each
 *                                                                 (transactions,
 *                                                                 blocking, pub/sub)
 *   client -- reqs (in request order) --> backend send/write/pending queues
 *
 * One request's path:
 *
 *   client_read_cb -> resp_req_feed -> (client hook) route_request -> gate_send
 *       -> backend_send
 *       -> (uv_check) backend_flush: one writev per backend per loop turn
 *       -> backend_read_cb -> resp_rsp_feed -> req done -> client dirty
 *       -> (uv_check) client_flush: one writev of every ready reply, in order
 *
 * Bytes are never re-encoded on this path: a request is written to the
 * backend from the client's read chunks, a reply to the client from the
 * backend's (struct msg); only a req with a hook (GENKEY, SCAN) or a merge
 * of several servers' replies (frag.c) gets new bytes. A req outlives
 * whichever side goes away first (see above).
 *
 * Everything runs on one libuv loop; nothing here is thread-safe. */
#ifndef SHARDIS_REQ_H
#define SHARDIS_REQ_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "proxy/base/mbuf.h"

struct backend;
struct client;
struct frag;
struct mig_op;
struct minify_tx;
struct track_wait;
struct req;

TAILQ_HEAD(req_list, req);

/* How a reply's hash field names map back to their long names (minify.c,
 * which makes and reads it; minify.h says the kinds): plain data a request
 * carries in u.minify, defined here so that a request embeds it rather
 * than pointing to one more allocation. */
struct minify_map {
    uint8_t  kind;              /* enum minify_reply (minify.h) */
    bool     novalues;          /* HSCAN ... NOVALUES (Redis 7.4): fields only */
    uint32_t matchlen;
    char    *match;             /* HSCAN's MATCH, applied here to the long names
                                   (owned), or NULL */
};

/* A request whose reply the proxy makes from the backend's (SHARD.GENKEY):
 * called with the backend's reply (or a failure's error) in r->rsp while
 * the client is still there. Returns 0 when r->rsp is now the client's
 * reply, or 1 when it sent r to a backend again (r is not done yet). */
typedef int req_hook(struct req *r);

/* The proxy's own requests (a handshake step, a MIGRATE, a group round):
 * the backend hands the reply to the request's own callback, and knows
 * nothing of what the request was for. r->rsp holds the reply; it is
 * empty when the request failed (b->reason says why). Returns 0, or -1
 * when the connection is no good (it has been failed). The backend frees
 * r afterwards. */
typedef int req_reply_cb(struct backend *b, struct req *r);

/* The head of a client's request as read: its first REQ_HEAD_BYTES bytes
 * of RESP, copied as it is routed, for a pool that logs slow requests
 * (slowlog_keep; an entry shows the arguments they hold). One copy of 55
 * bytes: keeping the request's own bytes until its reply instead held its
 * client's input chunk and cost 15% CPU on unpipelined GETs, and copying
 * its arguments one by one 5%. */
#define REQ_HEAD_BYTES 55
struct req_head {
    uint32_t len;               /* the request's bytes (more than kept: cut); 0 none */
    uint8_t  kept;
    char     raw[REQ_HEAD_BYTES];
};

struct req {
    TAILQ_ENTRY(req) cq;        /* client's queue, in request order */
    TAILQ_ENTRY(req) bq;        /* backend's send queue, then write queue */
    TAILQ_ENTRY(req) pq;        /* backend's queue of sent, unanswered reqs */
    struct client  *client;     /* NULL once the reply is written or the client gone */
    struct backend *backend;    /* where it was sent; NULL for local replies. While
                                   it waits at the gate: its one-off connection
                                   (via GATE_CONN), else NULL */
    struct msg      out;        /* bytes to send to the backend */
    struct msg      rsp;        /* the reply bytes, once done */
    struct req     *parent;     /* a fragment: the split request it is part of */
    struct frag    *frag;       /* a split request: its fragments (frag.c) */
    req_hook       *hook;       /* makes the client's reply; NULL: forward the backend's */
    req_reply_cb   *on_reply;   /* the proxy's own request: where its reply goes;
                                   NULL for a client's (or a fragment of one) */
    union {                     /* the hook's state */
        struct {
            uint32_t n;         /* ids asked for */
            uint16_t type, shard;
            uint8_t  array;     /* COUNT given: reply with an array */
            uint8_t  evaled;    /* sent as EVAL after -NOSCRIPT */
        } genkey;
        struct {                /* pubsub.c: confirmations still to come */
            uint32_t left;
            struct req *wait;   /* the client's request waiting for them, or NULL */
        } sub;
        struct req_kept *kept;  /* a blocking command's arguments (route.c) */
        uint64_t scan;          /* scan.c: the walk's cursor, but the server's position */
        struct {                /* sentinel.c: the round of which master it answers */
            uint32_t server, round;
            uint8_t  replicas;  /* SENTINEL REPLICAS, not MASTER */
        } sentinel;
        struct track_wait *track_wait; /* track.c: a BCAST CLIENT TRACKING waiting for
                                   its connections (its PINGs') */
        uint64_t clean;         /* info.c's INFO: when no request in a database other
                                   than redis_db lived as it was asked, 1 + how many
                                   had been routed (cur_loop->other_db_routed); else 0 */
        struct minify_map minify;   /* minify.c: how its reply's fields map back */
        struct minify_tx *minify_tx;/* minify.c: an EXEC's, its commands' maps */
        union {                 /* mig.c's own requests */
            struct mig_op *op;  /* a MIGRATE */
            struct {            /* the mover's SCAN: which source, of which epoch */
                uint32_t src, epoch;
                uint8_t  sizing;    /* MEMORY USAGE of a page's keys, not SCAN */
            } mv;
            uint64_t unblock_id;/* a drain marker: the CLIENT UNBLOCK's target, or 0 */
        } mig;
    } u;
    uint64_t        deadline;   /* loop ms by which the backend must answer; 0 none */
    uint64_t        t0_us;      /* a client's: cur_loop->now_us when it was read (stats.c) */
    uint32_t        epoch;      /* mig.c: the pool's epoch when it was routed */
    uint16_t        server;     /* gate.c: while it waits, the server it goes to */
    uint16_t        db;         /* ... and the database (its client may SELECT meanwhile) */
    uint16_t        migs;       /* mig.c: MIGRATEs it waits for */
    uint16_t        cmd;        /* a client's: 1 + its command's index in cmd_table
                                   (route.c), 0 if unknown or none (stats.c) */
    unsigned        done:1;     /* rsp is complete */
    unsigned        queued:1;   /* in a backend's send or write queue */
    unsigned        pending:1;  /* in a backend's pending queue */
    unsigned        unblocked:1;/* mig.c: CLIENT UNBLOCK ... ERROR was sent for it */
    unsigned        kept:1;     /* u.kept holds its arguments */
    unsigned        in_tx:1;    /* queued in a transaction, or its EXEC (pin.c) */
    unsigned        is_exec:1;  /* a transaction's EXEC (pin.c) */
    unsigned        gated:1;    /* gate.c: waiting on its client's gate queue */
    unsigned        via:2;      /* gate.c: while gated, how it goes (enum gate_via) */
    unsigned        resp3:1;    /* gate.c: while gated, the protocol it was sent in */
    unsigned        pinned:1;   /* must run on its client's pinned connection */
    unsigned        front:1;    /* gate.c: sent again, ahead of what waits */
    unsigned        before_hold:1; /* gate.c: later requests of its client wait for it */
    unsigned        hold_on_send:1;/* gate.c: ... from when it is sent */
    unsigned        mig_failed:1; /* mig.c: a key could not be moved: -TRYAGAIN */
    unsigned        quit:1;     /* close the client once this reply is written */
    unsigned        blocking:1; /* may wait as long as it asks: no deadline */
    unsigned        in_write:1; /* client_write.c: its reply is in the write in flight */
    unsigned        silent:1;   /* CLIENT REPLY OFF or SKIP: its reply is dropped */
    unsigned        keyless:1;  /* a script declaring no key, to run as the pool's
                                   keyless_user (route.c keyless_script, pin_keyless) */
    unsigned        as_own:1;   /* runs as shardis's own user, on a connection of its
                                   own (route.c needs_own_user, pin_internal) */
    unsigned        rejected:1; /* refused before it ran (route_refused; stats.c) */
    unsigned        ends_tx:1;  /* DISCARD or RESET on the pin: as it goes, the next
                                   transaction starts unbroken (gate.c tx_broken) */
    unsigned        minified:1; /* u.minify (u.minify_tx if is_exec) holds its map */
    unsigned        publish:1;  /* (S)PUBLISH: waits while subscriptions to its server
                                   are on their way (gate.c) */
    unsigned        other_db:1; /* in a database other than redis_db (route.c db_ok):
                                   counted in cur_loop->other_db_reqs until freed */
    unsigned        track:1;    /* track.c: its client tracks keys and this request's
                                   matter (it reads them, or a NOLOOP client writes,
                                   or it ends a transaction): on a tracking connection
                                   it keeps its bytes (out) till its reply, whose keys
                                   backend_hooks.tracked reads there */
    unsigned        tconn:1;    /* gate.c: while gated, it goes on a tracking
                                   connection (pool_via: POOL_TRACKING) */
    unsigned        anywhere:1; /* goes on its client's own connection, which no key
                                   chose (a keyless script; DISCARD, UNWATCH, RESET
                                   on the pin): a reload while it waits does not
                                   make it -TRYAGAIN (gate.c) */
    uint32_t        held;       /* client.c: the request's bytes its client counts while
                                   it is in flight (client_hold), UINT32_MAX at most */
    /* Last: req_get zeroes what comes before head.raw, which only
     * head.kept bytes of are ever read. */
    struct req_head head;       /* a client's: its head, where a slow log wants it */
};

/* What frees what the layers above hung on a request in r->u, by the mark
 * they set with it: registered once by the process before any request
 * (req_set_release, process/hooks.c), both set. req_maybe_free calls the
 * one whose mark is set as r is freed (u holds one thing at a time), and
 * nothing else does; the hook frees what u holds and clears the mark. It
 * may not free r, nor anything r is on. */
struct req_release {
    void (*kept)(struct req *r);        /* r->kept: u.kept (core/route.c) */
    void (*minified)(struct req *r);    /* r->minified: u.minify, or u.minify_tx of
                                           an EXEC (modules/minify.c) */
};
/* Register the release hooks (copied). */
void req_set_release(const struct req_release *rel);

struct req *req_get(void);
/* Free the pooled request objects (when the proxy is idle). */
void req_pool_trim(void);
/* Free r if nothing refers to it any more. */
void req_maybe_free(struct req *r);

#endif

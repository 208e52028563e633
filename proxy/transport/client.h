/* client.h -- client connections: accepting, reading and framing their
 * requests, closing (client.c); writing replies back in request order
 * (client_write.c); what each may hold (client_limits.c). */
#ifndef SHARDIS_CLIENT_H
#define SHARDIS_CLIENT_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <uv.h>

#include "proxy/transport/req.h"
#include "proxy/base/resp.h"
#include "proxy/base/stream.h"
#include "proxy/base/tls.h"

struct acl_user;
struct backend;
struct minify_tx;
struct track_client;
struct client;
struct pool;
struct req;

/* A client's transaction state. pin.c makes every transition (its tx_*
 * functions and pin_send); others only read it, or set tx_abort.
 *
 *   NONE --WATCH--> WATCHING --MULTI (sent)--> QUEUED_WATCHED --EXEC, DISCARD--> NONE
 *     |                |                           ^
 *     |                +--UNWATCH, EXEC--> NONE    | UNWATCH (queued)
 *     |                                            |
 *     +--MULTI (answered here)--> MULTI --the first keyed command--> QUEUED
 *                                   |          (MULTI sent)           |
 *                                   +--EXEC (*0), DISCARD--> NONE     +--EXEC, DISCARD--> NONE
 *
 * In MULTI no server is known yet; in the other states the client's pin
 * holds the state, and in WATCHING and QUEUED_WATCHED what it watches (or
 * an UNWATCH queued there) too: a request of that state routed before a
 * reload may still go (gate.c), its EXEC being refused. tx_abort (an
 * error while queuing) only has a meaning in MULTI and the QUEUED states:
 * EXEC then answers -EXECABORT. */
enum client_tx {
    TX_NONE,
    TX_WATCHING,        /* WATCH sent to the pin */
    TX_MULTI,           /* MULTI answered here: the first key picks the server */
    TX_QUEUED,          /* MULTI sent to the pin: commands queue there */
    TX_QUEUED_WATCHED,  /* ... after WATCH (or with an UNWATCH queued) */
};

/* CLIENT REPLY: whether a client's replies are written. local.c sets it;
 * route.c applies it to each request as it is routed, in order:
 *
 *   ON --CLIENT REPLY OFF--> OFF --CLIENT REPLY ON--> ON
 *   ON --CLIENT REPLY SKIP--> SKIP --the next request (its reply dropped)--> ON
 *
 * CLIENT REPLY OFF and SKIP get no reply, ON gets +OK; (un)subscribe
 * confirmations and messages are written whatever the mode, as in Redis 7. */
enum client_reply {
    CLIENT_REPLY_ON,
    CLIENT_REPLY_OFF,
    CLIENT_REPLY_SKIP,
};

/* Between MULTI and EXEC or DISCARD. */
#define client_in_multi(c) ((c)->tx >= TX_MULTI)
/* MULTI has been sent to the pin. */
#define client_tx_queued(c) ((c)->tx >= TX_QUEUED)

/* What the clients of one pool share, as the transport keeps them: the
 * list, what they hold, their limits and counters. A pool (core/pool.h)
 * embeds one and keeps conf and tls_server in step with its own
 * (pool_set_conf, pool_set_tls); the transport reads and writes these and
 * nothing else of the pool, which it holds only as an opaque owner (a
 * client's c->pool, for the layers above). Lifetime: the pool's. */
struct front {
    struct pool            *pool;       /* the owner (opaque here) */
    const struct conf_pool *conf;       /* the owner's config */
    uint32_t                conf_gen;   /* bumped with each conf (pool_set_conf) */
    SSL_CTX                *tls_server; /* TLS clients' connections are made from it,
                                           or NULL without tls_listen */
    uint32_t                nclients;
    struct client         **clients;    /* [nclients]: every client, a client's slot its
                                           index */
    /* The pool's clients on every loop, as client_connections counts them:
     * *all, loop 0's front's own count (set by the pool, or own_all). An
     * atomic per connection, none per request. */
    _Atomic uint32_t       *all;
    _Atomic uint32_t        own_all;
    uint32_t                clients_cap;
    /* What its clients make shardis hold, all together (client_hold) */
    uint64_t                clients_mem;
    uint64_t                accepted, rejected, requests;
    uint64_t                evicted_clients;    /* closed for maxmemory_clients */
    uint64_t                obl_disconnections; /* closed for client_output_buffer_limit */
    /* The most one client held, of input (a request being read) and of
     * everything, in this period and the one before (INFO's
     * client_recent_max_*_buffer; the tick turns the periods) */
    uint64_t                peak_in[2], peak_out[2];
    uint64_t                peak_period;  /* loop ms / CLIENT_PEAK_MS of peak_*[0] */
    /* client_limits.c: below these, no limit applies (for the conf of
     * generation quiet_gen: by generation, not by address, which a freed
     * config's successor may be given again) */
    uint32_t                quiet_gen;
    size_t                  quiet_held;
    uint64_t                quiet_total;
};

/* A client's lifetime: made as it is accepted (client_accept, or
 * client_open), listed on its pool's clients (c->slot), and kept by its
 * handle: client_close (a read error or EOF, QUIT once its reply is
 * written, a limit at the loop's next flush, CLIENT KILL, a reload that
 * takes its user) unlists it and tells the layers above (client_hooks.gone),
 * and the handle's close callback frees it, with nothing of it left on the
 * stack. Between the two c->closing is set: nothing more of it is read,
 * accounted or written, and a hook that finds it so leaves it be. Its requests outlive it:
 * each one not written is detached (r->client = NULL) and freed by
 * whatever else holds it (req.h). Nothing else frees a client; a pointer
 * to one held across loop turns (a gate's, a subscription's, MONITOR's)
 * is dropped by its gone hook.
 *
 * The stream handle comes last: a TCP client is allocated without the
 * bytes only a unix-socket client's uv_pipe_t needs. That is 520 bytes
 * with libuv 1.44, jemalloc's 640-byte size class (CLIENT LIST's age,
 * idle and last command took it past 512; below, the assertion keeps it
 * from the next class). */
struct client {
    struct pool     *pool;     /* its front's owner: what the layers above read */
    struct front    *front;    /* the clients it is one of (its pool's) */
    struct rstream   in;
    struct resp_req  scan;
    struct req_list  reqs;      /* requests whose replies are not written yet, in order */
    /* Who it is signed in as: a user of pool->acl (acl.h: valid while
     * that is the pool's; a reload rebinds it), or NULL before AUTH. */
    const struct acl_user *user;
    uint32_t         slot;      /* its index in pool->clients */
    uint32_t         born_s;    /* loop_seconds() it connected (CLIENT LIST's age) */
    struct mbuf     *lbuf;      /* chunk that local replies are written into */
    struct client_rare *rare;   /* what few clients need (client_rare), or NULL */
    struct backend  *pin;       /* dedicated connection (pin.c), or NULL */
    uint64_t         id;
    uint32_t         inflight;  /* reqs not done yet: forwarded, or waiting to be */
    uint32_t         last_s;    /* loop_seconds() of its last command (idle) ... */
    unsigned short   closing:1;
    unsigned short   reading:1;
    unsigned short   writing:1;
    unsigned short   is_dirty:1;
    unsigned short   quitting:1;/* QUIT or a protocol error: no more requests */
    unsigned short   tx:3;      /* enum client_tx (pin.c) */
    unsigned short   tx_abort:1;/* in MULTI: an error while queuing, EXEC aborts */
    unsigned short   subscribed:1; /* in subscriber mode (pubsub.c) */
    unsigned short   resp3:1;   /* HELLO 3: replies in RESP3 (local.c), its backends too */
    unsigned short   gated:1;   /* gate.c: requests wait, or later ones must (rare) */
    unsigned short   kicking:1; /* gate.c: sending from the gate now */
    unsigned short   reply:2;   /* enum client_reply */
    unsigned short   tls:1;     /* over TLS: its bytes go through rare->tls */
    unsigned short   notouch:1; /* CLIENT NO-TOUCH ON: its requests leave keys'
                                   LRU/LFU as they were (gate.c go) */
    unsigned short   tracking:1;/* CLIENT TRACKING ON (modules/track.c sets both) */
    unsigned short   track_via:1;/* ... not BCAST: its requests go over the servers'
                                   tracking connections (pool_via_of) */
    uint16_t         last_cmd;  /* ... and which (req.cmd's numbering; 0 none yet) */
    uint16_t         db;        /* its database: redis_db until SELECT (local.c) */
    bool             doomed;    /* over a memory limit: closed at the loop's next flush
                                   (client_limits.c client_doom), read no more meanwhile */
    size_t           rsp_bytes; /* reply bytes held for this client */
    size_t           mem;       /* everything it makes shardis hold (client_hold) */
    size_t           qbuf;      /* ... of which a request being read */
    union stream     h;         /* last: see above */
};
_Static_assert(offsetof(struct client, h) + sizeof(uv_tcp_t) <= 640,
               "a TCP client fits jemalloc's 640-byte class");

/* State that only some clients have, kept out of struct client so that
 * every client stays small; allocated by client_rare on first use. */
struct client_rare {
    char        *name;          /* CLIENT SETNAME, or NULL */
    struct subs *subs;          /* subscriptions (pubsub.c), or NULL */
    struct req_list gate;       /* gate.c: requests waiting, in order, linked by bq */
    uint32_t     hold_waits;    /* gate.c: requests that later ones wait for */
    uint64_t     stalled_ms;    /* client_limits.c: not read for what it holds, since;
                                   0 when read */
    uint64_t     soft_ms;       /* client_limits.c: over its soft limit since; 0 when not */
    TAILQ_ENTRY(client_rare) stalled; /* on cur_loop->stalled while either is not 0 */
    bool         watched;       /* ... and so on it (client_rewatch) */
    struct client *client;      /* its client (set while on cur_loop->stalled) */
    uint32_t     tx_epoch;      /* the pool's epoch when MULTI or WATCH began */
    struct req **tx_held;       /* pin.c: the keyless commands queued in MULTI before */
    uint32_t     tx_nheld;      /* any key (PING, ECHO, PUBLISH, DEBUG SLEEP, FLUSHALL,
                                   FLUSHDB), their requests to the server (owned here
                                   until sent) */
    bool         tx_flush;      /* pin.c: a FLUSHALL or FLUSHDB among them: EXEC runs
                                   the transaction on every server */
    bool         tx_publish;    /* pin.c: a PUBLISH among them (once on one server only) */
    bool         tx_broken;     /* mig.c: a queued command could not be sent: EXEC aborts */
    uint32_t     tx_sent;       /* pin.c: commands queued on the pin in this transaction */
    struct minify_tx *tx_minify;/* pin.c: their replies to map in EXEC's (minify.h), made
                                   on first use, given to the EXEC, freed when the
                                   transaction ends otherwise (tx_maps_drop) */
    struct tls  *tls;           /* TLS (tls.h) of a client of a TLS listener: made when
                                   accepted, freed by its close callback */
    bool         monitor;       /* on pool.monitors (monitor.c) */
    struct track_client *track; /* CLIENT TRACKING's state (track.c, which makes it on
                                   first use and frees it when the client goes), or NULL */
};

/* What the layers above do at a client's turns: one table, registered
 * once by the process before any client is accepted (client_set_hooks,
 * process/hooks.c), each entry set; the transport calls them and knows
 * nothing of what they do. None is called for the proxy's own requests
 * (req.on_reply). The per-request ones are one indirect call each, where
 * a direct call was: what a reply sets going (stats, slow log, hot keys)
 * is one function, not a list. */
struct client_hooks {
    /* c is connected (accepted, or client_open), before it is listed,
     * counted or read: sign it in as its pool's default user (c->user).
     * May not close c. */
    void (*session)(struct client *c);
    /* r, c's request, is framed (its arguments in c->scan and c->in, until
     * the hook returns) and queued on c: route it. It may answer r
     * (req_done), send it, or close c (client_close: c->closing is set
     * then, and c stays allocated until its close callback). It frees
     * neither: c's queue keeps r (req.h). */
    void (*request)(struct client *c, struct req *r);
    /* r's reply is complete in r->rsp, us microseconds after r was read,
     * and c is open: count it. Called once per request of a client's,
     * before its reply is accounted or written; may read r and c, change
     * neither, close nothing. */
    void (*replied)(struct client *c, struct req *r, uint64_t us);
    /* r, one that later requests of c wait for (r->before_hold), is
     * answered: what waited may go. May send c's requests, and answer
     * them (req_done, re-entering this file). */
    void (*held_answered)(struct client *c, struct req *r);
    /* A reply came back on c's pin (c->pin): it may be given back (and
     * c->pin set to NULL). */
    void (*pin_answered)(struct client *c);
    /* r, a fragment of a split request (r->parent), is done: its parent
     * may now be complete. May complete the parent (req_done) and free r
     * (req_maybe_free, r->parent cleared). */
    void (*fragment_done)(struct req *r);
    /* c is closing (c->closing set, off its pool's list, its memory off
     * the pool's sum): each drops what refers to c, in this order, once.
     * They may detach and free c's requests elsewhere (a gate's, a
     * subscription's), not c itself (its close callback frees it), and
     * may not call client_close on c again (a no-op). */
    void (*const *gone)(struct client *c);
    size_t ngone;
};

/* Register the hooks (copied): before the first client is accepted. */
void client_set_hooks(const struct client_hooks *h);

struct client_rare *client_rare(struct client *c);
/* CLIENT SETNAME's name, or NULL. */
const char *client_name(const struct client *c);
/* A command's HELP: its lines as simple strings, as redis-server's
 * addReplyHelp. */
void client_reply_help(struct client *c, struct req *r, const char *const *lines, size_t n);
/* A subcommand name did not match, or its arguments: redis-server's error
 * for command (upper case, as "SLOWLOG"), naming the subcommand given. */
struct args;
void client_reply_bad_sub(struct client *c, struct req *r, struct args *a, const char *command);
/* c's peer as "ip:port" ("[ip6]:port"), or "?" for a unix socket. */
void client_peer(const struct client *c, char *buf, size_t len);
/* c's own address, as client_peer: CLIENT LIST's laddr. */
void client_local(const struct client *c, char *buf, size_t len);

void client_accept(struct front *f, uv_stream_t *listener, bool tls);
/* A client of f over fd, a connection another loop accepted (handed over
 * by loop 0: process/proxy.c): opened on this loop, then as accepted. The
 * client takes fd (closed if it cannot be opened). */
void client_adopt(struct front *f, uv_os_sock_t fd, bool unix_socket, bool tls);
/* A client of p over fd, a connected stream socket of the process's own
 * (one end of a unit test's socketpair), as if accepted: the client owns
 * fd from then on. NULL if it cannot be read (fd is left open). */
struct client *client_open(struct front *f, uv_file fd);
/* Close the clients over their soft limit for too long (client_limits.c's
 * limits), from the proxy's tick. */
void client_check_stalled(uint64_t now);
/* Each tick, for each pool: turns the periods of INFO's recent peaks. */
void client_tick(struct front *f, uint64_t now);
/* The most one client of p held lately: of a request being read (*in),
 * and of everything (*out): client_recent_max_input_buffer and
 * client_recent_max_output_buffer. */
void client_peaks(const struct front *f, uint64_t now, uint64_t *in, uint64_t *out);
/* Append r to c's requests, in flight until req_done. */
void client_queue(struct client *c, struct req *r);
/* r's reply is complete in r->rsp: account for it and write when its turn
 * comes. Safe when the client is gone. */
void req_done(struct req *r);
/* Schedule a write if the reply at the head of the queue is ready. */
void client_ready(struct client *c);
/* A RESP writer into g, in c's chunks: of values for c (c's protocol), or
 * of a request c's traffic sends a backend (RESP2, as backends are spoken
 * to). */
struct resp_w client_w(struct client *c, struct msg *g);
struct resp_w client_cmd_w(struct client *c, struct msg *g);
void client_reply_error(struct client *c, struct req *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void client_flush(struct client *c);
void client_close(struct client *c);

#endif

/* core.h -- the proxy's objects and how they point at each other.
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
 *   client_read_cb -> resp_req_feed -> route_request -> backend_send
 *       -> (uv_check) backend_flush: one writev per backend per loop turn
 *       -> backend_read_cb -> resp_rsp_feed -> req done -> client dirty
 *       -> (uv_check) client_flush: one writev of every ready reply, in order
 *
 * Bytes are never re-encoded on this path: a request is written to the
 * backend from the client's read chunks, a reply to the client from the
 * backend's (struct msg); only a req with a hook (GENKEY, SCAN) or a merge
 * of several servers' replies (frag.c) gets new bytes. A req outlives
 * whichever side goes away first:
 * it is freed once it is neither queued at a backend nor owed to a client.
 *
 * Everything runs on one libuv loop; nothing here is thread-safe. */
#ifndef SHARDIS_CORE_H
#define SHARDIS_CORE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>
#include <uv.h>

#include "conf/conf.h"
#include "proxy/mbuf.h"
#include "proxy/resp.h"
#include "ring/ring.h"

struct client;
struct backend;
struct pool;
struct frag;
struct req;
struct genkey_shards;
struct subs;
struct cmd;
struct mig;
struct mig_op;
struct group;
struct pool_server;

TAILQ_HEAD(req_list, req);

/* ---- requests ------------------------------------------------------------ */

/* A request whose reply the proxy makes from the backend's (SHARD.GENKEY):
 * called with the backend's reply (or a failure's error) in r->rsp while
 * the client is still there. Returns 0 when r->rsp is now the client's
 * reply, or 1 when it sent r to a backend again (r is not done yet). */
typedef int req_hook(struct req *r);

/* Internal requests: the proxy's own, on a backend's (re)connect. */
enum req_internal {
    REQ_CLIENT = 0,             /* a client's (or a fragment of one) */
    REQ_HANDSHAKE,              /* AUTH, SELECT: +OK, or the backend is no good */
    REQ_RUN_ID,                 /* INFO server: the backend's run_id */
    REQ_SCRIPT_LOAD,            /* SCRIPT LOAD of idgen's allocator: its SHA1 */
    REQ_MARKER,                 /* mig.c: PING behind what was sent before a reload */
    REQ_MIGRATE,                /* mig.c: a MIGRATE (u.mig.op) */
    REQ_MOVER,                  /* mig.c: the background mover's SCAN (u.mig.mv) */
    REQ_RECORD,                 /* mig.c: SET or DEL of the migration's record */
    REQ_CLIENT_ID,              /* CLIENT ID of a dedicated connection (CLIENT UNBLOCK) */
    REQ_GROUP,                  /* group.c: PUBSUB CHANNELS, the other proxies */
    REQ_GROUP_SUB,              /* group.c: (UN)SUBSCRIBE of the proxy's own channel */
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
        union {                 /* mig.c's internal requests */
            struct mig_op *op;  /* REQ_MIGRATE */
            struct {            /* REQ_MOVER: which source, of which epoch */
                uint32_t src, epoch;
                uint8_t  sizing;    /* MEMORY USAGE of a page's keys, not SCAN */
            } mv;
            uint64_t unblock_id;/* REQ_MARKER: the CLIENT UNBLOCK's target, or 0 */
        } mig;
    } u;
    uint64_t        deadline;   /* loop ms by which the backend must answer; 0 none */
    uint32_t        epoch;      /* mig.c: the pool's epoch when it was routed */
    uint32_t        server;     /* gate.c: while it waits, the server it goes to */
    uint16_t        migs;       /* mig.c: MIGRATEs it waits for */
    unsigned        done:1;     /* rsp is complete */
    unsigned        queued:1;   /* in a backend's send or write queue */
    unsigned        pending:1;  /* in a backend's pending queue */
    unsigned        internal:4; /* enum req_internal */
    unsigned        unblocked:1;/* mig.c: CLIENT UNBLOCK ... ERROR was sent for it */
    unsigned        kept:1;     /* u.kept holds its arguments */
    unsigned        in_tx:1;    /* queued in a transaction, or its EXEC (pin.c) */
    unsigned        is_exec:1;  /* a transaction's EXEC (pin.c) */
    unsigned        gated:1;    /* gate.c: waiting on its client's gate queue */
    unsigned        via:2;      /* gate.c: while gated, how it goes (enum gate_via) */
    unsigned        pinned:1;   /* must run on its client's pinned connection */
    unsigned        front:1;    /* gate.c: sent again, ahead of what waits */
    unsigned        before_hold:1; /* gate.c: later requests of its client wait for it */
    unsigned        hold_on_send:1;/* gate.c: ... from when it is sent */
    unsigned        mig_failed:1; /* mig.c: a key could not be moved: -TRYAGAIN */
    unsigned        quit:1;     /* close the client once this reply is written */
    unsigned        blocking:1; /* may wait as long as it asks: no deadline */
    unsigned        in_write:1; /* client.c: its reply is in the write in flight */
};

struct req *req_get(void);
/* Free the pooled request objects (when the proxy is idle). */
void req_pool_trim(void);
/* Free r if nothing refers to it any more. */
void req_maybe_free(struct req *r);

/* ---- clients ------------------------------------------------------------- */

/* A reader's chunks: from the oldest byte still needed to the newest. */
struct rstream {
    struct mbuf *head, *tail;
    struct mbuf *seek;          /* the chunk rstream_find last found, or NULL */
    uint64_t     rx;            /* stream offset: bytes read so far */
};

/* The chunk that holds stream offset off (the first one after it if off
 * is at a chunk's end), or NULL. Lookups in increasing order cost O(1)
 * each: it starts from where the last one ended. */
struct mbuf *rstream_find(struct rstream *s, uint64_t off);
/* Append bytes [start, end) of the stream to g (references the chunks). */
void rstream_slice(struct rstream *s, uint64_t start, uint64_t end, struct msg *g);
/* Drop chunks wholly before offset keep; with keep == rx drop them all. */
void rstream_trim(struct rstream *s, uint64_t keep);
/* Libuv alloc_cb helper: free space in the tail chunk, or a new chunk. */
void rstream_buf(struct rstream *s, uv_buf_t *buf);

union stream {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t    tcp;
    uv_pipe_t   pipe;
};

/* The stream handle comes last: a TCP client is allocated without the
 * bytes only a unix-socket client's uv_pipe_t needs, which keeps the
 * struct in jemalloc's 512-byte size class. */
struct client {
    struct pool     *pool;
    struct rstream   in;
    struct resp_req  scan;
    struct req_list  reqs;      /* requests whose replies are not written yet, in order */
    TAILQ_ENTRY(client) dirty;  /* on proxy.dirty_clients */
    struct mbuf     *lbuf;      /* chunk that local replies are written into */
    struct client_rare *rare;   /* what few clients need (client_rare), or NULL */
    struct backend  *pin;       /* dedicated connection (pin.c), or NULL */
    uint64_t         id;
    uint32_t         inflight;  /* reqs not done yet: forwarded, or waiting to be */
    /* 16-bit flags fill the 4 bytes after inflight, which keeps a TCP
     * client at 512 bytes. */
    unsigned short   authed:1;
    unsigned short   closing:1;
    unsigned short   reading:1;
    unsigned short   writing:1;
    unsigned short   is_dirty:1;
    unsigned short   quitting:1;/* QUIT or a protocol error: no more requests */
    unsigned short   multi:1;   /* between MULTI and EXEC/DISCARD */
    unsigned short   tx_started:1; /* MULTI was sent to the pin */
    unsigned short   tx_abort:1;/* an error while queuing: EXEC aborts */
    unsigned short   watching:1;/* WATCH sent to the pin */
    unsigned short   subscribed:1; /* in subscriber mode (pubsub.c) */
    unsigned short   gated:1;   /* gate.c: requests wait, or later ones must (rare) */
    unsigned short   kicking:1; /* gate.c: sending from the gate now */
    size_t           rsp_bytes; /* reply bytes held for this client */
    union stream     h;         /* last: see above */
};

/* State that only some clients have, kept out of struct client so that
 * every client stays small; allocated by client_rare on first use. */
struct client_rare {
    char        *name;          /* CLIENT SETNAME, or NULL */
    struct subs *subs;          /* subscriptions (pubsub.c), or NULL */
    struct req_list gate;       /* gate.c: requests waiting, in order, linked by bq */
    uint32_t     hold_waits;    /* gate.c: requests that later ones wait for */
    uint64_t     stalled_ms;    /* client.c: not read for unread replies, since (or
                                   since it last took some); 0 when read */
    TAILQ_ENTRY(client_rare) stalled; /* on proxy.stalled while stalled_ms != 0 */
    struct client *client;      /* its client (set while on proxy.stalled) */
    uint32_t     tx_epoch;      /* the pool's epoch when MULTI or WATCH began */
    bool         tx_broken;     /* mig.c: a queued command could not be sent: EXEC aborts */
};

struct client_rare *client_rare(struct client *c);
/* CLIENT SETNAME's name, or NULL. */
const char *client_name(const struct client *c);

void client_accept(struct pool *p, uv_stream_t *listener);
/* Close the clients that have taken none of their unread replies for too
 * long (client.c's limits), from the proxy's tick. */
void client_check_stalled(uint64_t now);
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

/* ---- backends ------------------------------------------------------------ */

enum backend_state {
    BACKEND_DOWN,               /* not connected; connects on first use */
    BACKEND_CONNECTING,
    BACKEND_UP,
    BACKEND_FAILED,             /* failed recently: fail fast until retry_at */
};

struct backend {
    union stream     h;
    uv_connect_t     creq;
    uv_write_t       wreq;
    struct pool     *pool;
    uint32_t         server;    /* index in the pool's servers */
    enum backend_state state;
    TAILQ_HEAD(, req) sendq;    /* waiting to be written */
    TAILQ_HEAD(, req) writeq;   /* in the write in flight */
    TAILQ_HEAD(, req) pendq;    /* written, waiting for their replies */
    TAILQ_ENTRY(backend) dirty; /* on proxy.dirty_backends */
    struct rstream   in;
    struct resp_rsp  scan;
    uint64_t         framed;    /* stream offset: replies framed up to here */
    uint64_t         retry_at;  /* loop ms */
    uint64_t         rx_ms;     /* loop ms of the last byte read; 0 none yet */
    uint32_t         failures;  /* consecutive */
    char             reason[96];/* why it last failed */
    char             run_id[41];/* the server's INFO run_id on this connection; "" unknown */
    uint64_t         client_id; /* dedicated: its CLIENT ID on the server; 0 unknown */
    struct client   *owner;     /* dedicated: the client it serves, NULL when spare */
    TAILQ_ENTRY(backend) link;  /* dedicated: on pool.dedicated */
    unsigned         writing:1;
    unsigned         is_dirty:1;
    unsigned         closing:1;
    unsigned         dedicated:1; /* one client's (transaction, blocking command) */
    unsigned         spare:1;   /* dedicated, idle, kept for the next client */
    unsigned         sub:1;     /* dedicated, in subscriber mode (pubsub.c) */
    unsigned         transient:1; /* dedicated for one request (WAIT): released idle */
    unsigned         unblocking:1;/* dedicated: a CLIENT UNBLOCK for it is in flight (mig.c) */
    /* stats */
    uint64_t         requests, errors, timeouts;
};

void backend_init(struct backend *b, struct pool *p, uint32_t server);
/* Connect now rather than on first use (preconnect: true). */
void backend_preconnect(struct backend *b);
/* Queue r to b, or fail it at once if b is failed. */
void backend_send(struct backend *b, struct req *r);
void backend_flush(struct backend *b);
/* Deadline check: fail a backend whose oldest request timed out. */
void backend_check_timeout(struct backend *b, uint64_t now);
void backend_close(struct backend *b);
const char *backend_state_name(const struct backend *b);

/* Dedicated connections: a client whose commands hold state on a server
 * (MULTI ... EXEC, WATCH, a blocking pop) gets a connection of its own to
 * it while the state lasts (pin.c). Released clean (EXEC, DISCARD, the
 * pop answered) it waits as a spare for the next client; released dirty
 * (the client left mid-transaction or mid-pop) it is closed, so no state
 * leaks to anyone and a pop that was waiting takes nothing. The pool
 * frees them. */
struct backend *backend_acquire(struct pool *p, uint32_t server, struct client *owner);
void backend_release(struct backend *b, bool clean);
/* Nothing queued, in flight or awaiting a reply. */
bool backend_idle(const struct backend *b);
/* At start, before the loop runs: argv on the server ps, over a blocking
 * connection of its own (AUTH and SELECT as the pool says), a second's
 * timeout at each step. The reply's bulk string, or the bulks of an array
 * reply one per line (the caller frees it); NULL: nil, an error reply, or
 * no answer. */
char *backend_sync_call(const struct pool_server *ps, const struct conf_pool *pc, int argc,
                        const char *const *argv, size_t *len);
/* Close p's spare dedicated connections to server (UINT32_MAX: to every
 * server), when the proxy is idle or the server leaves. */
void backend_close_spares(struct pool *p, uint32_t server);

/* ---- pools and the proxy --------------------------------------------------- */

/* A server the pool has known since it started. Its index (the "server"
 * of backends, pins, subscriptions and the scan cursor) never changes, so
 * a reload keeps every connection to a server that stays; one that leaves
 * every ring is retired (its connections drained and closed) and its slot
 * is reused if its address comes back. */
struct pool_server {
    char            *label;         /* name, else host:port (owned) */
    char            *addr;          /* host:port or path, as written (owned) */
    char            *host;          /* host or unix path (owned) */
    uint16_t         port;          /* 0 for a unix socket */
    bool             unix_socket;
    bool             active;        /* in the ring, or holds keys still moving */
    uint32_t         ring_idx;      /* its index in pool.ring; UINT32_MAX: not in it */
    struct backend  *conns;         /* [pool.nconns] shared, pipelined (owned) */
    struct backend  *mover;         /* mig.c's own connection, so that clients' requests
                                       never queue behind its batches; or NULL (owned) */
    uint64_t         ejected_until; /* loop ms; 0 when in the ring */
    uint32_t         gained;        /* pool.ring_changes when a ring change last gave it
                                       keys (scan.c walks it again) */
};

/* Server slots a pool may have (scan.c's cursor has 10 bits for one). */
#define POOL_SLOTS_MAX 1024

struct pool {
    const struct conf_pool *conf;   /* borrowed from proxy.conf (swapped by reload) */
    struct ring      *ring;         /* the servers keys are routed by: names,
                                       shares, SHARD.WHEREIS */
    uint32_t         *slot;         /* ring index -> server (index in servers) */
    struct ring      *live;         /* eject_mode rehash: the servers not ejected,
                                       or NULL when that is all of them */
    uint32_t         *live_map;     /* live ring index -> server */
    union stream      listener;
    struct pool_server *servers;    /* [nservers]: every server ever in a ring */
    uint32_t          nservers;
    uint32_t          nconns;       /* server_connections */
    uint32_t          nclients;
    TAILQ_HEAD(, backend) dedicated;/* spares first, then those in use */
    TAILQ_HEAD(, subs) subscribers; /* clients with subscriptions (pubsub.c) */
    uint32_t          ndedicated, nspare;
    struct genkey_shards *shards;   /* the logical shards each server owns on ring:
                                       rebuild (genkey_pool_init) when ring changes */
    struct mig       *mig;          /* keys moving after a reload (mig.c), or NULL */
    uint32_t          epoch;        /* ring changes so far (reloads that moved keys) */
    uint32_t          ring_changes; /* pool_set_ring calls so far (scan.c) */
    struct group     *group;        /* the proxies in front of these servers (group.c) */
    /* stats */
    uint64_t          accepted, rejected, requests, errors;
};

struct proxy {
    uv_loop_t        *loop;
    struct conf      *conf;
    struct pool      *pools;
    size_t            npools;
    uv_check_t        flusher;      /* one writev per connection per loop turn */
    uv_timer_t        ticker;       /* request deadlines */
    uv_signal_t       sigterm, sigint, sighup;
    TAILQ_HEAD(, client)  dirty_clients;
    TAILQ_HEAD(, client_rare) stalled;  /* clients not read for their unread replies */
    TAILQ_HEAD(, backend) dirty_backends;
    uint64_t          next_client_id;
    uint64_t          started_ms;
    uint32_t          nclients;
    uint64_t          total_connections, total_commands;
    bool              stopping;
    uint64_t          stop_ms;      /* when the stop signal came */
    int               port;         /* first TCP listen port, for INFO */
    char              idgen_sha[41];/* SHA1 of idgen_script (from SCRIPT LOAD); "" unknown */
    struct conf     **old_confs;    /* replaced by reloads while a pool still routed by
                                       them (group.c); freed once none does */
    size_t            nold_confs;
};

extern struct proxy proxy;

/* A config the proxy no longer runs: freed, or kept while a pool still
 * routes by one of its pools (a reload waiting for the other proxies), and
 * freed when the last such pool switches (pool_set_ring). */
void proxy_conf_done(struct conf *cf);

/* Write what it can of iov (total bytes) to s now: 1 if all of it, 0 if
 * some is left (*iov, *niov then describe the rest, for uv_write), or a
 * negative error. */
int stream_try_write(uv_stream_t *s, uv_buf_t **iov, unsigned *niov, size_t total);

/* Point out[0 .. g->n) at g's slices; returns g->n. */
unsigned msg_bufs(struct msg *g, uv_buf_t *out);

void proxy_mark_client(struct client *c);
void proxy_mark_backend(struct backend *b);

/* The server that owns key now: the pool's ring, minus servers ejected by
 * twemproxy-style auto_eject_hosts (eject_mode: rehash). */
uint32_t pool_owner(const struct pool *p, const void *key, size_t len);
/* Backend b failed again: eject its server if the pool says so. */
void pool_backend_failed(struct pool *p, uint32_t server, uint32_t failures);
/* Whether server is in the ring keys are routed by. */
static inline bool pool_in_ring(const struct pool *p, uint32_t server)
{
    return p->servers[server].ring_idx != UINT32_MAX;
}
/* The server at a config server's address: its index, added now (not yet
 * active, its connections not opened) if the pool has none there. */
uint32_t pool_server_at(struct pool *p, const struct conf_server *sv);
/* Route by ring (built from pc, which becomes p->conf): the pool takes
 * ring; the one it had is returned, and its ring index -> server map in
 * *old_slot (or freed, with old_slot NULL), for the caller to keep or
 * free. Servers of ring become active; others stay as they were (mig.c
 * retires them once their keys have moved). */
struct ring *pool_set_ring(struct pool *p, const struct conf_pool *pc, struct ring *ring,
                           uint32_t **old_slot);
/* Close a server's connections and mark it inactive: it is in no ring. */
void pool_retire(struct pool *p, uint32_t server);

/* ---- routing and local commands -------------------------------------------- */

/* Decide what to do with the request c's framer just completed; r is the
 * request, already queued on c. Sends it, or replies. */
void route_request(struct client *c, struct req *r);

/* Where a command's keys are among its arguments. */
struct keyspan {
    uint32_t first, last, step;     /* a range of positions, step > 0 (0: no keys) */
    uint32_t extra;                 /* one more position (STORE dest), or 0 */
};

/* The arguments of the request being routed: in the client's read chunks
 * (array requests) or its framer's inline buffer. */
struct args {
    struct client *c;
    uint32_t       argc;
    struct keyspan ks;          /* its keys, once route_owner found them */
    char          *copies[8];   /* arguments that spanned chunks, copied */
    int            ncopies;
    char         **av;          /* a kept request's own arguments (route_reissue), or
                                   NULL: the client's framer has them */
    size_t        *avlen;
};

/* Argument i; *len gets its length. Valid until args_release. */
const char *args_get(struct args *a, uint32_t i, size_t *len);
void args_release(struct args *a);
/* True if argument i equals s, ignoring case. */
bool args_is(struct args *a, uint32_t i, const char *s);
/* Append the request's bytes to g: the client's own (array requests), or
 * encoded as RESP (inline ones). */
void args_request(struct args *a, struct msg *g);

/* What shardis does with a command (route.c decides by it, and `shardis
 * commands` prints it for README.md, so the two cannot differ). */
enum route_kind {
    ROUTE_LOCAL,            /* answered by shardis */
    ROUTE_KEY,              /* one key: its server */
    ROUTE_SAME_SERVER,      /* several keys: their server if they share one */
    ROUTE_SPLIT,            /* keys grouped per server, replies merged */
    ROUTE_BLOCKING,         /* its keys' server, on the client's own connection */
    ROUTE_EVERY,            /* every server, replies merged */
    ROUTE_EVERY_ADMIN,      /* the same, with admin_commands */
    ROUTE_FIRST_ADMIN,      /* the first server, with admin_commands */
    ROUTE_SCAN,             /* one server after another */
    ROUTE_WAIT,             /* WAIT: every server, after a write of its own (pin.c) */
    ROUTE_TX,               /* MULTI ... EXEC, WATCH (pin.c) */
    ROUTE_PUBSUB,           /* publish and subscribe (pubsub.c) */
    ROUTE_KEYLESS,          /* refused: no key to route by */
    ROUTE_UNSUPPORTED,      /* refused */
};

enum route_kind route_kind(const struct cmd *cmd);

/* The server owning every key of r (cmd's key positions, left in a->ks),
 * or -1 after replying an error (-CROSSSLOT, bad numkeys, no key to route
 * by). */
int route_owner(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
/* A blocking command waiting on an old owner was unblocked (mig.c): send r
 * again by the current ring, with what is left of its timeout. 1 if it
 * was (or an error answered it), 0 if it cannot be (its arguments were not
 * kept, or c's connection still has other requests). */
int route_reissue(struct client *c, struct req *r);
/* Free what route.c kept for r (req_maybe_free). */
void route_kept_free(struct req *r);

/* Send r (its bytes in r->out) to b for client c: at once, or after the
 * keys in a->ks (a may be NULL: none) have moved to b's server while a
 * reload's migration runs, and after c's requests already waiting. */
void route_send(struct client *c, struct req *r, struct args *a, struct backend *b);

/* Transactions, WATCH and blocking commands on a dedicated connection
 * (pin.c). pin_route takes MULTI/EXEC/DISCARD/WATCH/UNWATCH, and refuses
 * what cannot be queued in a transaction (cmd NULL: a SHARD.* command):
 * 1 if it did. pin_send sends a keyed command of a transaction, or a
 * blocking one, to server on c's dedicated connection. pin_check gives the
 * connection back once nothing holds it; pin_client_gone when c closes. */
int pin_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
void pin_send(struct client *c, struct req *r, struct args *a, uint32_t server, bool blocking);
void pin_check(struct client *c);
/* WAIT numreplicas timeout on every server (see pin.c). */
void pin_wait(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
/* A command for a server busy with a script (SCRIPT KILL, FUNCTION KILL or
 * STATS): on every server (or the first), over connections of its own. */
void pin_busy(struct client *c, struct req *r, struct args *a, const struct cmd *cmd,
              bool first_only);
void pin_client_gone(struct client *c);

/* Publish and subscribe (pubsub.c). pubsub_route takes PUBLISH, SPUBLISH,
 * (P|S)SUBSCRIBE and (P|S)UNSUBSCRIBE, and every command of a client in
 * subscriber mode: 1 if it did. pubsub_frame gets each frame [start, end)
 * read on a subscriber connection; pubsub_failed is told when one fails,
 * pubsub_client_gone when its client closes. */
int pubsub_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
void pubsub_frame(struct backend *b, uint64_t start, uint64_t end);
void pubsub_failed(struct backend *b);
void pubsub_client_gone(struct client *c);
/* A reload made server hold keys (every subscriber subscribes there too),
 * or it left every ring (their connections to it close). */
void pubsub_server_added(struct pool *p, uint32_t server);
void pubsub_server_gone(struct pool *p, uint32_t server);
/* p's ring was switched: shard channels whose owner changed are
 * unsubscribed, their clients told (sunsubscribe). */
void pubsub_ring_changed(struct pool *p);

/* Multi-key commands split per backend: -2 not a split command, -1
 * handled (split and sent, or an error replied), else the one server that
 * owns every key (forward the request whole). */
int frag_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
/* SCAN: one cursor over every server in turn (scan.c). */
void scan_send(struct client *c, struct req *r, struct args *a);

/* Send r to every server; its reply merges theirs by cmd's response policy.
 * via: the connection to use for each server, or NULL for c's usual ones;
 * blocking: the fragments may wait as long as they like (no deadline). */
void frag_broadcast(struct client *c, struct req *r, struct args *a, const struct cmd *cmd,
                    struct backend **via, bool blocking);
/* A fragment got its reply: merge once all have. */
void frag_done(struct req *fragment);

/* Whether the command (or parent command) called name is answered here. */
bool local_has(const char *name);
/* Whether cmd (multi_shard in Redis's tips) is split per server (frag.c). */
bool frag_splits(const struct cmd *cmd);

/* Local commands (PING, INFO, SHARD.* ...): run one if name is one.
 * Returns 1 if it was local (replied, or sent on by the command), 0 if not. */
int local_exec(struct client *c, struct req *r, struct args *a);

/* The backend that serves c's requests for server: its dedicated
 * connection to it if it has one, else a shared one. */
struct backend *pool_backend(struct pool *p, uint32_t server, const struct client *c);

/* SHARD.GENKEY, SHARD.CHANGETYPE, SHARD.KEYINFO, SHARD.FIXEDKEY (genkey.c).
 * Each replies to r, or (GENKEY) sends it to a backend. */
void genkey_genkey(struct client *c, struct req *r, struct args *a);
/* Map the logical shards of p's ring to their servers (for GENKEY's choice
 * of shard); genkey_pool_free releases the map. */
void genkey_pool_init(struct pool *p);
void genkey_pool_free(struct pool *p);
void genkey_changetype(struct client *c, struct req *r, struct args *a);
void genkey_keyinfo(struct client *c, struct req *r, struct args *a);
void genkey_fixedkey(struct client *c, struct req *r, struct args *a);

/* ---- reload and live resharding (reload.c, mig.c) ------------------------------- */

/* Read the config file again and apply it (SIGHUP, SHARD.RELOAD). On
 * success returns 0 and writes a summary (INFO-style lines) into out; a
 * file that is bad or cannot apply changes nothing: a negative errno and
 * the reason in err. */
int reload_run(char *out, size_t outlen, char *err, size_t errlen);

/* Keys move after pool p's ring changed from old (with old_slot, its ring
 * index -> server map, and old_text the config it came from) to the ring
 * of new_text: the ring and the map are the migration's from now on. Requests
 * for moving keys MIGRATE them first; a background mover walks every
 * earlier owner. Returns -EBUSY (err says why) when two earlier rings are
 * pending already; the caller then keeps old. */
int mig_start(struct pool *p, struct ring *old, uint32_t *old_slot, const char *old_text,
              const char *new_text, char *err, size_t errlen);
/* Whether another ring change can be taken now (err says why not). */
bool mig_can_start(const struct pool *p, char *err, size_t errlen);
void mig_free(struct pool *p);
void mig_tick(struct pool *p, uint64_t now);
/* Sending r to b (its keys' owner), where r has the keys given by
 * mig_key just before: move each key the ring change moved to b's server
 * from every earlier owner first. r waits for that (on c's parked queue,
 * and c's later requests behind it, so they keep their order); a key that
 * cannot be moved answers r -TRYAGAIN and r never reaches b. */
void mig_key(struct client *c, uint32_t to, const char *key, size_t len);
void mig_send(struct client *c, struct req *r, struct backend *b);
/* End of a loop turn: send the MIGRATEs its requests share. */
void mig_flush(struct pool *p);
/* The reply to one of mig.c's internal requests; r->rsp empty: it failed. */
void mig_reply(struct backend *b, struct req *r);
/* The reply of a blocking command mig.c unblocked (r->unblocked): if the
 * unblocking answered it, it is sent again by the new ring (1: r is not
 * done), or the client is told -TRYAGAIN. */
int mig_unblocked(struct req *r);
/* A request was told -TRYAGAIN because of a reload (for the status). */
void mig_told_tryagain(struct pool *p);
/* At start, before the loop runs: a migration recorded on p's servers (a
 * proxy stopped while keys moved) is taken up again: the record's config
 * replaces proxy.conf and *taken is set; the caller then reloads the file
 * (a file that differs is a reload request). 0, or a negative errno (err
 * says why) when the record cannot be followed. */
int mig_recover(struct pool *p, bool *taken, char *err, size_t errlen);
/* shardis's own keys, out of every client's reach (an error names them):
 * its bookkeeping under "__shardis:" (the migration record), which stays
 * on its server, and idgen's sequences "$equence{LL}" (genkey.c), which
 * move with their tag like any key. A client that could read or rewrite a
 * sequence could make SHARD.GENKEY hand out an id twice. The check is on
 * every request's keys: a byte or two when they are not shardis's. */
#define SHARDIS_RESERVED "__shardis:"
#define SHARDIS_SEQUENCE "$equence{"
#define SHARDIS_RESERVED_ERR "ERR keys under '" SHARDIS_RESERVED "' or '" SHARDIS_SEQUENCE \
                             "' are shardis's own"
static inline bool route_internal(const char *key, size_t len)
{
    return len >= 10 && key[0] == '_' && key[1] == '_' && memcmp(key, SHARDIS_RESERVED, 10) == 0;
}
static inline bool route_reserved(const char *key, size_t len)
{
    return route_internal(key, len) ||
           (len >= 9 && key[0] == '$' && key[1] == 'e' && memcmp(key, SHARDIS_SEQUENCE, 9) == 0);
}
/* Keep the drain closed (group.c: until every proxy has drained), or not. */
void mig_hold(struct pool *p, bool hold);
/* Whether what was sent before the switch is answered and the record
 * written. */
bool mig_drained(const struct pool *p);

/* Several proxies in front of the same servers (group.c). group_init
 * registers p (routing by p->conf's servers); group_prepare takes a
 * reload's new servers (pc in a conf kept alive, ring owned from then on,
 * from_text the config routed by now, to_text pc's) and switches p once every proxy has
 * them; group_tick keeps the registration fresh and moves the phases on;
 * group_reply gets each round's answers; group_check_start refuses (-EBUSY,
 * err says why) to start a proxy whose servers differ from those the live
 * proxies route by. */
void group_init(struct pool *p);
void group_free(struct pool *p);
uint64_t group_checksum(const struct conf_pool *pc);
void group_prepare(struct pool *p, const struct conf_pool *pc, struct ring *ring,
                   const char *from_text, const char *to_text);
void group_tick(struct pool *p, uint64_t now);
void group_reply(struct backend *b, struct req *r);
void group_status(const struct pool *p, FILE *f);
int group_check_start(struct pool *p, char *err, size_t errlen);
/* A reload back to the servers p routes by: forget the one waiting. */
void group_cancel(struct pool *p);
/* Between the switch and the release: no reload is taken then. */
bool group_switching(const struct pool *p);
/* "steady", "prepared", "holding" or "locked". */
const char *group_phase_name(const struct pool *p);
/* h is one of the group's connections: closed (1), or not ours (0). */
int group_close_handle(struct pool *p, uv_handle_t *h);
/* server left every ring: its group connection is closed. */
void group_server_gone(struct pool *p, uint32_t server);

/* SHARD.MIGRATION STATUS | PAUSE | RESUME, and SHARD.RELOAD (local.c). */
void mig_command(struct client *c, struct req *r, struct args *a);
void reload_command(struct client *c, struct req *r, struct args *a);

#endif
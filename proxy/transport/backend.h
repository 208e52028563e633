/* backend.h -- a connection to a redis-server: shared and pipelined, or
 * dedicated to one client; or its owner's, a Sentinel's link or a
 * blocking call (struct backend_owner). backend.c is its life,
 * backend_hello.c its handshake, backend_read.c its replies, and
 * backend_sync.c a blocking call: one run to its reply on a loop of its
 * own. It knows its server only by what its pool (or owner) tells it
 * (struct backend_server), and tells the layers above what befalls it
 * only through the hooks they registered (struct backend_hooks). */
#ifndef SHARDIS_BACKEND_H
#define SHARDIS_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <uv.h>

#include "conf/conf.h"
#include "proxy/transport/holdoff.h"
#include "proxy/transport/req.h"
#include "proxy/base/resp.h"
#include "proxy/base/stream.h"
#include "proxy/base/tls.h"

struct backend;
struct backend_owner;
struct client;
struct pool;
struct req;

enum backend_state {
    BACKEND_DOWN,               /* not connected; connects on first use */
    BACKEND_CONNECTING,
    BACKEND_UP,
    BACKEND_FAILED,             /* failed recently: fail fast while backend_held_off */
};

/* What a connection is for. A shared one is the pool's for its life. A
 * dedicated one is one client's while it holds state on a server, and
 * goes through these, the pool making every transition (core/pool_conn.c)
 * but the last, a LEFT or ONE_OFF one's free once closed (hooks.closed):
 *
 *   pool_conn_acquire --> PIN | SUBSCRIBER | ONE_OFF   (owner: its client)
 *        ^                  |                   ^
 *        |                  |   PIN --pool_conn_retire--+
 *        |                  |
 *        |                  +--pool_conn_release, clean and wanted--> SPARE
 *        +----------------------------------------------------------+
 *                           +--pool_conn_release, dirty or not wanted--> LEFT
 *                                (closed; freed once its handle is: hooks.closed)
 *
 * A PIN or ONE_OFF that fails stays its client's, failed, until released;
 * a SPARE or LEFT one that fails is freed. Only SPARE ones are on the head
 * of pool.dedicated (pool_conn_acquire stops at the first that is not). */
enum backend_role {
    BACKEND_SHARED,             /* pipelined, every client's (pool_server.conns, mover) */
    BACKEND_PIN,                /* a client's transaction, WATCH or blocking commands */
    BACKEND_SUBSCRIBER,         /* a client's subscriptions on one server (pubsub.c) */
    BACKEND_ONE_OFF,            /* one request (WAIT, SCRIPT KILL): released once idle */
    BACKEND_SPARE,              /* idle, kept for the next client */
    BACKEND_LEFT,               /* released and closing */
};

/* Who a connection signs in as on its server (backend_auth_args). Clients'
 * commands run as the pool's backend_user, so that a script can do no
 * more than that user may; shardis's own work (migration, the group, ID
 * sequences, admin commands, checking the keyless_user) as its
 * internal_user; a script that declares no key as the keyless_user. Each
 * is redis_auth's default user where the pool names no such user. */
enum backend_as {
    BACKEND_AS_CLIENT,
    BACKEND_AS_INTERNAL,
    BACKEND_AS_KEYLESS,
};

/* Who keeps a connection alive: a shared one is embedded in its pool's
 * arrays (pool_server.conns, dbconns, a replica's conns) or made by a
 * module for itself (the mover, the group's, a Sentinel's link), and lives
 * as long as they do; a dedicated one is made by pool_conn_acquire, listed on
 * pool.dedicated, and freed once closed (hooks.closed: pool_conn_closed).
 * Requests on its queues are kept by their marks (req.h). */
struct backend {
    union stream     h;
    uv_connect_t     creq;
    uv_write_t       wreq;
    struct pool     *pool;      /* whose it is: handed to the hooks and read by the
                                   layers above; never read through here */
    const struct conf_pool *const *conf;    /* its pool's config, where the pool keeps
                                   it (a reload swaps it): timeouts, credentials,
                                   redis_db, TLS names (hooks.conf; borrowed) */
    uint32_t         server;    /* index in the pool's servers */
    uint32_t         replica;   /* 0: to the server's master; k: to its replica in
                                   slot k - 1 (pool_server.replicas), for reads only */
    uint32_t         db;        /* the database it selects as it connects, and keeps:
                                   redis_db, or one a client SELECTed (pool.h) */
    enum backend_state state;
    TAILQ_HEAD(, req) sendq;    /* waiting to be written */
    TAILQ_HEAD(, req) writeq;   /* in the write in flight */
    TAILQ_HEAD(, req) pendq;    /* written, waiting for their replies */
    TAILQ_ENTRY(backend) dirty; /* on cur_loop->dirty_backends */
    struct rstream   in;
    struct tls      *tls;       /* made once connected, freed by the close
                                   callback (tls.h); NULL in the clear */
    struct resp_rsp  scan;
    uint64_t         framed;    /* stream offset: replies framed up to here */
    struct holdoff   hold;      /* shared: its reconnect backoff and failures in a
                                   row (holdoff.h; backend_held_off) */
    uint64_t         rx_ms;     /* loop ms of the last byte read; 0 none yet */
    char             reason[96];/* why it last failed */
    char             run_id[41];/* the server's INFO run_id on this connection; "" unknown */
    uint64_t         client_id; /* dedicated: its CLIENT ID on the server; 0 unknown */
    struct client   *owner;     /* dedicated: the client it serves, NULL when spare */
    const struct backend_owner *own;/* an owned connection (a Sentinel's link, a
                                   blocking call): what its owner hears, in place of
                                   the pool's hooks (and server is no pool server's
                                   index); NULL: a pool's server's */
    TAILQ_ENTRY(backend) link;  /* dedicated: on pool.dedicated */
    unsigned         writing:1;
    unsigned         is_dirty:1;
    unsigned         closing:1;
    unsigned         notouch:1; /* CLIENT NO-TOUCH ON is in force on it: a transaction's
                                   pin, until its EXEC or DISCARD (gate.c go) */
    unsigned         role:3;    /* enum backend_role */
    unsigned         unblocking:1;/* a pin: a CLIENT UNBLOCK for it is in flight (mig.c) */
    unsigned         resp3:1;   /* speaks RESP3 (HELLO 3 in its handshake) for RESP3 clients */
    unsigned         tracking:1;/* for clients that track keys: CLIENT TRACKING ON in
                                   its handshake (hooks.tracking_hello queues it), and a
                                   request marked track keeps its bytes till its reply
                                   (hooks.tracked reads its keys there); a RESP3 one
                                   hears its server's invalidations (hooks.invalidate) */
    unsigned         bcast:1;   /* ... in BCAST mode: every key its server changes */
    unsigned         held_back:1;/* no client's request is written on it (backend_flush)
                                   until its owner lets it go (a RESP2 tracking one
                                   waits for the connection its invalidations are to
                                   be redirected to: track.c) */
    unsigned         tracked:1; /* ... and hooks.tracked took a read answered on it as
                                   tracked since it connected (set there): closing it
                                   loses what its server tracks (hooks.untracked) */
    unsigned         as:2;      /* enum backend_as: the ACL user it signs in as */
    uint32_t         creds_gen; /* the pool's creds_gen it authenticated in */
    unsigned         retired:1; /* a ONE_OFF that was its client's PIN (pool_conn_retire) */
    unsigned         checking:1;/* a pool with sentinels: its HELLO has not yet said the
                                   server is a master, so nothing queued after that
                                   HELLO is written (backend_flush): no client's
                                   request, no MIGRATE, nothing of the group's */
    unsigned         role_asked:1;/* ... and that HELLO is written */
    unsigned         watched:1; /* a pool with sentinels, a master's: its error replies
                                   may say the master moved (hooks.doubt) */
    unsigned         verifying:1;/* keyless: its handshake's check is unanswered, so no
                                   request may be sent on it yet (gate.c): pipelined
                                   behind a failed AUTH, it would run as another user */
    /* Read callbacks that brought bytes: the order of what it read against
     * another connection's (track.c: whose write an invalidation is). */
    uint32_t         nreads;
    /* stats */
    uint64_t         requests, errors, timeouts;
    uint64_t         rx_bytes, tx_bytes;
};

/* What a connection must know of its server to reach it and sign in:
 * filled by its owner (hooks.server) each time it connects, so that it
 * follows a server that moved (Sentinels) or a reload's new TLS context;
 * and by whoever makes a blocking call (backend_sync), for the call. Every
 * pointer is borrowed, good until the loop runs again. */
struct backend_server {
    const struct conf_pool *conf;   /* its pool's: credentials, redis_db, TLS names */
    const char      *label;         /* its name in logs and errors */
    const char      *host;          /* where it is now: host, IP address or unix path */
    uint16_t         port;
    bool             unix_socket;
    bool             resolved;      /* false: where it is is not known yet (no Sentinels
                                       agreed): not connected, not asked */
    bool             sentinels;     /* its pool follows Sentinels: a master's connection
                                       checks its role first (backend.checking) */
    SSL_CTX         *tls;           /* what its TLS connections are made from; NULL: in
                                       the clear */
    const char      *tls_name;      /* the name its certificate must bear (and SNI, for a
                                       host name); NULL for none */
    uint32_t         creds_gen;     /* the pool's credentials' generation (pool.creds_gen) */
};

/* What the transport calls up: the layers above register it once, at
 * start, before any connection is made (backend_set_hooks; process/
 * proxy.c), and each hook's owner decides what its event means there.
 * Every hook runs on the loop, from b's callbacks, while b's handle is
 * open: only closed frees b; progress, lost and idle may give a dedicated
 * b back (pool_conn_release), which may close it; doubt may move b's
 * server (backend_move). A hook left NULL is skipped (but conf and server,
 * which every connection needs). On a request's way only these run:
 * keep_sent once per write, progress once per read or write of a
 * dedicated connection, unblocked for a request mig.c marked, and doubt
 * or replica_shun for an error reply in a pool with Sentinels. */
struct backend_hooks {
    /* -- what a connection asks of its pool (core) -- */
    /* Where p keeps its config (backend.conf): at backend_init. */
    const struct conf_pool *const *(*conf)(const struct pool *p);
    /* b's server, into *sv: as b connects, fails, and names it. */
    void (*server)(const struct backend *b, struct backend_server *sv);
    /* b, a clients' connection (BACKEND_AS_CLIENT) connecting: queue, at
     * the front (backend_queue_own), what signs it in as its pool's
     * clients' user, and return true; false where the pool has none (it
     * signs in as backend_user, or redis_auth's user). Called after the
     * rest of the handshake is queued and before its first AUTH (queued
     * after, so sent first: as the internal user when this returned true). */
    bool (*sign_in)(struct backend *b);
    /* A shared connection to server's master failed, the failures-th
     * time in a row: eject it if the pool says so (pool_backend_failed). */
    void (*server_failed)(struct pool *p, uint32_t server, uint32_t failures);
    /* A replica's connection got -LOADING or -MASTERDOWN: read elsewhere a while. */
    void (*replica_shun)(struct pool *p, uint32_t server, uint32_t replica);
    /* -- what it tells the modules -- */
    /* b connects: queue, at the front, what else goes first (it is sent
     * after the handshake). Any connection: the hook picks (genkey.c). */
    void (*connecting)(struct backend *b);
    /* HELLO's reply, len bytes at p, on a connection that checks its role:
     * whether its server says it is a master (sentinel.c). */
    bool (*says_master)(const char *p, size_t len);
    /* server's master may have moved (a shared connection failed, one was
     * told its server is a replica, a -READONLY reply): ask (sentinel.c). */
    void (*doubt)(struct pool *p, uint32_t server, const char *why);
    /* A frame that is not a reply, bytes [start, end) of b->in, on a
     * SUBSCRIBER connection: a message or a confirmation (pubsub.c). */
    void (*frame)(struct backend *b, uint64_t start, uint64_t end);
    /* b, a SUBSCRIBER of a client, failed: its requests are answered, it is
     * closing; the hook may release it (pubsub.c). */
    void (*lost)(struct backend *b);
    /* r, which mig.c marked unblocked, was answered, in r->rsp: nonzero if
     * the hook took it back (sent again to its key's new owner). */
    int (*unblocked)(struct req *r);
    /* Whether clients' requests keep their bytes once written, till their
     * replies (a HOTKEYS session reads their keys there). */
    bool (*keep_sent)(const struct pool *p);
    /* -- client-side caching (track.c): tracking connections only -- */
    /* r is answered on b, a tracking connection, in r->rsp, as it is
     * read, before anything after it on b: if it is a client's request
     * marked r->track (or a fragment of one), what it read is tracked from
     * now on, and r->out still holds what was sent. Every reply on b comes
     * here, before it goes on (req_done), and so does one that failed on
     * b, with shardis's error. It sets b->tracked where the server now
     * tracks for b a key some client is to be told of. */
    void (*tracked)(struct backend *b, struct req *r);
    /* b's server pushed frame (an invalidation), in the order b read it. */
    void (*invalidate)(struct backend *b, const struct msg *frame);
    /* b had tracked requests and is failing or closing: its server tracks
     * nothing of it any more. */
    void (*untracked)(struct backend *b);
    /* b, a tracking connection, connects: queue, at the front, how it
     * tracks (it is sent after the rest of the handshake). */
    void (*tracking_hello)(struct backend *b);
    /* -- what it tells a dedicated connection's owner (its client) -- */
    /* Something of owner's on b was written or answered: is it done? (pin.c) */
    void (*progress)(struct client *owner);
    /* Whether a request of owner's waits at its gate to go on b, a
     * one-off (which is then not given back: idle is not called). */
    bool (*waits_on)(const struct client *owner, const struct backend *b);
    /* b's handshake is answered: owner's requests may go on it now. */
    void (*ready)(struct client *owner);
    /* b, dedicated, released or a failed one-off, has closed: free it
     * (the pool's, which lists it). The one hook that frees b. */
    void (*closed)(struct backend *b);
    /* b, a one-off, has answered all it was sent: give it back unless
     * something waits to go on it (pool_conn_release: kept as a spare, or
     * closed, to be freed by closed; never freed here, b's handle is open). */
    void (*idle)(struct backend *b);
};

void backend_set_hooks(const struct backend_hooks *hooks);

/* How an owned connection signs in (backend_hello.c): never as a pool's
 * clients' connection, so nothing of the modules' (hooks.connecting), no
 * clients' user (hooks.sign_in), no role check, no CLIENT ID. */
enum backend_greeting {
    BACKEND_GREET_SENTINEL,     /* a Sentinel's: HELLO 3, with AUTH default
                                   <sentinel_auth> where the pool has one; in RESP2
                                   (own.resp3 false): AUTH <sentinel_auth> alone */
    BACKEND_GREET_INTERNAL,     /* shardis's own call on a pool's server: AUTH as
                                   its internal user (backend_auth_args), SELECT its
                                   redis_db; RESP2 */
};

/* A connection that is not one of a pool's to its servers, but its
 * owner's: a link to a Sentinel (modules/sentinel.c), or a blocking call
 * (backend_sync.c). Its owner hears of it through these, in place of the
 * pool's hooks, which know only the pool's servers and which a process
 * that runs no pool may never have registered (shardis acl --check): none
 * of them is called for it (no conf, no server_failed, no doubt, no
 * connecting, no keep_sent). It signs in as greeting says. Its requests
 * are the owner's own (req.on_reply); a failure answers each with no
 * reply, backs off as a shared connection's does (backend_fail), and is
 * retried by backend_keep_up or the next request. Every callback runs on
 * the loop, from b's callbacks, while b's handle is open; none may free
 * b. Kept (static) by the owner for as long as b lives. */
struct backend_owner {
    enum backend_greeting greeting;
    bool resp3;                 /* speaks RESP3 (HELLO 3): a Sentinel's link, whose
                                   pushes arrive between its replies */
    bool lenient;               /* its handshake's replies are not judged: a refused
                                   step does not fail it (a raw blocking call, whose
                                   caller reads what its command got, signed in or
                                   not) */
    /* Where b goes, into *sv, as hooks.server does for a pool's server
     * (conf: whose credentials and sentinel_auth it signs in with). */
    void (*server)(const struct backend *b, struct backend_server *sv);
    /* b is connected (its TLS handshake over), its handshake queued:
     * queue what follows it on each connection (a link's SUBSCRIBE), and
     * say so if it must be said. NULL: nothing, said at debug level. */
    void (*up)(struct backend *b);
    /* A push frame, in *frame (borrowed for the call): true if it is the
     * reply of the oldest request unanswered (RESP3 confirms a SUBSCRIBE
     * with a push), which then gets it; false: a message, read here. May
     * fail b (backend_fail, through the owner's other links' checks).
     * NULL: a push is dropped, with a warning. */
    bool (*push)(struct backend *b, const struct msg *frame);
    /* b fails for why: called first, b->state still what it was (UP: it
     * was linked); its requests are answered after, each with no reply.
     * The owner says it, or not: the transport logs nothing of it. */
    void (*failed)(struct backend *b, const char *why);
    /* How long each of its requests may wait for its answer, its
     * handshake's too (backend_deadline), whatever the pool's timeout: a
     * Sentinel that takes the connection and never answers fails it. 0:
     * the pool's (a blocking call keeps its own clock). */
    uint32_t answer_ms;
    /* The longest reply it may send: past it, b fails ("a reply too
     * long") instead of holding what its server has no reason to send. 0:
     * no bound. */
    size_t reply_max;
};

/* b, owned by p (embedded in its pool, or made by pool_conn_acquire), on
 * server; in the pool's redis_db and RESP2 until told otherwise. */
void backend_init(struct backend *b, struct pool *p, uint32_t server);
/* Connect now rather than on first use (preconnect: true). */
void backend_preconnect(struct backend *b);
/* b, an owned connection (struct backend_owner own, kept by its owner),
 * whose config is where conf says (its pool's, which a reload swaps: its
 * timeout, TLS and credentials); p is only kept (b->pool), NULL for none.
 * Down until backend_keep_up, backend_preconnect or a request. */
void backend_init_owned(struct backend *b, struct pool *p, const struct conf_pool *const *conf,
                        const struct backend_owner *own);
/* A connection that must be up though nothing waits to go on it (a
 * Sentinel's, for its pushes): connect it if it is down, or failed and
 * its backoff is over. From its owner's tick. */
void backend_keep_up(struct backend *b);
/* Queue r to b, or fail it at once if b is failed; its deadline is the
 * pool's (backend_deadline: the one rule) ... */
void backend_send(struct backend *b, struct req *r);
/* ... or own_ms after now, where it is not 0 (MIGRATE and the mover). */
void backend_send_by(struct backend *b, struct req *r, uint64_t own_ms);
/* When r must be answered by if queued on b now (loop ms; 0: never), with
 * a sender's own_ms (0: none); the rule is written in backend.c. */
uint64_t backend_deadline(const struct backend *b, const struct req *r, uint64_t own_ms,
                          uint64_t now);
void backend_flush(struct backend *b);
/* Deadline check: fail a backend whose oldest request timed out. */
void backend_check_timeout(struct backend *b, uint64_t now);
void backend_close(struct backend *b);
/* Answer everything queued on b with "its ... unavailable: why", and close
 * it: with no backoff (a dedicated connection given up). Once closed, a
 * dedicated one goes to hooks.closed. */
void backend_drop(struct backend *b, const char *why);
/* Whether b's handle is closed, or was never opened: nothing will call
 * back for it (it may be freed now). */
bool backend_gone(const struct backend *b);
/* b's server is now elsewhere (pool_server_move): what was written on b
 * gets an error (its outcome is unknown), what was not yet written goes
 * to the new address (within its deadline), and b reconnects there. A
 * dedicated connection fails instead: its client's state was on the old
 * server. */
void backend_move(struct backend *b, const char *why);
/* Queue the proxy's own command argv[0..argc) on b, ahead of everything
 * queued (front) or behind it; its reply goes to on_reply. */
void backend_queue_own(struct backend *b, req_reply_cb *on_reply, bool front, int argc,
                       const char *const *argv);
const char *backend_state_name(const struct backend *b);
/* b's server's name (hooks.server's label), for logs and errors. */
const char *backend_label(const struct backend *b);
/* Whether b is one client's (any role but BACKEND_SHARED). */
#define backend_dedicated(b) ((b)->role != BACKEND_SHARED)
/* Whether r (a client's request, or a fragment of one) reads keys its
 * client tracks (track.c marks it as it is routed). */
static inline bool backend_tracks(const struct req *r)
{
    return r->parent != NULL ? r->parent->track : r->track;
}
/* Whether b is kept away from at now: failed, and its reconnect backoff
 * (b->hold, holdoff.h) not over, so a request for it fails at once. The
 * one place that is read: backend_send's fail-fast, a connection closed
 * with requests still queued, a pool's choice of replica. */
static inline bool backend_held_off(const struct backend *b, uint64_t now)
{
    return b->state == BACKEND_FAILED && holdoff_on(&b->hold, now);
}
/* Nothing queued, in flight or awaiting a reply. */
bool backend_idle(const struct backend *b);
/* Whether bytes wait in b's socket, not read yet (a peek: nothing is
 * read). Not over a unix socket's or a closed connection. */
bool backend_unread(const struct backend *b);
/* Requests queued on b or awaiting their replies (a request being
 * written is in the second). */
uint32_t backend_queued(const struct backend *b);
/* A blocking command is queued, in flight or waiting on b. */
bool backend_has_blocking(const struct backend *b);

/* A handshake step's reply callback: AUTH, SELECT, RESET: +OK; HELLO 3:
 * the server's map. Anything else fails b (0, else -1: b failed). */
int backend_hello_reply(struct backend *b, struct req *r);
/* The AUTH a connection signing in as `as` starts with, in argv[0..n):
 * returns n (3: AUTH user password, 2: AUTH redis_auth, 0: none). The
 * keyless_user's AUTH comes after its check, which runs as internal. */
int backend_auth_args(const struct conf_pool *pc, enum backend_as as, const char *argv[3]);

/* A blocking call (backend_sync.c), where no loop runs (at start, or in
 * shardis acl --check): argv on the server sv, on a connection of its own
 * run to its reply on a loop of its own (AUTH as the internal user and
 * SELECT as its pool says; then pre[0..pre_argc) when pre_argc > 0); a
 * second at most without a byte (connecting, TLS, each reply), and three
 * for the replies in all. raw: the
 * reply's bytes as they came (read them with resp_rd_*), whatever the
 * replies before it were; NULL: no answer. Else the reply's bulk string,
 * or the bulks of an array reply one per line; NULL: nil, an error reply
 * (to the command or to any step before it), or no answer. The caller
 * frees it. A failure is said only where TLS says why (a warning). */
char *backend_sync(const struct backend_server *sv, int pre_argc, const char *const *pre,
                   int argc, const char *const *argv, bool raw, size_t *len);
/* The same on the Sentinel sv names (sv->conf: its pool's, whose
 * sentinel_auth it signs in with, AUTH alone; RESP2, in the clear): the
 * reply's bytes as they came, NULL if none. */
char *backend_sync_sentinel(const struct backend_server *sv, int argc, const char *const *argv,
                            size_t *len);

#endif

/* backend.h -- connections to the redis-servers (backend.c): shared
 * pipelined ones, and dedicated ones of one client each. */
#ifndef SHARDIS_BACKEND_H
#define SHARDIS_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <uv.h>

#include "conf/conf.h"
#include "proxy/transport/req.h"
#include "proxy/base/resp.h"
#include "proxy/base/stream.h"

struct backend;
struct client;
struct pool;
struct pool_server;
struct req;

enum backend_state {
    BACKEND_DOWN,               /* not connected; connects on first use */
    BACKEND_CONNECTING,
    BACKEND_UP,
    BACKEND_FAILED,             /* failed recently: fail fast until retry_at */
};

/* What a connection is for. A shared one is the pool's for its life. A
 * dedicated one is one client's while it holds state on a server, and
 * goes through these, backend.c making every transition:
 *
 *   backend_acquire --> PIN | SUBSCRIBER | ONE_OFF   (owner: its client)
 *        ^                  |                   ^
 *        |                  |   PIN --backend_retire--+
 *        |                  |
 *        |                  +--backend_release, clean and wanted--> SPARE
 *        +----------------------------------------------------------+
 *                           +--backend_release, dirty or not wanted--> LEFT
 *                                (closed; freed by its close callback)
 *
 * A PIN or ONE_OFF that fails stays its client's, failed, until released;
 * a SPARE or LEFT one that fails is freed. Only SPARE ones are on the head
 * of pool.dedicated (backend_acquire stops at the first that is not). */
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

struct backend {
    union stream     h;
    uv_connect_t     creq;
    uv_write_t       wreq;
    struct pool     *pool;
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
    struct tls      *tls;       /* backend_tls: made once connected, freed by the close
                                   callback (tls.h); NULL in the clear */
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
    unsigned         notouch:1; /* CLIENT NO-TOUCH ON is in force on it: a transaction's
                                   pin, until its EXEC or DISCARD (gate.c go) */
    unsigned         role:3;    /* enum backend_role */
    unsigned         unblocking:1;/* a pin: a CLIENT UNBLOCK for it is in flight (mig.c) */
    unsigned         resp3:1;   /* speaks RESP3 (HELLO 3 in its handshake) for RESP3 clients */
    unsigned         as:2;      /* enum backend_as: the ACL user it signs in as */
    uint32_t         creds_gen; /* the pool's creds_gen it authenticated in */
    unsigned         retired:1; /* a ONE_OFF that was its client's PIN (backend_retire) */
    unsigned         checking:1;/* a pool with sentinels: its HELLO has not yet said the
                                   server is a master, so nothing queued after that
                                   HELLO is written (backend_flush): no client's
                                   request, no MIGRATE, nothing of the group's */
    unsigned         role_asked:1;/* ... and that HELLO is written */
    unsigned         verifying:1;/* keyless: its handshake's check is unanswered, so no
                                   request may be sent on it yet (gate.c): pipelined
                                   behind a failed AUTH, it would run as another user */
    /* stats */
    uint64_t         requests, errors, timeouts;
    uint64_t         rx_bytes, tx_bytes;
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

/* Dedicated connections: a client whose commands hold state on a server
 * (MULTI ... EXEC, WATCH, a blocking pop) gets a connection of its own to
 * it while the state lasts (pin.c), in the client's database (a
 * subscriber's in redis_db: channels have none). Released clean (EXEC, DISCARD, the
 * pop answered) it waits as a spare for the next client; released dirty
 * (the client left mid-transaction or mid-pop) it is closed, so no state
 * leaks to anyone and a pop that was waiting takes nothing. The pool
 * frees them. */
struct backend *backend_acquire(struct pool *p, uint32_t server, struct client *owner,
                                enum backend_role role);
/* A ONE_OFF for a script that declares no key (pin_keyless): it
 * authenticates as the pool's keyless_user, and fails unless that user is
 * refused a key write (its handshake checks). */
struct backend *backend_acquire_keyless(struct pool *p, uint32_t server, struct client *owner);
/* A ONE_OFF for an admin command, authenticated as the pool's
 * internal_user (pin_internal). Spares serve only their own kind, in
 * their own database (and only while the pool's creds_gen is the one
 * they were made in). */
struct backend *backend_acquire_internal(struct pool *p, uint32_t server, struct client *owner);
/* The AUTH a connection signing in as `as` starts with, in argv[0..n):
 * returns n (3: AUTH user password, 2: AUTH redis_auth, 0: none). The
 * keyless_user's AUTH comes after its check, which runs as internal. */
int backend_auth_args(const struct conf_pool *pc, enum backend_as as, const char *argv[3]);
/* Whether b is one client's (any role but BACKEND_SHARED). */
#define backend_dedicated(b) ((b)->role != BACKEND_SHARED)
void backend_release(struct backend *b, bool clean);
/* Nothing queued, in flight or awaiting a reply. */
bool backend_idle(const struct backend *b);
/* Requests queued on b or awaiting their replies (a request being
 * written is in the second). */
uint32_t backend_queued(const struct backend *b);
/* A blocking command is queued, in flight or waiting on b. */
bool backend_has_blocking(const struct backend *b);
/* b, a PIN whose client has moved on to another (pin.c), finishes what
 * was sent on it as a ONE_OFF: given back clean once idle. */
void backend_retire(struct backend *b);
/* At start, before the loop runs: argv on the server ps, over a blocking
 * connection of its own (AUTH and SELECT as the pool says), a second's
 * timeout at each step. The reply's bulk string, or the bulks of an array
 * reply one per line (the caller frees it); NULL: nil, an error reply, or
 * no answer. */
/* The name a TLS server's certificate must bear (and SNI, for a host
 * name): backend_tls_server_name, else the server's host or IP address as
 * written; NULL for a unix socket. */
const char *backend_tls_name(const struct pool *p, uint32_t server);
char *backend_sync_call(const struct pool *p, const struct pool_server *ps, int argc,
                        const char *const *argv, size_t *len);
/* The same, the reply's bytes as they came (read them with resp_rd_*);
 * NULL: no answer. */
char *backend_sync_raw(const struct pool *p, const struct pool_server *ps, int argc,
                       const char *const *argv, size_t *len);
/* At start: argv on the Sentinel at host:port (AUTH password first, if
 * given), in the clear: the reply's bytes as they came, NULL if none. */
char *backend_sync_sentinel(const char *host, uint16_t port, const char *password, int argc,
                            const char *const *argv, size_t *len);
/* At start (and `shardis acl --check`): ask server ps (ACL DRYRUN, as the
 * internal user) whether the pool's clients' user (backend_user, or the
 * one shardis makes there first when make: srvuser.c) may touch
 * shardis's keys and channels or run admin commands, and whether the
 * internal_user may do shardis's work; each finding is a warning in the
 * log. The number of findings, -1 if it cannot tell. */
int backend_check_users(const struct pool *p, struct pool_server *ps, bool make);
/* Server ps did not let shardis make or sign in as the pool's clients'
 * user (srvuser.c): mark it (INFO), and say so loudly, once, with why
 * and how to mend it. */
void backend_user_refused(const struct pool *p, struct pool_server *ps, const char *why);
/* Close p's spare dedicated connections to server (UINT32_MAX: to every
 * server), when the proxy is idle or the server leaves. */
void backend_close_spares(struct pool *p, uint32_t server);

#endif

/* pool.h -- a pool: its servers, the ring keys are routed by, and the
 * connections to each server (pool.c). The one place the ring is swapped. */
#ifndef SHARDIS_POOL_H
#define SHARDIS_POOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "conf/conf.h"
#include "proxy/base/stream.h"
#include "proxy/base/tls.h"
#include "proxy/transport/client.h"
#include "proxy/transport/holdoff.h"
#include "ring/ring.h"

struct acl;
struct backend;
struct client;
struct cmd;
struct mig;
struct minify;
struct info;
struct slowlog;
struct metrics;
struct cmdinfo;
struct hotkeys;
struct track_tab;
struct sentinel;
struct stats;
struct stats_hist;
struct genkey_shards;
struct group;
struct srvuser;
struct subs;
struct pool;
struct pool_server;

/* A replica of a server's master, where the pool reads from replicas
 * (read_from; sentinel.c lists them, pool_server_replicas applies the
 * list). A slot is made once and kept for the pool's life, its
 * connections with it, so a pointer to one stays good as the masters'
 * do; a replica no longer listed takes no new request, and its slot is
 * given to another address once its connections are idle and closed. */
struct pool_replica {
    char            *host;          /* an IP address (owned); NULL: a free slot */
    uint16_t         port;
    bool             listed;        /* the Sentinels list it, up, replicating the master */
    struct holdoff   hold;          /* passed over for reads a while: it said -LOADING
                                       or -MASTERDOWN (pool_shun; pool_held_off) */
    struct backend  *conns;         /* [2 * pool.nconns]: RESP2's, then RESP3's (owned) */
};

/* Replicas followed per server (more are left out, with a notice). */
#define POOL_REPLICAS_MAX 8
/* After a reshard, reads go to the masters this long (ms) before replicas
 * again: the keys moved reach the new owners' replicas a replication delay
 * after the masters; this covers it but for a replica far behind. */
#define POOL_REPLICA_SETTLE_MS 1000
/* A replica that answers a read with -LOADING or -MASTERDOWN (restarted,
 * or cut off from its master with replica-serve-stale-data no) gets no
 * read for this long (ms). */
#define POOL_REPLICA_SHUN_MS 1000

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
    struct backend  *conns;         /* [pool_nconns()] shared, pipelined (owned): the
                                       RESP2 ones, then as many RESP3 ones, then
                                       shardis's own two (pool_own), then the
                                       tracking ones (POOL_CONN_TRACK3 ...) */
    struct backend  *dbconns;       /* [2 * pool.ndbs]: database d's shared connections,
                                       RESP2's at 2d, RESP3's at 2d + 1, for clients that
                                       SELECTed d (not redis_db: conns), connected on
                                       first use; NULL until a client SELECTs one (owned) */
    struct backend  *mover;         /* mig.c's own connection, so that clients' requests
                                       never queue behind its batches; or NULL (owned) */
    struct holdoff   hold;          /* ejected: out of the ring keys are hashed by
                                       (pool_backend_failed, pool_tick; pool_held_off) */
    uint32_t         gained;        /* pool.ring_changes when a ring change last gave it
                                       keys (scan.c walks it again) */
    bool             resolved;      /* host:port is where it is: always, but in a pool
                                       with sentinels only once they agreed on it */
    struct pool_replica *replicas;  /* [POOL_REPLICAS_MAX] once one is listed, else
                                       NULL (owned) */
    struct stats_hist *latency;     /* the times of its clients' requests it alone
                                       answered, read to reply (/metrics; stats.c),
                                       made on the first (owned) */
    uint64_t         ejections;     /* times eject_mode: rehash took it out */
    uint8_t          kind;          /* what server it said it is (cmd_kind; cmdinfo.c),
                                       0 until it has */
    uint32_t         redis_version; /* the Redis version it says it stands for
                                       (cmd_version of INFO's redis_version), 0 unknown */
    bool             user_refused;  /* it refused to make or sign in as clients_user:
                                       clients' connections there are shardis's own
                                       user's (said once in the log, and in INFO) */
    char            *record_ignored;    /* why the migration record found on it at start
                                           was not followed (INFO), until shardis writes
                                           its own there; NULL: none (owned; mig_record.c) */
};

/* Server slots a pool may have (scan.c's cursor has 10 bits for one). */
#define POOL_SLOTS_MAX 1024

struct pool {
    const struct conf_pool *conf;   /* its config's, held (conf_ref: pool_set_conf) */
    struct ring      *ring;         /* the servers keys are routed by: names,
                                       shares, SHARD.WHEREIS */
    uint32_t         *slot;         /* ring index -> server (index in servers) */
    struct ring      *live;         /* eject_mode rehash: the servers not ejected,
                                       or NULL when that is all of them */
    uint32_t         *live_map;     /* live ring index -> server */
    union stream      listener;
    union stream      tls_listener; /* tls_listen's (handle.loop NULL without one) */
    SSL_CTX          *tls_client;   /* what connections to servers are made from
                                       (backend_tls), and front.tls_server what TLS
                                       clients' are: owned, NULL without; swapped by
                                       pool_set_tls (tls.h) */
    struct pool_server *servers;    /* [nservers]: every server ever in a ring */
    uint32_t          nservers;
    uint32_t          nconns;       /* server_connections (of each protocol) */
    uint32_t          ndbs;         /* databases (fixed at start, as nconns) */
    struct front      front;        /* its clients, as the transport keeps them (client.h;
                                       front.conf is conf, set by pool_set_conf) */
    struct acl       *acl;          /* who may do what (acl.c): one reference,
                                       swapped whole by pool_set_acl */
    TAILQ_HEAD(backend_list, backend) dedicated;/* spares first, then those in use */
    TAILQ_HEAD(, subs) subscribers; /* clients with subscriptions (pubsub.c) */
    uint32_t          ndedicated, nspare;
    struct genkey_shards *shards;   /* the logical shards each server owns on ring:
                                       rebuilt by genkey.c's module when ring changes */
    struct minify    *minify;       /* idgen.subkeys, indexed (minify.c; rebuilt by
                                       pool_set_conf), or NULL without */
    struct mig       *mig;          /* keys moving after a reload (mig.c), or NULL */
    struct sentinel  *sentinel;     /* the Sentinels followed (sentinel.c), or NULL */
    struct info      *info;         /* the servers' INFO, kept (info.c), or NULL */
    struct slowlog   *slowlog;      /* its slow requests (slowlog.c), or NULL */
    struct metrics   *metrics;      /* its /metrics listener (metrics.c), or NULL */
    struct client   **monitors;     /* [nmonitors]: clients in MONITOR (monitor.c) */
    struct cmdinfo   *cmdinfo;      /* reading the servers' COMMAND (cmdinfo.c), or NULL */
    struct hotkeys   *hotkeys;      /* HOTKEYS's session (hotkeys.c), or NULL */
    struct track_tab *track;        /* which of its clients (this loop's) read which key,
                                       for their invalidations (track.c), or NULL */
    uint32_t          nmonitors, monitors_cap;
    uint64_t          monitor_loops;/* the loops whose copy of the pool has monitors
                                       (bit: loop id), the same on every copy:
                                       nothing is formatted while it is 0 */
    bool              publish_held; /* gate.c: a PUBLISH waited for subscriptions */
    /* [POOL_SLOTS_MAX], by server: (S|P)SUBSCRIBEs sent to it and not yet
     * confirmed, by the clients of every loop's copy of the pool (pubsub.c):
     * a PUBLISH to it waits (gate.c), whichever loop its publisher is on.
     * Loop 0's copy owns it (made at its start, or by the first
     * subscription of a pool made otherwise); the others point at it. An
     * atomic per subscription, read per PUBLISH. */
    _Atomic uint32_t *subscribing;
    bool              subscribing_owned;
    uint64_t          paused_until; /* loop ms CLIENT PAUSE lasts to; 0: not paused */
    uint64_t          other_db_seq; /* cur_loop->other_db_routed when a request of this pool
                                       in a database other than redis_db was last
                                       routed (route.c db_ok); 0 none */
    bool              pause_all;    /* ... for every request, not only writes (gate.c) */
    uint64_t          replica_reads_at; /* loop ms: reads go to no replica before
                                       (a migration just ended: POOL_REPLICA_SETTLE_MS) */
    uint32_t          epoch;        /* ring changes so far (reloads that moved keys) */
    uint32_t          ring_changes; /* pool_set_ring calls so far (scan.c) */
    struct group     *group;        /* the proxies in front of these servers (group.c) */
    uint32_t          creds_gen;    /* reloads that changed a user or password shardis
                                       signs in with: older spares are not reused */
    struct srvuser   *clients_user; /* what clients' connections sign in as where the
                                       pool names no backend_user (srvuser.c): made by
                                       pool_set_conf, owned; NULL with a backend_user */
    uint64_t          errors;
    struct stats     *stats;        /* INFO commandstats, errorstats (stats.c): made
                                       when the pool gets its first ring (its module's
                                       pool_init), freed by pool_free */
};

/* A server's shared connections, both protocols: a RESP3 client's
 * replies must come from a connection in RESP3 (HELLO 3), since they are
 * forwarded as they come; a RESP2 client's from one in RESP2. The RESP3
 * ones connect on first use.
 *
 * Databases (SELECT): a connection stays in the database it selected as
 * it connected, so a client that SELECTs another database than redis_db
 * uses that database's connections, one of each protocol per server
 * (pool_server.dbconns), shared by every client in it: a database in use
 * costs at most two connections to each server, none until it is used;
 * `databases` bounds them. Replicas are read in redis_db only; the other
 * databases are read from the masters. */
static inline uint32_t pool_nconns(const struct pool *p)
{
    return 2 * p->nconns + 5;
}
/* Which of a server's shared connections a client's requests take: its
 * protocol's (bit 0: RESP3), or, for a client that tracks keys (CLIENT
 * TRACKING ON, not BCAST: c->track_via), the server's tracking one in
 * that protocol (bit 1): CLIENT TRACKING ON in its handshake, so that the
 * server tracks what is read there (modules/track.c). Every request of a
 * tracking client goes there, its writes too, so that they keep their
 * order. */
enum pool_via {
    POOL_RESP2     = 0,
    POOL_RESP3     = 1,
    POOL_TRACKING2 = 2,
    POOL_TRACKING3 = 3,
};
#define POOL_VIA_TRACKS 2
static inline enum pool_via pool_via_of(const struct client *c)
{
    return (enum pool_via)((c->resp3 ? 1 : 0) | (c->track_via ? POOL_VIA_TRACKS : 0));
}
/* A server's tracking connections (pool_server.conns): RESP3's, which
 * hears the invalidations; RESP2's, whose are redirected there; and the
 * BCAST one, made when a client of the loop tracks in BCAST mode. */
#define POOL_CONN_TRACK3(p) (2 * (p)->nconns + 2)
#define POOL_CONN_TRACK2(p) (2 * (p)->nconns + 3)
#define POOL_CONN_BCAST(p)  (2 * (p)->nconns + 4)
/* Every shared connection of server's, one per call: its master's
 * (conns, then dbconns), then its replicas' (read_from); NULL after the
 * last. *it starts at 0. (Not the mover, nor the dedicated connections.) */
struct backend *pool_server_next(const struct pool *p, uint32_t server, uint32_t *it);
/* server's traffic, summed over those connections (INFO, /metrics): up is
 * its master's (1 a connection is up, 0 they failed, -1 none was needed
 * yet); conns counts its dedicated ones too. */
struct pool_server_totals {
    int      up;
    uint32_t conns, queued;
    uint64_t requests, errors, timeouts, rx_bytes, tx_bytes;
};
void pool_server_totals(const struct pool *p, uint32_t server, struct pool_server_totals *t);
/* The connection for shardis's own work on server (a migration's record
 * and MIGRATEs, CLIENT UNBLOCK, the group's PUBSUB, SHARD.GENKEY's
 * sequences), in RESP2 or 3: one signed in as the internal_user, made on
 * first use, where the pool names a backend_user or internal_user; else
 * a shared one, as clients' commands sign in as the same user. */
struct backend *pool_own(struct pool *p, uint32_t server, bool resp3);

/* The connection a command cmd of c's for server goes over, in RESP2 or
 * 3, or a tracking one (via): one to a replica where the pool reads from
 * them (read_from), c holds
 * no transaction or WATCH, no reshard is under way or just ended, and cmd
 * (NULL: none of a client's) is one a replica can answer (and c does not
 * track keys: a replica's would not be its master's invalidations); else
 * pool_backend_in's. NULL: the pool reads from replicas only and server
 * has none listed (the caller answers POOL_NO_REPLICA_ERR). The one place
 * this is decided: when a request is routed, and again when one that
 * waited at its client's gate goes (gate.c). */
struct backend *pool_backend_read(struct pool *p, uint32_t server, const struct client *c,
                                  const struct cmd *cmd, enum pool_via via, uint32_t db);
#define POOL_NO_REPLICA_ERR "ERR no replica of master '%s' is known to read from " \
                            "(read_from: replica)"

/* The replicas of server's master are now list[0..n) (sentinel.c): the
 * new ones get slots (connected on first use), those gone take no new
 * request and are closed once idle (pool_tick). */
struct pool_addr {
    const char *host;
    uint16_t    port;
};
void pool_server_replicas(struct pool *p, uint32_t server, const struct pool_addr *list,
                          uint32_t n);
/* The replicas of server listed now, "host:port" comma-separated into
 * buf (INFO, SHARD.NODES); "" for none. */
void pool_replicas_text(const struct pool *p, uint32_t server, char *buf, size_t size);

/* The server that owns key now: the pool's ring, minus servers ejected by
 * twemproxy-style auto_eject_hosts (eject_mode: rehash). */
uint32_t pool_owner(const struct pool *p, const void *key, size_t len);
/* The server that answers for the pool where any would do (COMMAND INFO,
 * a keyless script, DEBUG HELP): the first of the ring's servers that is
 * neither ejected nor failed, else the first. */
uint32_t pool_first_up(const struct pool *p);
/* Whether the pool keeps away from server at now (the loop's clock):
 * replica 0 asks of its master, ejected (eject_mode: rehash) from the
 * ring keys are hashed by until pool_tick re-admits it; replica k of its
 * replica in slot k - 1, passed over for reads a while after -LOADING or
 * -MASTERDOWN. The one place either is read (routing's ring, the choice
 * of a replica, pool_first_up, SHARD.NODES, /metrics, SHARD.GENKEY's
 * shares); a connection's own backoff is backend_held_off's. Both are
 * struct holdoff's (transport/holdoff.h). */
bool pool_held_off(const struct pool *p, uint32_t server, uint32_t replica, uint64_t now);
/* A shared connection to server's master failed, the failures-th time in
 * a row (hooks.server_failed): eject the server if the pool says so
 * (auto_eject_hosts, eject_mode: rehash, server_failure_limit), for
 * server_retry_timeout. */
void pool_backend_failed(struct pool *p, uint32_t server, uint32_t failures);
/* Server's replica in slot replica - 1 answered -LOADING or -MASTERDOWN:
 * no read goes to it for POOL_REPLICA_SHUN_MS (hooks.replica_shun). */
void pool_shun(struct pool *p, uint32_t server, uint32_t replica);
/* Whether server is in the ring keys are routed by. */
static inline bool pool_in_ring(const struct pool *p, uint32_t server)
{
    return p->servers[server].ring_idx != UINT32_MAX;
}
/* The server at a config server's address: its index, added now (not yet
 * active, its connections not opened) if the pool has none there. */
uint32_t pool_server_at(struct pool *p, const struct conf_server *sv);
/* The server's master is now at host:port (sentinel.c): its connections
 * go there, those in use are closed (backend_move), and it counts as
 * resolved. */
void pool_server_move(struct pool *p, uint32_t server, const char *host, uint16_t port);
/* Route by ring (built from pc, which becomes p->conf): the pool takes
 * the caller's reference to ring; its reference to the one it had is
 * returned, with that ring's index -> server map in *old_slot (or freed,
 * with old_slot NULL), for the caller to keep or give back (ring_unref). Servers of ring become active; others stay as they were (mig.c
 * retires them once their keys have moved). */
struct ring *pool_set_ring(struct pool *p, const struct conf_pool *pc, struct ring *ring,
                           uint32_t **old_slot);
/* The pool follows pc from now on (a reload): it takes a reference on
 * pc's config and drops the one on its old config, which frees that if no
 * one else holds it (conf.h). Spare connections signed in with credentials
 * it no longer names are not reused. */
void pool_set_conf(struct pool *p, const struct conf_pool *pc);
/* Free what pool p holds, once its handles are closed and the loop has
 * run their close callbacks (the end of proxy_run, or of a unit test). */
void pool_free(struct pool *p);
/* From the proxy's tick: bring ejected servers back when their time is
 * up, and retire servers that left the ring once nothing is in flight. */
void pool_tick(struct pool *p, uint64_t now);
/* CLIENT PAUSE for ms (all: every request, else writes), or CLIENT
 * UNPAUSE (ms 0): what waited goes. On p's copy on every loop. */
void pool_pause(struct pool *p, uint64_t ms, bool all);
/* Subscriptions on their way to server, from every loop (pool.subscribing). */
static inline uint32_t pool_subscribing(const struct pool *p, uint32_t server)
{
    return p->subscribing != NULL
           ? atomic_load_explicit(&p->subscribing[server], memory_order_relaxed) : 0;
}
/* The counts, made if they are not (p's own). */
_Atomic uint32_t *pool_subscribing_counts(struct pool *p);
/* fn(q, arg) for p's copy on each loop (p's own among them), in loop
 * order, cur_loop q's loop (transport/loop.h loop_each: with several
 * loops, every other is parked meanwhile). What spans a pool's clients
 * (CLIENT LIST, KILL, PAUSE; MONITOR) reaches all of them through it. */
void pool_each(const struct pool *p, void (*fn)(struct pool *q, void *arg), void *arg);
/* p, a new copy of src for another loop (p->conf set): src's servers,
 * slot for slot, so that every loop names a server by the same index. */
void pool_copy_servers(struct pool *p, const struct pool *src);
/* Close a server's connections and mark it inactive: it is in no ring. */
void pool_retire(struct pool *p, uint32_t server);

/* The backend that serves c's requests for server: its dedicated
 * connection to it if it has one, else a shared one in c's protocol and
 * database (pool_backend_in: in the protocol and database given, for a
 * request that waited at the gate while its client sent HELLO or
 * SELECT). */
struct backend *pool_backend(struct pool *p, uint32_t server, const struct client *c);
struct backend *pool_backend_in(struct pool *p, uint32_t server, const struct client *c,
                                enum pool_via via, uint32_t db);

/* New users (a reload's, or the same lines built against a grown command
 * table: acl_relearn): every signed-in client moves to its user of the
 * same name in acl, or is closed if that user is gone or off, or may no
 * longer use a channel or pattern the client is subscribed to; then the
 * pool gives its reference to the old users back. p takes the caller's
 * reference to acl. */
void pool_set_acl(struct pool *p, struct acl *acl);
/* New TLS contexts (a reload read the files again): connections made from
 * now on use them; open ones go on with the ones they were made from. */
void pool_set_tls(struct pool *p, SSL_CTX *server, SSL_CTX *client);

#endif

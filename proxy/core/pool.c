/* pool.c -- a pool's servers and the ring its keys are routed by.
 *
 * pool_set_ring is the one place a pool's ring is swapped: at start, by a
 * reload (reload.c, or group.c once every proxy agrees), and by a recorded
 * migration taken up again. Everything that depends on the ring is told
 * from here: the modules through their hooks (module.h: genkey.c's shard
 * map, pubsub.c's shard channels), scan.c's walk by the servers' gained
 * marks; routing looks the ring up per request, so the next request
 * follows it. Servers keep their slot (index) for the pool's life: a
 * connection, a pin, a subscription or a SCAN cursor naming one stays
 * valid across reloads.
 *
 * Keeping away from a server (struct holdoff, transport/holdoff.h) is
 * decided here for the pool, and read through pool_held_off alone:
 * ejection (auto_eject_hosts with eject_mode: rehash), where a server
 * failing server_failure_limit times in a row leaves the ring keys are
 * hashed by (p->live) until server_retry_timeout, and pool_tick brings it
 * back; and a replica that said -LOADING or -MASTERDOWN, passed over for
 * reads a while (pool_shun). A connection's own backoff is the
 * transport's (backend_held_off). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/core/acl.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/core/gate.h"
#include "proxy/core/cmdinfo.h"
#include "proxy/base/log.h"
#include "proxy/core/module.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/core/pool_conn.h"
#include "proxy/core/srvuser.h"
#include "proxy/base/util.h"

static void pool_retry_ejected(struct pool *p, uint64_t now);
static void pool_retire_idle(struct pool *p);

struct backend *pool_backend(struct pool *p, uint32_t server, const struct client *c)
{
    return pool_backend_in(p, server, c, pool_via_of(c), c->db);
}

/* Which of a server's (or a replica's) 2 * nconns connections client id
 * uses: its protocol's half, clients spread over it. */
static uint32_t conn_of(const struct pool *p, uint64_t id, bool resp3)
{
    return (resp3 ? p->nconns : 0) + (uint32_t)(id % p->nconns);
}

/* Database db's shared connection to server in RESP2 or 3, made now if
 * it is the first time any client uses a database there. */
static struct backend *db_conn(struct pool *p, uint32_t server, uint32_t db, bool resp3)
{
    struct pool_server *ps = &p->servers[server];

    ASSERT(db < p->ndbs);
    if (ps->dbconns == NULL) {
        ps->dbconns = xcalloc(2 * p->ndbs, sizeof(*ps->dbconns));
        for (uint32_t k = 0; k < 2 * p->ndbs; k++) {
            backend_init(&ps->dbconns[k], p, server);
            ps->dbconns[k].db = k / 2;
            ps->dbconns[k].resp3 = k % 2;
        }
    }
    return &ps->dbconns[2 * db + (resp3 ? 1 : 0)];
}

struct backend *pool_backend_in(struct pool *p, uint32_t server, const struct client *c,
                                enum pool_via via, uint32_t db)
{
    /* A client's requests to one server run in the order it sent them, as
     * on one Redis connection: while it has a connection of its own to the
     * server, all of them go there. Not one routed before a HELLO changed
     * the protocol, waiting at the gate since: its reply must be in the
     * protocol it was sent in, and the pin was given with gate_hold, so it
     * runs before anything sent on the pin. */
    bool resp3 = via & POOL_RESP3, tracks = via & POOL_VIA_TRACKS;

    if (c->pin != NULL && c->pin->server == server && c->pin->resp3 == resp3 &&
        c->pin->tracking == tracks && c->pin->db == db)
        return c->pin;
    if (db != (uint32_t)p->conf->redis_db)
        return db_conn(p, server, db, resp3);   /* (no tracking client is there: track.c) */
    if (tracks)
        return &p->servers[server].conns[resp3 ? POOL_CONN_TRACK3(p) : POOL_CONN_TRACK2(p)];
    return &p->servers[server].conns[conn_of(p, c->id, resp3)];
}

/* ---- reads from replicas (read_from) ------------------------------------------------- */

/* Whether a replica can answer cmd as its master would: read-only, and
 * not a script (a replica has not the scripts SCRIPT LOAD put on the
 * masters), a blocking command (those hold a connection: pin.c), nor one
 * about the key's use (TOUCH, OBJECT FREQ and IDLETIME: the master's LRU
 * and LFU are what count). */
static bool replica_can(const struct cmd *cmd)
{
    /* Rows of the table, which keep their addresses: each thread finds
     * them once. */
    static _Thread_local const struct cmd *use[3];

    if ((cmd->flags & (CMD_READONLY | CMD_NOSCRIPT | CMD_BLOCKING)) != CMD_READONLY)
        return false;
    if (use[0] == NULL) {
        const struct cmd *object = cmd_lookup("object", 6);
        use[0] = cmd_lookup("touch", 5);
        use[1] = object != NULL ? cmd_lookup_sub(object, "freq", 4) : NULL;
        use[2] = object != NULL ? cmd_lookup_sub(object, "idletime", 8) : NULL;
    }
    return cmd != use[0] && cmd != use[1] && cmd != use[2];
}

/* Whether a replica's connection b may be read from now: it is not in
 * its backoff, nor is its replica shunned. */
static bool usable(const struct pool *p, const struct backend *b)
{
    uint64_t now = uv_now(cur_loop->uv);

    return !backend_held_off(b, now) && !pool_held_off(p, b->server, b->replica, now);
}

struct backend *pool_backend_read(struct pool *p, uint32_t server, const struct client *c,
                                  const struct cmd *cmd, enum pool_via via, uint32_t db)
{
    struct pool_replica *reps = p->servers[server].replicas;
    struct backend *first = NULL;
    uint32_t listed = 0, pick, conn;

    /* Reads that must see the master's data as it is: inside a
     * transaction or WATCH (c->pin), or while keys move between masters
     * (a replica of the new owner may not have them yet). */
    if (p->conf->read_from == CONF_READ_MASTER || cmd == NULL || c->pin != NULL ||
        client_in_multi(c) || p->mig != NULL || (via & POOL_VIA_TRACKS) || !replica_can(cmd) ||
        uv_now(cur_loop->uv) < p->replica_reads_at || db != (uint32_t)p->conf->redis_db)
        return pool_backend_in(p, server, c, via, db);
    for (uint32_t i = 0; reps != NULL && i < POOL_REPLICAS_MAX; i++)
        listed += reps[i].listed;
    /* Each client reads from one replica while it is up (its reads keep
     * their order), clients spread over them and, within one, over its
     * connections; one that failed lately is passed over for the next. */
    pick = listed > 0 ? (uint32_t)(c->id % listed) : 0;
    conn = listed > 0 ? conn_of(p, c->id / listed, via & POOL_RESP3) : 0;
    for (uint32_t i = 0, n = 0; reps != NULL && i < 2 * POOL_REPLICAS_MAX; i++) {
        struct pool_replica *rp = &reps[i % POOL_REPLICAS_MAX];
        if (!rp->listed || n++ < pick)
            continue;
        struct backend *b = &rp->conns[conn];
        if (usable(p, b))
            return b;
        if (first == NULL)
            first = b;
        if (n >= pick + listed)
            break;
    }
    if (p->conf->read_from == CONF_READ_PREFER_REPLICA)
        return pool_backend_in(p, server, c, via, db);
    return first;           /* its failure is the answer; NULL: no replica at all */
}

void pool_server_replicas(struct pool *p, uint32_t server, const struct pool_addr *list,
                          uint32_t n)
{
    struct pool_server *ps = &p->servers[server];

    if (ps->replicas == NULL) {
        if (n == 0)
            return;
        ps->replicas = xcalloc(POOL_REPLICAS_MAX, sizeof(*ps->replicas));
    }
    for (uint32_t i = 0; i < POOL_REPLICAS_MAX; i++) {
        struct pool_replica *rp = &ps->replicas[i];
        bool was = rp->listed;
        rp->listed = false;
        for (uint32_t j = 0; rp->host != NULL && j < n && !rp->listed; j++)
            rp->listed = rp->port == list[j].port && strcmp(rp->host, list[j].host) == 0;
        if (was && !rp->listed)
            log_notice("pool '%s': master '%s': replica %s:%u is no longer listed; reads "
                       "leave it", p->conf->name, ps->label, rp->host, rp->port);
    }
    for (uint32_t j = 0; j < n; j++) {
        struct pool_replica *rp = NULL;
        bool known = false;
        for (uint32_t i = 0; i < POOL_REPLICAS_MAX && !known; i++)
            known = ps->replicas[i].listed && ps->replicas[i].port == list[j].port &&
                    strcmp(ps->replicas[i].host, list[j].host) == 0;
        if (known)
            continue;
        /* A slot never used, else one no longer listed whose connections
         * are closed (pool_tick closes them once idle). */
        for (uint32_t i = 0; i < POOL_REPLICAS_MAX && rp == NULL; i++)
            if (ps->replicas[i].host == NULL)
                rp = &ps->replicas[i];
        for (uint32_t i = 0; i < POOL_REPLICAS_MAX && rp == NULL; i++) {
            struct pool_replica *x = &ps->replicas[i];
            bool closed = !x->listed;
            for (uint32_t k = 0; k < 2 * p->nconns && closed; k++)
                closed = backend_idle(&x->conns[k]) &&
                         (x->conns[k].h.handle.loop == NULL ||
                          (uv_is_closing(&x->conns[k].h.handle) && !x->conns[k].closing));
            if (closed)
                rp = x;
        }
        if (rp == NULL) {
            log_notice("pool '%s': master '%s': replica %s:%u is not read from: %u are "
                       "already", p->conf->name, ps->label, list[j].host, list[j].port,
                       POOL_REPLICAS_MAX);
            continue;
        }
        if (rp->conns == NULL) {
            rp->conns = xcalloc(2 * p->nconns, sizeof(*rp->conns));
            for (uint32_t k = 0; k < 2 * p->nconns; k++) {
                backend_init(&rp->conns[k], p, server);
                rp->conns[k].replica = (uint32_t)(rp - ps->replicas) + 1;
                rp->conns[k].resp3 = k >= p->nconns;
            }
        }
        for (uint32_t k = 0; k < 2 * p->nconns; k++) {
            rp->conns[k].state = BACKEND_DOWN;      /* (a new server: no backoff) */
            holdoff_lift(&rp->conns[k].hold);
        }
        free(rp->host);
        rp->host = xstrdup(list[j].host);
        rp->port = list[j].port;
        rp->listed = true;
        holdoff_lift(&rp->hold);
        log_notice("pool '%s': master '%s': reads may go to its replica %s:%u",
                   p->conf->name, ps->label, rp->host, rp->port);
    }
}

void pool_replicas_text(const struct pool *p, uint32_t server, char *buf, size_t size)
{
    const struct pool_replica *reps = p->servers[server].replicas;
    size_t n = 0;

    buf[0] = '\0';
    for (uint32_t i = 0; reps != NULL && i < POOL_REPLICAS_MAX && n < size; i++)
        if (reps[i].listed)
            n += (size_t)snprintf(buf + n, size - n, "%s%s:%u", n > 0 ? "," : "",
                                  reps[i].host, reps[i].port);
}

/* Replicas no longer listed: their connections close once idle. */
static void pool_close_unlisted(struct pool *p)
{
    for (uint32_t s = 0; s < p->nservers; s++) {
        struct pool_replica *reps = p->servers[s].replicas;
        for (uint32_t i = 0; reps != NULL && i < POOL_REPLICAS_MAX; i++) {
            bool idle = reps[i].host != NULL && !reps[i].listed;
            for (uint32_t k = 0; k < 2 * p->nconns && idle; k++)
                idle = backend_idle(&reps[i].conns[k]);
            for (uint32_t k = 0; k < 2 * p->nconns && idle; k++)
                backend_close(&reps[i].conns[k]);       /* (once: it is closing after) */
        }
    }
}

struct backend *pool_server_next(const struct pool *p, uint32_t server, uint32_t *it)
{
    const struct pool_server *ps = &p->servers[server];
    uint32_t per = 2 * p->nconns, i;
    uint32_t masters = pool_nconns(p) + (ps->dbconns != NULL ? 2 * p->ndbs : 0);

    if (*it < pool_nconns(p))
        return &ps->conns[(*it)++];
    if (*it < masters)
        return &ps->dbconns[(*it)++ - pool_nconns(p)];
    for (i = *it - masters; ps->replicas != NULL && i / per < POOL_REPLICAS_MAX; i++) {
        const struct pool_replica *rp = &ps->replicas[i / per];
        if (rp->conns != NULL) {
            *it = masters + i + 1;
            return &rp->conns[i % per];
        }
    }
    return NULL;
}

void pool_server_totals(const struct pool *p, uint32_t server, struct pool_server_totals *t)
{
    bool any_up = false, any_failed = false;
    const struct backend *b;

    memset(t, 0, sizeof(*t));
    for (uint32_t it = 0; (b = pool_server_next(p, server, &it)) != NULL;) {
        any_up |= b->replica == 0 && b->state == BACKEND_UP;
        any_failed |= b->replica == 0 && b->state == BACKEND_FAILED;
        t->conns += b->state == BACKEND_UP;
        t->queued += backend_queued(b);
        t->requests += b->requests;
        t->errors += b->errors;
        t->timeouts += b->timeouts;
        t->rx_bytes += b->rx_bytes;
        t->tx_bytes += b->tx_bytes;
    }
    TAILQ_FOREACH(b, &p->dedicated, link)
        t->conns += b->server == server && b->state == BACKEND_UP;
    t->up = any_up ? 1 : any_failed ? 0 : -1;
}

struct backend *pool_own(struct pool *p, uint32_t server, bool resp3)
{
    return &p->servers[server].conns[2 * p->nconns + (resp3 ? 1 : 0)];
}

uint32_t pool_first_up(const struct pool *p)
{
    size_t n = ring_nservers(p->ring);
    uint64_t now = uv_now(cur_loop->uv);

    for (size_t i = 0; i < n; i++) {
        const struct pool_server *ps = &p->servers[p->slot[i]];
        bool failed = false;
        for (uint32_t k = 0; k < p->nconns; k++)        /* the RESP2 set: preconnected */
            failed |= ps->conns[k].state == BACKEND_FAILED;
        if (!pool_held_off(p, p->slot[i], 0, now) && !failed)
            return p->slot[i];
    }
    return p->slot[0];          /* none up: the first, whose error says so */
}

/* ---- keeping away: ejection (eject_mode: rehash) and shunned replicas --------------- */

bool pool_held_off(const struct pool *p, uint32_t server, uint32_t replica, uint64_t now)
{
    const struct pool_server *ps = &p->servers[server];

    return holdoff_on(replica == 0 ? &ps->hold : &ps->replicas[replica - 1].hold, now);
}

void pool_shun(struct pool *p, uint32_t server, uint32_t replica)
{
    holdoff_for(&p->servers[server].replicas[replica - 1].hold, HOLDOFF_SHUNNED,
                uv_now(cur_loop->uv) + POOL_REPLICA_SHUN_MS);
}

uint32_t pool_owner(const struct pool *p, const void *key, size_t len)
{
    if (p->live == NULL)
        return p->slot[ring_lookup(p->ring, key, len)];
    return p->live_map[ring_lookup(p->live, key, len)];
}

static bool rehashes(const struct pool *p)
{
    return p->conf->eject_mode == CONF_EJECT_REHASH && p->conf->auto_eject_hosts;
}

/* Rebuild the routing ring from the servers not ejected (twemproxy's
 * server_pool_update). With none left, route on the full ring: requests
 * then fail fast on their own servers rather than all on one. say: log
 * the new ring (one loop's copy says it for all). */
static void pool_rebuild(struct pool *p, bool say)
{
    const struct conf_pool *pc = p->conf;
    size_t nring = ring_nservers(p->ring);
    struct ring_options opt = *ring_options(p->ring);
    struct ring_server *sv = xcalloc(nring, sizeof(*sv));
    uint32_t *map = xcalloc(nring, sizeof(*map)), n = 0;
    struct ring *live = NULL;
    uint64_t now = uv_now(cur_loop->uv);
    char err[256];

    /* Ring index i is the config's server i (conf_pool_ring). */
    for (uint32_t i = 0; i < nring; i++) {
        if (pool_held_off(p, p->slot[i], 0, now))
            continue;
        sv[n] = (struct ring_server){pc->servers[i].name, pc->servers[i].addr.text,
                                     pc->servers[i].addr.port, pc->servers[i].weight};
        map[n++] = p->slot[i];
    }
    if (n > 0 && n < nring && ring_create(&live, &opt, sv, n, err, sizeof(err)) < 0)
        log_error("pool '%s': cannot rebuild the ring: %s", pc->name, err);
    ring_unref(p->live);
    free(p->live_map);
    p->live = live;
    p->live_map = live != NULL ? map : NULL;
    if (live == NULL)
        free(map);
    free(sv);
    MODULE_EACH(keys_rerouted, p);
    if (!say)
        return;
    if (n == 0)
        log_notice("pool '%s': every server is ejected: keys go to their own servers "
                   "until one is retried", pc->name);
    else
        log_notice("pool '%s': %u of %zu servers in the ring", pc->name,
                   live != NULL ? n : (uint32_t)nring, nring);
}

/* An ejection or a return, as every loop's copy of the pool takes it:
 * in one world stop (pool_each), so that no loop routes a key to a
 * server another loop has taken it from. */
struct ring_turn {
    uint32_t           server;
    uint64_t           until;   /* ejected until (0: back in the ring) */
    const struct loop *by;      /* the loop that decided: it counts and says it */
};

static void ring_turn_one(struct pool *p, void *arg)
{
    const struct ring_turn *t = arg;
    struct pool_server *ps = &p->servers[t->server];
    struct backend *b;

    if (t->until != 0) {
        holdoff_for(&ps->hold, HOLDOFF_EJECTED, t->until);
        ps->ejections += cur_loop == t->by;     /* (INFO sums the loops) */
    } else {
        holdoff_lift(&ps->hold);
        for (uint32_t it = 0; (b = pool_server_next(p, t->server, &it)) != NULL;)
            if (b->replica == 0)
                holdoff_ok(&b->hold);   /* (their failures count again from 0) */
    }
    pool_rebuild(p, cur_loop == t->by);
}

/* Whether server may be ejected now. Never while keys move: the ring is
 * what they move by. */
static bool ejectable(const struct pool *p, uint32_t server, uint64_t now)
{
    return rehashes(p) && !pool_held_off(p, server, 0, now) && p->mig == NULL &&
           pool_in_ring(p, server);
}

/* Any loop may decide an ejection, from its own connections' failures in
 * a row; every loop takes it at once. Asked again once every other loop
 * is parked: another loop may have ejected it meanwhile (one ejection,
 * counted once), or switched the ring and begun moving keys. (Called
 * from inside backend_fail: the stop's visits keep b's connections where
 * they are, so backend_fail goes on with b.) */
void pool_backend_failed(struct pool *p, uint32_t server, uint32_t failures)
{
    uint64_t now = uv_now(cur_loop->uv);

    if (failures < (uint32_t)p->conf->server_failure_limit || !ejectable(p, server, now))
        return;
    loop_world_stop();
    if (ejectable(p, server, now)) {
        log_warn("pool '%s': ejecting %s for %d ms after %u failures; its keys go to "
                 "other servers meanwhile", p->conf->name, p->servers[server].label,
                 p->conf->server_retry_timeout, failures);
        pool_each(p, ring_turn_one, &(struct ring_turn){
            .server = server, .until = now + (uint64_t)p->conf->server_retry_timeout,
            .by = cur_loop});
    }
    loop_world_go();
}

/* Loop 0 alone brings servers back (every loop holds them until lifted:
 * HOLDOFF_EJECTED), when its copy's time is up. */
static void pool_retry_ejected(struct pool *p, uint64_t now)
{
    if (cur_loop->id != 0)
        return;
    for (uint32_t s = 0; s < p->nservers; s++)
        if (holdoff_due(&p->servers[s].hold, now))
            pool_each(p, ring_turn_one, &(struct ring_turn){.server = s, .by = cur_loop});
}

/* ---- listening ------------------------------------------------------------------- */

/* ---- servers ------------------------------------------------------------------------ */

uint32_t pool_server_at(struct pool *p, const struct conf_server *sv)
{
    struct pool_server *ps;
    uint32_t s;

    /* With sentinels a server is its name (the address is a first guess,
     * and where it is now may be elsewhere); else its address. */
    bool by_name = p->conf->nsentinels > 0 && sv->name != NULL;
    for (s = 0; s < p->nservers; s++)
        if (by_name ? !strcmp(p->servers[s].label, sv->name)
                    : !strcmp(p->servers[s].addr, sv->addr.text))
            return s;
    p->servers = xrealloc(p->servers, (s + 1) * sizeof(*p->servers));
    ps = &p->servers[s];
    memset(ps, 0, sizeof(*ps));
    ps->addr = xstrdup(sv->addr.text);
    ps->host = xstrdup(sv->addr.host);
    ps->label = xstrdup(by_name ? sv->name : sv->addr.text);
    ps->resolved = p->conf->nsentinels == 0;    /* (sentinel.c finds it) */
    ps->port = sv->addr.port;
    ps->unix_socket = sv->addr.unix_socket;
    ps->ring_idx = UINT32_MAX;
    ps->conns = xcalloc(pool_nconns(p), sizeof(*ps->conns));
    for (uint32_t k = 0; k < pool_nconns(p); k++) {
        backend_init(&ps->conns[k], p, s);
        ps->conns[k].resp3 = k >= 2 * p->nconns ? k != 2 * p->nconns && k != POOL_CONN_TRACK2(p)
                                                : k >= p->nconns;
        if (k == 2 * p->nconns || k == 2 * p->nconns + 1)
            ps->conns[k].as = BACKEND_AS_INTERNAL;
        ps->conns[k].tracking = k >= POOL_CONN_TRACK3(p);
        ps->conns[k].bcast = k == POOL_CONN_BCAST(p);
    }
    p->nservers = s + 1;
    return s;
}

void pool_copy_servers(struct pool *p, const struct pool *src)
{
    for (uint32_t s = 0; s < src->nservers; s++) {
        const struct pool_server *from = &src->servers[s];
        struct conf_server sv = {
            .addr = {.text = from->addr, .host = from->host, .port = from->port,
                     .unix_socket = from->unix_socket},
            .name = p->conf->nsentinels > 0 ? from->label : NULL,
        };
        uint32_t got = pool_server_at(p, &sv);
        ASSERT(got == s);
        (void)got;
    }
}

/* The servers of ring that gain keys from old, which a SCAN walk spanning
 * the change walks again (scan.c): those the diff moves arcs to, or all
 * of them where it cannot tell. Random rings give keys no owner. */
static void pool_mark_gains(struct pool *p, const struct ring *old, const struct ring *ring)
{
    struct ring_diff *d = NULL;
    size_t n = ring_nservers(ring), nold = ring_nservers(old);
    char err[256];
    bool all;

    if (ring_distribution(ring) == RING_DIST_RANDOM)
        return;
    all = ring_diff_create(&d, old, ring, err, sizeof(err)) < 0;
    for (uint32_t i = 0; i < n; i++) {
        bool gains = all;
        for (uint32_t k = 0; k < nold && !gains; k++)
            gains = ring_diff_share(d, k, i) > 0;
        if (gains)
            p->servers[p->slot[i]].gained = p->ring_changes;
    }
    ring_diff_free(d);
}

void pool_server_move(struct pool *p, uint32_t server, const char *host, uint16_t port)
{
    struct pool_server *ps = &p->servers[server];
    struct backend *x;
    char why[96];

    snprintf(why, sizeof(why), "its master moved to %s:%u", host, port);
    free(ps->host);
    ps->host = xstrdup(host);
    ps->port = port;
    ps->unix_socket = false;
    ps->resolved = true;
    for (uint32_t it = 0; (x = pool_server_next(p, server, &it)) != NULL;)
        if (x->replica == 0)
            backend_move(x, why);
    if (ps->mover != NULL)
        backend_move(ps->mover, why);
    pool_conn_close_spares(p, server);
    for (struct backend *b = TAILQ_FIRST(&p->dedicated), *next; b != NULL; b = next) {
        next = TAILQ_NEXT(b, link);
        if (b->server == server)
            backend_move(b, why);
    }
    MODULE_EACH(server_moved, p, server, why);  /* the group's registration there, a
                                                   migration's walk of it (SCAN anew) */
}

void pool_set_conf(struct pool *p, const struct conf_pool *pc)
{
    const struct conf_pool *old = p->conf;

    /* (backend_user and internal_user cannot change: reload.c.) */
    if (old != NULL && (!conf_str_eq(old->keyless_user, pc->keyless_user) ||
                        !conf_str_eq(old->keyless_password, pc->keyless_password) ||
                        !conf_str_eq(old->redis_auth, pc->redis_auth)))
        p->creds_gen++;             /* spares of the old ones are not used again (pool_conn.c) */
    /* Its rules and name depend on what a reload may not change
     * (databases, redis_db: reload.c), its password on redis_auth. */
    if (pc->backend_user == NULL &&
        (p->clients_user == NULL || !conf_str_eq(old->redis_auth, pc->redis_auth))) {
        /* (new connections sign in as the new one; open ones stay as they are) */
        srvuser_free(p->clients_user);
        p->clients_user = srvuser_make(pc);
    }
    conf_ref(pc->owner);            /* a pool holds the config it routes by (conf.h) */
    p->conf = pc;
    p->front.pool = p;              /* (what its clients' c->pool is) */
    p->front.conf = pc;
    p->front.conf_gen++;            /* (from 1: a quiet_gen of 0 is none worked out) */
    MODULE_EACH(conf_set, p);       /* (minify.c's names: a reload may only add some) */
    if (old != NULL)
        conf_unref(old->owner);     /* the last pool off a replaced config frees it */
}

struct ring *pool_set_ring(struct pool *p, const struct conf_pool *pc, struct ring *ring,
                           uint32_t **old_slot)
{
    struct ring *old = p->ring;
    size_t n = ring_nservers(ring);

    pool_set_conf(p, pc);
    p->ring = ring;
    if (old_slot != NULL)
        *old_slot = p->slot;
    else
        free(p->slot);
    p->slot = xmalloc(n * sizeof(*p->slot));
    for (uint32_t s = 0; s < p->nservers; s++)
        p->servers[s].ring_idx = UINT32_MAX;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = pool_server_at(p, &pc->servers[i]);
        struct pool_server *ps = &p->servers[s];
        p->slot[i] = s;
        ps->ring_idx = i;
        if (!ps->active) {
            ps->active = true;
            MODULE_EACH(server_added, p, s);
        }
        if (!ps->resolved)      /* (sentinel.c; none at start: sentinel_start) */
            MODULE_EACH(server_unresolved, p, s, "it joined the ring");
        free(ps->label);
        ps->label = xstrdup(ring_server_label(ring, i));
        if (pc->preconnect)
            for (uint32_t k = 0; k < p->nconns; k++)    /* RESP2's */
                backend_preconnect(&ps->conns[k]);
    }
    p->ring_changes++;
    if (old != NULL)
        pool_mark_gains(p, old, ring);
    /* Ejections belong to the old ring. */
    for (uint32_t s = 0; s < p->nservers; s++)
        holdoff_lift(&p->servers[s].hold);
    ring_unref(p->live);
    free(p->live_map);
    p->live = NULL;
    p->live_map = NULL;
    if (old == NULL)
        MODULE_EACH(pool_init, p);
    MODULE_EACH(ring_changed, p);   /* genkey.c's shard map, pubsub.c's shard channels */
    MODULE_EACH(keys_rerouted, p);  /* (track.c: cached values may be stale now) */
    return old;
}

void pool_retire(struct pool *p, uint32_t server)
{
    struct pool_server *ps = &p->servers[server];
    struct backend *b;

    ps->active = false;
    for (uint32_t it = 0; (b = pool_server_next(p, server, &it)) != NULL;)
        if (b->replica == 0)
            backend_close(b);           /* drained: answers anything left with an error */
    if (ps->mover != NULL)
        backend_close(ps->mover);
    pool_server_replicas(p, server, NULL, 0);   /* (closed by pool_tick once idle) */
    MODULE_EACH(server_gone, p, server);
    pool_conn_close_spares(p, server);
    log_notice("pool '%s': server %s (%s) left the ring; its connections are closed",
               p->conf->name, ps->label, ps->addr);
}

/* Servers that left the ring and hold no keys any more: closed once
 * nothing is in flight to them (what was sent finishes first). */
static void pool_retire_idle(struct pool *p)
{
    for (uint32_t s = 0; s < p->nservers; s++) {
        struct pool_server *ps = &p->servers[s];
        bool idle = ps->mover == NULL || backend_idle(ps->mover);
        const struct backend *b;
        if (!ps->active || pool_in_ring(p, s))
            continue;
        for (uint32_t it = 0; idle && (b = pool_server_next(p, s, &it)) != NULL;)
            idle = b->replica != 0 || backend_idle(b);
        if (idle)
            pool_retire(p, s);
    }
}

void pool_set_acl(struct pool *p, struct acl *acl)
{
    /* From the end: closing one moves the last (seen already) into its slot. */
    for (uint32_t i = p->front.nclients; i-- > 0; ) {
        struct client *c = p->front.clients[i];
        const struct acl_user *u;
        if (c->user == NULL)
            continue;
        u = acl_find(acl, c->user->name, strlen(c->user->name));
        if (u == NULL || !u->on) {
            log_notice("pool '%s': closing client id=%llu: its user '%s' is %s",
                       p->conf->name, (unsigned long long)c->id, c->user->name,
                       u == NULL ? "gone" : "off");
            c->user = NULL;
            client_close(c);
            continue;
        }
        /* A subscriber would go on getting what its user may no longer
         * read: closed, as redis-server closes it after ACL SETUSER. */
        char *why = NULL;
        for (size_t k = 0; k < module_count && why == NULL; k++)
            if (module_list[k]->user_narrowed != NULL && acl_channels_narrowed(c->user, u))
                why = module_list[k]->user_narrowed(c, u);     /* (pubsub.c) */
        if (why != NULL) {
            log_notice("pool '%s': closing client id=%llu: its user '%s' may no longer use "
                       "its %s", p->conf->name, (unsigned long long)c->id, u->name, why);
            free(why);
            c->user = NULL;
            client_close(c);
            continue;
        }
        c->user = u;
    }
    acl_unref(p->acl);
    p->acl = acl;
}

void pool_set_tls(struct pool *p, SSL_CTX *server, SSL_CTX *client)
{
    tls_ctx_free(p->front.tls_server);
    tls_ctx_free(p->tls_client);
    p->front.tls_server = server;
    p->tls_client = client;
}

void pool_free(struct pool *p)
{
    pool_set_tls(p, NULL, NULL);
    acl_unref(p->acl);
    free(p->front.clients);
    if (p->subscribing_owned)
        free(p->subscribing);       /* (loop 0's, freed last: proxy.c) */
    MODULE_EACH(pool_free, p);
    srvuser_free(p->clients_user);
    cmdinfo_free(p);
    free(p->monitors);
    ring_unref(p->ring);
    ring_unref(p->live);
    free(p->live_map);
    free(p->slot);
    for (uint32_t s = 0; s < p->nservers; s++) {
        free(p->servers[s].label);
        free(p->servers[s].addr);
        free(p->servers[s].host);
        free(p->servers[s].conns);
        free(p->servers[s].dbconns);
        free(p->servers[s].mover);
        for (uint32_t i = 0; p->servers[s].replicas != NULL && i < POOL_REPLICAS_MAX; i++) {
            free(p->servers[s].replicas[i].host);
            free(p->servers[s].replicas[i].conns);
        }
        free(p->servers[s].replicas);
        free(p->servers[s].latency);
        free(p->servers[s].record_ignored);
    }
    free(p->servers);
    if (p->conf != NULL)
        conf_unref(p->conf->owner);
}

_Atomic uint32_t *pool_subscribing_counts(struct pool *p)
{
    if (p->subscribing == NULL) {
        p->subscribing = xcalloc(POOL_SLOTS_MAX, sizeof(*p->subscribing));
        p->subscribing_owned = true;
    }
    return p->subscribing;
}

struct pool_each {
    size_t   index;                 /* the pool's, the same on every loop */
    void   (*fn)(struct pool *q, void *arg);
    void    *arg;
};

static void pool_each_one(void *arg)
{
    struct pool_each *e = arg;

    e->fn(&cur_loop->pools[e->index], e->arg);
}

void pool_each(const struct pool *p, void (*fn)(struct pool *q, void *arg), void *arg)
{
    struct pool_each e = {.index = (size_t)(p - cur_loop->pools), .fn = fn, .arg = arg};

    loop_each(pool_each_one, &e);
}

struct pause {
    uint64_t ms;
    bool     all;
};

/* (each loop by its own clock) */
static void pause_one(struct pool *p, void *arg)
{
    const struct pause *pa = arg;

    if (pa->ms > 0) {
        uint64_t until = uv_now(cur_loop->uv) + pa->ms;
        /* (A pause already on stays as long, and as wide, if it is more.) */
        p->paused_until = until > p->paused_until ? until : p->paused_until;
        p->pause_all = p->pause_all || pa->all;
        return;
    }
    p->paused_until = 0;
    p->pause_all = false;
    /* From the end: a kick may close a client, which moves the last here. */
    for (uint32_t i = p->front.nclients; i-- > 0; )
        if (i < p->front.nclients && p->front.clients[i]->gated)
            gate_kick(p->front.clients[i]);
}

void pool_pause(struct pool *p, uint64_t ms, bool all)
{
    pool_each(p, pause_one, &(struct pause){.ms = ms, .all = all});
}

void pool_tick(struct pool *p, uint64_t now)
{
    if (p->paused_until != 0 && now >= p->paused_until)
        pause_one(p, &(struct pause){0});   /* (each loop's pause lapses by itself) */
    /* (Even with every server ejected, when the pool routes by the full
     * ring and p->live is NULL.) */
    pool_retry_ejected(p, now);
    pool_close_unlisted(p);
    if (p->mig == NULL)
        pool_retire_idle(p);
}

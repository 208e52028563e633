/* pool_conn.c -- what a pool tells its connections (the transport asks,
 * through the hooks process/hooks.c registers): where each server is now and how
 * to sign in there, and which dedicated connections exist (one client's
 * pin, subscriber or one-off; the spares kept for the next client). The
 * connection itself (backend.c) knows neither the pool nor its servers:
 * only what pool_conn_server_of tells it as it connects. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/core/pool_conn.h"
#include "proxy/core/gate.h"
#include "proxy/core/pool.h"
#include "proxy/transport/client.h"
#include "proxy/transport/loop.h"
#include "proxy/base/util.h"

/* Spare dedicated connections kept per server: enough for as many clients
 * in transactions or blocking commands at once, so that they seldom wait
 * for a connect; bounded, and closed when the pool goes idle. */
#define POOL_SPARES_PER_SERVER 64

void pool_conn_server_of(const struct pool *p, uint32_t server, uint32_t replica,
                         struct backend_server *sv)
{
    const struct pool_server *ps = &p->servers[server];
    const char *named = p->conf->tls.backend_server_name;

    *sv = (struct backend_server){
        .conf = p->conf,
        .label = ps->label,
        .host = ps->host,
        .port = ps->port,
        .unix_socket = ps->unix_socket,
        .resolved = ps->resolved,       /* (a replica's: its master's) */
        .sentinels = p->sentinel != NULL,
        .tls = p->tls_client,
        .tls_name = named != NULL ? named : ps->unix_socket ? NULL : ps->host,
        .creds_gen = p->creds_gen,
    };
    if (replica != 0) {
        /* Where a failover may have moved it: its own address, which its
         * certificate bears. */
        const struct pool_replica *rp = &ps->replicas[replica - 1];
        sv->host = rp->host;
        sv->port = rp->port;
        sv->unix_socket = false;
        sv->tls_name = named != NULL ? named : rp->host;
    }
}

const struct conf_pool *const *pool_conn_conf(const struct pool *p)
{
    return &p->conf;
}

void pool_conn_server(const struct backend *b, struct backend_server *sv)
{
    pool_conn_server_of(b->pool, b->server, b->replica, sv);
}

static char *call(const struct pool *p, uint32_t s, int argc, const char *const *argv,
                  bool raw, size_t *len)
{
    struct backend_server sv;

    pool_conn_server_of(p, s, 0, &sv);
    return backend_sync(&sv, 0, NULL, argc, argv, raw, len);
}

char *pool_conn_call(const struct pool *p, uint32_t s, int argc, const char *const *argv,
                     size_t *len)
{
    return call(p, s, argc, argv, false, len);
}

char *pool_conn_call_raw(const struct pool *p, uint32_t s, int argc, const char *const *argv,
                         size_t *len)
{
    return call(p, s, argc, argv, true, len);
}

/* ---- dedicated connections ------------------------------------------------------ */

void pool_conn_closed(struct backend *b)
{
    struct pool *p = b->pool;

    if (b->role == BACKEND_ONE_OFF && b->owner != NULL)
        gate_conn_gone(b->owner, b);    /* requests waiting to go on it */
    TAILQ_REMOVE(&p->dedicated, b, link);
    p->ndedicated--;
    if (b->role == BACKEND_SPARE)
        p->nspare--;
    free(b);
}

static struct backend *acquire(struct pool *p, uint32_t server, struct client *owner,
                               enum backend_role role, enum backend_as as)
{
    struct backend *b;
    /* Replies are forwarded as they come: in the client's protocol. A
     * subscriber's connection stays in RESP2, whose messages pubsub.c
     * relays as RESP3 pushes (the same bytes but the first). */
    bool resp3 = owner != NULL && owner->resp3 && role != BACKEND_SUBSCRIBER;
    /* A tracking client's pin tracks what it reads there (track.c's table
     * says whose the server's invalidations there are, spare or not). */
    bool tracking = owner != NULL && owner->track_via && role == BACKEND_PIN &&
                    as == BACKEND_AS_CLIENT;
    /* Its client's database; channels have none. */
    uint32_t db = owner != NULL && role != BACKEND_SUBSCRIBER ? owner->db
                                                              : (uint32_t)p->conf->redis_db;

    TAILQ_FOREACH(b, &p->dedicated, link) {
        if (b->role != BACKEND_SPARE)
            break;                  /* spares are kept at the head */
        if (b->server == server && b->state == BACKEND_UP && !b->closing &&
            b->resp3 == resp3 && b->tracking == tracking && b->db == db && b->as == as &&
            b->creds_gen == p->creds_gen) {
            TAILQ_REMOVE(&p->dedicated, b, link);
            p->nspare--;
            goto take;
        }
    }
    b = xmalloc(sizeof(*b));
    backend_init(b, p, server);
    b->resp3 = resp3;
    b->tracking = tracking;
    b->db = db;
    b->as = as;
    p->ndedicated++;
take:
    b->owner = owner;
    b->role = role;
    b->retired = 0;
    TAILQ_INSERT_TAIL(&p->dedicated, b, link);
    return b;
}

struct backend *pool_conn_acquire(struct pool *p, uint32_t server, struct client *owner,
                                  enum backend_role role)
{
    return acquire(p, server, owner, role, BACKEND_AS_CLIENT);
}

struct backend *pool_conn_acquire_internal(struct pool *p, uint32_t server,
                                           struct client *owner)
{
    return acquire(p, server, owner, BACKEND_ONE_OFF, BACKEND_AS_INTERNAL);
}

struct backend *pool_conn_acquire_keyless(struct pool *p, uint32_t server,
                                          struct client *owner)
{
    struct backend *b;

    /* A client's scripts run one after another (pin_keyless): a pipeline
     * of them shares the one connection its first took, while it lasts. */
    TAILQ_FOREACH_REVERSE(b, &p->dedicated, backend_list, link) {
        if (b->role == BACKEND_SPARE)
            break;                  /* in use ones are kept at the tail */
        if (b->owner == owner && b->as == BACKEND_AS_KEYLESS && b->server == server &&
            !b->closing && b->state != BACKEND_FAILED && b->resp3 == owner->resp3 &&
            b->db == owner->db && b->creds_gen == p->creds_gen)
            return b;
    }
    return acquire(p, server, owner, BACKEND_ONE_OFF, BACKEND_AS_KEYLESS);
}

void pool_conn_retire(struct backend *b)
{
    b->role = BACKEND_ONE_OFF;
    b->retired = 1;
    if (backend_idle(b) && !gate_waits_on(b->owner, b))
        pool_conn_release(b, true);
}

void pool_conn_release(struct backend *b, bool clean)
{
    struct pool *p = b->pool;

    b->owner = NULL;
    /* One with a CLIENT UNBLOCK on its way (mig.c) is closed: the next
     * client's command there would be the one unblocked. */
    if (clean && b->state == BACKEND_UP && !b->closing && backend_idle(b) && !b->unblocking &&
        b->creds_gen == p->creds_gen &&
        p->nspare < POOL_SPARES_PER_SERVER * p->nservers && p->servers[b->server].active &&
        !cur_loop->stopping) {
        /* Spares first: pool_conn_acquire and pool_conn_close_spares stop at
         * the first one that is not. One that is not stays where it is,
         * behind them, until it is closed and freed. */
        TAILQ_REMOVE(&p->dedicated, b, link);
        TAILQ_INSERT_HEAD(&p->dedicated, b, link);
        b->role = BACKEND_SPARE;
        p->nspare++;
        return;
    }
    b->role = BACKEND_LEFT;
    if (backend_gone(b)) {
        pool_conn_closed(b);        /* never connected, or failed and closed */
        return;
    }
    if (b->closing)
        return;                     /* pool_conn_closed frees it once closed */
    backend_drop(b, "its client went away");
}

void pool_conn_close_spares(struct pool *p, uint32_t server)
{
    struct backend *b, *next;

    for (b = TAILQ_FIRST(&p->dedicated); b != NULL && b->role == BACKEND_SPARE; b = next) {
        next = TAILQ_NEXT(b, link);
        if (server != UINT32_MAX && b->server != server)
            continue;
        b->role = BACKEND_LEFT;
        p->nspare--;
        backend_drop(b, "idle");    /* pool_conn_closed frees it once closed */
    }
}

void pool_conn_idle(struct backend *b)
{
    pool_conn_release(b, true);
}

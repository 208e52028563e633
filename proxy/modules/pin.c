/* pin.c -- transactions, WATCH and blocking commands: the commands whose
 * state lives on one connection to one server.
 *
 * While such state lasts, a client is pinned to a dedicated connection
 * (pool_conn_acquire) to the server that holds it:
 *
 *   MULTI      is answered here: no server is known yet. The transaction's
 *              first keyed command picks the server, and MULTI goes there
 *              just ahead of it. Every later command must have all its keys
 *              on that server; one that does not gets -CROSSSLOT and the
 *              transaction aborts at EXEC (-EXECABORT), as in Redis Cluster.
 *              Commands without keys cannot be queued anywhere, so they are
 *              refused the same way; but PING, ECHO, PUBLISH and DEBUG SLEEP
 *              mean the same on any server: before the first key they are
 *              held here (tx_hold)
 *              and follow MULTI to the server it picks, or to the first
 *              server at an EXEC without any key. FLUSHALL and FLUSHDB, held
 *              the same way before any key, empty every server: a
 *              transaction with one runs on every server (tx_exec_every),
 *              and takes no key. Errors shardis answers while queuing
 *              (unknown command, arity) abort it too, as in Redis.
 *   WATCH      picks the server (its keys must share one) for the
 *              transaction that follows; its MULTI goes there at once.
 *   EXEC, DISCARD, UNWATCH, RESET
 *              end the state; the connection goes back as a spare once
 *              idle, or, if the client's next transaction is for another
 *              server before then, finishes as a one-off (retire).
 *   blocking   BLPOP and the like run on the client's dedicated connection,
 *              so the shared pipelined ones never wait behind them; several
 *              from one client wait in order there, as on one Redis
 *              connection, and must be for the same server.
 *
 * A client that goes away releases its connection dirty: it is closed, so
 * its transaction, WATCH or waiting pop ends with it and takes nothing. */
#include <string.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/modules/frag.h"
#include "proxy/core/gate.h"
#include "proxy/modules/minify.h"
#include "proxy/core/keys.h"
#include "proxy/modules/pin.h"
#include "proxy/core/pool.h"
#include "proxy/core/pool_conn.h"
#include "proxy/core/route.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"


/* c's pin is to another server than its next request (next) needs. Once the
 * state that took it has ended (no transaction queued or WATCH held
 * there, no blocking command there or on its way) it holds nothing of
 * c's: what is still on it (an EXEC, a DISCARD, their replies) finishes
 * there, on it as a one-off given back once idle, and c takes a new pin.
 * A pipeline of transactions on different servers needs this: the next
 * one's WATCH is routed before the last one's EXEC is answered. What c
 * sends next goes elsewhere (a new pin, or a shared connection that is up
 * while this one may still be connecting), so it waits until what is
 * still on this one is answered: a SET sent after EXEC on the pin, then
 * RESET, then another SET on a shared connection ran the later SET first. */
static void retire(struct client *c, struct req *next)
{
    struct backend *b = c->pin;

    if ((c->tx != TX_NONE && c->tx != TX_MULTI) || backend_has_blocking(b) ||
        !gate_retire_pin(c, b))
        return;
    c->pin = NULL;
    gate_hold(c, next);     /* (what waits at the gate for b goes on b: held too) */
    pool_conn_retire(b);
}

bool pin_let_go(struct client *c, struct req *next)
{
    if (c->pin != NULL && c->tx == TX_NONE)
        retire(c, next);
    return c->pin == NULL;
}

/* c's dedicated connection to server for r: the one it has, or a new one
 * (nothing sent on it runs before c's earlier requests are answered); NULL
 * if it is pinned to another server. */
static struct backend *pin_to(struct client *c, struct req *r, uint32_t server)
{
    /* A pin speaks the protocol its client spoke when it was given, in
     * the database it was in: one of the other (RESET, SELECT since) is
     * as good as one to another server. */
    if (c->pin != NULL && (c->pin->server != server || c->pin->resp3 != c->resp3 ||
                           c->pin->db != c->db))
        retire(c, r);
    if (c->pin == NULL) {
        c->pin = pool_conn_acquire(c->pool, server, c, BACKEND_PIN);
        gate_hold(c, r);
    }
    return c->pin->server == server && c->pin->resp3 == c->resp3 && c->pin->db == c->db
               ? c->pin : NULL;
}

/* Send r, in c's pin, as it is for the transaction's state: a command
 * queued in it is counted (its place in EXEC's reply), and its reply's
 * map, if its hash fields are minified, is kept for the EXEC. */
static void forward(struct client *c, struct req *r, struct args *a)
{
    if (client_tx_queued(c) && !r->is_exec) {
        struct client_rare *rare = client_rare(c);
        if (r->minified)
            minify_tx_queued(&rare->tx_minify, r, rare->tx_sent);
        rare->tx_sent++;
    } else if (r->is_exec && c->rare != NULL) {
        minify_tx_exec(&c->rare->tx_minify, r);
    }
    args_request(a, &r->out);
    r->pinned = 1;
    route_send(c, r, a, c->pin);
}

/* A request of the proxy's own on b, one of c's connections, whose reply
 * nobody reads (the MULTI ahead of a transaction, a DISCARD after an
 * abort, WAIT's marker). */
static void send_quiet_on(struct client *c, struct backend *b, int argc,
                          const char *const *argv)
{
    struct req *r = req_get();
    struct resp_w w = client_cmd_w(c, &r->out);

    resp_w_command(&w, argc, argv, NULL);
    route_send(c, r, NULL, b);
}

/* r on every server that holds keys, each over a one-off connection of
 * c's signed in as shardis's own user, after c's earlier requests are
 * answered (the caller says how r holds c's later ones); ahead, if any,
 * first writes what goes before r there; the replies merged by reply
 * (no_deadline: they take as long as they take). */
static void every_own(struct client *c, struct req *r, struct args *a, enum cmd_reply reply,
                      bool no_deadline, void (*ahead)(struct client *c, struct backend *b))
{
    struct pool *p = c->pool;
    struct backend **via = xcalloc(p->nservers, sizeof(*via));

    gate_hold(c, r);
    for (uint32_t s = 0; s < p->nservers; s++) {
        if (!p->servers[s].active)
            continue;
        via[s] = pool_conn_acquire_internal(p, s, c);
        if (ahead != NULL)
            ahead(c, via[s]);
    }
    frag_broadcast(c, r, a, reply, via, no_deadline);
    free(via);
}

/* The same on c's pinned connection, of a command without arguments. */
static void send_quiet(struct client *c, const char *verb)
{
    struct req *r = req_get();
    struct resp_w w = client_cmd_w(c, &r->out);

    resp_w_command(&w, 1, &verb, NULL);
    r->pinned = 1;
    route_send(c, r, NULL, c->pin);
}

static void pin_reply_ok(struct client *c, struct req *r)
{
    struct resp_w w = client_w(c, &r->rsp);

    resp_w_simple(&w, "OK");
    req_done(r);
}

/* Answer r with the error line (no '-', no CRLF). */
static void refuse(struct client *c, struct req *r, const char *error)
{
    client_reply_error(c, r, "%s", error);
    req_done(r);
}

static void reply_crossslot(struct client *c, struct req *r)
{
    r->rejected = 1;                /* as Redis Cluster counts it */
    refuse(c, r, "CROSSSLOT Keys in request don't hash to the same node");
}

void pin_check(struct client *c)
{
    if (c->pin != NULL && c->tx == TX_NONE && !c->gated && backend_idle(c->pin)) {
        pool_conn_release(c->pin, true);
        c->pin = NULL;
    }
}

/* ---- keyless commands before the transaction's first key ------------------------- */

/* Queue r (PING, ECHO, PUBLISH, DEBUG SLEEP, FLUSHALL, FLUSHDB, in MULTI
 * before any key) here: answered +QUEUED, as a server would, its bytes
 * kept for the server the transaction gets. */
#define TX_HELD_MAX 1024    /* commands held before a key; more abort it */

static void tx_hold(struct client *c, struct req *r, struct args *a)
{
    struct client_rare *rare = client_rare(c);
    struct resp_w w = client_w(c, &r->rsp);
    struct req *q;

    if (rare->tx_nheld == TX_HELD_MAX) {
        client_reply_error(c, r, "ERR more than %d commands in MULTI before any key: "
                           "shardis holds no more", TX_HELD_MAX);
        c->tx_abort = 1;
        req_done(r);
        return;
    }
    if ((rare->tx_nheld & (rare->tx_nheld - 1)) == 0)      /* 0, 1, 2, 4 ...: double */
        rare->tx_held = xrealloc(rare->tx_held, (rare->tx_nheld ? 2 * rare->tx_nheld : 1) *
                                                sizeof(*rare->tx_held));
    q = req_get();
    args_request(a, &q->out);
    rare->tx_held[rare->tx_nheld++] = q;
    resp_w_simple(&w, "QUEUED");
    req_done(r);
}

/* Send what tx_hold kept to c's pin, just after its MULTI (their +QUEUED
 * replies were given: nobody reads the server's), or (send false) drop it. */
static void tx_release_held(struct client *c, bool send)
{
    struct client_rare *rare = c->rare;

    if (rare == NULL)
        return;
    rare->tx_flush = rare->tx_publish = false;
    for (uint32_t i = 0; i < rare->tx_nheld; i++) {
        struct req *q = rare->tx_held[i];
        if (send) {
            q->pinned = 1;
            route_send(c, q, NULL, c->pin);
        } else {
            msg_release(&q->out);
            req_maybe_free(q);
        }
    }
    free(rare->tx_held);
    rare->tx_held = NULL;
    rare->tx_nheld = 0;
}

/* FLUSHALL or FLUSHDB in MULTI (an admin command, as outside it): held
 * as PING is, and the transaction runs on every server at EXEC. Not once
 * a key has picked the transaction's server, nor with a PUBLISH, which
 * would reach each subscriber once for each server. */
static void tx_flush(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    const char *why = NULL;

    if (!route_admin_ok(c, r, cmd->name))
        return;                     /* (and the transaction aborts) */
    if (client_tx_queued(c))
        why = "after a key: the transaction runs on the server of its keys";
    else if (c->rare != NULL && c->rare->tx_publish)
        why = "after PUBLISH: run on every server, it would publish once for each";
    if (why != NULL) {
        client_reply_error(c, r, "ERR command '%s' inside MULTI is not supported by shardis "
                           "%s", cmd->name, why);
        route_refused(c, r);
        return;
    }
    client_rare(c)->tx_flush = true;
    tx_hold(c, r, a);
}

/* EXEC of a transaction that flushes (tx_flush): on every server, MULTI,
 * what was held and EXEC, as shardis's own user (the clients' user may
 * not FLUSHALL: srvuser.c) on connections of c's, after c's earlier
 * requests are answered. EXEC's reply is as FLUSHALL's outside MULTI
 * (all_succeeded): the first server's, or the first error (-EXECABORT
 * where a server refused a command as it was queued). Each server runs
 * the transaction at once; the servers do not run it at one instant, as
 * they do not a FLUSHALL outside MULTI; each as long as it takes. */
static void tx_every_ahead(struct client *c, struct backend *b)
{
    static const char *const multi[] = {"MULTI"};
    const struct client_rare *rare = c->rare;

    send_quiet_on(c, b, 1, multi);
    for (uint32_t i = 0; i < rare->tx_nheld; i++) {
        const struct msg *g = &rare->tx_held[i]->out;
        struct req *q = req_get();
        msg_sub(g, 0, g->len, &q->out);
        route_send(c, q, NULL, b);
    }
}

static void tx_exec_every(struct client *c, struct req *r, struct args *a)
{
    r->hold_on_send = 1;
    every_own(c, r, a, CMD_REPLY_ALL_OK, true, tx_every_ahead);
    tx_release_held(c, false);
}

/* c's transaction ends here, not by an EXEC a server runs: what it queued
 * never runs (track.c's notes of its writes). */
static void tx_unrun(struct client *c)
{
    if (c->tracking)
        module_role.tx_unrun(c);
}

/* The transaction is over, or never was: what its minified commands'
 * replies needed is let go (an EXEC took it, if it went). */
static void tx_maps_drop(struct client *c)
{
    if (c->rare != NULL) {
        minify_tx_free(c->rare->tx_minify);
        c->rare->tx_minify = NULL;
        c->rare->tx_sent = 0;
    }
}

/* The transaction has its server (c's pin): MULTI goes there, and what
 * was held for it. */
static void tx_begin_on_pin(struct client *c)
{
    struct client_rare *rare = client_rare(c);

    if (c->notouch)                         /* (till its EXEC or DISCARD: gate.c go) */
        gate_notouch(c, c->pin, true);
    send_quiet(c, "MULTI");
    rare->tx_sent = rare->tx_nheld;         /* (queued first) */
    tx_release_held(c, true);
    c->tx = TX_QUEUED;
}

void pin_client_gone(struct client *c)
{
    struct backend *b, *next;

    tx_release_held(c, false);
    tx_maps_drop(c);

    if (c->pin != NULL) {
        pool_conn_release(c->pin, false);
        c->pin = NULL;
    }
    for (b = TAILQ_FIRST(&c->pool->dedicated); b != NULL; b = next) {
        next = TAILQ_NEXT(b, link);
        if (b->owner == c && b->role == BACKEND_ONE_OFF)
            pool_conn_release(b, false);      /* a WAIT still waiting */
    }
}

/* (pin.h) What forward counts (tx_sent) once MULTI is on the pin; before
 * that, the first keyed command comes after what was held. */
uint32_t pin_tx_place(const struct client *c)
{
    if (c->rare == NULL)
        return 0;
    return client_tx_queued(c) ? c->rare->tx_sent : c->rare->tx_nheld;
}

/* ---- MULTI, EXEC, DISCARD, WATCH, UNWATCH ------------------------------------------ */

static void tx_multi(struct client *c, struct req *r, struct args *a)
{
    if (client_in_multi(c)) {
        refuse(c, r, "ERR MULTI calls can not be nested");
        return;
    }
    c->tx_abort = 0;
    tx_maps_drop(c);
    if (c->tx == TX_NONE) {         /* the first key will choose the server */
        client_rare(c)->tx_epoch = c->pool->epoch;
        c->tx = TX_MULTI;
        pin_reply_ok(c, r);
        return;
    }
    c->tx = TX_QUEUED_WATCHED;      /* WATCH chose it */
    forward(c, r, a);
    c->rare->tx_sent = 0;           /* (MULTI itself is not queued) */
}

static void tx_exec(struct client *c, struct req *r, struct args *a)
{
    enum client_tx was = c->tx;

    if (!client_in_multi(c)) {
        refuse(c, r, "ERR EXEC without MULTI");
        return;
    }
    c->tx = TX_NONE;
    if (c->tx_abort) {
        c->tx_abort = 0;
        tx_unrun(c);
        tx_maps_drop(c);
        tx_release_held(c, false);
        if (c->pin != NULL)
            send_quiet(c, was >= TX_QUEUED ? "DISCARD" : "UNWATCH");
        refuse(c, r, "EXECABORT Transaction discarded because of previous errors.");
        return;
    }
    if (was == TX_MULTI && c->rare != NULL && c->rare->tx_flush) {
        tx_exec_every(c, r, a);
        return;
    }
    if (was == TX_MULTI && (c->rare == NULL || c->rare->tx_nheld == 0)) {
        struct resp_w w = client_w(c, &r->rsp);     /* nothing was queued anywhere */
        resp_w_array(&w, 0);
        req_done(r);
        return;
    }
    if (was == TX_MULTI) {          /* only PING, ECHO, PUBLISH: any server runs them */
        pin_to(c, r, pool_first_up(c->pool));
        tx_begin_on_pin(c);
        c->tx = TX_NONE;
        r->in_tx = r->is_exec = 1;
        forward(c, r, a);
        return;
    }
    if (c->rare->tx_epoch != c->pool->epoch) {
        /* Keys moved since it began: what it queued or watched on its
         * server may no longer live there. */
        tx_unrun(c);
        send_quiet(c, "DISCARD");
        tx_maps_drop(c);
        refuse(c, r, "TRYAGAIN resharding: the transaction began before a reload, retry");
        return;
    }
    r->in_tx = r->is_exec = 1;
    forward(c, r, a);
}

static void tx_discard(struct client *c, struct req *r, struct args *a)
{
    enum client_tx was = c->tx;

    if (!client_in_multi(c)) {
        refuse(c, r, "ERR DISCARD without MULTI");
        return;
    }
    c->tx = TX_NONE;
    c->tx_abort = 0;
    client_rare(c)->tx_broken = false;
    tx_unrun(c);
    tx_release_held(c, false);
    tx_maps_drop(c);
    if (was >= TX_QUEUED) {         /* DISCARD unwatches too, as in Redis */
        r->anywhere = 1;
        r->ends_tx = 1;
        forward(c, r, a);
        return;
    }
    pin_reply_ok(c, r);
}

/* RESET's reply, in place of the DISCARD's or UNWATCH's it went as: the
 * state is gone either way (a pin that failed is closed, and its state
 * with it). */
static int reset_reply(struct req *r)
{
    struct resp_w w;

    msg_release(&r->rsp);
    w = client_w(r->client, &r->rsp);
    resp_w_simple(&w, "RESET");
    return 0;
}

bool pin_reset(struct client *c, struct req *r)
{
    enum client_tx was = c->tx;
    const char *verb = was == TX_WATCHING ? "UNWATCH" : "DISCARD";
    struct resp_w w;

    c->tx = TX_NONE;
    c->tx_abort = 0;
    if (c->rare != NULL)
        c->rare->tx_broken = false;
    tx_unrun(c);
    tx_release_held(c, false);
    tx_maps_drop(c);
    if (was != TX_WATCHING && was < TX_QUEUED) {
        if (c->pin != NULL)
            retire(c, r);           /* an EXEC or DISCARD still on it */
        return false;               /* nothing on a server: a MULTI without a key yet */
    }
    w = client_cmd_w(c, &r->out);
    resp_w_command(&w, 1, &verb, NULL);
    r->hook = reset_reply;
    r->anywhere = 1;
    r->ends_tx = 1;
    r->hold_on_send = 1;            /* nothing of c's runs before it ends the state */
    r->pinned = 1;
    route_send(c, r, NULL, c->pin);
    /* Whatever c sends next, in whichever protocol, needs nothing of this
     * pin: it finishes the DISCARD as a one-off. (Not while a blocking
     * command waits there: retire refuses, and a pinned command of the
     * other protocol is then refused by pin_to.) The RESET itself was
     * sent: what c sends after it waits for it too. */
    retire(c, NULL);
    return true;
}

static void tx_watch(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    int owner;

    if (client_in_multi(c)) {
        refuse(c, r, "ERR WATCH inside MULTI is not allowed");
        return;
    }
    if ((owner = route_owner(c, r, a, cmd)) < 0)
        return;                     /* -CROSSSLOT was sent */
    if (c->tx == TX_NONE)
        client_rare(c)->tx_epoch = c->pool->epoch;
    if (pin_to(c, r, (uint32_t)owner) == NULL) {
        reply_crossslot(c, r);      /* watching keys of another server */
        return;
    }
    c->tx = TX_WATCHING;
    forward(c, r, a);
}

static void tx_unwatch(struct client *c, struct req *r, struct args *a)
{
    switch ((enum client_tx)c->tx) {
    case TX_MULTI:
        /* Nowhere to queue it: no key has picked the server yet. */
        client_reply_error(c, r, "ERR UNWATCH in a transaction without a key yet is not "
                           "supported by shardis");
        c->tx_abort = 1;
        req_done(r);
        return;
    case TX_QUEUED:                 /* queued in MULTI: EXEC will end it */
    case TX_QUEUED_WATCHED:
        c->tx = TX_QUEUED_WATCHED;
        forward(c, r, a);
        return;
    case TX_WATCHING:
        c->tx = TX_NONE;
        r->anywhere = 1;
        forward(c, r, a);
        return;
    case TX_NONE:
        pin_reply_ok(c, r);
        return;
    }
}

int pin_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    const char *n;

    /* MULTI, EXEC, DISCARD, WATCH and UNWATCH all have the noscript flag:
     * a cheap test before the names. */
    if (cmd != NULL && (cmd->flags & CMD_NOSCRIPT)) {
        n = cmd->name;
        if (!strcmp(n, "multi"))
            return tx_multi(c, r, a), 1;
        if (!strcmp(n, "exec"))
            return tx_exec(c, r, a), 1;
        if (!strcmp(n, "discard"))
            return tx_discard(c, r, a), 1;
        if (!strcmp(n, "watch"))
            return tx_watch(c, r, a, cmd), 1;
        if (!strcmp(n, "unwatch"))
            return tx_unwatch(c, r, a), 1;
    }
    if (!client_in_multi(c) || (cmd != NULL && keys_any(cmd)))
        return 0;
    if (cmd != NULL && (!strcmp(cmd->name, "flushall") || !strcmp(cmd->name, "flushdb"))) {
        tx_flush(c, r, a, cmd);
        return 1;
    }
    /* PING and ECHO mean the same on any server, and so does PUBLISH: a
     * client's subscriptions to channels and patterns are on every server
     * (pubsub.c), so a message published on any reaches every subscriber,
     * as in Redis Cluster (Celery's result backend publishes in the
     * transaction that stores the result). Once the transaction has a
     * server, they are queued there. So is DEBUG SLEEP (an admin command,
     * as outside MULTI): it sleeps the server the transaction runs on, or
     * every server for one that flushes, all of a sleep a transaction can
     * see (a key of its expiring between two of its commands); its
     * clients' user may (srvuser.c, with admin_commands). */
    bool sleep = cmd != NULL && !strcmp(cmd->name, "debug") && args_is(a, 1, "sleep");
    bool publish = cmd != NULL && !strcmp(cmd->name, "publish");
    if (sleep && !route_admin_ok(c, r, cmd->name))
        return 1;                   /* (and the transaction aborts) */
    if (sleep || publish ||
        (cmd != NULL && (!strcmp(cmd->name, "ping") || !strcmp(cmd->name, "echo")))) {
        if (client_tx_queued(c)) {
            forward(c, r, a);
        } else if (publish && c->rare != NULL && c->rare->tx_flush) {
            client_reply_error(c, r, "ERR command 'publish' inside MULTI after FLUSHALL or "
                               "FLUSHDB is not supported by shardis: run on every server, "
                               "it would publish once for each");
            route_refused(c, r);
        } else {
            client_rare(c)->tx_publish |= publish;
            tx_hold(c, r, a);
        }
        return 1;
    }
    /* In MULTI without keys: shardis's own commands and every keyless one
     * would run here or everywhere, not in the transaction. */
    client_reply_error(c, r, "ERR command '%s' inside MULTI is not supported by shardis: "
                       "a transaction runs on the server of its keys",
                       cmd != NULL ? cmd->name : "shard.*");
    c->tx_abort = 1;
    r->rejected = 1;
    req_done(r);
    return 1;
}

/* ---- forwarding ---------------------------------------------------------------------- */

void pin_send(struct client *c, struct req *r, struct args *a, uint32_t server, bool blocking)
{
    if (c->tx == TX_MULTI && c->rare != NULL && c->rare->tx_flush) {
        client_reply_error(c, r, "ERR a key inside MULTI after FLUSHALL or FLUSHDB is not "
                           "supported by shardis: that transaction runs on every server");
        route_refused(c, r);
        return;
    }
    if (c->tx == TX_MULTI) {
        if (pin_to(c, r, server) == NULL) {
            c->tx_abort = 1;
            reply_crossslot(c, r);
            return;
        }
        tx_begin_on_pin(c);
    } else if (pin_to(c, r, server) == NULL) {
        if (client_in_multi(c))
            c->tx_abort = 1;
        if (c->tx != TX_NONE)
            reply_crossslot(c, r);
        else {
            client_reply_error(c, r, "ERR a client's blocking commands run one server at a "
                               "time in shardis: this one waits on another server");
            req_done(r);
        }
        return;
    }
    r->blocking = blocking && !client_in_multi(c);  /* it may wait as long as it asked */
    r->in_tx = client_in_multi(c);
    forward(c, r, a);
}

/* ---- WAIT ---------------------------------------------------------------------------- */

/* "PUBLISH __shardis:wait ''": a write that replicas receive (Redis
 * propagates PUBLISH), to a channel nobody listens to. */
static const char *const wait_marker[] = {"PUBLISH", "__shardis:wait", ""};

/* WAIT numreplicas timeout: how many replicas have every write the client
 * made before it. Redis counts the writes of the calling connection, but
 * the client's went over shared connections. So on every server a
 * connection of its own first makes a write of its own (wait_marker),
 * held until the client's earlier requests are answered, so that it comes
 * after all of them on that server; WAIT on that connection then waits
 * for replicas to have everything up to the marker. The reply is the
 * smallest count, Redis's agg_min for WAIT. */
static void wait_ahead(struct client *c, struct backend *b)
{
    send_quiet_on(c, b, 3, wait_marker);    /* (the marker is shardis's) */
}

static void pin_wait(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    /* WAIT blocks its client, as on one redis-server: what it sends after
     * runs once WAIT has answered. */
    r->blocking = 1;
    every_own(c, r, a, cmd->reply, true, wait_ahead);
}

/* A script that declares no key, where the pool has a keyless_user
 * (route.c keyless_script): on a connection of its own to server,
 * authenticated as that user, so that it can touch no key. It runs where
 * the client's other requests to that server would run on one
 * redis-server: after every earlier request of the client is answered,
 * and before any later one is sent (the other connections to the server
 * are no queue it waits in). */
void pin_keyless(struct client *c, struct req *r, struct args *a, uint32_t server)
{
    struct backend *b = pool_conn_acquire_keyless(c->pool, server, c);

    backend_preconnect(b);          /* a new one: its check must be answered first */
    r->anywhere = 1;
    r->hold_on_send = 1;
    gate_hold(c, r);
    args_request(a, &r->out);
    route_send(c, r, NULL, b);
}

/* An admin or @dangerous server-wide command where clients' commands
 * sign in to the servers as the pool's backend_user, which may not run
 * it: on
 * one-off connections signed in as the internal_user, to server `only`
 * (keyed: chosen by the keys in a) or, with only UINT32_MAX, every server,
 * replies merged by reply. The client's user was allowed the command
 * (route.c); only its servers' side runs as shardis. As pin_keyless, it
 * runs after every earlier request of the client is answered and before
 * any later one is sent. */
void pin_internal(struct client *c, struct req *r, struct args *a, enum cmd_reply reply,
                  uint32_t only, bool keyed, bool no_deadline)
{
    r->hold_on_send = 1;
    if (only == UINT32_MAX) {
        /* no_deadline: SAVE, DEBUG RELOAD take as long as the data. */
        every_own(c, r, a, reply, no_deadline, NULL);
        return;
    }
    gate_hold(c, r);
    struct backend *b = pool_conn_acquire_internal(c->pool, only, c);
    args_request(a, &r->out);
    route_send(c, r, keyed ? a : NULL, b);
}

/* SCRIPT KILL and the like must reach a server whose shared connection
 * waits behind the very script they are to stop. */
void pin_busy(struct client *c, struct req *r, struct args *a, const struct cmd *cmd,
              bool first_only)
{
    struct pool *p = c->pool;
    struct backend **via = xcalloc(p->nservers, sizeof(*via));

    for (uint32_t s = 0; s < p->nservers; s++) {
        if (!p->servers[s].active || (first_only && s != p->slot[0]))
            continue;
        via[s] = pool_conn_acquire(p, s, c, BACKEND_ONE_OFF);
    }
    if (first_only) {
        args_request(a, &r->out);
        route_send(c, r, NULL, via[p->slot[0]]);
    } else {
        frag_broadcast(c, r, a, cmd->reply, via, false);
    }
    free(via);
}

/* ---- the module ---------------------------------------------------------------------- */

const struct module pin_module = {
    .name = "pin",
    .take = pin_route,
    .routes = 1u << ROUTE_WAIT,
    .route = pin_wait,
    .roles = &(const struct module_roles){
        .send_pinned = pin_send,
        .send_as_own = pin_internal,
        .send_keyless = pin_keyless,
        .send_dedicated = pin_busy,
        .gate_emptied = pin_check,
    },
};

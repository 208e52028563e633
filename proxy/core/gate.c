/* gate.c -- when a client's request may be sent: the one place that says
 * "this request may not run before those".
 *
 * A request is sent the moment it is routed, unless one of these holds it:
 *
 *   moving    its keys are moving after a reload (mig.c) and must reach
 *             their new owner first (r->migs > 0);
 *   hold      the client has requests sent and not answered that everything
 *             after them must wait for (rare->hold_waits): a blocking
 *             command (on one redis-server nothing a client sends after
 *             BLPOP runs before BLPOP returns, whatever server it would run
 *             on here), and, when it is given a connection of its own (a
 *             transaction, WAIT), its requests still unanswered elsewhere,
 *             which must not run after what it sends on the new one. Only
 *             what has been sent is held (a request still waiting here
 *             joins the hold when it goes: r->hold_on_send), so what the
 *             hold waits for is always on its way to an answer; a request
 *             is never held back by its own split request;
 *   unblock   the connection it goes to has a CLIENT UNBLOCK aimed at the
 *             command waiting there (mig.c): nothing new runs there before
 *             that lands, or the new command would be the one unblocked;
 *   verify    the connection it goes to authenticates as the keyless_user
 *             and its check of that user is not answered yet (pin_keyless):
 *             sent behind an AUTH that failed, it would run as another;
 *   paused    CLIENT PAUSE: until the pool's pause ends, no request is sent
 *             (ALL), or none that may write (WRITE: see paused());
 *   subscribing  a PUBLISH (SPUBLISH) while a subscription sent to its server
 *             is not confirmed yet: a client that subscribes and another
 *             that publishes at once (not waiting for the confirmation:
 *             asyncio clients, channels_redis) get the message, as from
 *             one redis-server, though the subscription went on a
 *             connection of its own, maybe still connecting. At most
 *             GATE_SUBSCRIBING_MS: a server that never confirms holds no
 *             publisher for ever. With several loops, the subscriptions of
 *             every loop's clients count (pool.subscribing), and a publisher
 *             on another loop than the subscriber's goes at its loop's next
 *             tick once they are confirmed;
 *   order     an earlier request of the client waits already.
 *
 * A request that may not go waits on its client's gate queue, in order;
 * gate_kick sends from the head whenever one of those may have changed
 * (a MIGRATE finished, a request was answered, an UNBLOCK landed). A
 * client whose gate is idle (no request waits, nothing held: c->gated is
 * clear) pays one test per request.
 *
 * What a waiting request holds: its server, the protocol and database it
 * was routed in, and whether over a tracking connection (a HELLO, SELECT
 * or CLIENT TRACKING its client sends meanwhile is for later requests),
 * and how it goes there (r->via):
 * the client's usual connection for that server (the client's own pinned
 * one if it has one there by then, else a shared one, or a replica's for
 * a read as pool_backend_read decides then), the client's pinned
 * connection and no other (a transaction's or a blocking command's), or a
 * one-off connection its client holds (WAIT's, SCRIPT KILL's, a keyless
 * script's, which a pipeline of them shares), or shardis's own connection
 * to the server (pool_own: SHARD.GENKEY's). All but the one-off are
 * looked up when the request is sent, so a waiting request
 * never holds a pointer to a connection its client may give back
 * meanwhile (and another client then take). A one-off connection belongs
 * to its client until released; if it fails and is freed while requests
 * wait for it, gate_conn_gone answers them first.
 *
 * A request routed by a ring that a reload has since replaced is not sent
 * by that route: it is told -TRYAGAIN (its transaction is discarded),
 * unless no key chose its server (r->anywhere). */
#include <string.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/core/gate.h"
#include "proxy/core/module.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/base/util.h"

#define GATE_SUBSCRIBING_MS 1000

_Static_assert(POOL_SLOTS_MAX <= UINT16_MAX + 1 && CONF_DATABASES_MAX <= UINT16_MAX + 1,
               "a server and a database fit req.server and req.db");

/* The client's request r stands for: r itself, or the split request a
 * fragment is part of. */
static struct req *top(struct req *r)
{
    return r->parent != NULL ? r->parent : r;
}

/* ---- holding ----------------------------------------------------------------------- */

static void hold_add(struct client *c, struct req *r)
{
    if (!r->before_hold) {
        r->before_hold = 1;
        client_rare(c)->hold_waits++;
        c->gated = 1;
    }
}

static void hold_remove(struct client *c, struct req *r)
{
    if (r->before_hold) {
        r->before_hold = 0;
        c->rare->hold_waits--;
    }
}

/* Whether r, or a fragment of it, still waits here (not all of it sent). */
static bool waiting(const struct client *c, const struct req *r)
{
    struct req *x;

    if (!c->gated)
        return false;
    TAILQ_FOREACH(x, &c->rare->gate, bq)
        if (x == r || x->parent == r)
            return true;
    return false;
}

void gate_hold(struct client *c, struct req *r)
{
    for (struct req *x = TAILQ_FIRST(&c->reqs); x != NULL && x != r; x = TAILQ_NEXT(x, cq)) {
        if (x->done)
            continue;
        if (waiting(c, x))
            x->hold_on_send = 1;    /* held from when it goes */
        else
            hold_add(c, x);
    }
}

void gate_answered(struct client *c, struct req *r)
{
    if (!r->before_hold)
        return;
    hold_remove(c, r);
    gate_kick(c);                   /* a fragment of a held request may go now */
}

/* ---- sending ----------------------------------------------------------------------- */

/* Where r goes now: NULL if its connection is gone (a transaction's
 * pinned connection was given back). */
static struct backend *target(struct client *c, struct req *r)
{
    switch ((enum gate_via)r->via) {
    case GATE_PIN:
        return c->pin != NULL && c->pin->server == r->server ? c->pin : NULL;
    case GATE_CONN:
        return r->backend;
    case GATE_OWN:
        return pool_own(c->pool, r->server, r->resp3);
    default:
        return pool_backend_read(c->pool, r->server, c, cmd_numbered(top(r)->cmd),
                                 (enum pool_via)(r->resp3 | (r->tconn ? POOL_VIA_TRACKS : 0)),
                                 r->db);
    }
}

/* CLIENT NO-TOUCH ON or OFF on b, a request of shardis's own whose reply
 * nobody reads. */
void gate_notouch(struct client *c, struct backend *b, bool on)
{
    static const char *const argv[2][3] = {{"CLIENT", "NO-TOUCH", "OFF"},
                                           {"CLIENT", "NO-TOUCH", "ON"}};
    struct req *q = req_get();
    struct resp_w w = client_cmd_w(c, &q->out);

    resp_w_command(&w, 3, argv[on], NULL);
    backend_send(b, q);
    b->notouch = on;
}

/* Send r on b now. A blocking command holds every later request of its
 * client until it returns, and so does one a hold was taken behind.
 *
 * A client in CLIENT NO-TOUCH has each request bracketed by NO-TOUCH ON
 * and OFF on b, in one run of the connection's pipeline, so that the
 * setting covers its request and no other client's on a shared
 * connection. A transaction's pin has it ON from before its MULTI
 * (pin.c) to after its EXEC or DISCARD, where the queued commands run:
 * an ON queued after MULTI would answer inside EXEC's reply. */
static void go_notouch(struct client *c, struct req *r, struct req *t, struct backend *b)
{
    bool bracket = c->notouch && t->client == c && b->role != BACKEND_SUBSCRIBER &&
                   !t->in_tx && !t->ends_tx;

    if (bracket)
        gate_notouch(c, b, true);
    backend_send(b, r);
    if (bracket || (b->notouch && (t->is_exec || t->ends_tx)))
        gate_notouch(c, b, false);
}

static void go(struct client *c, struct req *r, struct backend *b)
{
    struct req *t = top(r);

    if (t->client == c && (t->blocking || t->hold_on_send))
        hold_add(c, t);
    if (c->notouch || b->notouch)
        go_notouch(c, r, t, b);
    else
        backend_send(b, r);
}

/* Whether CLIENT PAUSE holds r now. WRITE holds what redis-server's holds:
 * the commands that may change a server's data or reach its replicas (the
 * write flag, and the may-replicate ones: EVAL, EVALSHA and FCALL whatever
 * the script does, PUBLISH, SPUBLISH, PFCOUNT). WAIT's marker (pin.c) has
 * no command: held as SHARD.GENKEY's are, WAIT answers after the pause.
 * (Redis 7.0's COMMAND does not show may_replicate: the names are here.) */
static bool paused(const struct client *c, struct req *r)
{
    static const char *const may_replicate[] = {"eval", "evalsha", "fcall", "publish",
                                                "spublish", "pfcount"};
    const struct pool *p = c->pool;
    const struct cmd *cmd;

    if (p->paused_until == 0)
        return false;
    if (p->pause_all)
        return true;
    if ((cmd = cmd_numbered(top(r)->cmd)) == NULL)
        return true;                /* (SHARD.GENKEY: its sequences are writes; WAIT) */
    if (cmd->flags & CMD_WRITE)
        return true;
    for (size_t i = 0; i < ARRAY_SIZE(may_replicate); i++)
        if (!strcmp(cmd->name, may_replicate[i]))
            return true;
    return false;
}

/* Whether r, a PUBLISH, waits for subscriptions on their way to its server. */
static bool subscribing(struct client *c, struct req *r, uint32_t server)
{
    if (pool_subscribing(c->pool, server) == 0 ||
        cur_loop->now_us - r->t0_us >= GATE_SUBSCRIBING_MS * 1000ull)
        return false;
    c->pool->publish_held = true;   /* kicked when they are confirmed, or by the tick */
    return true;
}

static bool may_go(struct client *c, struct req *r, struct backend *b)
{
    struct client_rare *rare = c->rare;

    if (r->migs > 0 || paused(c, r) || (r->publish && subscribing(c, r, r->server)))
        return false;
    /* What the hold waits for, but r's own request (the rest of a split
     * request whose first fragments went). */
    if (rare != NULL && rare->hold_waits > top(r)->before_hold)
        return false;
    return b == NULL || (!b->unblocking && !b->verifying);
}

void gate_send(struct client *c, struct req *r, struct backend *b)
{
    struct client_rare *rare;
    bool front = r->front;

    r->front = 0;
    if (!c->gated && r->migs == 0 && !b->unblocking && !b->verifying &&
        (c->pool->paused_until == 0 || !paused(c, r)) &&    /* (the tests inline) */
        (!r->publish || pool_subscribing(c->pool, b->server) == 0)) {
        go(c, r, b);
        return;
    }
    r->server = (uint16_t)b->server;
    r->via = r->pinned ? GATE_PIN
           : backend_dedicated(b) && b != c->pin ? GATE_CONN
           : b->as == BACKEND_AS_INTERNAL ? GATE_OWN : GATE_SERVER;
    r->backend = r->via == GATE_CONN ? b : NULL;
    r->resp3 = b->resp3;            /* a later HELLO does not change it, */
    r->tconn = b->tracking;         /* nor a later CLIENT TRACKING, */
    r->db = (uint16_t)b->db;        /* nor a later SELECT */
    rare = client_rare(c);
    c->gated = 1;
    r->gated = 1;
    /* A request sent again (a blocking command after a reload) is older
     * than everything waiting, and not on its way any more: it leaves the
     * hold until it goes again. */
    if (front) {
        hold_remove(c, r);
        TAILQ_INSERT_HEAD(&rare->gate, r, bq);
    } else {
        TAILQ_INSERT_TAIL(&rare->gate, r, bq);
    }
    gate_kick(c);
}

bool gate_waits_on(const struct client *c, const struct backend *b)
{
    struct req *x;

    if (c == NULL || !c->gated)
        return false;
    TAILQ_FOREACH(x, &c->rare->gate, bq)
        if (x->via == GATE_CONN && x->backend == b)
            return true;
    return false;
}

bool gate_retire_pin(struct client *c, struct backend *b)
{
    struct req *x;

    if (!c->gated)
        return true;
    TAILQ_FOREACH(x, &c->rare->gate, bq)
        if (x->server == b->server && x->via != GATE_CONN && top(x)->blocking)
            return false;
    /* What would have gone on the pin goes on it still, after what is
     * there: pinned, or to its server in its protocol. */
    TAILQ_FOREACH(x, &c->rare->gate, bq) {
        if (x->server != b->server || x->via == GATE_CONN || x->via == GATE_OWN ||
            (x->via == GATE_SERVER && (x->resp3 != b->resp3 || x->tconn != b->tracking)))
            continue;                   /* (shardis's own work never goes on a pin) */
        x->via = GATE_CONN;
        x->backend = b;
    }
    return true;
}

void gate_tryagain(struct client *c, struct req *r)
{
    if (c != NULL && !c->closing) {
        client_reply_error(c, r, "TRYAGAIN resharding, retry");
        module_role.told_tryagain(c->pool);     /* (mig.c's count) */
        if (r->in_tx)               /* a command queued in the open transaction */
            c->tx_abort = 1;
    }
    req_done(r);
}

/* r leaves the gate: sent, or answered (it can no longer go as routed). */
static void release(struct client *c, struct req *r, struct backend *b)
{
    struct client_rare *rare = c->rare;
    bool own = r->client != NULL || r->parent != NULL;
    /* Routed before a later reload: its owner may have changed (what goes
     * to a pin holding WATCH state may go on: its EXEC will be refused,
     * tx_exec; a transaction without WATCH holds nothing that needs it). */
    bool stale = own && r->epoch != c->pool->epoch && !r->anywhere &&
                 !(r->pinned && !r->is_exec && !r->in_tx &&
                   (c->tx == TX_WATCHING || c->tx == TX_QUEUED_WATCHED));

    r->backend = NULL;
    if (own && r->is_exec && (rare->tx_broken || stale)) {
        /* A command of its transaction was not queued: none runs. */
        if (b != NULL) {
            struct req *d = req_get();
            struct resp_w w = client_cmd_w(c, &d->out);
            resp_w_command(&w, 1, (const char *const[]){"DISCARD"}, NULL);
            backend_send(b, d);
            if (b->notouch)
                gate_notouch(c, b, false);
        }
        rare->tx_broken = false;
        if (stale) {
            gate_tryagain(c, r);
        } else {
            client_reply_error(c, r, "EXECABORT Transaction discarded because of "
                               "previous errors.");
            req_done(r);
        }
    } else if (own && b == NULL && r->via == GATE_SERVER && !r->mig_failed && !stale) {
        /* A read for replicas only, and its server has none listed now. */
        client_reply_error(c, r, POOL_NO_REPLICA_ERR, c->pool->servers[r->server].label);
        req_done(r);
    } else if (own && (r->mig_failed || stale || b == NULL ||
                       (r->in_tx && rare->tx_broken))) {
        if (r->in_tx)
            rare->tx_broken = true;
        gate_tryagain(c, r);
    } else if (b == NULL) {
        req_maybe_free(r);          /* the proxy's own (MULTI, DISCARD): nowhere to go */
    } else {
        if (own && r->ends_tx)
            rare->tx_broken = false;    /* what broke the last transaction went before */
        go(c, r, b);
    }
}

void gate_kick(struct client *c)
{
    struct client_rare *rare = c->rare;
    struct req *r;

    if (!c->gated || c->closing || c->kicking)
        return;
    /* Sending may answer a request at once (a failed backend), which
     * kicks again: the loop below goes on from where that left it. */
    c->kicking = 1;
    while ((r = TAILQ_FIRST(&rare->gate)) != NULL) {
        struct backend *b = target(c, r);
        if (!may_go(c, r, b))
            break;
        TAILQ_REMOVE(&rare->gate, r, bq);
        r->gated = 0;
        release(c, r, b);
        if (c->closing)
            return;
    }
    c->kicking = 0;
    if (TAILQ_EMPTY(&rare->gate) && rare->hold_waits == 0) {
        c->gated = 0;
        module_role.gate_emptied(c);   /* (pin.c: its pin goes back if nothing holds it) */
    }
}

void gate_conn_gone(struct client *c, struct backend *b)
{
    struct req *r, *next;

    if (!c->gated || c->closing)
        return;
    for (r = TAILQ_FIRST(&c->rare->gate); r != NULL; r = next) {
        next = TAILQ_NEXT(r, bq);
        if (r->via != GATE_CONN || r->backend != b)
            continue;
        TAILQ_REMOVE(&c->rare->gate, r, bq);
        r->gated = 0;
        r->backend = NULL;
        if (r->client == NULL && r->parent == NULL) {
            req_maybe_free(r);      /* the proxy's own (WAIT's marker) */
            continue;
        }
        client_reply_error(c, r, "ERR backend %s unavailable: %s",
                           c->pool->servers[b->server].label, b->reason);
        req_done(r);
    }
    gate_kick(c);
}

/* A request of a client that went away: done with it. */
void gate_drop(struct req *r)
{
    if (r->parent != NULL)
        req_done(r);                /* its split request counts it */
    else
        req_maybe_free(r);
}

void gate_client_gone(struct client *c)
{
    struct req *r;

    if (!c->gated)
        return;
    while ((r = TAILQ_FIRST(&c->rare->gate)) != NULL) {
        TAILQ_REMOVE(&c->rare->gate, r, bq);
        r->gated = 0;
        r->backend = NULL;
        if (r->migs == 0)
            gate_drop(r);           /* else when its MIGRATEs are over (mig.c) */
    }
    c->rare->hold_waits = 0;
    c->gated = 0;
}

void gate_kick_publishers(struct pool *p)
{
    if (!p->publish_held)
        return;
    p->publish_held = false;        /* (set again by a PUBLISH that still waits) */
    /* From the end: a client closed by what it sends leaves its slot to
     * the last one, already kicked. */
    for (uint32_t i = p->front.nclients; i-- > 0; )
        if (i < p->front.nclients && p->front.clients[i]->gated)
            gate_kick(p->front.clients[i]);
}

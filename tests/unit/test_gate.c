/* test_gate.c -- the ordering gate (proxy/core/gate.c) on the proxy's own
 * objects: a pool of two servers, clients, their dedicated connections,
 * requests. No socket is opened: connections are marked up and what they
 * would write is read off their send queues, so every sequence is exact,
 * with no timing. Each case is a defect the gate exists to prevent. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <string.h>

#include "proxy/core/acl.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/modules/mig.h"
#include "proxy/process/hooks.h"
#include "proxy/core/pool.h"
#include "proxy/core/pool_conn.h"
#include "proxy/process/proxy.h"
#include "proxy/transport/loop.h"
#include "proxy/core/route.h"
#include "proxy/process/modules.h"
#include "proxy/base/util.h"

static const char conf_text[] =
    "alpha:\n"
    "  listen: 127.0.0.1:1\n"
    "  hash_tag: \"{}\"\n"
    "  hash: md5\n"
    "  servers:\n"
    "    - 127.0.0.1:2:1 one\n"
    "    - 127.0.0.1:3:1 two\n";

static struct conf *cf;
static struct pool pool;
static struct client *clients[4];   /* made by a case, freed after it */
static size_t nclients;

static void setup(void)
{
    char err[CONF_ERRLEN];
    struct ring *ring;

    static struct loop the_loop;

    loop_init(&the_loop, uv_default_loop());
    hooks_register();
    modules_register();             /* as main */
    cr_assert(eq(int, conf_parse(&cf, "test", conf_text, sizeof(conf_text) - 1, err,
                                 sizeof(err)), 0), "%s", err);
    cur_loop->conf = cf;
    cr_assert(eq(int, conf_pool_ring(&cf->pools[0], &ring, err, sizeof(err)), 0), "%s", err);
    memset(&pool, 0, sizeof(pool));
    pool.nconns = 1;
    TAILQ_INIT(&pool.dedicated);
    TAILQ_INIT(&pool.subscribers);
    pool_set_ring(&pool, &cf->pools[0], ring, NULL);
    cr_assert(eq(int, acl_build(&cf->pools[0], "test", &pool.acl, err, sizeof(err)), 0));
    cur_loop->pools = &pool;
    cur_loop->npools = 1;
    for (uint32_t s = 0; s < pool.nservers; s++)
        pool.servers[s].conns[0].state = BACKEND_UP;    /* writes stay queued */
}

/* Free the cases' clients as client_close_cb does: their requests let go
 * (what a backend still queues stays there, reachable from the pool). */
static void teardown(void)
{
    for (size_t i = 0; i < nclients; i++) {
        struct client *c = clients[i];
        struct req *r;
        while ((r = TAILQ_FIRST(&c->reqs)) != NULL) {
            TAILQ_REMOVE(&c->reqs, r, cq);
            r->client = NULL;
            req_maybe_free(r);
        }
        if (c->lbuf != NULL)
            mbuf_unref(c->lbuf);
        free(c->rare);
        free(c);
    }
    nclients = 0;
    acl_unref(pool.acl);
    pool.acl = NULL;
}

TestSuite(gate, .init = setup, .fini = teardown, .timeout = 10);

static struct client *client_new(uint64_t id)
{
    struct client *c = xcalloc(1, sizeof(*c));

    c->pool = &pool;
    c->front = &pool.front;
    c->id = id;
    c->user = &pool.acl->users[0];
    c->reading = 1;                 /* (it has no socket: nothing to start reading) */
    TAILQ_INIT(&c->reqs);
    cr_assert(nclients < ARRAY_SIZE(clients));
    clients[nclients++] = c;
    return c;
}

/* A request of c's, as the framer hands it over. */
static struct req *request(struct client *c)
{
    struct req *r = req_get();

    client_queue(c, r);
    return r;
}

static struct backend *pin(struct client *c, uint32_t server)
{
    struct backend *b = pool_conn_acquire(&pool, server, c, BACKEND_PIN);

    b->state = BACKEND_UP;
    c->pin = b;
    return b;
}

static bool queued_on(const struct backend *b, const struct req *r)
{
    const struct req *x;

    TAILQ_FOREACH(x, &b->sendq, bq)
        if (x == r)
            return true;
    return false;
}

/* Defect 3: a request waiting behind its client's BLPOP kept a pointer to
 * the client's pinned connection. The BLPOP, sent again after a reload,
 * gave that connection back as a spare; another client took it for a
 * transaction; the waiting request then went into that transaction. */
Test(gate, a_waiting_request_never_goes_to_a_connection_given_away)
{
    struct client *c = client_new(1), *d = client_new(2);
    struct backend *shared = &pool.servers[0].conns[0];
    struct backend *p = pin(c, 0);
    struct req *blpop = request(c), *get = request(c);

    blpop->blocking = blpop->pinned = 1;
    route_send(c, blpop, NULL, p);
    cr_assert(queued_on(p, blpop), "the BLPOP goes at once");
    route_send(c, get, NULL, pool_backend(&pool, 0, c));    /* c's pin, for now */
    cr_assert(not(queued_on(p, get)), "the GET waits for the BLPOP");

    /* The BLPOP is taken off (unblocked, to be sent elsewhere), and its
     * connection goes back, clean, as a spare; d takes it. */
    TAILQ_REMOVE(&p->sendq, blpop, bq);
    blpop->queued = 0;
    pool_conn_release(p, true);
    c->pin = NULL;
    cr_assert(eq(ptr, pool_conn_acquire(&pool, 0, d, BACKEND_PIN), p), "d gets c's old connection");
    d->pin = p;

    req_done(blpop);                /* the BLPOP answered: the GET may go */
    cr_assert(queued_on(shared, get), "c's GET goes on c's own route (the shared one)");
    cr_assert(not(queued_on(p, get)), "c's GET never reaches d's connection");
}

/* Defect 17: CLIENT UNBLOCK aims at a connection. A blocking command sent
 * on it before the UNBLOCK lands would be the one unblocked. */
Test(gate, nothing_goes_to_a_connection_with_an_unblock_in_flight)
{
    struct client *c = client_new(1);
    struct backend *p = pin(c, 0);
    struct req *again = request(c);

    p->client_id = 7;
    p->unblocking = 1;              /* as mig.c's unblock() sets it */
    again->blocking = again->pinned = 1;
    route_send(c, again, NULL, p);
    cr_assert(not(queued_on(p, again)), "a BLPOP waits while the UNBLOCK is on its way");

    /* The UNBLOCK's reply comes back (mig.c's marker_reply). */
    mig_unblock_landed(&pool, 0, 7);
    cr_assert(eq(int, p->unblocking, 0));
    cr_assert(queued_on(p, again), "the BLPOP goes once the UNBLOCK has landed");
}

/* ... and a connection given back while an UNBLOCK for it is on its way is
 * never handed to the next client. */
Test(gate, a_connection_being_unblocked_is_no_spare)
{
    struct client *c = client_new(1), *d = client_new(2);
    struct backend *p = pin(c, 0);

    p->unblocking = 1;
    pool_conn_release(p, true);
    c->pin = NULL;
    cr_assert(eq(u32, pool.nspare, 0), "not kept as a spare");
    struct backend *q = pool_conn_acquire(&pool, 0, d, BACKEND_PIN);
    cr_assert(eq(int, q->state, BACKEND_DOWN), "d gets a new connection");
    cr_assert(eq(int, q->unblocking, 0));
}

/* Defect 11: a command sent after a blocking one runs after it, on any
 * server; and (the review's hang) a hold never waits for a request that
 * is itself still waiting at the gate. */
Test(gate, after_a_blocking_command_everything_waits_then_goes)
{
    struct client *c = client_new(1);
    struct backend *p = pin(c, 0), *other = &pool.servers[1].conns[0];
    struct req *blpop = request(c), *get = request(c), *get2 = request(c);

    blpop->blocking = blpop->pinned = 1;
    route_send(c, blpop, NULL, p);
    route_send(c, get, NULL, other);
    route_send(c, get2, NULL, other);
    cr_assert(not(queued_on(other, get)), "no GET on another server before the BLPOP returns");
    TAILQ_REMOVE(&p->sendq, blpop, bq);
    blpop->queued = 0;
    req_done(blpop);
    cr_assert(queued_on(other, get) && queued_on(other, get2), "both go once it returned");
    cr_assert(eq(int, c->gated, 0), "nothing is held any more");
}

/* A request routed before a reload, still waiting when it may go, is told
 * -TRYAGAIN: its keys' owner may have changed. Only one that belongs to
 * what the client's pin watches goes on (its EXEC is refused anyway). A
 * transaction begun without WATCH watches nothing: a BLPOP waiting behind
 * another, routed before the reload, must not go to the old owner. */
static struct req *blocked_across_a_reload(struct client *c, struct backend *p,
                                           enum client_tx tx)
{
    struct req *first = request(c), *second = request(c);

    first->blocking = first->pinned = 1;
    second->blocking = second->pinned = 1;
    first->epoch = second->epoch = pool.epoch;
    route_send(c, first, NULL, p);
    route_send(c, second, NULL, p);
    cr_assert(not(queued_on(p, second)), "the second BLPOP waits for the first");
    c->tx = tx;
    pool.epoch++;                   /* a reload moved keys */
    req_done(first);
    return second;
}

Test(gate, a_request_routed_before_a_reload_goes_only_with_watch_state)
{
    struct client *c = client_new(1), *d = client_new(2);
    struct backend *p = pin(c, 0), *q = pin(d, 1);
    struct req *r;

    r = blocked_across_a_reload(c, p, TX_QUEUED);
    cr_assert(not(queued_on(p, r)), "MULTI without WATCH: not sent to the old owner");
    cr_assert(r->done, "it is answered");
    r = blocked_across_a_reload(d, q, TX_QUEUED_WATCHED);
    cr_assert(queued_on(q, r), "under WATCH it goes on (EXEC will be refused)");
}

/* mig_op.c -- the MIGRATE commands of a migration (mig.c says why they
 * are safe): the keys of requests routed in one loop turn joined into one
 * MIGRATE per (earlier owner, new owner), held while the drain lasts,
 * sent, retried with backoff, and answered; the mover's batches
 * (mig_mover.c) are sent and answered here too. A request waiting for
 * MIGRATEs counts them in r->migs and waits at its client's gate. */
#include <stdlib.h>
#include <string.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/core/gate.h"
#include "proxy/base/log.h"
#include "proxy/modules/mig_int.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/core/route.h"
#include "proxy/base/util.h"

static req_reply_cb migrate_reply;

/* ---- on touch ---------------------------------------------------------------------- */

/* On touch, the keys of every request routed in one loop turn that go
 * from one server to another share one MIGRATE (m->open, sent by
 * mig_flush when the turn ends): fewer of them block the servers. The
 * ops the request being routed joined wait in m->joined until mig_send
 * takes them. */

/* Into g: "MIGRATE host port "" db timeout REPLACE [AUTH pw | AUTH2 user
 * pw] KEYS", to which op's keys are appended: the source server signs in
 * to the target, where it is now, as shardis's internal user. */
static void op_head(struct mig *m, struct pool *p, const struct mig_op *op, struct msg *g)
{
    const struct pool_server *d = &p->servers[op->to];
    const struct conf_pool *pc = p->conf;
    struct resp_w w = resp_w_on(g, &m->buf, RESP2);
    uint32_t nkeys = op->nkeys;
    const char *auth[3];
    int nauth = backend_auth_args(pc, BACKEND_AS_INTERNAL, auth);

    resp_w_array(&w, 8 + nkeys + (uint32_t)nauth);
    resp_w_bulk_str(&w, "MIGRATE");
    resp_w_bulk_str(&w, d->host);
    resp_w_bulk_ull(&w, d->port);
    resp_w_bulk(&w, "", 0);
    resp_w_bulk_ull(&w, (unsigned long long)pc->redis_db);
    resp_w_bulk_ull(&w, (unsigned long long)op->timeout);
    resp_w_bulk_str(&w, "REPLACE");
    if (nauth > 0)
        resp_w_bulk_str(&w, nauth == 3 ? "AUTH2" : "AUTH");
    for (int i = 1; i < nauth; i++)
        resp_w_bulk_str(&w, auth[i]);
    resp_w_bulk_str(&w, "KEYS");
}

void mig_put_key(struct mig *m, struct msg *g, const char *key, size_t len)
{
    struct resp_w w = resp_w_on(g, &m->buf, RESP2);
    resp_w_bulk(&w, key, len);
}

/* The open MIGRATE from -> to, made if there is none. */
static struct mig_op *open_op(struct pool *p, struct mig *m, uint32_t from, uint32_t to)
{
    struct mig_op *op;

    TAILQ_FOREACH(op, &m->open, link)
        if (op->from == from && op->to == to)
            return op;
    op = xcalloc(1, sizeof(*op));
    op->pool = p;
    op->src = -1;
    op->from = from;
    op->to = to;
    op->epoch = p->epoch;
    TAILQ_INSERT_TAIL(&m->open, op, link);
    return op;
}

void mig_key(struct client *c, uint32_t to, const char *key, size_t len)
{
    struct pool *p = c->pool;
    struct mig *m = p->mig;

    if (m == NULL)
        return;
    for (uint32_t i = 0; i < m->nprior; i++) {
        uint32_t from = m->prior[i].slot[ring_lookup(m->prior[i].ring, key, len)], k;
        if (from == to)
            continue;
        struct mig_op *op = open_op(p, m, from, to);
        op->nkeys++;
        mig_put_key(m, &op->keys, key, len);
        for (k = 0; k < m->njoined && m->joined[k] != op; k++)
            ;
        if (k == m->njoined) {
            if (m->njoined == m->capjoined) {
                m->capjoined = m->capjoined ? 2 * m->capjoined : 4;
                m->joined = xrealloc(m->joined, m->capjoined * sizeof(*m->joined));
            }
            m->joined[m->njoined++] = op;
        }
    }
}

/* Send (or hold for the drain) an op that takes no more keys. */
static void op_close(struct pool *p, struct mig *m, struct mig_op *op)
{
    TAILQ_REMOVE(&m->open, op, link);
    op->timeout = (uint64_t)p->conf->migrate_timeout;
    if (m->state == MIG_DRAINING) {
        op->gated_at = uv_now(cur_loop->uv);
        TAILQ_INSERT_TAIL(&m->gated, op, link);
    } else {
        mig_op_send(m, op);
    }
}

void mig_flush(struct pool *p)
{
    struct mig *m = p->mig;
    struct mig_op *op;

    while ((op = TAILQ_FIRST(&m->open)) != NULL)
        op_close(p, m, op);
}

void mig_send(struct client *c, struct req *r, struct backend *b)
{
    struct pool *p = c->pool;
    struct mig *m = p->mig;

    r->epoch = p->epoch;
    if (m == NULL) {
        gate_send(c, r, b);
        return;
    }
    for (uint32_t k = 0; k < m->njoined; k++) {
        struct mig_op *op = m->joined[k];
        if (op->nwait == op->capwait) {
            op->capwait = op->capwait ? 2 * op->capwait : 4;
            op->wait = xrealloc(op->wait, op->capwait * sizeof(*op->wait));
        }
        op->wait[op->nwait++] = r;
        r->migs++;
    }
    gate_send(c, r, b);
    /* Full ones go now; r waits at the gate first, so one that fails at
     * once answers it (-TRYAGAIN) rather than letting it through. */
    for (uint32_t k = 0; k < m->njoined; k++)
        if (m->joined[k]->nkeys >= (uint32_t)p->conf->migration_batch)
            op_close(p, m, m->joined[k]);
    m->njoined = 0;
}

void mig_told_tryagain(struct pool *p)
{
    if (p->mig != NULL)
        p->mig->tryagain++;
}

/* ---- MIGRATE ------------------------------------------------------------------------ */

void mig_op_send(struct mig *m, struct mig_op *op)
{
    struct pool *p = op->pool;
    struct req *r = req_get();

    op_head(m, p, op, &r->out);
    msg_sub(&op->keys, 0, op->keys.len, &r->out);
    r->on_reply = migrate_reply;
    r->u.mig.op = op;
    m->inflight++;
    backend_send_by(op->src >= 0 ? mig_mover_conn(p, op->from) : pool_own(p, op->from, false), r,
            op->timeout + 1000);
}

static struct client *client_of(const struct req *r)
{
    return r->client != NULL ? r->client : r->parent != NULL ? r->parent->client : NULL;
}

/* An on-touch MIGRATE is over: ok, or failed for good. */
void mig_op_done(struct mig *m, struct mig_op *op, bool ok)
{
    for (uint32_t i = 0; i < op->nwait; i++) {
        struct req *r = op->wait[i];
        struct client *c = client_of(r);
        if (!ok)
            r->mig_failed = 1;
        if (--r->migs == 0) {
            if (r->gated && c != NULL && !c->closing)
                gate_kick(c);
            else if (!r->gated)
                gate_drop(r);       /* its client went away meanwhile */
        }
    }
    (void)m;
    mig_op_free(op);
}

void mig_op_free(struct mig_op *op)
{
    msg_release(&op->keys);
    free(op->wait);
    free(op);
}

/* A MIGRATE, for a request's keys or the mover's. */
static int migrate_reply(struct backend *b, struct req *r)
{
    struct pool *p = b->pool;
    struct mig *m = p->mig;
    char head[64];
    char type = resp_rd_head(&r->rsp, head, sizeof(head));

    if (m == NULL)
        return 0;
    struct mig_op *op = r->u.mig.op;
    bool ok = type == RESP_SIMPLE && !strcmp(head, "OK");
    bool nokey = type == RESP_SIMPLE && !strcmp(head, "NOKEY");
    m->inflight--;
    if (ok || nokey) {
        if (op->src >= 0)
            mig_mover_op_done(p, m, op, true, nokey);
        else {
            m->touched += ok ? op->nkeys : 0;
            mig_op_done(m, op, true);
        }
        return 0;
    }
    log_warn("pool '%s': MIGRATE of %u key%s from %s to their new owner failed: %s",
                 p->conf->name, op->nkeys, op->nkeys > 1 ? "s" : "",
                 p->servers[op->from].label, r->rsp.len == 0 ? b->reason : head);
    if (op->src >= 0) {
        mig_mover_op_done(p, m, op, false, false);
        return 0;
    }
    if (op->tries < (uint32_t)p->conf->migrate_retries && op->epoch == p->epoch) {
        /* Backoff 0, 10, 20, 40 ... ms, as codis retries a key in flight, up
         * to MIG_RETRY_MAX_MS (migrate_retries may be 100). */
        uint64_t backoff = op->tries == 0 ? 0 : 10ull << (op->tries < 20 ? op->tries - 1 : 19);
        op->retry_at = uv_now(cur_loop->uv) +
                       (backoff < MIG_RETRY_MAX_MS ? backoff : MIG_RETRY_MAX_MS);
        op->tries++;
        TAILQ_INSERT_TAIL(&m->retry, op, link);
        return 0;
    }
    mig_op_done(m, op, false);
    return 0;
}

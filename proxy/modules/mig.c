/* mig.c -- moving the keys whose owner a reload changed, with no
 * acknowledged write lost, on stock Redis.
 *
 * Once the proxies in front of the servers agree (group.c), the pool
 * routes by the new ring; the rings it
 * routed by before (at most MIG_MAX_PRIOR of them) stay here until every
 * key they placed elsewhere has moved. The invariant that makes this safe:
 * no write reaches a key's new owner B while an earlier owner A may still
 * hold the key. Three things keep it:
 *
 *   drain      Requests sent to A before the swap may still be on their
 *              way. Each connection gets a PING marker behind them (a
 *              blocked command is unblocked instead, and sent again by the
 *              new ring); until every marker is answered, the record below
 *              is written, every MIGRATE of an earlier epoch has finished
 *              and every other proxy has drained too (group.c), no MIGRATE
 *              is sent, and so no request for a moving key goes anywhere.
 *   on touch   A request for a key in a moving arc first runs
 *              MIGRATE B.host B.port "" db timeout REPLACE KEYS k... on
 *              every earlier owner that differs from B (one MIGRATE per
 *              source for all the request's keys), then goes to B. +OK and
 *              +NOKEY both mean the key is only on B now: MIGRATE is atomic
 *              at A, so two clients racing for one key cannot fork it.
 *              Never COPY: a copy left on A could come back over newer
 *              writes on B. REPLACE only finishes an earlier IOERR (the key
 *              on both). A request waits on its client's parked queue, and
 *              the client's later requests wait behind it, so a client's
 *              requests keep their order. A MIGRATE that fails is tried
 *              again with backoff (migrate_retries); then the request gets
 *              -TRYAGAIN and never reaches B.
 *   mover      In the background every earlier owner is walked with SCAN;
 *              each key is placed by the router's own function, sized
 *              (MEMORY USAGE) and moved in batches (migration_batch keys,
 *              4 MiB), at most migration_rate keys/s, big keys last. SCAN
 *              returns every key present for
 *              the whole walk, and after the drain no key is created on an
 *              earlier owner for a moving arc, so one pass finds them all;
 *              a pass with errors is followed by another.
 *
 * When every source has been walked the earlier rings are dropped and the
 * servers that left the ring are closed. A second reload while keys move
 * keeps both earlier rings (keys are probed on each earlier owner that
 * differs), drains again, and restarts the walk over every source; a third
 * is refused until one finishes.
 *
 * The state is kept on the servers too (the record), so a proxy
 * restarted mid-migration, even after kill -9, goes on from it.
 *
 * The files:
 *   mig.c        the migration's life: start, drain, the clock (mig_tick),
 *                finish, SHARD.MIGRATION; the drain's markers and unblocks
 *   mig_op.c     MIGRATE commands: keys joined on touch, sent, retried,
 *                answered (the mover's batches too)
 *   mig_mover.c  the background walk: SCAN, sizing, batches, big keys
 *   mig_record.c the record on the servers, and taking it up at start
 *   mig_int.h    the structs they share */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/core/gate.h"
#include "proxy/modules/group.h"
#include "proxy/base/log.h"
#include "proxy/modules/mig_int.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/core/route.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

static req_reply_cb marker_reply;

void mig_hold(struct pool *p, bool hold)
{
    if (p->mig != NULL)
        p->mig->hold = hold;
}

/* What this loop sent before the switch is answered, and every MIGRATE
 * of an earlier epoch it sent. */
static bool drained_here(const struct mig *m)
{
    return m->markers == 0 && m->inflight == 0 && m->writes == 0 && !m->record_due;
}

bool mig_drained(const struct pool *p)
{
    const struct mig *m = p->mig;

    return m == NULL || (drained_here(m) &&
                         (!m->lead || m->loops_drained + 1 >= loop_count()));
}

/* ---- several loops: loop 0's copy leads (mig_int.h) ---------------------------------- */

/* Loop 0's copy of p (p itself with one loop): where the mover, the
 * record and the group are. Read in a world stop only. */
static const struct pool *lead_pool(const struct pool *p)
{
    return loop_count() > 1 ? &loop_at(0)->pools[p - cur_loop->pools] : p;
}

/* A word between loops about pool p's migration, for its epoch. */
struct mig_mail {
    size_t   pool;
    uint32_t epoch;
};

static void mig_mail(struct loop *to, loop_fn *fn, const struct pool *p)
{
    struct mig_mail *x = xmalloc(sizeof(*x));

    x->pool = (size_t)(p - cur_loop->pools);
    x->epoch = p->epoch;
    if (!loop_post(to, fn, x))
        free(x);                /* (that loop is stopping) */
}

/* The pool a mail names, if its migration is still at the mail's epoch. */
static struct pool *mailed(const struct mig_mail *x)
{
    struct pool *p = x->pool < cur_loop->npools ? &cur_loop->pools[x->pool] : NULL;

    return p != NULL && p->mig != NULL && p->epoch == x->epoch ? p : NULL;
}

/* On loop 0: another loop has drained. */
static void drained_arrived(void *arg)
{
    struct pool *p = mailed(arg);

    if (p != NULL && p->mig->lead)
        p->mig->loops_drained++;
    free(arg);
}

static void go_moving(struct mig *m, uint64_t now);

/* On another loop: every loop has drained, loop 0 moves keys. */
static void moving_arrived(void *arg)
{
    struct pool *p = mailed(arg);

    if (p != NULL && p->mig->state == MIG_DRAINING)
        go_moving(p->mig, uv_now(cur_loop->uv));
    free(arg);
}

/* ---- starting and finishing ------------------------------------------------------- */

/* Whether the earlier rings kept are as many as may be (err says so). */
static bool rings_full(const struct pool *p, char *err, size_t errlen)
{
    if (p->mig == NULL || p->mig->nprior < MIG_MAX_PRIOR)
        return false;
    snprintf(err, errlen, "reshard in progress (%d pending rings): wait for "
             "SHARD.MIGRATION STATUS to finish before reloading again", MIG_MAX_PRIOR);
    return true;
}

bool mig_can_start(const struct pool *p, char *err, size_t errlen)
{
    /* (Whether keys are in other databases, which no walk moves, the
     * reload asks INFO besides: reload.c can_reshard.) */
    return !rings_full(p, err, errlen);
}

/* A marker behind everything sent to b so far. */
static void marker(struct mig *m, struct backend *b)
{
    struct req *r = req_get();
    struct resp_w w = resp_w_on(&r->out, &m->buf, RESP2);

    resp_w_command(&w, 1, (const char *const[]){"PING"}, NULL);
    r->on_reply = marker_reply;
    m->markers++;
    backend_send(b, r);
}

/* Blocking commands can wait for ever: a marker behind them would too.
 * A retired pin holds none (pin.c), but may hold an EXEC still to run. */
static bool waits_long(const struct backend *b)
{
    if (b->role != BACKEND_PIN && !b->retired)
        return true;
    return backend_has_blocking(b);
}

/* A client's blocking command waiting on its own connection may wait for
 * a key that now lives elsewhere, where pushes now go: CLIENT UNBLOCK it
 * (ERROR, so that a timeout and an unblocking differ), and its client is
 * told -TRYAGAIN, to send it again by the new ring. If it was answered
 * first, the answer stands. */
static void unblock(struct pool *p, struct mig *m, struct backend *b)
{
    struct req *r;
    char id[24];

    /* The command the connection runs: the first that is the client's. The
     * connection's CLIENT ID may still be on its way: then at a later tick. */
    for (r = TAILQ_FIRST(&b->pendq); r != NULL && r->on_reply != NULL; r = TAILQ_NEXT(r, pq))
        ;
    if (r == NULL || !r->blocking || r->unblocked || r->epoch == p->epoch ||
        b->client_id == 0 || b->unblocking)
        return;                         /* (a CLIENT UNBLOCK in flight: a later tick) */
    snprintf(id, sizeof(id), "%" PRIu64, b->client_id);
    r->unblocked = 1;
    /* Nothing new goes to b until the UNBLOCK has landed: it aims at the
     * connection, and must find this command there, not a later one. */
    b->unblocking = 1;
    struct req *u = req_get();
    struct resp_w w = resp_w_on(&u->out, &m->buf, RESP2);
    resp_w_command(&w, 4, (const char *const[]){"CLIENT", "UNBLOCK", id, "ERROR"}, NULL);
    u->on_reply = marker_reply;         /* the drain waits for it too */
    u->u.mig.unblock_id = b->client_id;
    m->markers++;
    backend_send(pool_own(p, b->server, false), u);
}

/* The CLIENT UNBLOCK aimed at the dedicated connection to server whose
 * id there is id has landed (or failed): what waits for it may go. */
void mig_unblock_landed(struct pool *p, uint32_t server, uint64_t id)
{
    struct backend *b;

    TAILQ_FOREACH(b, &p->dedicated, link)
        if (b->server == server && b->client_id == id && b->unblocking) {
            b->unblocking = 0;
            if (b->owner != NULL)
                gate_kick(b->owner);
            return;
        }
}

int mig_unblocked(struct req *r)
{
    if (!resp_rd_error_is(&r->rsp, "UNBLOCKED") || r->client == NULL || r->client->closing)
        return 0;
    if (route_reissue(r->client, r))
        return 1;
    msg_release(&r->rsp);
    client_reply_error(r->client, r, "TRYAGAIN resharding: keys moved while it waited, "
                       "send it again");
    return 0;
}

static void drain(struct pool *p, struct mig *m)
{
    struct backend *b;

    m->state = MIG_DRAINING;
    /* (Reads on a replica of the old owner too: its copy of a key goes
     * once the key has moved.) */
    for (uint32_t s = 0; s < p->nservers; s++)
        for (uint32_t it = 0; (b = pool_server_next(p, s, &it)) != NULL;)
            if (!backend_idle(b) && b->state != BACKEND_FAILED)
                marker(m, b);
    TAILQ_FOREACH(b, &p->dedicated, link) {
        if (b->role == BACKEND_SPARE || backend_idle(b) || b->state != BACKEND_UP)
            continue;
        if (!waits_long(b))
            marker(m, b);
        else if (b->role == BACKEND_PIN)
            unblock(p, m, b);
    }
}

/* Blocked commands routed before the last switch (drain() tried them all;
 * a connection may have learnt its CLIENT ID since). */
static void unblock_late(struct pool *p, struct mig *m)
{
    struct backend *b;

    TAILQ_FOREACH(b, &p->dedicated, link)
        if (b->role == BACKEND_PIN && b->state == BACKEND_UP &&
            !TAILQ_EMPTY(&b->pendq))
            unblock(p, m, b);
}
int mig_start(struct pool *p, struct ring *old, uint32_t *old_slot, const char *old_text,
              const char *new_text, char *err, size_t errlen)
{
    struct mig *m = p->mig;
    struct mig_op *op;

    if (rings_full(p, err, errlen))
        return -EBUSY;
    if (m == NULL) {
        m = p->mig = xcalloc(1, sizeof(*m));
        TAILQ_INIT(&m->open);
        TAILQ_INIT(&m->gated);
        TAILQ_INIT(&m->retry);
        m->started_ms = uv_now(cur_loop->uv);
        m->lead = cur_loop->id == 0;
    }
    memmove(&m->prior[1], &m->prior[0], m->nprior * sizeof(m->prior[0]));
    m->prior[0] = (struct mig_ring){old, old_slot, xstrdup(old_text)};
    free(m->text);
    m->text = xstrdup(new_text);
    m->nprior++;
    m->record_due = m->lead;            /* (the record is loop 0's) */
    m->state = MIG_DRAINING;
    m->loops_drained = 0;
    m->told_drained = false;
    p->epoch++;
    /* MIGRATEs of the last epoch not sent yet were for owners that may
     * have changed: their requests get -TRYAGAIN. */
    while ((op = TAILQ_FIRST(&m->retry)) != NULL) {
        TAILQ_REMOVE(&m->retry, op, link);
        mig_op_done(m, op, false);
    }
    while ((op = TAILQ_FIRST(&m->open)) != NULL) {
        TAILQ_REMOVE(&m->open, op, link);
        mig_op_done(m, op, false);
    }
    while ((op = TAILQ_FIRST(&m->gated)) != NULL) {
        TAILQ_REMOVE(&m->gated, op, link);
        mig_op_done(m, op, false);
    }
    if (m->lead)
        mig_mover_reset(p, m);
    m->tokens = 0;
    m->tick_ms = uv_now(cur_loop->uv);
    drain(p, m);
    if (m->lead)
        log_notice("pool '%s': epoch %u: keys move from %u earlier ring%s; %u servers to "
                   "walk", p->conf->name, p->epoch, m->nprior, m->nprior > 1 ? "s" : "",
                   m->nsrc);
    return 0;
}

void mig_copy(struct pool *p, const struct pool *src)
{
    const struct mig *from = src->mig;
    struct mig *m = p->mig = xcalloc(1, sizeof(*m));

    TAILQ_INIT(&m->open);
    TAILQ_INIT(&m->gated);
    TAILQ_INIT(&m->retry);
    m->started_ms = from->started_ms;
    m->tick_ms = from->tick_ms;
    m->state = from->state;
    m->text = xstrdup(from->text);
    for (uint32_t i = 0; i < from->nprior; i++) {
        const struct mig_ring *r = &from->prior[i];
        size_t n = ring_nservers(r->ring);
        uint32_t *slot = xmalloc(n * sizeof(*slot));
        memcpy(slot, r->slot, n * sizeof(*slot));
        m->prior[i] = (struct mig_ring){ring_ref(r->ring), slot, xstrdup(r->text)};
    }
    m->nprior = from->nprior;
    p->epoch = src->epoch;
    /* (No connection yet: nothing to drain. Loop 0 hears so at the first
     * tick, mig_tick.) */
}

void mig_free(struct pool *p)
{
    struct mig *m = p->mig;
    struct mig_op *op;

    if (m == NULL)
        return;
    while ((op = TAILQ_FIRST(&m->open)) != NULL) {
        TAILQ_REMOVE(&m->open, op, link);
        mig_op_free(op);
    }
    while ((op = TAILQ_FIRST(&m->gated)) != NULL) {
        TAILQ_REMOVE(&m->gated, op, link);
        mig_op_free(op);
    }
    while ((op = TAILQ_FIRST(&m->retry)) != NULL) {
        TAILQ_REMOVE(&m->retry, op, link);
        mig_op_free(op);
    }
    for (uint32_t i = 0; i < m->nprior; i++) {
        ring_unref(m->prior[i].ring);
        free(m->prior[i].slot);
        free(m->prior[i].text);
    }
    if (m->buf != NULL)
        mbuf_unref(m->buf);
    free(m->text);
    free(m->joined);
    mig_mover_free(m);
    free(m);
    p->mig = NULL;
}

/* Whether a loop's copy has no MIGRATE of its own left, sent or not. */
static void idle_one(struct pool *q, void *arg)
{
    const struct mig *m = q->mig;

    if (m != NULL && (m->inflight > 0 || !TAILQ_EMPTY(&m->retry) ||
                      !TAILQ_EMPTY(&m->gated) || !TAILQ_EMPTY(&m->open)))
        *(bool *)arg = false;
}

static void finish(struct pool *p, struct mig *m);
static void touch_sums(const struct pool *lead, uint64_t *touched, uint64_t *tryagain);

/* One loop's copy as the migration ends: loop 0's finishes (the log, the
 * record's DEL), every other drops its earlier rings. */
static void finish_one(struct pool *q, void *arg)
{
    (void)arg;
    if (q->mig == NULL)
        return;
    if (q->mig->lead) {
        finish(q, q->mig);
        return;
    }
    mig_free(q);
    q->replica_reads_at = uv_now(cur_loop->uv) + POOL_REPLICA_SETTLE_MS;
}

/* The mover is done (loop 0): once no loop has a MIGRATE of its own
 * left, every loop drops its earlier rings, in one world stop (a key no
 * loop moves on touch any more is one no loop will find elsewhere).
 * Whether it is done is asked again at a later tick if not. */
static void finish_all(struct pool *p)
{
    bool idle = true;

    loop_world_stop();
    pool_each(p, idle_one, &idle);
    if (idle)
        pool_each(p, finish_one, NULL);
    loop_world_go();
}

/* Every source walked, nothing in flight: the earlier rings go, and the
 * servers in none of the rings left are closed. */
static void finish(struct pool *p, struct mig *m)
{
    uint64_t moved = 0, touched, tryagain;

    for (uint32_t i = 0; i < m->nsrc; i++)
        moved += m->src[i].moved;
    touch_sums(p, &touched, &tryagain);     /* (every loop's: in finish_all's stop) */
    log_notice("pool '%s': epoch %u: migration complete in %.1f s: %" PRIu64 " keys moved "
               "by the mover, %" PRIu64 " on touch, %" PRIu64 " requests told TRYAGAIN",
               p->conf->name, p->epoch, (double)(uv_now(cur_loop->uv) - m->started_ms) / 1000,
               moved, touched, tryagain);
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\rshardis: pool '%s': migration complete%30s\n", p->conf->name, "");
    mig_record_send(p, m, false);
    mig_free(p);
    /* The new owners' replicas get the last keys moved a replication
     * delay after their masters: reads stay on the masters a while. */
    p->replica_reads_at = uv_now(cur_loop->uv) + POOL_REPLICA_SETTLE_MS;
    /* Servers in no ring are retired by the pool once the DELs are through. */
    for (uint32_t s = 0; s < p->nservers; s++)
        if (p->servers[s].mover != NULL)
            backend_close(p->servers[s].mover);     /* idle now; made again if needed */
}

/* A drain marker (PING), or a CLIENT UNBLOCK the drain waits for too. */
static int marker_reply(struct backend *b, struct req *r)
{
    struct pool *p = b->pool;

    if (r->u.mig.unblock_id != 0)
        mig_unblock_landed(p, b->server, r->u.mig.unblock_id);
    if (p->mig != NULL)
        p->mig->markers--;
    return 0;
}

/* ---- the clock ------------------------------------------------------------------------ */

static void progress(struct pool *p, struct mig *m, uint64_t now)
{
    uint64_t scanned = 0, moved = 0;
    uint32_t done = 0;

    for (uint32_t i = 0; i < m->nsrc; i++) {
        scanned += m->src[i].scanned;
        moved += m->src[i].moved;
        done += m->src[i].walk == WALK_DONE;
    }
    log_notice("pool '%s': migration %s: %u of %u servers walked, %" PRIu64 " keys scanned, "
               "%" PRIu64 " moved, %" PRIu64 " on touch", p->conf->name,
               m->paused ? "paused" : m->state == MIG_DRAINING ? "draining" : "moving",
               done, m->nsrc, scanned, moved, m->touched);
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\rshardis: pool '%s': %u/%u servers walked, %" PRIu64 " keys moved ",
                p->conf->name, done, m->nsrc, moved + m->touched);
    m->log_ms = now;
}

void mig_tick(struct pool *p, uint64_t now)
{
    struct mig *m = p->mig;
    struct mig_op *op, *next;
    bool all_done = true;
    int rate = p->conf->migration_rate;

    if (m->record_due)
        mig_record_send(p, m, true);
    unblock_late(p, m);
    if (m->state == MIG_DRAINING) {
        if (!m->lead && !m->told_drained && drained_here(m)) {
            m->told_drained = true;
            mig_mail(loop_at(0), drained_arrived, p);
        }
        if (!m->lead || !mig_drained(p) || m->hold) {
            /* Held too long (a server slow to answer): -TRYAGAIN, never
             * the old route. */
            while ((op = TAILQ_FIRST(&m->gated)) != NULL &&
                   now - op->gated_at > (uint64_t)p->conf->lock_max_ms) {
                TAILQ_REMOVE(&m->gated, op, link);
                mig_op_done(m, op, false);
            }
            return;
        }
        go_moving(m, now);
        for (uint32_t i = 1; i < loop_count(); i++)
            mig_mail(loop_at(i), moving_arrived, p);
        log_info("pool '%s': epoch %u: drained; keys move", p->conf->name, p->epoch);
    }
    for (op = TAILQ_FIRST(&m->retry); op != NULL; op = next) {
        next = TAILQ_NEXT(op, link);
        if (now >= op->retry_at) {
            TAILQ_REMOVE(&m->retry, op, link);
            mig_op_send(m, op);
        }
    }
    if (!m->lead)
        return;                         /* (the rest is the mover's) */
    if (now - m->log_ms >= MIG_LOG_MS)
        progress(p, m, now);
    if (now - m->record_ms >= MIG_RECORD_MS && m->writes == 0)
        mig_record_send(p, m, true);        /* the cursors so far */
    /* The mover's budget: rate keys/s, at most a second's worth saved up. */
    if (rate > 0) {
        m->tokens += (double)rate * (double)(now - m->tick_ms) / 1000;
        if (m->tokens > rate)
            m->tokens = rate;
    }
    m->tick_ms = now;
    for (uint32_t i = 0; i < m->nsrc; i++) {
        mig_advance(p, m, &m->src[i]);
        all_done = all_done && m->src[i].walk == WALK_DONE;
    }
    /* (The other loops are asked in a world stop: at most every
     * MIG_FINISH_MS while one still has a MIGRATE waiting for a retry.) */
    if (all_done && m->inflight == 0 && TAILQ_EMPTY(&m->retry) && TAILQ_EMPTY(&m->gated) &&
        now - m->finish_ms >= MIG_FINISH_MS) {
        m->finish_ms = now;
        finish_all(p);
    }
}

/* Requests for moving keys go on: every loop has drained. */
static void go_moving(struct mig *m, uint64_t now)
{
    struct mig_op *op;

    m->state = MIG_MOVING;
    m->moving_ms = now;
    while ((op = TAILQ_FIRST(&m->gated)) != NULL) {
        TAILQ_REMOVE(&m->gated, op, link);
        mig_op_send(m, op);
    }
}

/* ---- SHARD.MIGRATION ------------------------------------------------------------------ */

/* Keys moved on touch and requests told -TRYAGAIN, by every loop (in a
 * world stop); lead: loop 0's copy of the pool. */
static void touch_sums(const struct pool *lead, uint64_t *touched, uint64_t *tryagain)
{
    uint32_t n = loop_count() > 1 ? loop_count() : 1;
    size_t i = n > 1 ? (size_t)(lead - loop_at(0)->pools) : 0;

    *touched = *tryagain = 0;
    for (uint32_t l = 0; l < n; l++) {
        const struct mig *m = n > 1 ? loop_at(l)->pools[i].mig : lead->mig;
        if (m != NULL) {
            *touched += m->touched;
            *tryagain += m->tryagain;
        }
    }
}

static void command_on(struct client *c, struct req *r, struct args *a,
                       const struct pool *p);

/* Answered from loop 0's copy of the pool (the mover's, the group's),
 * in a world stop: a client on any loop sees one migration. */
void mig_command(struct client *c, struct req *r, struct args *a)
{
    loop_world_stop();
    command_on(c, r, a, lead_pool(c->pool));
    loop_world_go();
}

static void command_on(struct client *c, struct req *r, struct args *a,
                       const struct pool *p)
{
    struct mig *m = p->mig;

    if (a->argc != 2) {
        client_reply_error(c, r, "ERR wrong number of arguments for 'shard.migration' command");
        return;
    }
    if (args_is(a, 1, "pause") || args_is(a, 1, "resume")) {
        if (!p->conf->admin_commands) {     /* as SHARD.RELOAD: they steer the reshard */
            client_reply_error(c, r, "ERR 'shard.migration %s' is an admin command: it runs "
                               "only with admin_commands: true in pool '%s'",
                               args_is(a, 1, "pause") ? "pause" : "resume", p->conf->name);
            return;
        }
        if (m == NULL) {
            client_reply_error(c, r, "ERR no migration in progress");
            return;
        }
        m->paused = args_is(a, 1, "pause");
        log_notice("pool '%s': migration %s", p->conf->name, m->paused ? "paused" : "resumed");
        struct resp_w w = client_w(c, &r->rsp);
        resp_w_simple(&w, "OK");
        return;
    }
    if (!args_is(a, 1, "status")) {
        client_reply_error(c, r, "ERR SHARD.MIGRATION STATUS | PAUSE | RESUME");
        return;
    }
    /* The text is INFO-like lines ended by CRLF: a payload, not RESP. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = xopen_memstream(&buf, &len);
    uint64_t now = uv_now(cur_loop->uv);

    fprintf(f, "state:%s\r\nepoch:%u\r\n", m == NULL
            ? (strcmp(group_phase_name(p), "steady") ? "preparing" : "stable")
            : m->paused ? "paused" : m->state == MIG_DRAINING ? "draining" : "moving", p->epoch);
    if (p->group != NULL)
        group_status(p, f);
    if (m != NULL) {
        uint64_t scanned = 0, moved = 0, touched, tryagain;
        double secs = (double)(now - (m->moving_ms ? m->moving_ms : now)) / 1000;
        touch_sums(p, &touched, &tryagain);
        fprintf(f, "pending_rings:%u\r\nelapsed_s:%.1f\r\nmoved_on_touch:%" PRIu64 "\r\n"
                "tryagain:%" PRIu64 "\r\nsources:%u\r\n", m->nprior,
                (double)(now - m->started_ms) / 1000, touched, tryagain, m->nsrc);
        double eta = 0;
        bool known = true;
        for (uint32_t i = 0; i < m->nsrc; i++) {
            const struct mig_source *src = &m->src[i];
            double rate = secs > 0 ? (double)src->moved / secs : 0, done = mig_walked(src);
            double left = done > 0 ? secs * (1 - done) / done : -1;
            scanned += src->scanned;
            moved += src->moved;
            known = known && left >= 0;
            eta = left > eta ? left : eta;
            fprintf(f, "source_%u:server=%s,addr=%s,done=%d,cursor=%" PRIu64 ",scanned=%"
                    PRIu64 ",moved=%" PRIu64 ",errors=%" PRIu64 ",passes=%" PRIu64
                    ",rate=%.0f,big_keys=%" PRIu64 ",walked=%.2f,eta_s=", i,
                    p->servers[src->server].label, p->servers[src->server].addr, src->walk == WALK_DONE,
                    src->cursor, src->scanned, src->moved, src->errors, src->passes, rate,
                    src->bigs + src->nbig, done);
            if (left >= 0)
                fprintf(f, "%.0f\r\n", left);
            else
                fprintf(f, "?\r\n");
        }
        fprintf(f, "keys_scanned:%" PRIu64 "\r\nkeys_moved:%" PRIu64 "\r\n", scanned, moved);
        if (known)
            fprintf(f, "eta_s:%.0f\r\n", eta);
        else
            fprintf(f, "eta_s:?\r\n");
    }
    fclose(f);
    struct resp_w w = client_w(c, &r->rsp);
    resp_w_verbatim(&w, "txt", buf, len);
    free(buf);
}

void mig_progress(const struct pool *p, struct mig_progress *out)
{
    const struct mig *m;

    memset(out, 0, sizeof(*out));
    if (p->mig == NULL && (loop_count() == 1 || cur_loop->id == 0))
        return;                 /* (loop 0's copy has none: no loop has one) */
    loop_world_stop();          /* (loop 0's copy: the mover's; every loop's sums) */
    const struct pool *lead = lead_pool(p);
    if ((m = lead->mig) != NULL) {
        out->active = true;
        out->draining = m->state == MIG_DRAINING;
        touch_sums(lead, &out->moved_on_touch, &out->tryagain);
        for (uint32_t i = 0; i < m->nsrc; i++) {
            out->scanned += m->src[i].scanned;
            out->moved += m->src[i].moved;
        }
    }
    loop_world_go();
}

/* ---- the module ---------------------------------------------------------------------- */

static void mig_tick_hook(struct pool *p, uint64_t now)
{
    if (p->mig != NULL)
        mig_tick(p, now);
}

static void mig_moved_hook(struct pool *p, uint32_t server, const char *why)
{
    (void)why;
    mig_server_moved(p, server);        /* a walk of it: SCAN anew */
}

/* route_send while keys move: each of r's keys first (mig_key), then r. */
static void mig_route_send(struct client *c, struct req *r, struct args *a, struct backend *b)
{
    size_t len;
    const char *key;

    for (const struct keyspan *s = a != NULL ? a->keys.span : NULL;
         a != NULL && s < a->keys.span + a->keys.n; s++)
        for (uint32_t i = s->first; i <= s->last; i += s->step) {
            key = args_get(a, i, &len);
            mig_key(c, b->server, key, len);
        }
    mig_send(c, r, b);
}

const struct module mig_module = {
    .name = "mig",
    .pool_free = mig_free,
    .server_moved = mig_moved_hook,
    .tick = mig_tick_hook,
    .roles = &(const struct module_roles){
        .send_moving = mig_route_send,
        .told_tryagain = mig_told_tryagain,
    },
};

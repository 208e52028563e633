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
 * The state is kept on the servers too (the record, below), so a proxy
 * restarted mid-migration, even after kill -9, goes on from it. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy/backend.h"
#include "proxy/client.h"
#include "proxy/gate.h"
#include "proxy/group.h"
#include "proxy/log.h"
#include "proxy/mig.h"
#include "proxy/pool.h"
#include "proxy/proxy.h"
#include "proxy/route.h"
#include "proxy/util.h"

#define MIG_MAX_PRIOR       2
#define MIG_LOG_MS          5000        /* progress in the log this often */
#define MIG_SCAN_FACTOR     10          /* SCAN COUNT = batch * this */
#define MIG_BATCH_BYTES     (4 << 20)   /* a batch's keys' MEMORY USAGE, at most */
#define MIG_BIG_TIMEOUT     10          /* a big key's MIGRATE: migrate_timeout * this */
#define MIG_SLOW_MS         10          /* a mover command slower than this: the source
                                           rests as long before the next */
#define MIG_RETRY_MAX_MS    1000        /* a MIGRATE's retry backoff, at most */

enum mig_state { MIG_DRAINING, MIG_MOVING };

struct mig_ring {
    struct ring *ring;
    uint32_t    *slot;                  /* ring index -> server */
    char        *text;                  /* the config it came from (for the record) */
};

/* One MIGRATE: for requests (on touch) or a batch of the mover. */
struct mig_op {
    TAILQ_ENTRY(mig_op) link;           /* open, gated or retry list */
    struct pool       *pool;
    struct msg         cmd;             /* the request's bytes, kept for retries */
    struct msg         keys;            /* open: the "$len key" run so far */
    struct req       **wait;            /* on touch: the requests waiting */
    uint32_t           nwait, capwait;
    int32_t            src;             /* mover: its source's index; -1 on touch */
    uint32_t           from;            /* the server it runs on */
    uint32_t           to;              /* where the keys go */
    uint32_t           nkeys;
    uint32_t           tries;
    uint32_t           epoch;
    uint64_t           retry_at;
    uint64_t           gated_at;        /* when it began to wait for the drain */
    uint64_t           timeout;         /* MIGRATE's own, ms */
};

TAILQ_HEAD(mig_ops, mig_op);

/* A misplaced key found by SCAN, waiting to be sized or (big) moved. */
struct mig_key {
    char    *key;
    size_t   len;
    uint32_t owner;
};

/* A server the mover walks. One command of the mover at a time runs on
 * it: redis-server runs a connection's pipelined commands back to back,
 * so a client's request waits behind at most one SCAN or one batch. */
/* Where the mover is in walking one earlier owner (a source). advance()
 * moves it on; the replies to its SCAN and MEMORY USAGE move it out of
 * PAGE (page_over):
 *
 *   WALKING --scan_page--> PAGE --reply, cursor != 0--> WALKING
 *                            |
 *                            +--reply, cursor 0--> WALKED --batches answered,
 *                                                     big keys moved-->
 *                                 again (a batch failed): WALKING | DONE
 *
 * A failed page goes back to WALKING at the same cursor, after a pause
 * (wait_until). reset_sources starts every source WALKING at cursor 0. */
enum mig_walk {
    WALK_WALKING,                       /* between pages: the next SCAN when allowed */
    WALK_PAGE,                          /* a SCAN, or its keys' sizing, in flight */
    WALK_WALKED,                        /* back at cursor 0: its batches finish */
    WALK_DONE,                          /* walked with nothing failed: no key left */
};

struct mig_source {
    uint32_t server;
    uint64_t cursor;
    uint64_t resume;                    /* where a restarted proxy may go on: the cursor
                                           of the page in hand (pages before it moved) */
    uint32_t ops;                       /* its MIGRATEs queued or unanswered */
    struct mig_ops queue;               /* batches of the last SCAN not yet sent */
    enum mig_walk walk;
    bool     again;                     /* a batch failed: walk once more */
    uint64_t wait_until;                /* loop ms: rest until then (failed, or slow) */
    uint64_t sent_ms;                   /* when its command in flight was sent */
    struct mig_key *page;               /* the last SCAN's misplaced keys, being sized */
    uint32_t npage;
    struct mig_key *big;                /* keys over bigkey_bytes: moved last */
    uint32_t nbig, capbig;
    uint64_t bigs;                      /* big keys moved */
    uint64_t scanned, moved, errors, passes;
};

struct mig {
    struct mig_ring    prior[MIG_MAX_PRIOR];    /* [0] the most recent */
    uint32_t           nprior;
    enum mig_state     state;
    bool               paused;
    uint32_t           markers;         /* drain markers unanswered */
    uint32_t           writes;          /* record writes unanswered */
    bool               record_due;      /* write the record (before anything moves) */
    bool               hold;            /* group.c: keep the drain closed */
    char              *text;            /* the config routed by (the record's "conf") */
    uint64_t           record_ms;       /* when it was last written */
    uint32_t           inflight;        /* MIGRATEs sent, unanswered */
    struct mig_ops     open;            /* on touch: taking keys until the loop turn ends */
    struct mig_ops     gated;           /* waiting for the drain */
    struct mig_ops     retry;           /* waiting for their retry time */
    struct mig_source *src;
    uint32_t           nsrc;
    struct mbuf       *buf;             /* where the proxy's own bytes are written */
    double             tokens;          /* keys the mover may move now */
    uint64_t           tick_ms;
    uint64_t           started_ms, moving_ms, log_ms;
    uint64_t           touched;         /* keys moved on touch (+OK) */
    uint64_t           tryagain;        /* requests answered -TRYAGAIN */
};

static void op_send(struct mig *m, struct mig_op *op);
static void op_done(struct mig *m, struct mig_op *op, bool ok);
static void op_free(struct mig_op *op);
static void scan_page(struct pool *p, struct mig *m, struct mig_source *src);
static struct backend *mover_conn(struct pool *p, uint32_t server);

void mig_hold(struct pool *p, bool hold)
{
    if (p->mig != NULL)
        p->mig->hold = hold;
}

bool mig_drained(const struct pool *p)
{
    const struct mig *m = p->mig;

    return m == NULL || (m->markers == 0 && m->inflight == 0 && m->writes == 0 &&
                         !m->record_due);
}

/* Where the replies of mig.c's own requests go (see "replies" below). */
static req_reply_cb marker_reply, record_reply, mover_reply, migrate_reply;

/* ---- the record on the backends ------------------------------------------------------
 *
 * While keys move, "__shardis:ctl:<pool>" on every server involved holds
 * what a restarted proxy needs to route as this one does:
 *
 *   shardis-migration 1\n
 *   epoch <n>\n
 *   conf <len>\n<the config text keys move to>\n
 *   prior <len>\n<an earlier config text>\n        (newest first)
 *   cursor <addr> <cursor>\n                        (the mover's, per source)
 *
 * It is written before anything moves (the drain waits for it), again
 * every MIG_RECORD_MS with the cursors, and deleted when keys are done
 * moving. Clients cannot touch "__shardis:" keys; the mover never moves
 * them. */

#define MIG_RECORD_MS   1000
#define MIG_RECORD_PREFIX SHARDIS_RESERVED "ctl:"

static void record_key(const struct pool *p, char *out, size_t len)
{
    snprintf(out, len, "%s%s", MIG_RECORD_PREFIX, p->conf->name);
}

/* The record's text; the caller frees it. */
static char *record_text(const struct pool *p, const struct mig *m, size_t *len)
{
    char *buf = NULL;
    FILE *f = xopen_memstream(&buf, len);

    /* The config routed by: proxy.conf may be a reload's, waiting for the
     * other proxies. */
    fprintf(f, "shardis-migration 1\nepoch %u\nconf %zu\n", p->epoch, strlen(m->text));
    fputs(m->text, f);
    for (uint32_t i = 0; i < m->nprior; i++)
        fprintf(f, "\nprior %zu\n%s", strlen(m->prior[i].text), m->prior[i].text);
    fputc('\n', f);
    /* A walk to redo (a batch failed) or big keys still to move: from 0. */
    for (uint32_t i = 0; i < m->nsrc; i++) {
        const struct mig_source *src = &m->src[i];
        fprintf(f, "cursor %s %" PRIu64 "\n", p->servers[src->server].addr,
                src->walk == WALK_DONE || src->again || src->nbig > 0 ? 0 : src->resume);
    }
    fclose(f);
    return buf;
}

/* SET the record (or DEL it: set false) on every server that holds keys. */
static void record_send(struct pool *p, struct mig *m, bool set)
{
    char key[300], *text = NULL;
    size_t klen, tlen = 0;

    record_key(p, key, sizeof(key));
    klen = strlen(key);
    if (set)
        text = record_text(p, m, &tlen);
    for (uint32_t s = 0; s < p->nservers; s++) {
        if (!p->servers[s].active)
            continue;
        struct req *r = req_get();
        struct resp_w w = resp_w_on(&r->out, &m->buf, RESP2);
        resp_w_command(&w, set ? 3 : 2, (const char *const[]){set ? "SET" : "DEL", key, text},
                       (const size_t[]){3, klen, tlen});
        r->on_reply = record_reply;
        m->writes += set;
        backend_send(&p->servers[s].conns[0], r);
    }
    free(text);
    m->record_due = false;
    m->record_ms = uv_now(proxy.loop);
}

/* ---- starting and finishing ------------------------------------------------------- */

bool mig_can_start(const struct pool *p, char *err, size_t errlen)
{
    if (p->mig != NULL && p->mig->nprior == MIG_MAX_PRIOR) {
        snprintf(err, errlen, "reshard in progress (%d pending rings): wait for "
                 "SHARD.MIGRATION STATUS to finish before reloading again", MIG_MAX_PRIOR);
        return false;
    }
    return true;
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

/* Blocking commands can wait for ever: a marker behind them would too. */
static bool waits_long(const struct backend *b)
{
    const struct req *r;

    if (b->role != BACKEND_PIN)
        return true;
    TAILQ_FOREACH(r, &b->pendq, pq)
        if (r->blocking)
            return true;
    TAILQ_FOREACH(r, &b->sendq, bq)
        if (r->blocking)
            return true;
    return false;
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
        b->client_id == 0)
        return;
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
    backend_send(&p->servers[b->server].conns[0], u);
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
    for (uint32_t s = 0; s < p->nservers; s++)
        for (uint32_t k = 0; k < p->nconns; k++) {
            b = &p->servers[s].conns[k];
            if (!backend_idle(b) && b->state != BACKEND_FAILED)
                marker(m, b);
        }
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

static bool is_source(const struct mig *m, uint32_t server)
{
    for (uint32_t i = 0; i < m->nprior; i++)
        for (size_t k = 0; k < ring_nservers(m->prior[i].ring); k++)
            if (m->prior[i].slot[k] == server)
                return true;
    return false;
}

static void free_keys(struct mig_key *k, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        free(k[i].key);
    free(k);
}

static void free_sources(struct mig *m)
{
    struct mig_op *op;

    for (uint32_t i = 0; i < m->nsrc; i++) {
        while ((op = TAILQ_FIRST(&m->src[i].queue)) != NULL) {
            TAILQ_REMOVE(&m->src[i].queue, op, link);
            op_free(op);
        }
        free_keys(m->src[i].page, m->src[i].npage);
        free_keys(m->src[i].big, m->src[i].nbig);
    }
    free(m->src);
}

/* Walk every server of every earlier ring from the start. */
static void reset_sources(struct pool *p, struct mig *m)
{
    free_sources(m);
    m->src = NULL;
    m->nsrc = 0;
    for (uint32_t s = 0; s < p->nservers; s++) {
        if (!is_source(m, s))
            continue;
        m->src = xrealloc(m->src, (m->nsrc + 1) * sizeof(*m->src));
        m->src[m->nsrc++] = (struct mig_source){.server = s};
        p->servers[s].active = true;    /* it holds keys still */
    }
    for (uint32_t i = 0; i < m->nsrc; i++)  /* (heads point into the array) */
        TAILQ_INIT(&m->src[i].queue);
}

int mig_start(struct pool *p, struct ring *old, uint32_t *old_slot, const char *old_text,
              const char *new_text, char *err, size_t errlen)
{
    struct mig *m = p->mig;
    struct mig_op *op;

    if (!mig_can_start(p, err, errlen))
        return -EBUSY;
    if (m == NULL) {
        m = p->mig = xcalloc(1, sizeof(*m));
        TAILQ_INIT(&m->open);
        TAILQ_INIT(&m->gated);
        TAILQ_INIT(&m->retry);
        m->started_ms = uv_now(proxy.loop);
    }
    memmove(&m->prior[1], &m->prior[0], m->nprior * sizeof(m->prior[0]));
    m->prior[0] = (struct mig_ring){old, old_slot, xstrdup(old_text)};
    free(m->text);
    m->text = xstrdup(new_text);
    m->nprior++;
    m->record_due = true;
    p->epoch++;
    /* MIGRATEs of the last epoch not sent yet were for owners that may
     * have changed: their requests get -TRYAGAIN. */
    while ((op = TAILQ_FIRST(&m->retry)) != NULL) {
        TAILQ_REMOVE(&m->retry, op, link);
        op_done(m, op, false);
    }
    while ((op = TAILQ_FIRST(&m->open)) != NULL) {
        TAILQ_REMOVE(&m->open, op, link);
        op_done(m, op, false);
    }
    while ((op = TAILQ_FIRST(&m->gated)) != NULL) {
        TAILQ_REMOVE(&m->gated, op, link);
        op_done(m, op, false);
    }
    reset_sources(p, m);
    m->tokens = 0;
    m->tick_ms = uv_now(proxy.loop);
    drain(p, m);
    log_notice("pool '%s': epoch %u: keys move from %u earlier ring%s; %u servers to walk",
               p->conf->name, p->epoch, m->nprior, m->nprior > 1 ? "s" : "", m->nsrc);
    return 0;
}

static void op_free(struct mig_op *op)
{
    msg_release(&op->cmd);
    msg_release(&op->keys);
    free(op->wait);
    free(op);
}

void mig_free(struct pool *p)
{
    struct mig *m = p->mig;
    struct mig_op *op;

    if (m == NULL)
        return;
    while ((op = TAILQ_FIRST(&m->open)) != NULL) {
        TAILQ_REMOVE(&m->open, op, link);
        op_free(op);
    }
    while ((op = TAILQ_FIRST(&m->gated)) != NULL) {
        TAILQ_REMOVE(&m->gated, op, link);
        op_free(op);
    }
    while ((op = TAILQ_FIRST(&m->retry)) != NULL) {
        TAILQ_REMOVE(&m->retry, op, link);
        op_free(op);
    }
    for (uint32_t i = 0; i < m->nprior; i++) {
        ring_free(m->prior[i].ring);
        free(m->prior[i].slot);
        free(m->prior[i].text);
    }
    if (m->buf != NULL)
        mbuf_unref(m->buf);
    free(m->text);
    free_sources(m);
    free(m);
    p->mig = NULL;
}

/* Every source walked, nothing in flight: the earlier rings go, and the
 * servers in none of the rings left are closed. */
static void finish(struct pool *p, struct mig *m)
{
    uint64_t moved = 0;

    for (uint32_t i = 0; i < m->nsrc; i++)
        moved += m->src[i].moved;
    log_notice("pool '%s': epoch %u: migration complete in %.1f s: %" PRIu64 " keys moved "
               "by the mover, %" PRIu64 " on touch, %" PRIu64 " requests told TRYAGAIN",
               p->conf->name, p->epoch, (double)(uv_now(proxy.loop) - m->started_ms) / 1000,
               moved, m->touched, m->tryagain);
    if (isatty(STDERR_FILENO))
        fprintf(stderr, "\rshardis: pool '%s': migration complete%30s\n", p->conf->name, "");
    record_send(p, m, false);
    mig_free(p);
    /* Servers in no ring are retired by the pool once the DELs are through. */
    for (uint32_t s = 0; s < p->nservers; s++)
        if (p->servers[s].mover != NULL)
            backend_close(p->servers[s].mover);     /* idle now; made again if needed */
}

/* ---- on touch ---------------------------------------------------------------------- */

/* On touch, the keys of every request routed in one loop turn that go
 * from one server to another share one MIGRATE (m->open, sent by
 * mig_flush when the turn ends): fewer of them block the servers. The
 * ops the request being routed joined, until mig_send takes them
 * (single-threaded: a static list). */
static struct {
    struct mig_op **ops;
    uint32_t n, cap;
} joined;

/* op->cmd: "MIGRATE host port "" db timeout REPLACE [AUTH pw] KEYS", to
 * which the keys are appended. */
static void op_header(struct mig *m, struct pool *p, struct mig_op *op, long long timeout)
{
    const struct pool_server *d = &p->servers[op->to];
    const struct conf_pool *pc = p->conf;
    struct resp_w w = resp_w_on(&op->cmd, &m->buf, RESP2);
    uint32_t nkeys = op->nkeys;

    op->timeout = (uint64_t)timeout;
    resp_w_array(&w, 8 + nkeys + (pc->redis_auth != NULL ? 2 : 0));
    resp_w_bulk_str(&w, "MIGRATE");
    resp_w_bulk_str(&w, d->host);
    resp_w_bulk_ull(&w, d->port);
    resp_w_bulk(&w, "", 0);
    resp_w_bulk_ull(&w, (unsigned long long)pc->redis_db);
    resp_w_bulk_ull(&w, (unsigned long long)timeout);
    resp_w_bulk_str(&w, "REPLACE");
    if (pc->redis_auth != NULL) {
        resp_w_bulk_str(&w, "AUTH");
        resp_w_bulk_str(&w, pc->redis_auth);
    }
    resp_w_bulk_str(&w, "KEYS");
}

static void put_key(struct mig *m, struct msg *g, const char *key, size_t len)
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
        put_key(m, &op->keys, key, len);
        for (k = 0; k < joined.n && joined.ops[k] != op; k++)
            ;
        if (k == joined.n) {
            if (joined.n == joined.cap) {
                joined.cap = joined.cap ? 2 * joined.cap : 4;
                joined.ops = xrealloc(joined.ops, joined.cap * sizeof(*joined.ops));
            }
            joined.ops[joined.n++] = op;
        }
    }
}

/* Send (or hold for the drain) an op that takes no more keys. */
static void op_close(struct pool *p, struct mig *m, struct mig_op *op)
{
    TAILQ_REMOVE(&m->open, op, link);
    op_header(m, p, op, p->conf->migrate_timeout);
    msg_sub(&op->keys, 0, op->keys.len, &op->cmd);
    msg_release(&op->keys);
    if (m->state == MIG_DRAINING) {
        op->gated_at = uv_now(proxy.loop);
        TAILQ_INSERT_TAIL(&m->gated, op, link);
    } else {
        op_send(m, op);
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

    r->epoch = p->epoch;
    for (uint32_t k = 0; k < joined.n; k++) {
        struct mig_op *op = joined.ops[k];
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
    for (uint32_t k = 0; k < joined.n; k++)
        if (joined.ops[k]->nkeys >= (uint32_t)p->conf->migration_batch)
            op_close(p, p->mig, joined.ops[k]);
    joined.n = 0;
}

void mig_told_tryagain(struct pool *p)
{
    if (p->mig != NULL)
        p->mig->tryagain++;
}

/* ---- MIGRATE ------------------------------------------------------------------------ */

/* Send r with a deadline of its own (MIGRATE has its own timeout, longer
 * than the pool's, and the mover's commands need one even when the pool
 * has none): a server that stops answering fails them, not hangs them. */
static void send_by(struct backend *b, struct req *r, uint64_t ms)
{
    r->blocking = 1;                    /* no pool deadline: this one instead */
    backend_send(b, r);
    if (r->queued)
        r->deadline = uv_now(proxy.loop) + ms;
}

static void op_send(struct mig *m, struct mig_op *op)
{
    struct pool *p = op->pool;
    struct req *r = req_get();

    msg_sub(&op->cmd, 0, op->cmd.len, &r->out);
    r->on_reply = migrate_reply;
    r->u.mig.op = op;
    m->inflight++;
    send_by(op->src >= 0 ? mover_conn(p, op->from) : &p->servers[op->from].conns[0], r,
            op->timeout + 1000);
}

static struct client *client_of(const struct req *r)
{
    return r->client != NULL ? r->client : r->parent != NULL ? r->parent->client : NULL;
}

/* An on-touch MIGRATE is over: ok, or failed for good. */
static void op_done(struct mig *m, struct mig_op *op, bool ok)
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
    op_free(op);
}

static void advance(struct pool *p, struct mig *m, struct mig_source *src);
static struct mig_op *mover_op(struct pool *p, struct mig *m, struct mig_source *src,
                               uint32_t owner);
static void queue_op(struct pool *p, struct mig *m, struct mig_source *src, struct mig_op *op,
                     long long timeout);

/* A batch of the mover is over. One of an earlier epoch only counts as
 * finished (the drain waits for it); its source was walked anew. */
static void mover_op_done(struct pool *p, struct mig *m, struct mig_op *op, bool ok, bool nokey)
{
    struct mig_source *src = op->epoch == p->epoch ? &m->src[op->src] : NULL;
    uint32_t nkeys = op->nkeys;

    op_free(op);
    if (src == NULL)
        return;
    if (ok && !nokey)
        src->moved += nkeys;
    else if (!ok) {                     /* walk again, after a pause */
        src->errors++;
        src->again = true;
        src->wait_until = uv_now(proxy.loop) + 1000;
    }
    src->ops--;
    if ((op = TAILQ_FIRST(&src->queue)) != NULL) {
        TAILQ_REMOVE(&src->queue, op, link);
        op_send(m, op);
    }
    advance(p, m, src);
}

/* ---- the mover ------------------------------------------------------------------------ */

/* The mover's connection to server, made on first use. */
static struct backend *mover_conn(struct pool *p, uint32_t server)
{
    struct pool_server *ps = &p->servers[server];

    if (ps->mover == NULL) {
        ps->mover = xmalloc(sizeof(*ps->mover));
        backend_init(ps->mover, p, server);
    }
    return ps->mover;
}

/* The page in hand is over (its keys queued, or it failed): the walk is
 * back at cursor 0, or between pages. */
static void page_over(struct mig_source *src)
{
    src->walk = src->cursor == 0 ? WALK_WALKED : WALK_WALKING;
}

static void scan_page(struct pool *p, struct mig *m, struct mig_source *src)
{
    struct req *r = req_get();
    struct resp_w w = resp_w_on(&r->out, &m->buf, RESP2);

    resp_w_array(&w, 4);
    resp_w_bulk_str(&w, "SCAN");
    resp_w_bulk_ull(&w, src->cursor);
    resp_w_bulk_str(&w, "COUNT");
    resp_w_bulk_ull(&w, (unsigned long long)(p->conf->migration_batch * MIG_SCAN_FACTOR));
    r->on_reply = mover_reply;
    r->u.mig.mv.src = (uint32_t)(src - m->src);
    r->u.mig.mv.epoch = p->epoch;
    src->resume = src->cursor;          /* every earlier page is done (ops == 0) */
    src->walk = WALK_PAGE;              /* until the page's keys are sized and queued */
    src->sent_ms = uv_now(proxy.loop);
    send_by(mover_conn(p, src->server), r, (uint64_t)p->conf->migrate_timeout + 1000);
}

/* Move a source's walk on: the next SCAN as soon as the last one's batches
 * are sent (they run in order on the mover's connection, and deleting keys
 * does not disturb a SCAN), budget and pause allowing; and once the walk
 * is back at cursor 0 with every batch answered, the pass is over. */
static void advance(struct pool *p, struct mig *m, struct mig_source *src)
{
    if (src->walk == WALK_DONE || src->walk == WALK_PAGE)
        return;
    if (src->walk == WALK_WALKED) {
        if (src->ops > 0)
            return;
        if (src->nbig > 0) {            /* the big keys, one at a time, last */
            log_notice("pool '%s': %s walked; now its %u big key%s (over %d bytes), one at a "
                       "time", p->conf->name, p->servers[src->server].label, src->nbig,
                       src->nbig > 1 ? "s" : "", p->conf->bigkey_bytes);
            for (uint32_t i = 0; i < src->nbig; i++) {
                struct mig_op *op = mover_op(p, m, src, src->big[i].owner);
                put_key(m, &op->keys, src->big[i].key, src->big[i].len);
                op->nkeys = 1;
                queue_op(p, m, src, op, (long long)p->conf->migrate_timeout * MIG_BIG_TIMEOUT);
                src->bigs++;
            }
            free_keys(src->big, src->nbig);
            src->big = NULL;
            src->nbig = src->capbig = 0;
            struct mig_op *op = TAILQ_FIRST(&src->queue);
            TAILQ_REMOVE(&src->queue, op, link);
            op_send(m, op);
            return;
        }
        src->walk = WALK_WALKING;
        src->passes++;
        if (src->again) {               /* some batch failed: walk again */
            src->again = false;
            return;
        }
        src->walk = WALK_DONE;
        log_info("pool '%s': %s walked: %" PRIu64 " keys scanned, %" PRIu64 " moved",
                 p->conf->name, p->servers[src->server].label, src->scanned, src->moved);
        return;
    }
    if (!m->paused && m->state == MIG_MOVING && uv_now(proxy.loop) >= src->wait_until &&
        src->ops == 0 && (p->conf->migration_rate == 0 || m->tokens > 0))
        scan_page(p, m, src);
}

/* MEMORY USAGE of each key, 0 for one gone since: one script call per page. */
static const char size_script[] =
    "local r = {} for i, k in ipairs(KEYS) do "
    "r[i] = redis.call('MEMORY', 'USAGE', k, 'SAMPLES', '5') or 0 end return r";

static void send_sizing(struct pool *p, struct mig *m, struct mig_source *src)
{
    struct req *r = req_get();
    struct resp_w w = resp_w_on(&r->out, &m->buf, RESP2);

    resp_w_array(&w, (long long)src->npage + 3);
    resp_w_bulk_str(&w, "EVAL");
    resp_w_bulk(&w, size_script, sizeof(size_script) - 1);
    resp_w_bulk_ull(&w, src->npage);
    for (uint32_t i = 0; i < src->npage; i++)
        resp_w_bulk(&w, src->page[i].key, src->page[i].len);
    r->on_reply = mover_reply;
    r->u.mig.mv.src = (uint32_t)(src - m->src);
    r->u.mig.mv.epoch = p->epoch;
    r->u.mig.mv.sizing = 1;
    src->sent_ms = uv_now(proxy.loop);
    send_by(mover_conn(p, src->server), r, (uint64_t)p->conf->migrate_timeout + 1000);
}

/* A server's SCAN cursor, the bulk v: decimal digits, within 64 bits. */
static bool cursor_of(const struct resp_rd *rd, const struct resp_val *v, unsigned long long *c)
{
    char buf[24], *end;

    if (v->type != RESP_BULK || v->nil || v->len == 0 || v->len >= sizeof(buf))
        return false;
    buf[resp_rd_copy(rd, v, buf, v->len)] = '\0';
    if (buf[0] < '0' || buf[0] > '9')
        return false;
    errno = 0;
    *c = strtoull(buf, &end, 10);
    return *end == '\0' && errno == 0;
}

/* A SCAN reply: "*2\r\n$c\r\n<cursor>\r\n*n\r\n$...": its misplaced keys
 * are sized next. */
static void scan_reply(struct pool *p, struct mig *m, struct mig_source *src, struct msg *rsp)
{
    char head[61], key[512];
    struct resp_rd rd;
    struct resp_val v, cur, keys;
    unsigned long long c = 0;

    resp_rd_init(&rd, rsp);
    if (resp_rd_next(&rd, &v) < 0 || v.type != RESP_ARRAY || v.n != 2 ||
        resp_rd_next(&rd, &cur) < 0 || !cursor_of(&rd, &cur, &c) ||
        resp_rd_next(&rd, &keys) < 0 || keys.type != RESP_ARRAY || keys.nil) {
        size_t n = rsp->len < sizeof(head) - 1 ? rsp->len : sizeof(head) - 1;
        msg_copy(rsp, 0, n, head);      /* the bytes as they came, for the log */
        head[n] = '\0';
        log_warn("pool '%s': mover: %s answered SCAN with %.60s", p->conf->name,
                 p->servers[src->server].label, head);
        src->errors++;
        src->again = true;
        src->wait_until = uv_now(proxy.loop) + 1000;
        page_over(src);
        advance(p, m, src);
        return;
    }
    src->cursor = c;
    src->page = xmalloc((keys.n > 0 ? (size_t)keys.n : 1) * sizeof(*src->page));
    src->npage = 0;
    for (long long i = 0; i < keys.n && resp_rd_next(&rd, &v) == 0 && v.type == RESP_BULK &&
                          !v.nil; i++) {
        uint32_t owner;
        char *heap = NULL;
        const char *s = resp_rd_str(&rd, &v, key, sizeof(key));
        if (s == NULL)
            resp_rd_copy(&rd, &v, heap = xmalloc(v.len), v.len);
        s = s != NULL ? s : heap;
        src->scanned++;
        if (route_internal(s, v.len)) {
            free(heap);
            continue;                   /* shardis's own: stays where it is */
        }
        owner = p->slot[ring_lookup(p->ring, s, v.len)];
        if (owner == src->server) {
            free(heap);
            continue;
        }
        struct mig_key *k = &src->page[src->npage++];
        k->key = xmalloc(v.len + 1);
        memcpy(k->key, s, v.len);
        k->len = v.len;
        k->owner = owner;
        free(heap);
    }
    if (src->npage > 0) {
        send_sizing(p, m, src);         /* still WALK_PAGE */
        return;
    }
    free_keys(src->page, 0);
    src->page = NULL;
    page_over(src);
    advance(p, m, src);
}

static struct mig_op *mover_op(struct pool *p, struct mig *m, struct mig_source *src,
                               uint32_t owner)
{
    struct mig_op *op = xcalloc(1, sizeof(*op));

    op->pool = p;
    op->src = (int32_t)(src - m->src);
    op->from = src->server;
    op->to = owner;
    op->epoch = p->epoch;
    return op;
}

static void queue_op(struct pool *p, struct mig *m, struct mig_source *src, struct mig_op *op,
                     long long timeout)
{
    op_header(m, p, op, timeout);
    msg_sub(&op->keys, 0, op->keys.len, &op->cmd);
    msg_release(&op->keys);
    src->ops++;
    m->tokens -= op->nkeys;
    TAILQ_INSERT_TAIL(&src->queue, op, link);
}

/* The sizes of a page's keys ("*n\r\n:size\r\n..."): batches per owner, of
 * at most migration_batch keys and MIG_BATCH_BYTES; keys over bigkey_bytes
 * wait for the end of the walk. */
static void sizing_reply(struct pool *p, struct mig *m, struct mig_source *src, struct msg *rsp)
{
    uint32_t batch = (uint32_t)p->conf->migration_batch;
    struct mig_op **to = xcalloc(p->nservers, sizeof(*to));
    uint64_t *bytes = xcalloc(p->nservers, sizeof(*bytes));
    struct mig_op *op;
    struct resp_rd rd;
    struct resp_val v;
    /* Sizes not given (not an array, or a value that is not an integer:
     * then none after it either) count as 0. */
    long long left = 0;

    resp_rd_init(&rd, rsp);
    if (resp_rd_next(&rd, &v) == 0 && v.type == RESP_ARRAY)
        left = v.n;
    for (uint32_t i = 0; i < src->npage; i++) {
        struct mig_key *k = &src->page[i];
        unsigned long long size = 0;
        if (left > 0 && resp_rd_next(&rd, &v) == 0 && v.type == RESP_INTEGER) {
            size = v.n > 0 ? (unsigned long long)v.n : 0;
            left--;
        } else {
            left = 0;
        }
        if (size > (unsigned long long)p->conf->bigkey_bytes) {
            if (src->nbig == src->capbig) {
                src->capbig = src->capbig ? 2 * src->capbig : 8;
                src->big = xrealloc(src->big, src->capbig * sizeof(*src->big));
            }
            src->big[src->nbig++] = *k;     /* takes the key */
            k->key = NULL;
            continue;
        }
        if (to[k->owner] != NULL && bytes[k->owner] + size > MIG_BATCH_BYTES) {
            queue_op(p, m, src, to[k->owner], p->conf->migrate_timeout);
            to[k->owner] = NULL;
        }
        if (to[k->owner] == NULL) {
            to[k->owner] = mover_op(p, m, src, k->owner);
            bytes[k->owner] = 0;
        }
        op = to[k->owner];
        put_key(m, &op->keys, k->key, k->len);
        bytes[k->owner] += size;
        if (++op->nkeys == batch) {
            queue_op(p, m, src, op, p->conf->migrate_timeout);
            to[k->owner] = NULL;
        }
    }
    for (uint32_t d = 0; d < p->nservers; d++)
        if (to[d] != NULL)
            queue_op(p, m, src, to[d], p->conf->migrate_timeout);
    free(to);
    free(bytes);
    free_keys(src->page, src->npage);
    src->page = NULL;
    src->npage = 0;
    if ((op = TAILQ_FIRST(&src->queue)) != NULL) {
        TAILQ_REMOVE(&src->queue, op, link);
        op_send(m, op);
    }
    page_over(src);
    advance(p, m, src);
}

/* ---- replies ------------------------------------------------------------------------ */

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

/* SET or DEL of the migration's record. */
static int record_reply(struct backend *b, struct req *r)
{
    struct pool *p = b->pool;
    struct mig *m = p->mig;
    char head[64];
    char type = resp_rd_head(&r->rsp, head, sizeof(head));

    if (m == NULL)
        return 0;
    if (!(type == RESP_SIMPLE && !strcmp(head, "OK")) && type != RESP_INTEGER)
        log_warn("pool '%s': cannot write the migration record on %s: %s", p->conf->name,
                 p->servers[b->server].label, r->rsp.len == 0 ? b->reason : head);
    if (m->writes > 0)
        m->writes--;
    return 0;
}

/* The mover's SCAN page, or the MEMORY USAGE of its keys. */
static int mover_reply(struct backend *b, struct req *r)
{
    struct pool *p = b->pool;
    struct mig *m = p->mig;
    char head[64];
    char type = resp_rd_head(&r->rsp, head, sizeof(head));

    if (m == NULL || r->u.mig.mv.epoch != p->epoch)
        return 0;                       /* walked anew since */
    struct mig_source *src = &m->src[r->u.mig.mv.src];
    if (r->rsp.len == 0 || type == RESP_ERROR) {
        src->errors++;
        free_keys(src->page, src->npage);
        src->page = NULL;
        src->npage = 0;
        if (r->u.mig.mv.sizing)
            src->again = true;          /* the page's keys: on the next pass */
        src->walk = WALK_WALKING;       /* the page is asked again, in a second */
        src->wait_until = uv_now(proxy.loop) + 1000;
        log_warn("pool '%s': mover: SCAN on %s failed: %s", p->conf->name,
                 p->servers[src->server].label, r->rsp.len == 0 ? b->reason : head);
        return 0;
    }
    uint64_t rtt = uv_now(proxy.loop) - src->sent_ms;
    if (rtt > MIG_SLOW_MS)              /* the server is slow: rest as long */
        src->wait_until = uv_now(proxy.loop) + rtt;
    if (r->u.mig.mv.sizing)
        sizing_reply(p, m, src, &r->rsp);
    else
        scan_reply(p, m, src, &r->rsp);
    return 0;
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
            mover_op_done(p, m, op, true, nokey);
        else {
            m->touched += ok ? op->nkeys : 0;
            op_done(m, op, true);
        }
        return 0;
    }
    log_warn("pool '%s': MIGRATE of %u key%s from %s to their new owner failed: %s",
                 p->conf->name, op->nkeys, op->nkeys > 1 ? "s" : "",
                 p->servers[op->from].label, r->rsp.len == 0 ? b->reason : head);
    if (op->src >= 0) {
        mover_op_done(p, m, op, false, false);
        return 0;
    }
    if (op->tries < (uint32_t)p->conf->migrate_retries && op->epoch == p->epoch) {
        /* Backoff 0, 10, 20, 40 ... ms, as codis retries a key in flight, up
         * to MIG_RETRY_MAX_MS (migrate_retries may be 100). */
        uint64_t backoff = op->tries == 0 ? 0 : 10ull << (op->tries < 20 ? op->tries - 1 : 19);
        op->retry_at = uv_now(proxy.loop) +
                       (backoff < MIG_RETRY_MAX_MS ? backoff : MIG_RETRY_MAX_MS);
        op->tries++;
        TAILQ_INSERT_TAIL(&m->retry, op, link);
        return 0;
    }
    op_done(m, op, false);
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
        record_send(p, m, true);
    unblock_late(p, m);
    if (m->state == MIG_DRAINING) {
        if (m->markers > 0 || m->inflight > 0 || m->writes > 0 || m->record_due || m->hold) {
            /* Held too long (a server slow to answer): -TRYAGAIN, never
             * the old route. */
            while ((op = TAILQ_FIRST(&m->gated)) != NULL &&
                   now - op->gated_at > (uint64_t)p->conf->lock_max_ms) {
                TAILQ_REMOVE(&m->gated, op, link);
                op_done(m, op, false);
            }
            return;
        }
        m->state = MIG_MOVING;
        m->moving_ms = now;
        while ((op = TAILQ_FIRST(&m->gated)) != NULL) {
            TAILQ_REMOVE(&m->gated, op, link);
            op_send(m, op);
        }
        log_info("pool '%s': epoch %u: drained; keys move", p->conf->name, p->epoch);
    }
    for (op = TAILQ_FIRST(&m->retry); op != NULL; op = next) {
        next = TAILQ_NEXT(op, link);
        if (now >= op->retry_at) {
            TAILQ_REMOVE(&m->retry, op, link);
            op_send(m, op);
        }
    }
    if (now - m->log_ms >= MIG_LOG_MS)
        progress(p, m, now);
    if (now - m->record_ms >= MIG_RECORD_MS && m->writes == 0)
        record_send(p, m, true);        /* the cursors so far */
    /* The mover's budget: rate keys/s, at most a second's worth saved up. */
    if (rate > 0) {
        m->tokens += (double)rate * (double)(now - m->tick_ms) / 1000;
        if (m->tokens > rate)
            m->tokens = rate;
    }
    m->tick_ms = now;
    for (uint32_t i = 0; i < m->nsrc; i++) {
        advance(p, m, &m->src[i]);
        all_done = all_done && m->src[i].walk == WALK_DONE;
    }
    if (all_done && m->inflight == 0 && TAILQ_EMPTY(&m->retry) && TAILQ_EMPTY(&m->gated))
        finish(p, m);
}

/* ---- SHARD.MIGRATION ------------------------------------------------------------------ */

/* How much of a server a SCAN walk has covered, from its cursor: Redis
 * walks its table in reversed-bit order, so the cursor's bits reversed,
 * read as a fraction of 2^64, are the part done (exact while the table
 * does not resize). */
static double walked(const struct mig_source *src)
{
    uint64_t c = src->cursor, r = 0;

    if (src->walk == WALK_DONE)
        return 1;
    if (c == 0)
        return 0;                       /* not begun (or begun again) */
    for (int i = 0; i < 64; i++, c >>= 1)
        r = (r << 1) | (c & 1);
    return (double)r / 18446744073709551616.0;
}

void mig_command(struct client *c, struct req *r, struct args *a)
{
    struct pool *p = c->pool;
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
    uint64_t now = uv_now(proxy.loop);

    fprintf(f, "state:%s\r\nepoch:%u\r\n", m == NULL
            ? (strcmp(group_phase_name(p), "steady") ? "preparing" : "stable")
            : m->paused ? "paused" : m->state == MIG_DRAINING ? "draining" : "moving", p->epoch);
    if (p->group != NULL)
        group_status(p, f);
    if (m != NULL) {
        uint64_t scanned = 0, moved = 0;
        double secs = (double)(now - (m->moving_ms ? m->moving_ms : now)) / 1000;
        fprintf(f, "pending_rings:%u\r\nelapsed_s:%.1f\r\nmoved_on_touch:%" PRIu64 "\r\n"
                "tryagain:%" PRIu64 "\r\nsources:%u\r\n", m->nprior,
                (double)(now - m->started_ms) / 1000, m->touched, m->tryagain, m->nsrc);
        double eta = 0;
        bool known = true;
        for (uint32_t i = 0; i < m->nsrc; i++) {
            const struct mig_source *src = &m->src[i];
            double rate = secs > 0 ? (double)src->moved / secs : 0, done = walked(src);
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

/* ---- taking a recorded migration up again ------------------------------------------
 *
 * At start the loop is not running yet: the record is read with
 * backend_sync_call, a blocking request with a second's timeout. */

/* The record's parts: pointers into text. */
struct record {
    unsigned    epoch;
    const char *conf;
    size_t      conflen;
    const char *prior[MIG_MAX_PRIOR];
    size_t      priorlen[MIG_MAX_PRIOR];
    uint32_t    nprior;
    const char *cursors;            /* "cursor <addr> <n>" lines */
};

static int record_parse(char *text, size_t len, struct record *rec)
{
    char *p = text, *end = text + len, *nl;
    size_t n;

    memset(rec, 0, sizeof(*rec));
    if (sscanf(p, "shardis-migration 1\nepoch %u\nconf %zu\n", &rec->epoch, &n) != 2 ||
        (p = strstr(p, "\nconf ")) == NULL || (p = strchr(p + 1, '\n')) == NULL ||
        (size_t)(end - ++p) < n)
        return -1;
    rec->conf = p;
    rec->conflen = n;
    p += n;
    while (p < end && *p == '\n' && p + 7 < end && !strncmp(p + 1, "prior ", 6)) {
        if (rec->nprior == MIG_MAX_PRIOR || sscanf(p + 7, "%zu", &n) != 1 ||
            (nl = memchr(p + 7, '\n', (size_t)(end - p - 7))) == NULL ||
            (size_t)(end - nl - 1) < n)
            return -1;
        rec->prior[rec->nprior] = nl + 1;
        rec->priorlen[rec->nprior++] = n;
        p = nl + 1 + n;
    }
    rec->cursors = p < end ? p + 1 : end;
    return rec->nprior > 0 ? 0 : -1;
}

/* Parse a recorded config text and find p's pool in it. */
static int record_conf(const struct pool *p, const char *text, size_t len, struct conf **cf,
                       const struct conf_pool **pc, char *err, size_t errlen)
{
    char why[CONF_ERRLEN];

    if (conf_parse(cf, "(the migration record)", text, len, why, sizeof(why)) < 0) {
        snprintf(err, errlen, "the migration record on the backends holds a config that "
                 "does not parse: %s", why);
        return -EINVAL;
    }
    if ((*pc = conf_pool(*cf, p->conf->name)) == NULL) {
        snprintf(err, errlen, "the migration record on the backends has no pool '%s'",
                 p->conf->name);
        conf_free(*cf);
        *cf = NULL;
        return -EINVAL;
    }
    return 0;
}

int mig_recover(struct pool *p, bool *taken, char *err, size_t errlen)
{
    char key[300], *best = NULL;
    struct record rec = {0}, r;
    struct conf *cf = NULL;
    const struct conf_pool *pc;
    int rc;

    *taken = false;
    record_key(p, key, sizeof(key));
    for (uint32_t s = 0; s < p->nservers; s++) {
        size_t len;
        char *v = p->servers[s].active
                  ? backend_sync_call(&p->servers[s], p->conf, 2, (const char *[]){"GET", key},
                                      &len)
                  : NULL;
        if (v == NULL)
            continue;
        if (record_parse(v, len, &r) == 0 && (best == NULL || r.epoch > rec.epoch)) {
            free(best);
            best = v;
            rec = r;
        } else {
            free(v);
        }
    }
    if (best == NULL)
        return 0;
    log_notice("pool '%s': a migration was under way (epoch %u, %u earlier ring%s): taking "
               "it up again", p->conf->name, rec.epoch, rec.nprior, rec.nprior > 1 ? "s" : "");
    if ((rc = record_conf(p, rec.conf, rec.conflen, &cf, &pc, err, errlen)) < 0)
        goto out;
    /* The target ring: the record's, whatever the file says now. */
    struct ring *ring;
    char why[CONF_ERRLEN];
    if ((rc = conf_pool_ring(pc, &ring, why, sizeof(why))) < 0) {
        snprintf(err, errlen, "the migration record's servers: %s", why);
        goto out;
    }
    ring_free(pool_set_ring(p, pc, ring, NULL));
    p->epoch = rec.epoch - rec.nprior;
    for (uint32_t i = rec.nprior; i-- > 0; ) {      /* oldest first */
        struct conf *pcf;
        const struct conf_pool *ppc;
        struct ring *pr;
        if ((rc = record_conf(p, rec.prior[i], rec.priorlen[i], &pcf, &ppc, err, errlen)) < 0)
            goto out;
        if ((rc = conf_pool_ring(ppc, &pr, why, sizeof(why))) < 0) {
            snprintf(err, errlen, "the migration record's earlier servers: %s", why);
            conf_free(pcf);
            goto out;
        }
        uint32_t *slot = xmalloc(ppc->nservers * sizeof(*slot));
        for (size_t k = 0; k < ppc->nservers; k++)
            slot[k] = pool_server_at(p, &ppc->servers[k]);
        char *ptext = xmalloc(rec.priorlen[i] + 1);
        memcpy(ptext, rec.prior[i], rec.priorlen[i]);
        ptext[rec.priorlen[i]] = '\0';
        mig_start(p, pr, slot, ptext, cf->text, why, sizeof(why));
        free(ptext);
        conf_free(pcf);
    }
    /* The mover goes on from the recorded cursors. */
    for (const char *c = rec.cursors; c != NULL && !strncmp(c, "cursor ", 7); ) {
        char addr[256];
        unsigned long long cur;
        if (sscanf(c, "cursor %255s %llu", addr, &cur) == 2)
            for (uint32_t i = 0; i < p->mig->nsrc; i++)
                if (!strcmp(p->servers[p->mig->src[i].server].addr, addr))
                    p->mig->src[i].cursor = cur;
        c = strchr(c, '\n');
        c = c != NULL ? c + 1 : NULL;
    }
    *taken = true;
    rc = 0;
out:
    free(best);
    if (rc == 0) {
        /* The record's config is the running one now: every pool points
         * into it (the file is read again as a reload). */
        struct conf *was = proxy.conf;
        free(cf->path);
        cf->path = xstrdup(was->path);
        for (size_t i = 0; i < proxy.npools; i++) {
            const struct conf_pool *np = conf_pool(cf, proxy.pools[i].conf->name);
            if (np != NULL)
                proxy.pools[i].conf = np;
        }
        proxy.conf = cf;
        proxy_conf_done(was);
        return 0;
    }
    proxy_conf_done(cf);                /* p->conf may point into it already */
    return rc;
}

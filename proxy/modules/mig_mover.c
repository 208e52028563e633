/* mig_mover.c -- the mover: in the background, every earlier owner (a
 * source) is walked with SCAN; each key is placed by the router's own
 * function, sized (MEMORY USAGE) and moved in batches (migration_batch
 * keys, MIG_BATCH_BYTES), at most migration_rate keys/s, big keys last.
 * SCAN returns every key present for the whole walk, and after the drain
 * no key is created on an earlier owner for a moving arc, so one pass
 * finds them all; a pass with errors is followed by another.
 *
 * One command of the mover at a time runs on a source, on a connection of
 * its own (pool_server.mover): redis-server runs a connection's pipelined
 * commands back to back, so a client's request waits behind at most one
 * SCAN or one batch. */
#include <errno.h>
#include <inttypes.h>
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

static req_reply_cb mover_reply;
static struct mig_op *mover_op(struct pool *p, struct mig *m, struct mig_source *src,
                               uint32_t owner);
static void queue_op(struct mig *m, struct mig_source *src, struct mig_op *op,
                     long long timeout);
static void free_keys(struct mig_key *k, uint32_t n);

/* The mover's connection to server, made on first use. */
struct backend *mig_mover_conn(struct pool *p, uint32_t server)
{
    struct pool_server *ps = &p->servers[server];

    if (ps->mover == NULL) {
        ps->mover = xmalloc(sizeof(*ps->mover));
        backend_init(ps->mover, p, server);
        ps->mover->as = BACKEND_AS_INTERNAL;
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
    src->sent_ms = uv_now(cur_loop->uv);
    backend_send_by(mig_mover_conn(p, src->server), r, (uint64_t)p->conf->migrate_timeout + 1000);
}

/* Move a source's walk on: the next SCAN as soon as the last one's batches
 * are sent (they run in order on the mover's connection, and deleting keys
 * does not disturb a SCAN), budget and pause allowing; and once the walk
 * is back at cursor 0 with every batch answered, the pass is over. */
void mig_advance(struct pool *p, struct mig *m, struct mig_source *src)
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
                mig_put_key(m, &op->keys, src->big[i].key, src->big[i].len);
                op->nkeys = 1;
                queue_op(m, src, op, (long long)p->conf->migrate_timeout * MIG_BIG_TIMEOUT);
                src->bigs++;
            }
            free_keys(src->big, src->nbig);
            src->big = NULL;
            src->nbig = src->capbig = 0;
            struct mig_op *op = TAILQ_FIRST(&src->queue);
            TAILQ_REMOVE(&src->queue, op, link);
            mig_op_send(m, op);
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
    if (!m->paused && m->state == MIG_MOVING && uv_now(cur_loop->uv) >= src->wait_until &&
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
    src->sent_ms = uv_now(cur_loop->uv);
    backend_send_by(mig_mover_conn(p, src->server), r, (uint64_t)p->conf->migrate_timeout + 1000);
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
        src->wait_until = uv_now(cur_loop->uv) + 1000;
        page_over(src);
        mig_advance(p, m, src);
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
    mig_advance(p, m, src);
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

static void queue_op(struct mig *m, struct mig_source *src, struct mig_op *op,
                     long long timeout)
{
    op->timeout = (uint64_t)timeout;
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
            queue_op(m, src, to[k->owner], p->conf->migrate_timeout);
            to[k->owner] = NULL;
        }
        if (to[k->owner] == NULL) {
            to[k->owner] = mover_op(p, m, src, k->owner);
            bytes[k->owner] = 0;
        }
        op = to[k->owner];
        mig_put_key(m, &op->keys, k->key, k->len);
        bytes[k->owner] += size;
        if (++op->nkeys == batch) {
            queue_op(m, src, op, p->conf->migrate_timeout);
            to[k->owner] = NULL;
        }
    }
    for (uint32_t d = 0; d < p->nservers; d++)
        if (to[d] != NULL)
            queue_op(m, src, to[d], p->conf->migrate_timeout);
    free(to);
    free(bytes);
    free_keys(src->page, src->npage);
    src->page = NULL;
    src->npage = 0;
    if ((op = TAILQ_FIRST(&src->queue)) != NULL) {
        TAILQ_REMOVE(&src->queue, op, link);
        mig_op_send(m, op);
    }
    page_over(src);
    mig_advance(p, m, src);
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

void mig_mover_free(struct mig *m)
{
    struct mig_op *op;

    for (uint32_t i = 0; i < m->nsrc; i++) {
        while ((op = TAILQ_FIRST(&m->src[i].queue)) != NULL) {
            TAILQ_REMOVE(&m->src[i].queue, op, link);
            mig_op_free(op);
        }
        free_keys(m->src[i].page, m->src[i].npage);
        free_keys(m->src[i].big, m->src[i].nbig);
    }
    free(m->src);
}

/* Walk every server of every earlier ring from the start. */
void mig_mover_reset(struct pool *p, struct mig *m)
{
    mig_mover_free(m);
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

void mig_server_moved(struct pool *p, uint32_t server)
{
    struct mig *m = p->mig;

    for (uint32_t i = 0; m != NULL && i < m->nsrc; i++) {
        struct mig_source *src = &m->src[i];
        if (src->server != server)
            continue;
        /* Keys that moved from the old master are gone from the new one
         * too (or were never there, if not replicated: then the writes
         * that made them were not either); SCAN again from the start. */
        src->cursor = 0;
        src->resume = 0;
        m->record_due = true;           /* a restart must not take up the old cursor */
        if (src->walk == WALK_DONE || src->walk == WALK_WALKED)
            src->walk = WALK_WALKING;
        log_notice("pool '%s': %s's master moved while its keys were moving: walking it "
                   "again from the start", p->conf->name, p->servers[server].label);
    }
}

/* A batch of the mover is over. One of an earlier epoch only counts as
 * finished (the drain waits for it); its source was walked anew. */
void mig_mover_op_done(struct pool *p, struct mig *m, struct mig_op *op, bool ok, bool nokey)
{
    struct mig_source *src = op->epoch == p->epoch ? &m->src[op->src] : NULL;
    uint32_t nkeys = op->nkeys;

    mig_op_free(op);
    if (src == NULL)
        return;
    if (ok && !nokey)
        src->moved += nkeys;
    else if (!ok) {                     /* walk again, after a pause */
        src->errors++;
        src->again = true;
        src->wait_until = uv_now(cur_loop->uv) + 1000;
    }
    src->ops--;
    if ((op = TAILQ_FIRST(&src->queue)) != NULL) {
        TAILQ_REMOVE(&src->queue, op, link);
        mig_op_send(m, op);
    }
    mig_advance(p, m, src);
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
        src->wait_until = uv_now(cur_loop->uv) + 1000;
        log_warn("pool '%s': mover: SCAN on %s failed: %s", p->conf->name,
                 p->servers[src->server].label, r->rsp.len == 0 ? b->reason : head);
        return 0;
    }
    uint64_t rtt = uv_now(cur_loop->uv) - src->sent_ms;
    if (rtt > MIG_SLOW_MS)              /* the server is slow: rest as long */
        src->wait_until = uv_now(cur_loop->uv) + rtt;
    if (r->u.mig.mv.sizing)
        sizing_reply(p, m, src, &r->rsp);
    else
        scan_reply(p, m, src, &r->rsp);
    return 0;
}


/* How much of a server a SCAN walk has covered, from its cursor: Redis
 * walks its table in reversed-bit order, so the cursor's bits reversed,
 * read as a fraction of 2^64, are the part done (exact while the table
 * does not resize). */
double mig_walked(const struct mig_source *src)
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

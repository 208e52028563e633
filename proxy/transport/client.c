/* client.c -- client connections: read requests into chunks, frame them,
 * hand them to the router in order, and write replies back in that order.
 *
 * Lifecycle: accept -> reading -> (QUIT or protocol error: quitting, the
 * queued replies are still written) -> closing -> close callback frees.
 * A client is freed only in its handle's close callback; its unanswered
 * requests are detached (req.client = NULL) and freed by the backend once
 * their replies arrive.
 *
 * Backpressure: a client stops being read while too many of its requests
 * are in flight (forwarded, or waiting to be: 1,024), and is read again as
 * the backends answer them. Replies it has not read yet do not stop it
 * being read below its limit: a client may write its whole pipeline before
 * it reads a reply (a bulk loader does), and holding back its reads while
 * it is blocked writing to us would leave neither side moving. Waiting
 * replies cost their bytes and little more: each one done behind another
 * done one joins it (client_fold), so a million waiting "+OK"s are one
 * request object and a few chunks, not a million of each.
 *
 * Memory: c->mem is everything a client makes shardis hold: each request
 * object, a request's bytes while it is in flight, its reply's until
 * written, a request being read. client_hold moves it, and its pool's sum
 * (pool.clients_mem) with it; client_limit, where it grew, applies the
 * limits, which are redis-server's:
 *   - client_output_buffer_limit, by class (a subscribed client is pubsub,
 *     every other normal): past hard, closed at once; past soft for
 *     soft_seconds on end, closed (the tick looks at those over soft, so a
 *     client that gets nothing more is closed too). What pushed it past
 *     hard passes when it is the only reply or request it holds: one
 *     value of any size always can be read.
 *   - maxmemory_clients: past it, the pool's client holding most is closed
 *     (redis-server 7's client eviction).
 *   - a normal client holding more than its soft limit (half its hard one
 *     without) is read no more, as it asks for no more, and read again
 *     below half that: most clients that pipeline faster than they read
 *     never reach a limit.
 * Each close is logged and counted (INFO: evicted_clients,
 * client_output_buffer_limit_disconnections). A limit never closes a
 * client where it is found over it: that is inside some caller's work (a
 * reply handed on in a loop over a server's subscribers, a request being
 * routed that fed a monitor), often another client's. It dooms it
 * (client_doom): its memory leaves the pool's sum at once, it is read no
 * more, and flush_cb closes it, with nothing of its on the stack.
 *
 * An idle client holds no chunk: reads go into a fresh chunk from the pool
 * and every chunk is let go once all its requests are framed. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/transport/args.h"
#include "proxy/transport/client.h"
#include "proxy/base/log.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/base/tls.h"
#include "proxy/base/util.h"

#define CLIENT_PAUSE_REQS    1024        /* stop reading above this many in flight */
#define CLIENT_RESUME_REQS   256
#define CLIENT_STALL_BYTES   (256u << 20) /* what a client holds: stop reading it, with
                                            no limit configured */
#define CLIENT_PEAK_MS       4000        /* INFO's recent peaks: two periods this long */
#define CLIENT_IOV_MAX       1024
#define CLIENT_FOLD_COPY     512         /* waiting replies up to this long are copied */

/* The layers above's (client_set_hooks): set once, before any client. */
static struct client_hooks hooks;

void client_set_hooks(const struct client_hooks *h)
{
    hooks = *h;
}

/* ---- clients' rare state ------------------------------------------------------- */

struct client_rare *client_rare(struct client *c)
{
    if (c->rare == NULL) {
        c->rare = xcalloc(1, sizeof(*c->rare));
        TAILQ_INIT(&c->rare->gate);
    }
    return c->rare;
}

const char *client_name(const struct client *c)
{
    return c->rare != NULL ? c->rare->name : NULL;
}

/* ---- replies made here --------------------------------------------------------- */

/* Every client speaks RESP2 until HELLO 3; what shardis answers itself
 * follows c->resp3 from then on, as what its backends answer does (the
 * connections it is given speak its protocol: pool_backend). */
struct resp_w client_w(struct client *c, struct msg *g)
{
    return resp_w_on(g, &c->lbuf, c->resp3 ? RESP3 : RESP2);
}

struct resp_w client_cmd_w(struct client *c, struct msg *g)
{
    return resp_w_on(g, &c->lbuf, RESP2);
}

void client_reply_error(struct client *c, struct req *r, const char *fmt, ...)
{
    struct resp_w w = client_w(c, &r->rsp);
    va_list ap;

    va_start(ap, fmt);
    resp_w_verror(&w, fmt, ap);
    va_end(ap);
}

/* ---- reading ------------------------------------------------------------------ */

static void client_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct client *c = container_of(h, struct client, h);
    (void)suggested;
    if (c->tls)
        tls_read_buf(buf);          /* ciphertext: client_read_tls */
    else
        rstream_buf(&c->in, buf);
}

static void client_pause(struct client *c)
{
    if (c->reading) {
        uv_read_stop(&c->h.stream);
        c->reading = 0;
    }
}

static void client_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

/* Whether c has as many requests in flight as it may. Their replies are
 * what may still come once it stops being read for unread replies, so
 * this also bounds how far past client_stall_at it can go. */
static bool client_busy(const struct client *c, bool resuming)
{
    return c->inflight > (resuming ? CLIENT_RESUME_REQS : CLIENT_PAUSE_REQS);
}

static void client_resume(struct client *c)
{
    if (!c->reading && !c->closing && !c->doomed && !c->quitting && !client_busy(c, true) &&
        (c->rare == NULL || c->rare->stalled_ms == 0)) {
        if (uv_read_start(&c->h.stream, client_alloc_cb, client_read_cb) == 0)
            c->reading = 1;
    }
}

/* ---- what a client holds, and its limits (see the top) --------------------------- */

/* c holds delta bytes more (or fewer): it, and its pool's sum. A closed
 * or doomed client holds nothing (client_doom and client_close took what
 * it held off the sum). */
static inline void client_hold(struct client *c, int64_t delta)
{
    if (!c->closing && !c->doomed) {
        c->mem += (size_t)delta;
        c->pool->clients_mem += (uint64_t)delta;
    }
}

static const struct conf_client_limit *client_limits(const struct client *c)
{
    return &c->pool->conf->client_limits[c->subscribed ? CONF_CLIENT_PUBSUB
                                                       : CONF_CLIENT_NORMAL];
}

/* Past this a normal client is read no more; read again below half. */
static size_t client_stall_at(const struct conf_client_limit *l)
{
    return l->soft > 0 ? (size_t)l->soft : l->hard > 0 ? (size_t)l->hard / 2
                                                       : CLIENT_STALL_BYTES;
}

/* On cur_loop->stalled while stalled or over its soft limit, where the tick
 * looks: set after either changes. */
static void client_rewatch(struct client *c)
{
    struct client_rare *rare = c->rare;
    bool want = rare->stalled_ms != 0 || rare->soft_ms != 0;

    if (want && !rare->watched) {
        rare->client = c;
        TAILQ_INSERT_TAIL(&cur_loop->stalled, rare, stalled);
    } else if (!want && rare->watched) {
        TAILQ_REMOVE(&cur_loop->stalled, rare, stalled);
    }
    rare->watched = want;
}

/* c holds more than it may: read it no more (it asks for no more). */
static void client_stall(struct client *c)
{
    client_pause(c);
    client_rare(c)->stalled_ms = uv_now(cur_loop->uv);
    client_rewatch(c);
}

static void client_unwatch(struct client *c)
{
    if (c->rare != NULL) {
        c->rare->stalled_ms = c->rare->soft_ms = 0;
        client_rewatch(c);
    }
}

static void client_evict(struct pool *p);

static inline uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* c is to be closed for a limit: it counts as gone from the pool's sum
 * now, and is closed at the loop's next flush (see the top). */
static void client_doom(struct client *c)
{
    c->pool->clients_mem -= c->mem;
    c->mem = c->qbuf = 0;
    c->doomed = 1;
    client_pause(c);
    loop_mark_client(c);
}

/* A limit dooms c: say which, and count it. */
static void client_over(struct client *c, const char *which, const struct conf_client_limit *l)
{
    log_warn("client %llu: holds %zu bytes (%zu of replies not read), over the limit: "
             "client_output_buffer_limit %s %s %lld bytes%s; closing it, as redis-server does",
             (unsigned long long)c->id, c->mem, c->rsp_bytes,
             c->subscribed ? "pubsub" : "normal", which, which[0] == 'h' ? l->hard : l->soft,
             which[0] == 'h' ? "" : " for longer than its seconds");
    c->pool->obl_disconnections++;
    client_doom(c);
}

/* c's holding grew, by added (a reply's bytes, or a request's): apply the
 * limits. Returns -1 if c is doomed (client_doom). One reply or request passes the
 * hard limit when c holds nothing else of its kind. A request still being
 * read counts in maxmemory_clients only: stopping to read it half way
 * would leave it never whole (redis-server bounds it by
 * client-query-buffer-limit, shardis by the request's own limits, resp.h). */
static int client_limit_slow(struct client *c, size_t added, bool reply)
{
    const struct conf_client_limit *l = client_limits(c);
    struct pool *p = c->pool;
    size_t held = c->mem - c->qbuf;
    uint64_t now;

    if (c->closing || c->doomed)
        return -1;
    if (l->hard > 0 && held > (size_t)l->hard &&
        (reply ? c->rsp_bytes > added : c->inflight > 1)) {
        client_over(c, "hard", l);
        return -1;
    }
    if (l->soft > 0 && held > (size_t)l->soft) {
        now = uv_now(cur_loop->uv);
        if (c->rare == NULL || c->rare->soft_ms == 0) {
            client_rare(c)->soft_ms = now;
            client_rewatch(c);
        } else if (now - c->rare->soft_ms > (uint64_t)l->soft_seconds * 1000) {
            client_over(c, "soft", l);
            return -1;
        }
    }
    if (!c->subscribed && held > client_stall_at(l) &&
        (c->rare == NULL || c->rare->stalled_ms == 0))
        client_stall(c);
    if (p->conf->maxmemory_clients > 0 && p->clients_mem > (uint64_t)p->conf->maxmemory_clients) {
        client_evict(p);
        if (c->doomed)
            return -1;
    }
    return 0;
}

/* Below what a client and all clients may hold before any limit has a
 * word to say (the pool's conf's, worked out again when a reload swaps
 * it), a request or reply costs client_limit two tests. */
static void client_quiet_of(struct pool *p)
{
    size_t held = SIZE_MAX;

    for (int k = 0; k < CONF_CLIENT_CLASSES; k++) {
        const struct conf_client_limit *l = &p->conf->client_limits[k];
        if (l->soft > 0 && (size_t)l->soft < held)
            held = (size_t)l->soft;
        if (l->hard > 0 && (size_t)l->hard < held)
            held = (size_t)l->hard;
        if (client_stall_at(l) < held)
            held = client_stall_at(l);
    }
    p->quiet_held = held;
    p->quiet_total = p->conf->maxmemory_clients > 0 ? (uint64_t)p->conf->maxmemory_clients
                                                    : UINT64_MAX;
    p->quiet_conf = p->conf;
}

static inline int client_limit(struct client *c, size_t added, bool reply)
{
    struct pool *p = c->pool;
    size_t held = c->mem - c->qbuf;

    if (held > p->peak_out[0])
        p->peak_out[0] = held;
    if (p->quiet_conf != p->conf)
        client_quiet_of(p);
    if (held <= p->quiet_held && p->clients_mem <= p->quiet_total && !c->doomed)
        return 0;
    return client_limit_slow(c, added, reply);
}

/* c's holding fell: under half the point where it stopped being read, it
 * is read again (by the caller); under its soft limit, its soft clock
 * stops. A normal client's stops only with its reads again: one stopped
 * at its soft limit that takes a few bytes is still one that does not
 * read, and would be neither read nor closed, ever. */
static void client_relieved(struct client *c)
{
    const struct conf_client_limit *l;
    size_t held, calm;

    if (c->rare == NULL || (c->rare->stalled_ms == 0 && c->rare->soft_ms == 0))
        return;
    l = client_limits(c);
    held = c->mem - c->qbuf;
    calm = c->subscribed ? (size_t)l->soft : client_stall_at(l) / 2;
    if (c->rare->soft_ms != 0 && (l->soft == 0 || held <= calm))
        c->rare->soft_ms = 0;
    if (c->rare->stalled_ms != 0 && held <= client_stall_at(l) / 2)
        c->rare->stalled_ms = 0;        /* (read again by the caller) */
    client_rewatch(c);
}

/* The pool's clients hold more than maxmemory_clients: close the one that
 * holds most, as redis-server 7 evicts clients. */
static void client_evict(struct pool *p)
{
    struct client *worst = NULL;

    for (uint32_t i = 0; i < p->nclients; i++) {
        struct client *c = p->clients[i];
        if (!c->closing && !c->doomed && (worst == NULL || c->mem > worst->mem))
            worst = c;
    }
    if (worst == NULL)
        return;
    log_warn("client %llu: evicted, holding %zu bytes, the most of any client, while all "
             "of pool '%s''s hold %llu, over maxmemory_clients (%lld)",
             (unsigned long long)worst->id, worst->mem, p->conf->name,
             (unsigned long long)p->clients_mem, p->conf->maxmemory_clients);
    p->evicted_clients++;
    client_doom(worst);
}

void client_check_stalled(uint64_t now)
{
    struct client_rare *rare, *next;

    for (rare = TAILQ_FIRST(&cur_loop->stalled); rare != NULL; rare = next) {
        next = TAILQ_NEXT(rare, stalled);
        struct client *c = rare->client;
        const struct conf_client_limit *l = client_limits(c);
        /* (what it holds may have fallen since, with nothing written) */
        client_relieved(c);
        if (!c->reading)
            client_resume(c);
        if (rare->soft_ms != 0 && now - rare->soft_ms > (uint64_t)l->soft_seconds * 1000)
            client_over(c, "soft", l);
    }
}

void client_peaks(const struct pool *p, uint64_t now, uint64_t *in, uint64_t *out)
{
    bool turned = now / CLIENT_PEAK_MS != p->peak_period;
    bool last = now / CLIENT_PEAK_MS == p->peak_period + 1;

    /* (periods are turned by the tick: one may have ended since) */
    *in = turned ? (last ? p->peak_in[0] : 0) : max_u64(p->peak_in[0], p->peak_in[1]);
    *out = turned ? (last ? p->peak_out[0] : 0) : max_u64(p->peak_out[0], p->peak_out[1]);
}

void client_tick(struct pool *p, uint64_t now)
{
    uint64_t period = now / CLIENT_PEAK_MS;

    if (period == p->peak_period)
        return;
    p->peak_in[1] = period == p->peak_period + 1 ? p->peak_in[0] : 0;
    p->peak_out[1] = period == p->peak_period + 1 ? p->peak_out[0] : 0;
    p->peak_in[0] = p->peak_out[0] = 0;
    p->peak_period = period;
}

void client_queue(struct client *c, struct req *r)
{
    r->client = c;
    TAILQ_INSERT_TAIL(&c->reqs, r, cq);
    c->inflight++;
    client_hold(c, sizeof(*r));
}

/* A protocol error: reply like redis-server, then close once it is sent. */
static void client_protocol_error(struct client *c)
{
    struct req *r = req_get();

    client_queue(c, r);
    log_info("client %llu: %s; closing", (unsigned long long)c->id, resp_error());
    client_reply_error(c, r, "ERR %s", resp_error());
    r->quit = 1;
    c->quitting = 1;
    client_pause(c);
    req_done(r);
}

/* What c holds of a request still being read. */
static void client_read_held(struct client *c)
{
    if (c->closing || c->doomed)
        return;
    size_t q = resp_req_idle(&c->scan) ? 0 : (size_t)(c->in.rx - c->scan.start);
    size_t grew = q > c->qbuf ? q - c->qbuf : 0;

    client_hold(c, (int64_t)q - (int64_t)c->qbuf);
    c->qbuf = q;
    if (q > c->pool->peak_in[0])
        c->pool->peak_in[0] = q;
    if (grew > 0)
        client_limit(c, grew, false);
}

/* nread bytes were read into the tail chunk of c->in: frame and route
 * each request they complete. */
static void client_consume(struct client *c, size_t nread)
{
    const char *p;
    uint64_t off;
    size_t left;

    p = c->in.tail->data + c->in.tail->len;
    off = c->in.rx;
    c->in.tail->len += (uint32_t)nread;
    c->in.rx += (uint64_t)nread;
    left = nread;

    while (left > 0 && !c->quitting) {
        size_t used;
        /* (a request framed here may be an AUTH: asked for each one) */
        c->scan.preauth = c->user == NULL;
        int rc = resp_req_feed(&c->scan, p, left, off, &used);
        if (rc < 0) {
            client_protocol_error(c);
            break;
        }
        p += used;
        off += used;
        left -= used;
        if (rc == 0)
            break;
        struct req *r = req_get();
        uint64_t len = c->scan.end - c->scan.start;
        r->t0_us = cur_loop->now_us;
        client_queue(c, r);
        /* Its bytes are held until it is answered (req_done). */
        uint32_t held = len < UINT32_MAX ? (uint32_t)len : UINT32_MAX;
        r->held = held;
        client_hold(c, (int64_t)held - (int64_t)c->qbuf);  /* (what was read of it before) */
        c->qbuf = 0;
        cur_loop->total_commands++;
        c->pool->requests++;
        hooks.request(c, r);        /* may close c: then c->closing is set; r may be
                                       answered and gone */
        resp_req_reset(&c->scan);
        if (c->closing || client_limit(c, held, false) < 0)
            return;                 /* (doomed: read no more) */
    }
    /* Keep only what a partial request still needs. */
    rstream_trim(&c->in, resp_req_idle(&c->scan) ? c->in.rx : c->scan.start);
    if (resp_req_idle(&c->scan))
        resp_req_free(&c->scan);
    client_read_held(c);
    if (client_busy(c, false))
        client_pause(c);
}

/* Ciphertext was read: what it decrypts to goes into c->in's chunks, as a
 * plain client's bytes are read, and is consumed the same way. Until its
 * handshake is over a client has no chunk (tls_accept), so a handshake
 * left half way costs its SSL and what it sent, not a chunk more. */
static void client_read_tls(struct client *c, const char *p, size_t nread)
{
    struct tls *t = c->rare->tls;
    ssize_t n;

    tls_feed(t, p, nread);
    n = tls_accept(t);
    while (n > 0 && !c->closing && !c->quitting) {
        uv_buf_t b;
        rstream_buf(&c->in, &b);
        n = tls_read(t, b.base, b.len);
        if (n > 0)
            client_consume(c, (size_t)n);
        else if (resp_req_idle(&c->scan))
            rstream_trim(&c->in, c->in.rx);     /* the chunk it took is still empty */
    }
    tls_feed(t, NULL, 0);           /* (quitting: what it sent after is dropped) */
    if (n < 0 && !c->closing) {
        if (n != UV_EOF)
            log_info("client %llu: %s", (unsigned long long)c->id, tls_error(t));
        client_close(c);
    }
}

static void client_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct client *c = container_of(s, struct client, h.stream);

    if (nread < 0) {
        if (nread != UV_EOF)
            log_info("client %llu: read: %s", (unsigned long long)c->id,
                     uv_strerror((int)nread));
        client_close(c);
        return;
    }
    if (nread == 0)
        return;
    cur_loop->now_us = uv_hrtime() / 1000;
    if (c->tls)
        client_read_tls(c, buf->base, (size_t)nread);
    else
        client_consume(c, (size_t)nread);
}

/* Its TLS handshake took longer than the pool's tls_handshake_timeout. */
static void client_tls_expired(void *data)
{
    struct client *c = data;

    log_info("client %llu: %s", (unsigned long long)c->id, tls_error(c->rare->tls));
    client_close(c);
}

/* ---- writing ------------------------------------------------------------------ */

static void client_fold(struct client *c, struct req *r);

void req_done(struct req *r)
{
    struct client *c = r->client;

    if (r->parent != NULL) {
        r->done = 1;
        hooks.fragment_done(r);
        return;
    }
    if (c != NULL && !c->closing && r->hook != NULL && r->hook(r) != 0)
        return;                     /* sent again: its reply is still to come */
    r->done = 1;
    if (c == NULL || c->closing)
        return;
    hooks.replied(c, r, cur_loop->now_us > r->t0_us ? cur_loop->now_us - r->t0_us : 0);
    c->inflight--;
    if (r->silent)
        msg_release(&r->rsp);       /* CLIENT REPLY OFF or SKIP */
    if (r->before_hold)
        hooks.held_answered(c, r);
    if (c->pin != NULL && r->backend == c->pin)
        hooks.pin_answered(c);
    /* Its request's bytes are let go (written to a server, or never
     * sent), its reply's held. */
    c->rsp_bytes += r->rsp.len;
    client_hold(c, (int64_t)r->rsp.len - (int64_t)r->held);
    r->held = 0;
    if (client_limit(c, r->rsp.len, true) < 0)
        return;
    client_fold(c, r);
    if (!c->reading)
        client_resume(c);
    client_ready(c);
}

void client_ready(struct client *c)
{
    struct req *r = TAILQ_FIRST(&c->reqs);

    /* Only a done request at the head (past what is being written) can go. */
    while (r != NULL && r->in_write)
        r = TAILQ_NEXT(r, cq);
    if (r != NULL && r->done)
        loop_mark_client(c);
}

/* Move the reply of r (done) into into (done, before it, not being
 * written), and let r go. Its short slices are copied into the client's
 * own chunk, next to the one before: then they hold no backend chunk (a
 * few bytes must not keep 14 KiB alive while the client does not read)
 * and join their neighbours in one slice; long ones move as they are. A
 * reply is folded slice by slice, not whole: one that had others folded
 * into it while the reply before it was awaited (replies of several
 * servers come in any order) is long, and its first slice short, and
 * moving it whole kept a backend chunk alive for a few bytes of each:
 * 1.3 times the memory, with three servers. */
static void fold(struct client *c, struct req *into, struct req *r)
{
    for (uint32_t i = 0; i < r->rsp.n; i++) {
        const struct slice *sl = msg_slice(&r->rsp, i);
        if (sl->len <= CLIENT_FOLD_COPY)
            memcpy(msg_reserve(&into->rsp, &c->lbuf, sl->len), sl->m->data + sl->off, sl->len);
        else
            msg_append(&into->rsp, sl->m, sl->off, sl->len);
    }
    msg_release(&r->rsp);
    into->quit |= r->quit;
    TAILQ_REMOVE(&c->reqs, r, cq);
    client_hold(c, -(int64_t)sizeof(*r));
    r->client = NULL;
    req_maybe_free(r);
}

/* r is done: join it to the done reply before it, and the done ones after
 * it to it, while the joined reply stays one write's worth of iovecs. */
static void client_fold(struct client *c, struct req *r)
{
    struct req *prev = TAILQ_PREV(r, req_list, cq), *next;

    /* Nothing joins a reply after which the client is closed (QUIT): what
     * comes after it is never written. */
    if (prev != NULL && prev->done && !prev->in_write && !prev->quit &&
        prev->rsp.n + r->rsp.n + 1 <= CLIENT_IOV_MAX) {
        fold(c, prev, r);
        r = prev;
    }
    while (!r->quit && (next = TAILQ_NEXT(r, cq)) != NULL && next->done &&
           r->rsp.n + next->rsp.n + 1 <= CLIENT_IOV_MAX)
        fold(c, r, next);
}

/* The replies at the head that were in the write were written (or failed). */
static void client_written(struct client *c, int status)
{
    struct req *r;
    bool quit = false;

    c->writing = 0;
    while ((r = TAILQ_FIRST(&c->reqs)) != NULL && r->in_write) {
        TAILQ_REMOVE(&c->reqs, r, cq);
        c->rsp_bytes -= r->rsp.len;
        client_hold(c, -(int64_t)(r->rsp.len + sizeof(*r)));
        quit |= r->quit;
        r->client = NULL;
        msg_release(&r->rsp);
        req_maybe_free(r);
    }
    client_relieved(c);         /* (read again below, if it was stopped) */
    /* Nothing waits: nothing is held but a request being read. */
    assert(c->closing || !TAILQ_EMPTY(&c->reqs) || c->mem == c->qbuf);
    if (TAILQ_EMPTY(&c->reqs) && c->lbuf != NULL) {
        /* Idle: keep no chunk for local replies (the next takes one from the pool). */
        mbuf_unref(c->lbuf);
        c->lbuf = NULL;
    }
    if (status == UV_ECANCELED || c->closing)
        return;
    if (status < 0 || quit) {
        client_close(c);
        return;
    }
    client_resume(c);
    client_ready(c);
}

static void client_tls_sent(void *data, int status)
{
    client_written(data, status);
}

static void client_write_cb(uv_write_t *w, int status)
{
    struct client *c = w->data;

    free(w);
    client_written(c, status);
}

/* Write everything ready at the head of the queue. Most writes complete at
 * once: uv_try_write then avoids a write request, its callback and the
 * epoll_ctl calls libuv makes around one; only a partial write allocates a
 * uv_write_t and waits, so an idle client does not carry one. */
void client_flush(struct client *c)
{
    uv_buf_t stack[CLIENT_IOV_MAX], *iovs = stack, *iov;
    unsigned niov = 0;
    uint32_t nreq = 0;
    size_t total = 0;
    struct req *r;
    int rc;

    if (c->doomed) {
        client_close(c);            /* (a limit's: see the top) */
        return;
    }
    if (c->writing || c->closing)
        return;
    /* A reply of more slices than a batch holds (a 16 MB value, an MGET
     * of thousands of keys) is written alone, from the heap. */
    r = TAILQ_FIRST(&c->reqs);
    if (r != NULL && r->done && r->rsp.n > CLIENT_IOV_MAX)
        iovs = xmalloc(r->rsp.n * sizeof(*iovs));
    TAILQ_FOREACH(r, &c->reqs, cq) {
        if (!r->done || (niov > 0 && niov + r->rsp.n > CLIENT_IOV_MAX))
            break;
        niov += msg_bufs(&r->rsp, iovs + niov);
        total += r->rsp.len;
        r->in_write = 1;
        nreq++;
        if (r->quit)
            break;
    }
    if (nreq == 0)
        return;
    if (niov == 0) {                /* only dropped replies (CLIENT REPLY OFF) */
        client_written(c, 0);
        return;
    }
    iov = iovs;
    if (c->tls) {
        rc = tls_send(c->rare->tls, iov, niov);
        c->writing = rc == 0;       /* client_tls_sent ends it */
    } else if ((rc = stream_try_write(&c->h.stream, &iov, &niov, total)) == 0) {
        uv_write_t *w = xmalloc(sizeof(*w));
        w->data = c;
        rc = uv_write(w, &c->h.stream, iov, niov, client_write_cb);
        if (rc == 0)
            c->writing = 1;
        else
            free(w);
    }
    if (iovs != stack)
        free(iovs);     /* uv_write copied what it still needs */
    if (rc == 1)
        client_written(c, 0);
    else if (rc < 0)
        client_close(c);
}

/* ---- lifecycle ------------------------------------------------------------------ */

static void client_close_cb(uv_handle_t *h)
{
    struct client *c = container_of(h, struct client, h);
    struct req *r;

    while ((r = TAILQ_FIRST(&c->reqs)) != NULL) {
        TAILQ_REMOVE(&c->reqs, r, cq);
        r->client = NULL;
        req_maybe_free(r);
    }
    rstream_trim(&c->in, c->in.rx);
    resp_req_free(&c->scan);
    if (c->lbuf != NULL)
        mbuf_unref(c->lbuf);
    if (c->rare != NULL) {
        tls_free(c->rare->tls);     /* (its write, if any, was cancelled by now) */
        free(c->rare->name);
        free(c->rare->tx_held);     /* (emptied by pin_client_gone) */
        free(c->rare);
    }
    free(c);
}

void client_reply_help(struct client *c, struct req *r, const char *const *lines, size_t n)
{
    struct resp_w w = client_w(c, &r->rsp);

    resp_w_array(&w, (long long)n);
    for (size_t i = 0; i < n; i++)
        resp_w_simple(&w, lines[i]);
}

void client_reply_bad_sub(struct client *c, struct req *r, struct args *a, const char *command)
{
    size_t len;
    const char *sub = args_get(a, 1, &len);

    client_reply_error(c, r, "ERR unknown subcommand or wrong number of arguments for '%.*s'. "
                       "Try %s HELP.", (int)(len < 128 ? len : 128), sub, command);
}

static void sock_name(const struct client *c, bool peer, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    int n = sizeof(ss);
    char ip[64];

    if (c->h.handle.type != UV_TCP) {       /* a unix socket's, as redis-server: path:0 */
        snprintf(buf, len, "%s:0", c->pool->conf->listen.unix_socket
                                       ? c->pool->conf->listen.host : "?");
        return;
    }
    snprintf(buf, len, "?");
    if ((peer ? uv_tcp_getpeername((const uv_tcp_t *)&c->h.tcp, (struct sockaddr *)&ss, &n)
              : uv_tcp_getsockname((const uv_tcp_t *)&c->h.tcp, (struct sockaddr *)&ss, &n)) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
        snprintf(buf, len, "%s:%u", ip, ntohs(((struct sockaddr_in *)&ss)->sin_port));
    } else {
        uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
        snprintf(buf, len, "[%s]:%u", ip, ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    }
}

void client_peer(const struct client *c, char *buf, size_t len)
{
    sock_name(c, true, buf, len);
}

void client_local(const struct client *c, char *buf, size_t len)
{
    sock_name(c, false, buf, len);
}

/* Every client of p is on p->clients, its slot its index there: listed
 * as it starts, unlisted as it closes (the last takes its slot). */
static void client_list(struct pool *p, struct client *c)
{
    if (p->nclients == p->clients_cap) {
        p->clients_cap = p->clients_cap ? 2 * p->clients_cap : 16;
        p->clients = xrealloc(p->clients, p->clients_cap * sizeof(*p->clients));
    }
    c->slot = p->nclients;
    p->clients[p->nclients++] = c;
}

static void client_unlist(struct client *c)
{
    struct pool *p = c->pool;
    struct client *last = p->clients[p->nclients - 1];

    ASSERT(p->clients[c->slot] == c);
    p->clients[c->slot] = last;
    last->slot = c->slot;
    p->nclients--;
}

void client_close(struct client *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    if (c->is_dirty) {
        for (size_t i = 0; i < cur_loop->ndirty; i++)
            if (cur_loop->dirty[i] == c)
                cur_loop->dirty[i] = NULL;
        c->is_dirty = 0;
    }
    client_unlist(c);
    cur_loop->nclients--;
    c->pool->clients_mem -= c->mem;     /* (its requests, detached, are let go soon) */
    c->mem = c->qbuf = 0;
    client_unwatch(c);
    for (size_t i = 0; i < hooks.ngone; i++)
        hooks.gone[i](c);
    uv_close(&c->h.handle, client_close_cb);
}

/* A client of p over a handle of its own kind (pipe: a uv_pipe_t, else a
 * uv_tcp_t), initialised but not connected yet; NULL if it cannot be. */
static struct client *client_new(struct pool *p, bool pipe)
{
    struct client *c = xcalloc(1, offsetof(struct client, h) +
                                  (pipe ? sizeof(uv_pipe_t) : sizeof(uv_tcp_t)));
    int rc;

    if (pipe)
        rc = uv_pipe_init(cur_loop->uv, &c->h.pipe, 0);
    else
        rc = uv_tcp_init(cur_loop->uv, &c->h.tcp);
    if (rc < 0) {
        free(c);
        return NULL;
    }
    c->pool = p;
    c->db = (uint16_t)p->conf->redis_db;
    TAILQ_INIT(&c->reqs);
    resp_req_reset(&c->scan);
    return c;
}

/* c is connected: count it, and read it (or refuse it, over the pool's
 * client_connections). */
static void client_start(struct pool *p, struct client *c)
{
    c->id = ++cur_loop->next_client_id;
    c->born_s = c->last_s = loop_seconds();
    hooks.session(c);
    client_list(p, c);
    p->accepted++;
    cur_loop->nclients++;
    cur_loop->total_connections++;
    if (c->h.handle.type == UV_TCP) {
        uv_tcp_nodelay(&c->h.tcp, 1);
        if (p->conf->tcpkeepalive)
            uv_tcp_keepalive(&c->h.tcp, 1, 60);
    }
    if (p->conf->client_connections > 0 &&
        p->nclients > (uint32_t)p->conf->client_connections) {
        /* Say why, then close, as redis-server does at maxclients. */
        struct req *r = req_get();
        p->rejected++;
        client_queue(c, r);
        client_reply_error(c, r, "ERR max number of clients reached");
        r->quit = 1;
        c->quitting = 1;
        req_done(r);
        return;
    }
    if (uv_read_start(&c->h.stream, client_alloc_cb, client_read_cb) == 0)
        c->reading = 1;
    else
        client_close(c);
}

void client_accept(struct pool *p, uv_stream_t *listener)
{
    struct client *c = client_new(p, listener->type == UV_NAMED_PIPE);

    if (c == NULL)
        return;
    if (uv_accept(listener, &c->h.stream) < 0) {
        c->closing = 1;
        uv_close(&c->h.handle, client_close_cb);
        return;
    }
    if (listener == &p->tls_listener.stream) {
        /* Its handshake runs as it is read; no request is read before
         * the handshake is over, so none is answered in the clear. */
        struct tls *t = tls_new(p->tls_server, &c->h.stream, true, NULL,
                                uv_now(cur_loop->uv) + (uint64_t)p->conf->tls.handshake_timeout,
                                client_tls_sent, client_tls_expired, c);
        if (t == NULL) {
            log_warn("pool '%s': no TLS for a new client (out of memory)", p->conf->name);
            c->closing = 1;
            uv_close(&c->h.handle, client_close_cb);
            return;
        }
        client_rare(c)->tls = t;
        c->tls = 1;
    }
    client_start(p, c);
}

struct client *client_open(struct pool *p, uv_file fd)
{
    struct client *c = client_new(p, true);

    if (c == NULL)
        return NULL;
    if (uv_pipe_open(&c->h.pipe, fd) < 0) {
        c->closing = 1;
        uv_close(&c->h.handle, client_close_cb);
        return NULL;
    }
    client_start(p, c);
    return c;
}

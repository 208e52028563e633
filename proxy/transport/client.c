/* client.c -- client connections: accept them, read requests into chunks,
 * frame them and hand them, in order, to the layer above (client_on.request);
 * and close them. Their replies are written by client_write.c, what they
 * hold is bounded by client_limits.c (client_int.h is what the three share).
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
 * An idle client holds no chunk: reads go into a fresh chunk from the pool
 * and every chunk is let go once all its requests are framed. */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proxy/transport/args.h"
#include "proxy/transport/client_int.h"
#include "proxy/base/log.h"
#include "proxy/transport/loop.h"
#include "proxy/base/tls.h"
#include "proxy/base/util.h"

#define CLIENT_PAUSE_REQS    1024        /* stop reading above this many in flight */
#define CLIENT_RESUME_REQS   256

struct client_hooks client_on;     /* (client_int.h; set once at start, before
                                      any loop runs) */

void client_set_hooks(const struct client_hooks *h)
{
    client_on = *h;
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

/* ---- reading ------------------------------------------------------------------ */

static void client_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct client *c = container_of(h, struct client, h);
    (void)suggested;
    if (c->tls)
        tls_read_buf(c->rare->tls, buf);    /* ciphertext: client_read_tls */
    else
        rstream_buf(&c->in, buf);
}

void client_pause(struct client *c)
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

void client_resume(struct client *c)
{
    if (!c->reading && !c->closing && !c->doomed && !c->quitting && !client_busy(c, true) &&
        (c->rare == NULL || c->rare->stalled_ms == 0)) {
        if (uv_read_start(&c->h.stream, client_alloc_cb, client_read_cb) == 0)
            c->reading = 1;
    }
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
    if (q > c->front->peak_in[0])
        c->front->peak_in[0] = q;
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
        c->front->requests++;
        client_on.request(c, r);        /* may close c: then c->closing is set; r may be
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

static void sock_name(const struct client *c, bool peer, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    int n = sizeof(ss);
    char ip[64];

    if (c->h.handle.type != UV_TCP) {       /* a unix socket's, as redis-server: path:0 */
        snprintf(buf, len, "%s:0", c->front->conf->listen.unix_socket
                                       ? c->front->conf->listen.host : "?");
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

/* Every client of p is on f->clients, its slot its index there: listed
 * as it starts, unlisted as it closes (the last takes its slot). */
static void client_list(struct front *f, struct client *c)
{
    if (f->all == NULL)
        f->all = &f->own_all;
    atomic_fetch_add_explicit(f->all, 1, memory_order_relaxed);
    if (f->nclients == f->clients_cap) {
        f->clients_cap = f->clients_cap ? 2 * f->clients_cap : 16;
        f->clients = xrealloc(f->clients, f->clients_cap * sizeof(*f->clients));
    }
    c->slot = f->nclients;
    f->clients[f->nclients++] = c;
}

static void client_unlist(struct client *c)
{
    struct front *f = c->front;
    struct client *last = f->clients[f->nclients - 1];

    ASSERT(f->clients[c->slot] == c);
    f->clients[c->slot] = last;
    last->slot = c->slot;
    f->nclients--;
    atomic_fetch_sub_explicit(f->all, 1, memory_order_relaxed);
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
    atomic_fetch_sub_explicit(&cur_loop->load, 1, memory_order_relaxed);
    c->front->clients_mem -= c->mem;     /* (its requests, detached, are let go soon) */
    c->mem = c->qbuf = 0;
    client_unwatch(c);
    for (size_t i = 0; i < client_on.ngone; i++)
        client_on.gone[i](c);
    uv_close(&c->h.handle, client_close_cb);
}

/* A client of p over a handle of its own kind (pipe: a uv_pipe_t, else a
 * uv_tcp_t), initialised but not connected yet; NULL if it cannot be. */
static struct client *client_new(struct front *f, bool pipe)
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
    c->front = f;
    c->pool = f->pool;
    c->db = (uint16_t)f->conf->redis_db;
    TAILQ_INIT(&c->reqs);
    resp_req_reset(&c->scan);
    return c;
}

/* c is connected: count it, and read it (or refuse it, over the pool's
 * client_connections). */
static void client_start(struct front *f, struct client *c)
{
    /* (one count for the process, whichever loop the client is on: an
     * atomic per connection, none per request) */
    static _Atomic uint64_t last_id;

    c->id = atomic_fetch_add_explicit(&last_id, 1, memory_order_relaxed) + 1;
    c->born_s = c->last_s = loop_seconds();
    client_on.session(c);
    client_list(f, c);
    f->accepted++;
    cur_loop->nclients++;
    atomic_fetch_add_explicit(&cur_loop->load, 1, memory_order_relaxed);
    cur_loop->total_connections++;
    if (c->h.handle.type == UV_TCP) {
        uv_tcp_nodelay(&c->h.tcp, 1);
        if (f->conf->tcpkeepalive)
            uv_tcp_keepalive(&c->h.tcp, 1, 60);
    }
    if (f->conf->client_connections > 0 &&
        atomic_load_explicit(f->all, memory_order_relaxed) >
            (uint32_t)f->conf->client_connections) {
        /* Say why, then close, as redis-server does at maxclients. */
        struct req *r = req_get();
        f->rejected++;
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

/* c is connected: over TLS, its handshake first; then started. */
static void client_begin(struct front *f, struct client *c, bool tls)
{
    if (tls) {
        /* Its handshake runs as it is read; no request is read before
         * the handshake is over, so none is answered in the clear. */
        struct tls *t = tls_new(&cur_loop->tls, f->tls_server, &c->h.stream, true, NULL,
                                uv_now(cur_loop->uv) + (uint64_t)f->conf->tls.handshake_timeout,
                                client_tls_sent, client_tls_expired, c);
        if (t == NULL) {
            log_warn("pool '%s': no TLS for a new client (out of memory)", f->conf->name);
            c->closing = 1;
            uv_close(&c->h.handle, client_close_cb);
            return;
        }
        client_rare(c)->tls = t;
        c->tls = 1;
    }
    client_start(f, c);
}

void client_accept(struct front *f, uv_stream_t *listener, bool tls)
{
    struct client *c = client_new(f, listener->type == UV_NAMED_PIPE);

    if (c == NULL)
        return;
    if (uv_accept(listener, &c->h.stream) < 0) {
        c->closing = 1;
        uv_close(&c->h.handle, client_close_cb);
        return;
    }
    client_begin(f, c, tls);
}

void client_adopt(struct front *f, uv_os_sock_t fd, bool unix_socket, bool tls)
{
    struct client *c = client_new(f, unix_socket);
    int rc;

    if (c == NULL) {
        close(fd);
        return;
    }
    rc = unix_socket ? uv_pipe_open(&c->h.pipe, fd) : uv_tcp_open(&c->h.tcp, fd);
    if (rc < 0) {
        log_warn("pool '%s': a connection handed over not opened: %s", f->conf->name,
                 uv_strerror(rc));
        close(fd);
        c->closing = 1;
        uv_close(&c->h.handle, client_close_cb);
        return;
    }
    client_begin(f, c, tls);
}

struct client *client_open(struct front *f, uv_file fd)
{
    struct client *c = client_new(f, true);

    if (c == NULL)
        return NULL;
    if (uv_pipe_open(&c->h.pipe, fd) < 0) {
        c->closing = 1;
        uv_close(&c->h.handle, client_close_cb);
        return NULL;
    }
    client_start(f, c);
    return c;
}

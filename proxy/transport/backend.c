/* backend.c -- pipelined connections to the redis-servers.
 *
 * States:
 *
 *   DOWN --first request--> CONNECTING --connected--> UP
 *     ^                          |                      |
 *     +--- backoff is over --- FAILED <--- error, EOF, timeout, bad reply
 *
 * Every client's requests for a server share its connection: requests are
 * queued (sendq), written together once per loop turn (writeq while the
 * write is in flight), and wait in pendq for their replies, which arrive
 * in the same order (backend_read.c). The handshake is queued ahead of
 * everything as the proxy's own requests (backend_hello.c). The proxy's
 * own requests carry their reply callback (req.on_reply): the transport
 * forwards bytes and never learns what a request was for.
 *
 * A failure answers every queued request with
 * "-ERR backend <server> unavailable: <reason>" and closes the connection
 * (its pipeline cannot be resynchronised); during its backoff (b->hold:
 * backend_held_off) new requests fail at once, so one dead server never
 * stalls the others' clients.
 *
 * What a connection knows of its server it asks of its pool as it
 * connects (hooks.server); what befalls it (a failure, a frame that is no
 * reply, a one-off gone idle) it tells the layers above through the
 * hooks they registered (struct backend_hooks), never by name. An owned
 * connection (a Sentinel's link, a blocking call) asks and tells its
 * owner instead (struct backend_owner), and is otherwise the same
 * connection. Which
 * dedicated connections (a pin, a subscriber, a one-off) exist is the
 * pool's (core/pool_conn.c). A blocking call, where no loop runs, is
 * one of these run to its reply on a loop of its own (backend_sync.c). */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/backend_int.h"
#include "proxy/transport/client.h"
#include "proxy/base/log.h"
#include "proxy/transport/loop.h"
#include "proxy/base/tls.h"
#include "proxy/base/util.h"

#define BACKEND_IOV_MAX     1024

static void backend_connect(struct backend *b);

const char *backend_state_name(const struct backend *b)
{
    switch (b->state) {
    case BACKEND_DOWN:       return "down";
    case BACKEND_CONNECTING: return "connecting";
    case BACKEND_UP:         return "up";
    default:                 return "failed";
    }
}

/* Set once at start (hooks.c), before any loop runs; only read after. */
const struct backend_hooks *backend_above;

void backend_set_hooks(const struct backend_hooks *hooks)
{
    backend_above = hooks;
}

/* Where b goes: its owner's word for an owned connection, else its
 * pool's. */
static void server_of(const struct backend *b, struct backend_server *sv)
{
    if (b->own != NULL)
        b->own->server(b, sv);
    else
        backend_above->server(b, sv);
}

const char *backend_addr(const struct backend *b)
{
    static _Thread_local char buf[300];    /* (each loop's thread formats its own) */
    struct backend_server sv;

    server_of(b, &sv);
    if (sv.unix_socket)
        return sv.host;
    snprintf(buf, sizeof(buf), strchr(sv.host, ':') ? "[%s]:%u" : "%s:%u", sv.host, sv.port);
    return buf;
}

const char *backend_label(const struct backend *b)
{
    struct backend_server sv;

    server_of(b, &sv);
    return sv.label;
}

static void init(struct backend *b, struct pool *p, const struct conf_pool *const *conf,
                 uint32_t server)
{
    memset(b, 0, sizeof(*b));
    b->pool = p;
    b->conf = conf;
    b->server = server;
    b->db = (uint32_t)(*b->conf)->redis_db;
    b->state = BACKEND_DOWN;
    TAILQ_INIT(&b->sendq);
    TAILQ_INIT(&b->writeq);
    TAILQ_INIT(&b->pendq);
}

void backend_init(struct backend *b, struct pool *p, uint32_t server)
{
    init(b, p, backend_above->conf(p), server);
}

void backend_init_owned(struct backend *b, struct pool *p, const struct conf_pool *const *conf,
                        const struct backend_owner *own)
{
    init(b, p, conf, 0);
    b->own = own;
    if (own->greeting == BACKEND_GREET_SENTINEL)
        b->db = 0;              /* (a Sentinel has no databases) */
    b->resp3 = own->resp3;
}

/* ---- failing and closing ------------------------------------------------------- */

/* r failed on b: answered with b->reason (a request of the proxy's own
 * is told, with an empty reply). On a tracking connection its failure
 * goes where its reply would have (hooks.tracked: what it wrote is not
 * said), before its bytes go (release_out: they are not in a write in
 * flight). */
static void answer_failed(struct backend *b, struct req *r, bool release_out)
{
    struct client *c = r->parent != NULL ? r->parent->client : r->client;

    if (r->on_reply != NULL) {
        if (release_out)
            msg_release(&r->out);
        r->on_reply(b, r);          /* told, with no reply: it failed */
        req_maybe_free(r);
        return;
    }
    if (c == NULL && r->parent == NULL) {
        if (release_out)
            msg_release(&r->out);
        req_maybe_free(r);
        return;
    }
    msg_release(&r->rsp);
    if (c != NULL && !c->closing)
        client_reply_error(c, r, "ERR backend %s unavailable: %s", backend_label(b),
                           b->reason);
    b->errors++;
    if (b->tracking && backend_above->tracked != NULL)
        backend_above->tracked(b, r);
    if (release_out)
        msg_release(&r->out);
    req_done(r);
}

static void fail_req(struct backend *b, struct req *r)
{
    answer_failed(b, r, true);
}

static void backend_close_cb(uv_handle_t *h)
{
    struct backend *b = container_of(h, struct backend, h);
    struct req *r;

    /* The write in flight was cancelled: its requests failed already. */
    while ((r = TAILQ_FIRST(&b->writeq)) != NULL) {
        TAILQ_REMOVE(&b->writeq, r, bq);
        r->queued = 0;
        req_maybe_free(r);
    }
    b->closing = 0;
    b->writing = 0;
    tls_free(b->tls);               /* the next connection makes its own */
    b->tls = NULL;
    rstream_trim(&b->in, b->in.rx);
    b->in.rx = 0;
    if (b->state != BACKEND_FAILED)
        b->state = BACKEND_DOWN;
    if (backend_dedicated(b)) {
        if (b->owner == NULL || b->role == BACKEND_ONE_OFF) {
            backend_above->closed(b);   /* released, a spare or a one-off that failed */
            return;
        }
        while ((r = TAILQ_FIRST(&b->sendq)) != NULL) {
            TAILQ_REMOVE(&b->sendq, r, bq);
            r->queued = 0;
            fail_req(b, r);
        }
        return;
    }
    /* Requests that arrived while closing go to a new connection. */
    if (!TAILQ_EMPTY(&b->sendq) && !cur_loop->stopping) {
        if (backend_held_off(b, uv_now(cur_loop->uv))) {
            while ((r = TAILQ_FIRST(&b->sendq)) != NULL) {
                TAILQ_REMOVE(&b->sendq, r, bq);
                r->queued = 0;
                fail_req(b, r);
            }
        } else {
            backend_connect(b);
        }
    }
}

/* Answer every request written on b (or being written) with b->reason. */
static void fail_pending(struct backend *b)
{
    struct req *r;

    while ((r = TAILQ_FIRST(&b->pendq)) != NULL) {
        TAILQ_REMOVE(&b->pendq, r, pq);
        r->pending = 0;
        if (!r->queued)
            fail_req(b, r);
        else
            answer_failed(b, r, false); /* in the cancelled write: freed after it */
    }
}

/* b's server forgets what it tracked on it as it closes: say so, once. */
static void untracked(struct backend *b)
{
    if (b->tracked) {
        b->tracked = 0;
        if (backend_above->untracked != NULL)
            backend_above->untracked(b);
    }
}

/* Answer every request queued on b with b->reason, and close it. */
static void backend_abort(struct backend *b)
{
    struct req *r;

    fail_pending(b);
    while ((r = TAILQ_FIRST(&b->sendq)) != NULL) {
        TAILQ_REMOVE(&b->sendq, r, bq);
        r->queued = 0;
        fail_req(b, r);
    }
    if (b->is_dirty) {
        TAILQ_REMOVE(&cur_loop->dirty_backends, b, dirty);
        b->is_dirty = 0;
    }
    if (!b->closing && !uv_is_closing(&b->h.handle) && b->h.handle.loop != NULL) {
        b->closing = 1;
        uv_close(&b->h.handle, backend_close_cb);
    }
    untracked(b);
}

/* Fail the connection: answer every request, close, back off. A shared
 * connection is retried after the backoff; a dedicated one stays failed
 * (a new connection would not have its transaction) until released. */
void backend_fail(struct backend *b, const char *reason)
{
    snprintf(b->reason, sizeof(b->reason), "%s", reason);
    b->run_id[0] = '\0';       /* the next connection may meet another server */
    if (b->own != NULL)
        b->own->failed(b, reason);          /* (its owner says it, or not) */
    else if (b->state != BACKEND_FAILED)
        log_warn("backend %s (%s)%s failed: %s", backend_label(b), backend_addr(b),
                 backend_dedicated(b) ? ", a dedicated connection," : "", reason);
    if (!backend_dedicated(b)) {
        holdoff_fail(&b->hold, uv_now(cur_loop->uv));
        /* (a replica's failure ejects no master; an owned one is no server's) */
        if (b->replica == 0 && b->own == NULL && backend_above->server_failed != NULL)
            backend_above->server_failed(b->pool, b->server, b->hold.failures);
    }
    b->state = BACKEND_FAILED;
    backend_abort(b);
    if (b->role == BACKEND_SUBSCRIBER && b->owner != NULL && backend_above->lost != NULL)
        backend_above->lost(b);
    if (!backend_dedicated(b) && b->own == NULL && backend_above->doubt != NULL) {
        struct backend_server sv;
        server_of(b, &sv);
        if (sv.resolved)            /* (a pool with Sentinels: they are asked) */
            backend_above->doubt(b->pool, b->server, reason);
    }
}

void backend_drop(struct backend *b, const char *why)
{
    snprintf(b->reason, sizeof(b->reason), "%s", why);
    b->state = BACKEND_FAILED;
    backend_abort(b);
}

bool backend_gone(const struct backend *b)
{
    return b->h.handle.loop == NULL || (uv_is_closing(&b->h.handle) && !b->closing);
}

/* ---- writing ------------------------------------------------------------------- */

/* The requests in writeq are on the wire (or the write failed). */
static void backend_written(struct backend *b, int status)
{
    struct req *r;

    /* (HOTKEYS reads a request's key at its reply: while a session runs,
     * a client's request keeps its bytes until then.) */
    bool keep = b->own == NULL && backend_above->keep_sent != NULL &&
                backend_above->keep_sent(b->pool);

    b->writing = 0;
    while ((r = TAILQ_FIRST(&b->writeq)) != NULL) {
        TAILQ_REMOVE(&b->writeq, r, bq);
        r->queued = 0;
        if (r->on_reply != NULL || !(keep || (b->tracking && backend_tracks(r))))
            msg_release(&r->out);
        req_maybe_free(r);
    }
    if (status == UV_ECANCELED || b->closing)
        return;
    if (status < 0) {
        backend_fail(b, uv_strerror(status));
        return;
    }
    if (!TAILQ_EMPTY(&b->sendq))
        loop_mark_backend(b);
    else if (b->owner != NULL && backend_above->progress != NULL)
        backend_above->progress(b->owner);  /* its last request is on the wire */
}

static void backend_write_cb(uv_write_t *w, int status)
{
    backend_written(container_of(w, struct backend, wreq), status);
}

static void backend_tls_sent(void *data, int status)
{
    backend_written(data, status);
}

/* Its handshake took longer than tls_handshake_timeout: a server that
 * does not speak TLS there reads the hello as a command and waits. */
static void backend_tls_expired(void *data)
{
    struct backend *b = data;

    backend_fail(b, tls_error(b->tls));
}

void backend_flush(struct backend *b)
{
    uv_buf_t stack[BACKEND_IOV_MAX], *iovs = stack, *iov;
    unsigned niov = 0;
    size_t total = 0;
    struct req *r;
    int rc;

    if (b->writing || b->closing || b->state != BACKEND_UP)
        return;
    /* A request of more slices than a batch holds (a bulk of 16 MB and
     * up, a fragment of a thousand keys) is written alone, from the heap. */
    r = TAILQ_FIRST(&b->sendq);
    if (r != NULL && r->out.n > BACKEND_IOV_MAX)
        iovs = xmalloc(r->out.n * sizeof(*iovs));
    while ((r = TAILQ_FIRST(&b->sendq)) != NULL) {
        if (niov > 0 && niov + r->out.n > BACKEND_IOV_MAX)
            break;
        if (b->checking && b->role_asked)
            break;                  /* nothing after the question before its answer */
        if (b->held_back && r->on_reply == NULL)
            break;                  /* (its own requests go: its handshake's rest) */
        niov += msg_bufs(&r->out, iovs + niov);
        total += r->out.len;
        TAILQ_REMOVE(&b->sendq, r, bq);
        TAILQ_INSERT_TAIL(&b->writeq, r, bq);
        TAILQ_INSERT_TAIL(&b->pendq, r, pq);
        r->pending = 1;
        if (r->on_reply == backend_role_reply)
            b->role_asked = 1;
    }
    iov = iovs;
    b->tx_bytes += total;
    if (niov == 0) {    /* nothing queued, or held until the role is known */
        if (iovs != stack)
            free(iovs);
        return;
    }
    if (b->tls != NULL)
        rc = tls_send(b->tls, iov, niov);   /* 0: backend_tls_sent ends it */
    else if ((rc = stream_try_write(&b->h.stream, &iov, &niov, total)) == 0)
        rc = uv_write(&b->wreq, &b->h.stream, iov, niov, backend_write_cb);
    if (rc == 1)
        rc = 2;
    if (rc == 2) {
        backend_written(b, 0);
    } else if (rc < 0) {
        /* The callback will not run: undo the write queue first. */
        while ((r = TAILQ_FIRST(&b->writeq)) != NULL) {
            TAILQ_REMOVE(&b->writeq, r, bq);
            r->queued = 0;
        }
        backend_fail(b, rc == UV_EPROTO && b->tls != NULL ? tls_error(b->tls)
                                                          : uv_strerror(rc));
    } else {
        b->writing = 1;
    }
    if (iovs != stack)
        free(iovs);     /* uv_write copied what it still needs */
}

/* ---- connecting ------------------------------------------------------------------ */

static void backend_connect_cb(uv_connect_t *creq, int status)
{
    struct backend *b = container_of(creq, struct backend, creq);

    if (status == UV_ECANCELED)
        return;
    if (status < 0) {
        backend_fail(b, uv_strerror(status));
        return;
    }
    if (b->h.handle.type == UV_TCP)
        uv_tcp_nodelay(&b->h.tcp, 1);
    struct backend_server sv;
    server_of(b, &sv);
    if (sv.tls != NULL) {
        /* Connecting until the handshake is over (backend_read_tls). */
        b->tls = tls_new(&cur_loop->tls, sv.tls, &b->h.stream, false, sv.tls_name,
                         uv_now(cur_loop->uv) + (uint64_t)sv.conf->tls.handshake_timeout,
                         backend_tls_sent, backend_tls_expired, b);
        if (b->tls == NULL) {
            backend_fail(b, "TLS: out of memory");
            return;
        }
    }
    if (uv_read_start(&b->h.stream, backend_alloc_cb, backend_read_cb) < 0) {
        backend_fail(b, "cannot read");
        return;
    }
    if (b->tls != NULL) {
        if (tls_connect(b->tls) < 0)
            backend_fail(b, tls_error(b->tls));
        return;
    }
    backend_up(b);
}

void backend_up(struct backend *b)
{
    b->state = BACKEND_UP;
    if (b->own == NULL)
        log_info("backend %s connected%s", backend_label(b), b->tls != NULL ? " (TLS)" : "");
    else if (b->own->up != NULL)
        b->own->up(b);                  /* (its owner says it, or not) */
    else
        log_debug("backend %s connected%s", backend_label(b), b->tls != NULL ? " (TLS)" : "");
    loop_mark_backend(b);
}

static void backend_connect(struct backend *b)
{
    struct backend_server sv;
    int rc;

    server_of(b, &sv);
    if (!sv.resolved && b->replica == 0) {
        /* A pool with sentinels: none has said where this master is yet. */
        uv_tcp_init(cur_loop->uv, &b->h.tcp);
        backend_fail(b, "its master's address is not known: the Sentinels have not agreed "
                        "on one");
        return;
    }
    b->state = BACKEND_CONNECTING;
    b->framed = 0;
    b->rx_ms = 0;
    b->run_id[0] = '\0';
    resp_rsp_init(&b->scan, b->resp3);     /* its protocol: what HELLO it sends */
    backend_hello(b, &sv);

    const char *host = sv.host;
    uint16_t port = sv.port;
    if (sv.unix_socket) {
        uv_pipe_init(cur_loop->uv, &b->h.pipe, 0);
        uv_pipe_connect(&b->creq, &b->h.pipe, host, backend_connect_cb);
        return;
    }
    struct sockaddr_storage ss;
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) != 0 &&
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) != 0) {
        /* A host name: resolve it synchronously, once per connect. */
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
        char service[8];
        snprintf(service, sizeof(service), "%u", port);
        if (getaddrinfo(host, service, &hints, &ai) != 0 || ai == NULL) {
            uv_tcp_init(cur_loop->uv, &b->h.tcp);
            backend_fail(b, "cannot resolve host");
            return;
        }
        memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
        freeaddrinfo(ai);
    }
    uv_tcp_init(cur_loop->uv, &b->h.tcp);
    rc = uv_tcp_connect(&b->creq, &b->h.tcp, (struct sockaddr *)&ss, backend_connect_cb);
    if (rc < 0)
        backend_fail(b, uv_strerror(rc));
}

/* ---- requests ------------------------------------------------------------------ */

/* When r's server must have answered, decided here and only here, as r
 * is queued (0: never): own_ms after now for a request sent with a
 * deadline of its own (backend_send_by: MIGRATE and the mover's commands,
 * which need one longer than the pool's, or one where the pool has none);
 * none for a blocking one (r->blocking: a blocking command, or SAVE and
 * DEBUG RELOAD, which take as long as the data); else the pool's timeout,
 * if it has one. (An owned connection sends every request, its
 * handshake's too, with its owner's answer_ms where it has one: a
 * Sentinel's link.) backend_check_timeout
 * enforces it. */
uint64_t backend_deadline(const struct backend *b, const struct req *r, uint64_t own_ms,
                          uint64_t now)
{
    int timeout = (*b->conf)->timeout;

    if (own_ms == 0 && b->own != NULL)
        own_ms = b->own->answer_ms;     /* (0: none of its own) */
    if (own_ms != 0)
        return now + own_ms;
    if (r->blocking || timeout <= 0)
        return 0;
    return now + (uint64_t)timeout;
}

void backend_send(struct backend *b, struct req *r)
{
    backend_send_by(b, r, 0);
}

void backend_send_by(struct backend *b, struct req *r, uint64_t own_ms)
{
    r->backend = b;
    r->server = (uint16_t)b->server;    /* (slowlog.c names it) */
    b->requests++;
    if (b->state == BACKEND_FAILED) {
        if (backend_dedicated(b) || backend_held_off(b, uv_now(cur_loop->uv)) || b->closing) {
            fail_req(b, r);
            return;
        }
        b->state = BACKEND_DOWN;
    }
    r->deadline = backend_deadline(b, r, own_ms, uv_now(cur_loop->uv));
    r->queued = 1;
    TAILQ_INSERT_TAIL(&b->sendq, r, bq);
    if (b->state == BACKEND_DOWN && !b->closing)
        backend_connect(b);
    else if (b->state == BACKEND_UP)
        loop_mark_backend(b);
}

/* A request's deadline is `timeout` after it was queued; but a server
 * that is still sending is not hung, however long its replies take to
 * arrive (a pipeline of 100 MB values under a 400 ms timeout): the oldest
 * pending request times out only once nothing has been read for the
 * pool's timeout as well. Every other request waits behind it in the same
 * pipeline, so checking the oldest is enough. */
void backend_check_timeout(struct backend *b, uint64_t now)
{
    struct req *r = TAILQ_FIRST(&b->pendq);
    int timeout = (*b->conf)->timeout;

    /* The oldest request is the first to expire: pending ones were sent
     * first, and while connecting nothing is pending yet. */
    if (r == NULL && b->state == BACKEND_CONNECTING)
        r = TAILQ_FIRST(&b->sendq);
    if (r == NULL || r->deadline == 0 || now < r->deadline)
        return;
    if (r->pending && timeout > 0 && b->rx_ms != 0 && now - b->rx_ms < (uint64_t)timeout)
        return;                     /* still sending */
    b->timeouts++;
    backend_fail(b, "timeout");
}

void backend_preconnect(struct backend *b)
{
    if (b->state == BACKEND_DOWN)
        backend_connect(b);
}

void backend_keep_up(struct backend *b)
{
    if (b->closing)
        return;                     /* (the next call, once closed) */
    if (b->state == BACKEND_FAILED && !backend_held_off(b, uv_now(cur_loop->uv)))
        b->state = BACKEND_DOWN;
    if (b->state == BACKEND_DOWN)
        backend_connect(b);
}

void backend_move(struct backend *b, const char *why)
{
    struct req *r, *next;

    if (backend_dedicated(b)) {
        if (b->state != BACKEND_FAILED)
            backend_fail(b, why);
        return;
    }
    snprintf(b->reason, sizeof(b->reason), "%s", why);
    fail_pending(b);
    /* The old connection's handshake goes with it; the new one has its own. */
    for (r = TAILQ_FIRST(&b->sendq); r != NULL; r = next) {
        next = TAILQ_NEXT(r, bq);
        if (r->on_reply != NULL) {
            TAILQ_REMOVE(&b->sendq, r, bq);
            r->queued = 0;
            fail_req(b, r);
        }
    }
    holdoff_lift(&b->hold);            /* a new address: no backoff */
    b->run_id[0] = '\0';
    b->state = BACKEND_DOWN;
    untracked(b);
    if (b->h.handle.loop != NULL && !b->closing && !uv_is_closing(&b->h.handle)) {
        if (b->is_dirty) {
            TAILQ_REMOVE(&cur_loop->dirty_backends, b, dirty);
            b->is_dirty = 0;
        }
        b->closing = 1;
        uv_close(&b->h.handle, backend_close_cb);   /* (which connects again for the rest) */
    } else if (!b->closing && !TAILQ_EMPTY(&b->sendq)) {
        backend_connect(b);
    }
}

/* Close at shutdown: anything still queued is answered with an error. */
void backend_close(struct backend *b)
{
    if (!TAILQ_EMPTY(&b->pendq) || !TAILQ_EMPTY(&b->sendq)) {
        backend_fail(b, "proxy stopping");
        return;
    }
    if (b->h.handle.loop != NULL && !uv_is_closing(&b->h.handle) && !b->closing) {
        b->closing = 1;
        uv_close(&b->h.handle, backend_close_cb);
    }
}

bool backend_unread(const struct backend *b)
{
    uv_os_fd_t fd;
    char byte;

    if (b->state != BACKEND_UP || b->closing || uv_fileno(&b->h.handle, &fd) != 0)
        return false;
    return recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

bool backend_idle(const struct backend *b)
{
    return TAILQ_EMPTY(&b->sendq) && TAILQ_EMPTY(&b->writeq) && TAILQ_EMPTY(&b->pendq);
}

uint32_t backend_queued(const struct backend *b)
{
    uint32_t n = 0;
    const struct req *r;

    TAILQ_FOREACH(r, &b->sendq, bq)
        n++;
    TAILQ_FOREACH(r, &b->pendq, pq)
        n++;
    return n;
}

bool backend_has_blocking(const struct backend *b)
{
    const struct req *r;

    TAILQ_FOREACH(r, &b->pendq, pq)
        if (r->blocking)
            return true;
    TAILQ_FOREACH(r, &b->writeq, bq)
        if (r->blocking)
            return true;
    TAILQ_FOREACH(r, &b->sendq, bq)
        if (r->blocking)
            return true;
    return false;
}


/* backend.c -- pipelined connections to the redis-servers.
 *
 * States:
 *
 *   DOWN --first request--> CONNECTING --connected--> UP
 *     ^                          |                      |
 *     +---- retry_at passed -- FAILED <--- error, EOF, timeout, bad reply
 *
 * Every client's requests for a server share its connection: requests are
 * queued (sendq), written together once per loop turn (writeq while the
 * write is in flight), and wait in pendq for their replies, which arrive
 * in the same order. The handshake is queued ahead of everything as the
 * proxy's own requests (backend_queue_own): AUTH as the user its
 * enum backend_as names (backend_auth_args, the one place that decides)
 * and SELECT (refused: the connection is no good), then what other modules ask of a new connection
 * (genkey.c: its script; CLIENT ID of a dedicated one, for mig.c). The
 * proxy's own requests carry their reply callback (req.on_reply): this
 * file forwards bytes and never learns what a request was for.
 *
 * A failure answers every queued request with
 * "-ERR backend <server> unavailable: <reason>" and closes the connection
 * (its pipeline cannot be resynchronised); until retry_at new requests
 * fail at once, so one dead server never stalls the others' clients.
 *
 * Also here: dedicated connections (a pin, a subscriber, a one-off;
 * backend_acquire, enum backend_role). A blocking request made before
 * the loop runs is backend_sync.c's. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/core/gate.h"
#include "proxy/modules/genkey.h"
#include "proxy/base/log.h"
#include "proxy/modules/mig.h"
#include "proxy/modules/pin.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/modules/pubsub.h"
#include "proxy/modules/sentinel.h"
#include "proxy/ops/hotkeys.h"
#include "proxy/ops/slowlog.h"
#include "proxy/core/srvuser.h"
#include "proxy/ops/stats.h"
#include "proxy/base/tls.h"
#include "proxy/base/util.h"

#define BACKEND_IOV_MAX     1024
#define BACKEND_RETRY_MIN   100         /* ms */
#define BACKEND_RETRY_MAX   2000

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

/* Where b connects: its server's address now (a failover may have
 * moved it from the one written), or its replica's. */
static void where(const struct backend *b, const char **host, uint16_t *port, bool *unix_socket)
{
    const struct pool_server *ps = &b->pool->servers[b->server];

    if (b->replica != 0) {
        const struct pool_replica *rp = &ps->replicas[b->replica - 1];
        *host = rp->host;
        *port = rp->port;
        *unix_socket = false;
        return;
    }
    *host = ps->host;
    *port = ps->port;
    *unix_socket = ps->unix_socket;
}

static const char *backend_addr(const struct backend *b)
{
    static char buf[300];
    const char *host;
    uint16_t port;
    bool unix_socket;

    where(b, &host, &port, &unix_socket);
    if (unix_socket)
        return host;
    snprintf(buf, sizeof(buf), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
    return buf;
}

static const char *label(const struct backend *b)
{
    return b->pool->servers[b->server].label;
}

void backend_init(struct backend *b, struct pool *p, uint32_t server)
{
    memset(b, 0, sizeof(*b));
    b->pool = p;
    b->server = server;
    b->db = (uint32_t)p->conf->redis_db;
    b->state = BACKEND_DOWN;
    TAILQ_INIT(&b->sendq);
    TAILQ_INIT(&b->writeq);
    TAILQ_INIT(&b->pendq);
}

/* Answer r with the backend's failure; the proxy's own requests are told
 * with an empty reply. */
static void answer_failed(struct backend *b, struct req *r)
{
    struct client *c = r->parent != NULL ? r->parent->client : r->client;

    if (r->on_reply != NULL) {
        r->on_reply(b, r);          /* told, with no reply: it failed */
        req_maybe_free(r);
        return;
    }
    if (c == NULL && r->parent == NULL) {
        req_maybe_free(r);
        return;
    }
    msg_release(&r->rsp);
    if (c != NULL && !c->closing)
        client_reply_error(c, r, "ERR backend %s unavailable: %s", label(b), b->reason);
    b->errors++;
    req_done(r);
}

static void fail_req(struct backend *b, struct req *r)
{
    msg_release(&r->out);
    answer_failed(b, r);
}

static void dedicated_free(struct backend *b)
{
    struct pool *p = b->pool;

    if (b->role == BACKEND_ONE_OFF && b->owner != NULL)
        gate_conn_gone(b->owner, b);    /* requests waiting to go on it */
    TAILQ_REMOVE(&p->dedicated, b, link);
    p->ndedicated--;
    if (b->role == BACKEND_SPARE)
        p->nspare--;
    free(b);
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
            dedicated_free(b);          /* released, a spare or a one-off that failed */
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
        if (b->state == BACKEND_FAILED && uv_now(cur_loop->uv) < b->retry_at) {
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
            answer_failed(b, r);    /* in the cancelled write: freed after it */
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
}

/* Fail the connection: answer every request, close, back off. A shared
 * connection is retried after the backoff; a dedicated one stays failed
 * (a new connection would not have its transaction) until released. */
static void backend_fail(struct backend *b, const char *reason)
{
    uint64_t backoff;

    snprintf(b->reason, sizeof(b->reason), "%s", reason);
    b->run_id[0] = '\0';       /* the next connection may meet another server */
    if (b->state != BACKEND_FAILED)
        log_warn("backend %s (%s)%s failed: %s", label(b), backend_addr(b),
                 backend_dedicated(b) ? ", a dedicated connection," : "", reason);
    if (!backend_dedicated(b)) {
        b->failures++;
        if (b->replica == 0)        /* (a replica's failure ejects no master) */
            pool_backend_failed(b->pool, b->server, b->failures);
        backoff = BACKEND_RETRY_MIN << (b->failures < 6 ? b->failures - 1 : 5);
        b->retry_at = uv_now(cur_loop->uv) +
                      (backoff < BACKEND_RETRY_MAX ? backoff : BACKEND_RETRY_MAX);
    }
    b->state = BACKEND_FAILED;
    backend_abort(b);
    if (b->role == BACKEND_SUBSCRIBER && b->owner != NULL)
        pubsub_failed(b);
    if (!backend_dedicated(b) && b->pool->servers[b->server].resolved)
        sentinel_hint(b->pool, b->server, reason);      /* (a pool that has them) */
}

/* ---- replies ------------------------------------------------------------------- */

static void backend_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct backend *b = container_of(h, struct backend, h);
    (void)suggested;
    if (b->tls != NULL)
        tls_read_buf(buf);          /* ciphertext: backend_read_tls */
    else
        rstream_buf(&b->in, buf);
}

/* AUTH or SELECT: +OK; HELLO 3: the server's map (the connection speaks
 * RESP3 from here on). Anything else: the connection is no good. */
static int handshake_reply(struct backend *b, struct req *r)
{
    char first[96];
    char why[128];
    char type;

    if (r->rsp.len == 0)
        return 0;                   /* failed: the connection has failed already */
    type = resp_rd_head(&r->rsp, first, sizeof(first));
    if (type == RESP_SIMPLE || type == RESP_MAP)
        return 0;
    snprintf(why, sizeof(why), "handshake refused: %s", first);
    backend_fail(b, why);
    return -1;
}

/* HELLO, where the pool follows Sentinels: the server must say it is a
 * master, or nothing is written on this connection (and the Sentinels
 * are asked again). RESP3 connections speak RESP3 from here on. */
static int role_reply(struct backend *b, struct req *r)
{
    char *flat;
    bool master;
    char why[128];

    if (r->rsp.len == 0)
        return 0;                   /* failed: the connection has failed already */
    flat = xmalloc(r->rsp.len);
    msg_copy(&r->rsp, 0, r->rsp.len, flat);
    master = sentinel_says_master(flat, r->rsp.len);
    free(flat);
    if (master) {
        b->checking = 0;
        loop_mark_backend(b);      /* what waited for it */
        return 0;
    }
    snprintf(why, sizeof(why), "%.96s does not say it is a master", backend_addr(b));
    backend_fail(b, why);
    sentinel_hint(b->pool, b->server, why);
    return -1;
}

/* A keyless connection is checked before it authenticates as the
 * keyless_user: as the internal user, ACL GETUSER must show that user
 * with no key pattern, no channel pattern and no selector (one that could
 * name keys), or a script run as it could write a key, or publish, on a
 * server that does not own it. The reply is RESP2's (HELLO comes later):
 * name, value pairs; Redis 7 gives keys and channels as one string,
 * Redis 6.2 as arrays. Anything else fails the connection. */
static int keyless_check_reply(struct backend *b, struct req *r)
{
    const char *user = b->pool->conf->keyless_user ? b->pool->conf->keyless_user : "?";
    char why[256], first[96];
    struct resp_rd rd;
    struct resp_val v, k, val;

    if (r->rsp.len == 0)
        return 0;
    resp_rd_init(&rd, &r->rsp);
    if (resp_rd_next(&rd, &v) < 0 || v.type != RESP_ARRAY || v.nil) {
        if (resp_rd_head(&r->rsp, first, sizeof(first)) == RESP_ERROR)
            snprintf(why, sizeof(why), "cannot check keyless_user '%s': ACL GETUSER "
                     "answered %s", user, first);
        else
            snprintf(why, sizeof(why), "no ACL user '%s' on this server", user);
        goto fail;
    }
    for (long long e = 0; e + 1 < v.n; e += 2) {
        if (resp_rd_next(&rd, &k) < 0 || resp_rd_skip(&rd, &val) < 0)
            break;
        bool named = resp_rd_is(&rd, &k, "keys", 4, false) ||
                     resp_rd_is(&rd, &k, "channels", 8, false) ||
                     resp_rd_is(&rd, &k, "selectors", 9, false);
        bool empty = val.type == RESP_ARRAY ? val.n == 0 : val.len == 0;
        if (named && !empty) {
            char field[16];
            field[resp_rd_copy(&rd, &k, field, sizeof(field) - 1)] = '\0';
            snprintf(why, sizeof(why), "keyless_user '%s' may use keys or channels (its %s "
                     "are not empty); give it resetkeys resetchannels and no selector",
                     user, field);
            goto fail;
        }
    }
    if (rd.err != NULL) {
        snprintf(why, sizeof(why), "cannot check keyless_user '%s': %s", user, rd.err);
        goto fail;
    }
    return 0;
fail:
    log_error("backend %s: %s", label(b), why);
    backend_fail(b, why);
    return -1;
}

/* AUTH as the keyless_user, after its check: the first reply on which a
 * request may be sent on the connection (gate.c waits for it), since one
 * pipelined behind an AUTH that failed would run as the pool's user. */
static int keyless_auth_reply(struct backend *b, struct req *r)
{
    if (r->rsp.len == 0)
        return 0;                   /* failed: the connection has failed already */
    if (handshake_reply(b, r) < 0)
        return -1;
    b->verifying = 0;
    if (b->owner != NULL)
        gate_kick(b->owner);        /* its script may go */
    return 0;
}

/* The clients' user (srvuser.c) on a clients' connection: ACL SETUSER,
 * as shardis's own user, then AUTH as it. A refusal of the SETUSER is
 * the AUTH's to judge (the operator may have made the user); a refused
 * AUTH leaves the connection signed in as clients' connections were
 * before (redis_auth's default user: backend_connect), which works but
 * lets a client's script do what that user may: backend_user_refused. */
static int user_made_reply(struct backend *b, struct req *r)
{
    char first[160];

    if (r->rsp.len != 0 && resp_rd_head(&r->rsp, first, sizeof(first)) == RESP_ERROR)
        log_info("pool '%s': %s: ACL SETUSER %s: %s", b->pool->conf->name,
                 b->pool->servers[b->server].label, b->pool->clients_user->name, first);
    return 0;
}

static int user_auth_reply(struct backend *b, struct req *r)
{
    struct pool_server *ps = &b->pool->servers[b->server];
    char first[160];

    if (r->rsp.len == 0)
        return 0;                   /* failed: the connection has failed already */
    if (resp_rd_head(&r->rsp, first, sizeof(first)) != RESP_ERROR) {
        if (ps->user_refused)
            log_notice("pool '%s': %s: clients' connections sign in as %s again",
                       b->pool->conf->name, ps->label, b->pool->clients_user->name);
        ps->user_refused = false;
        return 0;
    }
    backend_user_refused(b->pool, ps, first);
    return 0;
}

void backend_user_refused(const struct pool *p, struct pool_server *ps, const char *why)
{
    const char *own = p->conf->internal_user != NULL ? p->conf->internal_user : "default";

    if (!ps->user_refused)
        log_warn("pool '%s': %s (%s) has no clients' user %s shardis may make or sign in as "
                 "(%s): clients' commands and scripts there run as the default user, with "
                 "every right it has (a script may FLUSHALL, run KEYS, write shardis's own "
                 "keys). Give '%s' +acl, or run on that server: %s", p->conf->name, ps->label,
                 ps->addr, p->clients_user->name, why, own, p->clients_user->line);
    ps->user_refused = true;
}

/* CLIENT ID of a dedicated connection (mig.c aims CLIENT UNBLOCK by it). */
static int client_id_reply(struct backend *b, struct req *r)
{
    struct resp_rd rd;
    struct resp_val v;

    resp_rd_init(&rd, &r->rsp);
    if (resp_rd_next(&rd, &v) == 0 && v.type == RESP_INTEGER && v.n >= 0)
        b->client_id = (uint64_t)v.n;
    return 0;
}

/* nread bytes were read into the tail chunk of b->in: frame each reply
 * they complete and hand it on. -1 if b failed meanwhile. */
static int backend_consume(struct backend *b, size_t nread)
{
    uint64_t off;
    const char *p;
    size_t left;

    p = b->in.tail->data + b->in.tail->len;
    off = b->in.rx;
    b->in.tail->len += (uint32_t)nread;
    b->in.rx += (uint64_t)nread;
    b->rx_bytes += (uint64_t)nread;
    left = nread;

    while (left > 0) {
        size_t used;
        int rc = resp_rsp_feed(&b->scan, p, left, &used);
        if (rc < 0) {
            char why[128];
            snprintf(why, sizeof(why), "protocol error: %s", resp_error());
            backend_fail(b, why);
            return -1;
        }
        p += used;
        off += used;
        left -= used;
        if (rc == 0)
            break;

        struct req *r = TAILQ_FIRST(&b->pendq);
        if (b->scan.type == RESP_PUSH) {
            /* Out of band, never a reply: a RESP3 connection gets one only
             * for what shardis does not ask of it (CLIENT TRACKING is
             * refused, subscriber connections speak RESP2). */
            log_warn("backend %s: a push frame on a connection that asked for none: "
                     "dropped", label(b));
            b->framed = off;
            resp_rsp_reset(&b->scan);
            continue;
        }
        if (b->role == BACKEND_SUBSCRIBER && (r == NULL || r->on_reply == NULL)) {
            pubsub_frame(b, b->framed, off);  /* a message, or a confirmation */
            b->framed = off;
            resp_rsp_reset(&b->scan);
            continue;
        }
        if (r == NULL) {
            backend_fail(b, "reply to no request");
            return -1;
        }
        TAILQ_REMOVE(&b->pendq, r, pq);
        r->pending = 0;
        rstream_slice(&b->in, b->framed, off, &r->rsp);
        b->framed = off;
        resp_rsp_reset(&b->scan);
        if (r->on_reply != NULL) {
            if (r->on_reply(b, r) < 0) {
                req_maybe_free(r);      /* b failed; r was off its queues */
                return -1;
            }
            msg_release(&r->rsp);
            req_maybe_free(r);
            continue;
        }
        b->failures = 0;
        /* A master demoted while connected: its Sentinels know where to. */
        if (b->pool->sentinel != NULL && msg_first(&r->rsp) == RESP_ERROR) {
            if (resp_rd_error_is(&r->rsp, "READONLY"))
                sentinel_hint(b->pool, b->server, "a -READONLY reply");
            else if (b->replica != 0 && (resp_rd_error_is(&r->rsp, "LOADING") ||
                                         resp_rd_error_is(&r->rsp, "MASTERDOWN")))
                b->pool->servers[b->server].replicas[b->replica - 1].shunned_until =
                    uv_now(cur_loop->uv) + POOL_REPLICA_SHUN_MS;
        }
        if (r->unblocked && mig_unblocked(r))
            continue;               /* sent again, to the key's new owner */
        if (r->client != NULL || r->parent != NULL)
            req_done(r);
        else
            req_maybe_free(r);
    }
    rstream_trim(&b->in, b->framed);
    /* Its one request is answered, or is not sent yet: it waits at its
     * client's gate for this connection (pin_keyless's, while the
     * handshake was answered). */
    if (b->role == BACKEND_ONE_OFF && backend_idle(b) && !gate_waits_on(b->owner, b))
        backend_release(b, true);
    else if (b->owner != NULL)
        pin_check(b->owner);        /* the last reply its client waited for? */
    return 0;
}

/* Ciphertext was read: its plaintext goes into b->in's chunks and is
 * consumed as a plain connection's bytes are. The handshake ends here:
 * only then is b up, and what waits in its sendq is written. */
static void backend_read_tls(struct backend *b, const char *p, size_t nread)
{
    ssize_t n;

    tls_feed(b->tls, p, nread);
    do {
        uv_buf_t buf;
        rstream_buf(&b->in, &buf);
        n = tls_read(b->tls, buf.base, buf.len);
        if (n > 0 && backend_consume(b, (size_t)n) < 0) {
            tls_feed(b->tls, NULL, 0);  /* (b failed: the rest is dropped) */
            return;
        }
        if (n == 0 && b->framed == b->in.rx)
            rstream_trim(&b->in, b->in.rx);     /* the chunk it took is still empty */
    } while (n > 0 && !b->closing);
    tls_feed(b->tls, NULL, 0);      /* (a failed one's unread bytes are dropped) */
    if (b->closing)
        return;
    if (n < 0) {
        backend_fail(b, n == UV_EOF ? "connection closed" : tls_error(b->tls));
        return;
    }
    if (b->state == BACKEND_CONNECTING && tls_ready(b->tls)) {
        b->state = BACKEND_UP;
        log_info("backend %s connected (TLS)", label(b));
        loop_mark_backend(b);
    }
}

static void backend_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct backend *b = container_of(s, struct backend, h.stream);

    cur_loop->now_us = uv_hrtime() / 1000;
    if (nread < 0) {
        backend_fail(b, nread == UV_EOF ? "connection closed" : uv_strerror((int)nread));
        return;
    }
    if (nread == 0)
        return;
    b->rx_ms = uv_now(cur_loop->uv);
    if (b->tls != NULL)
        backend_read_tls(b, buf->base, (size_t)nread);
    else
        backend_consume(b, (size_t)nread);
}

/* ---- writing ------------------------------------------------------------------- */

/* The requests in writeq are on the wire (or the write failed). */
static void backend_written(struct backend *b, int status)
{
    struct req *r;

    b->writing = 0;
    while ((r = TAILQ_FIRST(&b->writeq)) != NULL) {
        TAILQ_REMOVE(&b->writeq, r, bq);
        r->queued = 0;
        /* (HOTKEYS reads a request's key at its reply: while a session
         * runs, a client's request keeps its bytes until then.) */
        if (r->on_reply != NULL || b->pool->hotkeys == NULL || !hotkeys_active(b->pool))
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
    else if (b->owner != NULL)
        pin_check(b->owner);        /* its last request is on the wire */
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

const char *backend_tls_name(const struct pool *p, uint32_t server)
{
    const struct pool_server *sv = &p->servers[server];

    if (p->conf->tls.backend_server_name != NULL)
        return p->conf->tls.backend_server_name;
    return sv->unix_socket ? NULL : sv->host;
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
        niov += msg_bufs(&r->out, iovs + niov);
        total += r->out.len;
        TAILQ_REMOVE(&b->sendq, r, bq);
        TAILQ_INSERT_TAIL(&b->writeq, r, bq);
        TAILQ_INSERT_TAIL(&b->pendq, r, pq);
        r->pending = 1;
        if (r->on_reply == role_reply)
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

void backend_queue_own(struct backend *b, req_reply_cb *on_reply, bool front, int argc,
                       const char *const *argv)
{
    struct req *r = req_get();
    struct mbuf *m = NULL;
    struct resp_w w = resp_w_on(&r->out, &m, RESP2);

    resp_w_command(&w, argc, argv, NULL);
    mbuf_unref(m);
    r->on_reply = on_reply;
    r->queued = 1;
    r->backend = b;
    r->deadline = b->pool->conf->timeout > 0
                      ? uv_now(cur_loop->uv) + (uint64_t)b->pool->conf->timeout : 0;
    if (front)
        TAILQ_INSERT_HEAD(&b->sendq, r, bq);
    else
        TAILQ_INSERT_TAIL(&b->sendq, r, bq);
}

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
    if (b->pool->tls_client != NULL) {
        /* Connecting until the handshake is over (backend_read_tls). */
        const char *host, *name = backend_tls_name(b->pool, b->server);
        uint16_t port;
        bool unix_socket;
        where(b, &host, &port, &unix_socket);
        if (b->replica != 0 && b->pool->conf->tls.backend_server_name == NULL)
            name = host;            /* (a replica's certificate bears its own address) */
        b->tls = tls_new(b->pool->tls_client, &b->h.stream, false, name,
                         uv_now(cur_loop->uv) + (uint64_t)b->pool->conf->tls.handshake_timeout,
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
    b->state = BACKEND_UP;
    log_info("backend %s connected", label(b));
    loop_mark_backend(b);
}

static void backend_connect(struct backend *b)
{
    const struct pool_server *sv = &b->pool->servers[b->server];
    const struct conf_pool *pc = b->pool->conf;
    const char *host;
    uint16_t port;
    bool unix_socket;
    int rc;

    where(b, &host, &port, &unix_socket);
    if (!sv->resolved && b->replica == 0) {
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
    /* The handshake goes first, ahead of anything already queued; each
     * goes to the front, so the last queued is the first sent. Dedicated
     * connections skip what only GENKEY needs (the shared ones load the
     * script; without a run_id the script reads it itself). */
    b->client_id = 0;
    b->creds_gen = b->pool->creds_gen;      /* the credentials it authenticates with */
    if (backend_dedicated(b))   /* for CLIENT UNBLOCK when a reload moves keys (mig.c) */
        backend_queue_own(b, client_id_reply, true, 2, (const char *const[]){"CLIENT", "ID"});
    else if (b->replica == 0 && b->as == BACKEND_AS_INTERNAL)
        genkey_connecting(b);   /* the sequences are the internal_user's (pool_own) */
    b->verifying = b->as == BACKEND_AS_KEYLESS;
    /* A master's connection checks its role; a replica's carries only
     * reads, which any server may answer (a replica just promoted too). */
    b->checking = b->pool->sentinel != NULL && b->replica == 0;
    b->role_asked = 0;
    if (b->checking)                        /* a master, or nothing is written */
        backend_queue_own(b, role_reply, true, 2,
                          (const char *const[]){"HELLO", b->resp3 ? "3" : "2"});
    else if (b->resp3)
        backend_queue_own(b, handshake_reply, true, 2, (const char *const[]){"HELLO", "3"});
    if (b->db != 0) {
        char db[16];
        snprintf(db, sizeof(db), "%u", b->db);
        backend_queue_own(b, handshake_reply, true, 2, (const char *const[]){"SELECT", db});
    }
    if (b->as == BACKEND_AS_KEYLESS) {  /* checked as the internal user, then used */
        backend_queue_own(b, keyless_auth_reply, true, 3,
                          (const char *const[]){"AUTH", pc->keyless_user, pc->keyless_password});
        backend_queue_own(b, keyless_check_reply, true, 3,
                          (const char *const[]){"ACL", "GETUSER", pc->keyless_user});
    }
    const struct srvuser *u = b->pool->clients_user;
    enum backend_as as = b->as == BACKEND_AS_CLIENT && u == NULL ? BACKEND_AS_CLIENT
                                                                 : BACKEND_AS_INTERNAL;
    if (b->as == BACKEND_AS_CLIENT && u != NULL) {
        /* Sent: AUTH as shardis's own user, ACL SETUSER, then, where
         * shardis's own user is not redis_auth's default one, RESET and
         * AUTH as that (what clients' connections were before there was
         * a clients' user: where the next AUTH is refused, they stay so,
         * never shardis's own; RESET signs out, to the default user if it
         * needs no password), and AUTH as the clients' user. Each goes to
         * the front: the last queued is the first sent. */
        backend_queue_own(b, user_auth_reply, true, 3,
                          (const char *const[]){"AUTH", u->name, u->password});
        if (pc->internal_user != NULL) {
            const char *before[3];
            int nbefore = backend_auth_args(pc, BACKEND_AS_CLIENT, before);
            if (nbefore > 0)
                backend_queue_own(b, handshake_reply, true, nbefore, before);
            backend_queue_own(b, handshake_reply, true, 1, (const char *const[]){"RESET"});
        }
        backend_queue_own(b, user_made_reply, true, u->argc, (const char *const *)u->argv);
    }
    const char *auth[3];
    int nauth = backend_auth_args(pc, as, auth);
    if (nauth > 0)
        backend_queue_own(b, handshake_reply, true, nauth, auth);

    if (unix_socket) {
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

void backend_send(struct backend *b, struct req *r)
{
    const struct conf_pool *pc = b->pool->conf;

    r->backend = b;
    r->server = (uint16_t)b->server;    /* (slowlog.c names it) */
    b->requests++;
    if (b->state == BACKEND_FAILED) {
        if (backend_dedicated(b) || uv_now(cur_loop->uv) < b->retry_at || b->closing) {
            fail_req(b, r);
            return;
        }
        b->state = BACKEND_DOWN;
    }
    r->deadline = pc->timeout > 0 && !r->blocking ? uv_now(cur_loop->uv) + (uint64_t)pc->timeout
                                                  : 0;
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
    int timeout = b->pool->conf->timeout;

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
    b->failures = 0;
    b->retry_at = 0;
    b->run_id[0] = '\0';
    b->state = BACKEND_DOWN;
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

/* ---- dedicated connections ------------------------------------------------------ */

/* Spare dedicated connections kept per server: enough for as many clients
 * in transactions or blocking commands at once, so that they seldom wait
 * for a connect; bounded, and closed when the pool goes idle. */
#define BACKEND_SPARES_PER_SERVER 64

int backend_auth_args(const struct conf_pool *pc, enum backend_as as, const char *argv[3])
{
    const char *user = NULL, *password = NULL;

    switch (as) {
    case BACKEND_AS_CLIENT:
        user = pc->backend_user, password = pc->backend_password;
        break;
    case BACKEND_AS_INTERNAL:
        user = pc->internal_user, password = pc->internal_password;
        break;
    case BACKEND_AS_KEYLESS:
        user = pc->keyless_user, password = pc->keyless_password;
        break;
    }
    argv[0] = "AUTH";
    if (user != NULL) {
        argv[1] = user, argv[2] = password;
        return 3;
    }
    if (pc->redis_auth != NULL) {
        argv[1] = pc->redis_auth;
        return 2;
    }
    return 0;
}

static struct backend *acquire(struct pool *p, uint32_t server, struct client *owner,
                               enum backend_role role, enum backend_as as)
{
    struct backend *b;
    /* Replies are forwarded as they come: in the client's protocol. A
     * subscriber's connection stays in RESP2, whose messages pubsub.c
     * relays as RESP3 pushes (the same bytes but the first). */
    bool resp3 = owner != NULL && owner->resp3 && role != BACKEND_SUBSCRIBER;
    /* Its client's database; channels have none. */
    uint32_t db = owner != NULL && role != BACKEND_SUBSCRIBER ? owner->db
                                                              : (uint32_t)p->conf->redis_db;

    TAILQ_FOREACH(b, &p->dedicated, link) {
        if (b->role != BACKEND_SPARE)
            break;                  /* spares are kept at the head */
        if (b->server == server && b->state == BACKEND_UP && !b->closing &&
            b->resp3 == resp3 && b->db == db && b->as == as && b->creds_gen == p->creds_gen) {
            TAILQ_REMOVE(&p->dedicated, b, link);
            p->nspare--;
            goto take;
        }
    }
    b = xmalloc(sizeof(*b));
    backend_init(b, p, server);
    b->resp3 = resp3;
    b->db = db;
    b->as = as;
    p->ndedicated++;
take:
    b->owner = owner;
    b->role = role;
    b->retired = 0;
    TAILQ_INSERT_TAIL(&p->dedicated, b, link);
    return b;
}

struct backend *backend_acquire(struct pool *p, uint32_t server, struct client *owner,
                                enum backend_role role)
{
    return acquire(p, server, owner, role, BACKEND_AS_CLIENT);
}

struct backend *backend_acquire_internal(struct pool *p, uint32_t server, struct client *owner)
{
    return acquire(p, server, owner, BACKEND_ONE_OFF, BACKEND_AS_INTERNAL);
}

struct backend *backend_acquire_keyless(struct pool *p, uint32_t server, struct client *owner)
{
    struct backend *b;

    /* A client's scripts run one after another (pin_keyless): a pipeline
     * of them shares the one connection its first took, while it lasts. */
    TAILQ_FOREACH_REVERSE(b, &p->dedicated, backend_list, link) {
        if (b->role == BACKEND_SPARE)
            break;                  /* in use ones are kept at the tail */
        if (b->owner == owner && b->as == BACKEND_AS_KEYLESS && b->server == server &&
            !b->closing && b->state != BACKEND_FAILED && b->resp3 == owner->resp3 &&
            b->db == owner->db && b->creds_gen == p->creds_gen)
            return b;
    }
    return acquire(p, server, owner, BACKEND_ONE_OFF, BACKEND_AS_KEYLESS);
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

void backend_retire(struct backend *b)
{
    b->role = BACKEND_ONE_OFF;
    b->retired = 1;
    if (backend_idle(b) && !gate_waits_on(b->owner, b))
        backend_release(b, true);
}

void backend_release(struct backend *b, bool clean)
{
    struct pool *p = b->pool;

    b->owner = NULL;
    /* One with a CLIENT UNBLOCK on its way (mig.c) is closed: the next
     * client's command there would be the one unblocked. */
    if (clean && b->state == BACKEND_UP && !b->closing && backend_idle(b) && !b->unblocking &&
        b->creds_gen == p->creds_gen &&
        p->nspare < BACKEND_SPARES_PER_SERVER * p->nservers && p->servers[b->server].active &&
        !cur_loop->stopping) {
        /* Spares first: backend_acquire and backend_close_spares stop at
         * the first one that is not. One that is not stays where it is,
         * behind them, until it is closed and freed. */
        TAILQ_REMOVE(&p->dedicated, b, link);
        TAILQ_INSERT_HEAD(&p->dedicated, b, link);
        b->role = BACKEND_SPARE;
        p->nspare++;
        return;
    }
    b->role = BACKEND_LEFT;
    if (b->h.handle.loop == NULL || (uv_is_closing(&b->h.handle) && !b->closing)) {
        dedicated_free(b);          /* never connected, or failed and closed */
        return;
    }
    if (b->closing)
        return;                     /* close_cb frees it */
    snprintf(b->reason, sizeof(b->reason), "its client went away");
    b->state = BACKEND_FAILED;
    backend_abort(b);
}

void backend_close_spares(struct pool *p, uint32_t server)
{
    struct backend *b, *next;

    for (b = TAILQ_FIRST(&p->dedicated); b != NULL && b->role == BACKEND_SPARE; b = next) {
        next = TAILQ_NEXT(b, link);
        if (server != UINT32_MAX && b->server != server)
            continue;
        b->role = BACKEND_LEFT;
        p->nspare--;
        snprintf(b->reason, sizeof(b->reason), "idle");
        b->state = BACKEND_FAILED;
        backend_abort(b);           /* close_cb frees it */
    }
}

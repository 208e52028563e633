/* client_write.c -- a client's replies: each request's accounted for as it
 * is complete (req_done), joined to the done ones next to it while they
 * wait, and written back in request order, every ready one in one write
 * per loop turn (client_flush, from the loop's flush). client.c reads and
 * frames the requests; client_limits.c applies what a client may hold. */
#include <assert.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/transport/client_int.h"
#include "proxy/transport/loop.h"
#include "proxy/base/tls.h"
#include "proxy/base/util.h"

#define CLIENT_IOV_MAX       1024
#define CLIENT_FOLD_COPY     512         /* waiting replies up to this long are copied */

static void client_fold(struct client *c, struct req *r);

void req_done(struct req *r)
{
    struct client *c = r->client;

    if (r->parent != NULL) {
        r->done = 1;
        client_on.fragment_done(r);
        return;
    }
    if (c != NULL && !c->closing && r->hook != NULL && r->hook(r) != 0)
        return;                     /* sent again: its reply is still to come */
    r->done = 1;
    if (c == NULL || c->closing)
        return;
    client_on.replied(c, r, cur_loop->now_us > r->t0_us ? cur_loop->now_us - r->t0_us : 0);
    c->inflight--;
    if (r->silent)
        msg_release(&r->rsp);       /* CLIENT REPLY OFF or SKIP */
    /* Its request's bytes are let go (written to a server, or never
     * sent), its reply's held: before the hooks, which may queue a reply
     * of shardis's own behind r and join it to r's (a pin given back
     * flushes a tracking client: track.c). */
    c->rsp_bytes += r->rsp.len;
    client_hold(c, (int64_t)r->rsp.len - (int64_t)r->held);
    r->held = 0;
    if (r->before_hold)
        client_on.held_answered(c, r);
    if (c->pin != NULL && r->backend == c->pin)
        client_on.pin_answered(c);
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

void client_tls_sent(void *data, int status)
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
        client_close(c);            /* (a limit's: client_limits.c) */
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

/* backend_read.c -- a server connection's replies: the bytes it reads
 * (deciphered first over TLS) framed one reply at a time by the reply
 * scanner, each handed to the request it answers, in the order they were
 * written (pendq). A frame that answers nothing (a subscriber's message)
 * goes to hooks.frame; the proxy's own requests' replies to their own
 * callbacks (req.on_reply), so that this file never learns what a
 * request was for. Any reply that cannot be matched fails the connection:
 * a pipeline cannot be resynchronised. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/backend_int.h"
#include "proxy/transport/client.h"
#include "proxy/base/log.h"
#include "proxy/transport/loop.h"
#include "proxy/base/tls.h"
#include "proxy/base/util.h"

void backend_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct backend *b = container_of(h, struct backend, h);
    (void)suggested;
    if (b->tls != NULL)
        tls_read_buf(b->tls, buf);  /* ciphertext: backend_read_tls */
    else
        rstream_buf(&b->in, buf);
}
/* r, a client's request (or a fragment of one), is answered in r->rsp. */
static void answered(struct backend *b, struct req *r)
{
    const struct backend_hooks *h = backend_above;

    holdoff_ok(&b->hold);
    /* A master demoted while connected: its Sentinels know where to. */
    if (b->watched && msg_first(&r->rsp) == RESP_ERROR) {
        if (resp_rd_error_is(&r->rsp, "READONLY")) {
            if (h->doubt != NULL)
                h->doubt(b->pool, b->server, "a -READONLY reply");
        } else if (b->replica != 0 && (resp_rd_error_is(&r->rsp, "LOADING") ||
                                       resp_rd_error_is(&r->rsp, "MASTERDOWN"))) {
            if (h->replica_shun != NULL)
                h->replica_shun(b->pool, b->server, b->replica);
        }
    }
    if (r->unblocked && h->unblocked != NULL && h->unblocked(r))
        return;                     /* sent again, to the key's new owner */
    if (b->tracking && h->tracked != NULL)
        h->tracked(b, r);           /* (every reply: the pushes after it are its) */
    if (r->client != NULL || r->parent != NULL)
        req_done(r);
    else
        req_maybe_free(r);
}

/* A push frame, bytes [b->framed, off) of b->in. An owned connection
 * that hears pushes (a Sentinel's link) hands it to its owner, which says
 * whether it is the reply of the oldest request (RESP3 confirms a
 * SUBSCRIBE with a push): 1, it goes to that request; else it was a
 * message, read there: 0 (-1: b failed meanwhile). A tracking connection
 * hands its server's invalidations up (hooks.invalidate), in the order
 * they came among the replies. Any other connection gets one only for
 * what shardis does not ask of it (subscriber connections speak RESP2):
 * out of band, dropped. */
static int pushed(struct backend *b, uint64_t off)
{
    if (b->own != NULL && b->own->push != NULL) {
        struct msg frame = {0};
        rstream_slice(&b->in, b->framed, off, &frame);
        bool reply = b->own->push(b, &frame);
        msg_release(&frame);
        if (b->state == BACKEND_FAILED)
            return -1;
        if (reply)
            return 1;
    } else if (b->tracking && backend_above->invalidate != NULL) {
        struct msg frame = {0};
        rstream_slice(&b->in, b->framed, off, &frame);
        backend_above->invalidate(b, &frame);
        msg_release(&frame);
    } else {
        log_warn("backend %s: a push frame on a connection that asked for none: dropped",
                 backend_label(b));
    }
    b->framed = off;
    resp_rsp_reset(&b->scan);
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
            int rc = pushed(b, off);
            if (rc < 0)
                return -1;
            if (rc == 0)
                continue;
        }
        if (b->role == BACKEND_SUBSCRIBER && (r == NULL || r->on_reply == NULL) &&
            backend_above->frame != NULL) {
            backend_above->frame(b, b->framed, off);  /* a message, or a confirmation */
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
        answered(b, r);
    }
    if (b->own != NULL && b->own->reply_max != 0 && b->in.rx - b->framed > b->own->reply_max) {
        backend_fail(b, "a reply too long");
        return -1;
    }
    rstream_trim(&b->in, b->framed);
    /* Its one request is answered, or is not sent yet: it waits at its
     * client's gate for this connection (pin_keyless's, while the
     * handshake was answered). */
    const struct backend_hooks *h = backend_above;
    if (b->role == BACKEND_ONE_OFF && backend_idle(b) &&
        (h->waits_on == NULL || !h->waits_on(b->owner, b))) {
        if (h->idle != NULL)
            h->idle(b);
    } else if (b->owner != NULL && h->progress != NULL) {
        h->progress(b->owner);      /* the last reply its client waited for? */
    }
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
    if (b->state == BACKEND_CONNECTING && tls_ready(b->tls))
        backend_up(b);
}

void backend_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
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
    b->nreads++;
    if (b->tls != NULL)
        backend_read_tls(b, buf->base, (size_t)nread);
    else
        backend_consume(b, (size_t)nread);
}

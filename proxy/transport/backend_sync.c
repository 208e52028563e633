/* backend_sync.c -- blocking calls: one command on a server or a Sentinel
 * and its reply, where no loop runs: at start, before the process's loop
 * does (the migration record, INFO, the group's channels, the Sentinels'
 * first answers, the ACL users' check), or at all (shardis acl --check).
 *
 * A call is an ordinary connection (struct backend), owned (struct
 * backend_owner: it never reaches the pool's hooks, which such a process
 * may not have registered), run to its reply on a loop of its own
 * (loop_enter): connecting, TLS, the handshake (its greeting: AUTH as the
 * pool's internal user and SELECT, or a Sentinel's AUTH; RESP2), the
 * deadlines' failures and the reply reader are every connection's code.
 * What is the call's own is its turns of the loop and its clock: no step
 * waits more than BACKEND_SYNC_MS for a byte (connecting, each part of a
 * TLS handshake, each part of a reply), so a server that took the
 * connection and went quiet costs a second, as the callers count on (a
 * server stopped at start: ops/info.c, mig_record.c); and the replies,
 * once connected, come within 3 x BACKEND_SYNC_MS in all, so one that
 * drips a byte at a time cannot hold the start either:
 *
 *   connecting --connected (TLS handshake over)--> up --the reply--> done
 *        |   a second without a byte              |  the same, or 3 s in all
 *        +----------------------------------------+--> failed (no reply) --> done
 *
 * then the connection and the timer are closed, and the loop with them.
 * Everything lives on the caller's stack for the call. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/backend_int.h"
#include "proxy/transport/loop.h"
#include "proxy/base/log.h"
#include "proxy/base/resp.h"
#include "proxy/base/util.h"

#define BACKEND_SYNC_MS  1000           /* the most a step waits for a byte */
#define BACKEND_SYNC_MAX (64u << 20)    /* the most a blocking call reads */

/* One call, on the caller's stack (sync_run). */
struct sync_call {
    struct backend b;
    struct backend_server sv;   /* where, as the caller said (its pointers borrowed) */
    uv_timer_t     timer;       /* the deadline of the step under way */
    uint64_t       end;         /* loop ms: the replies' deadline, once up; 0 before */
    uint64_t       seen;        /* b.rx_ms when the step's clock last started */
    uint64_t       wait;        /* ... and for how long (ms) */
    bool           raw;         /* the reply's bytes as they came, not its value */
    bool           done;        /* the command's reply came, or b failed */
    char          *val;         /* what the call gives back (the caller frees it), or NULL */
    size_t         len;
};

static struct sync_call *call_of(const struct backend *b)
{
    return container_of((struct backend *)b, struct sync_call, b);
}

/* The value of one whole reply, the len bytes at p: 0, and into *out
 * (when out is given) a bulk's bytes or an array of bulks' elements one
 * per line (nil ones left out), else NULL; -1 for an error reply, or
 * anything else in an array. */
static int sync_value(const char *p, size_t len, char **out, size_t *outlen)
{
    struct resp_rd rd;
    struct resp_val v, e;
    char *val = NULL;
    size_t vlen = 0;

    resp_rd_init_flat(&rd, p, len);
    if (resp_rd_next(&rd, &v) < 0 || v.type == RESP_ERROR || v.type == RESP_BLOBERR)
        return -1;
    if ((v.type == RESP_BULK && !v.nil) || v.type == RESP_SIMPLE) {
        val = xmalloc(v.len + 1);
        memcpy(val, v.p, v.len);
        vlen = v.len;
        val[vlen] = '\0';
    } else if (v.type == RESP_ARRAY || v.type == RESP_SET) {
        val = xstrdup("");              /* nil or empty: "" */
        for (long long i = 0; i < v.n; i++) {
            if (resp_rd_next(&rd, &e) < 0 || e.type != RESP_BULK) {
                free(val);
                return -1;
            }
            if (e.nil)
                continue;
            val = xrealloc(val, vlen + e.len + 2);
            if (i > 0)
                val[vlen++] = '\n';
            memcpy(val + vlen, e.p, e.len);
            vlen += e.len;
            val[vlen] = '\0';
        }
    }
    if (out != NULL && val != NULL) {
        *out = val;
        *outlen = vlen;
    } else {
        free(val);
    }
    return 0;
}

/* r's reply, its bytes in one buffer (the caller frees it). */
static char *flat(const struct req *r)
{
    char *p = xmalloc(r->rsp.len);

    msg_copy(&r->rsp, 0, r->rsp.len, p);
    return p;
}

/* The reply of what the caller sends before its command (pre): where the
 * call gives a value, of no use if it is an error (as sync_value judges),
 * which fails the call; where it gives bytes (raw), not judged. */
static int sync_step_reply(struct backend *b, struct req *r)
{
    if (r->rsp.len == 0 || call_of(b)->raw)
        return 0;                       /* (failed: the command is answered so too) */
    char *p = flat(r);
    int rc = sync_value(p, r->rsp.len, NULL, NULL);
    free(p);
    if (rc < 0) {
        backend_fail(b, "a reply of no use");
        return -1;
    }
    return 0;
}

/* The command's reply: the call is done, with its bytes (raw) or value,
 * or with nothing (none came: b failed). */
static int sync_reply(struct backend *b, struct req *r)
{
    struct sync_call *c = call_of(b);

    c->done = true;
    if (r->rsp.len == 0)
        return 0;
    char *p = flat(r);
    if (c->raw) {
        c->val = p;
        c->len = r->rsp.len;
        return 0;
    }
    if (sync_value(p, r->rsp.len, &c->val, &c->len) < 0)
        c->val = NULL;
    free(p);
    return 0;
}

static void sync_expired(uv_timer_t *t)
{
    struct sync_call *c = container_of(t, struct sync_call, timer);
    char why[64];

    if (c->done)
        return;                         /* (the reply came in the same turn) */
    snprintf(why, sizeof(why), "%sno answer in %llu ms", c->b.tls != NULL ? "TLS: " : "",
             (unsigned long long)c->wait);
    backend_fail(&c->b, why);
}

static void sync_server(const struct backend *b, struct backend_server *sv)
{
    *sv = call_of(b)->sv;
}

/* The step's clock starts (again): BACKEND_SYNC_MS for the next byte, but
 * never past the replies' deadline. */
static void sync_step(struct sync_call *c)
{
    uint64_t now = uv_now(cur_loop->uv), wait = BACKEND_SYNC_MS;

    if (c->end != 0)
        wait = c->end > now ? (c->end - now < wait ? c->end - now : wait) : 0;
    c->seen = c->b.rx_ms;
    c->wait = wait;
    uv_timer_start(&c->timer, sync_expired, wait, 0);
}

/* Connected (its TLS handshake over): its handshake and the command are
 * written next; all their replies are due within 3 steps' time. */
static void sync_up(struct backend *b)
{
    struct sync_call *c = call_of(b);

    log_debug("backend %s connected for a blocking call%s", c->sv.label,
              b->tls != NULL ? " (TLS)" : "");
    c->end = uv_now(cur_loop->uv) + 3 * BACKEND_SYNC_MS;
    sync_step(c);
}

/* Its caller says nothing of a failure (the call gives NULL), but of TLS's,
 * whose text says what is wrong with a certificate or a server: what
 * tls_error says (its texts start so, as the deadline's does over TLS), or
 * a connection closed under TLS. A refused reply is not TLS's. */
static void sync_failed(struct backend *b, const char *why)
{
    struct sync_call *c = call_of(b);

    if (b->tls != NULL && (strncmp(why, "TLS", 3) == 0 || strcmp(why, "connection closed") == 0))
        log_warn("pool '%s': %s: %s", c->sv.conf->name, c->sv.label, why);
    else
        log_debug("pool '%s': %s: a blocking call failed: %s", c->sv.conf->name, c->sv.label,
                  why);
}

/* A call for a value judges every reply (a refused AUTH or SELECT fails
 * it); one for bytes (raw) gives its command's reply, whatever the
 * handshake got: its caller reads it. */
static const struct backend_owner sync_internal = {
    .greeting = BACKEND_GREET_INTERNAL,
    .server = sync_server,
    .up = sync_up,
    .failed = sync_failed,
    .reply_max = BACKEND_SYNC_MAX,
};

static const struct backend_owner sync_internal_raw = {
    .greeting = BACKEND_GREET_INTERNAL,
    .lenient = true,
    .server = sync_server,
    .up = sync_up,
    .failed = sync_failed,
    .reply_max = BACKEND_SYNC_MAX,
};

static const struct backend_owner sync_sentinel = {
    .greeting = BACKEND_GREET_SENTINEL,
    .lenient = true,
    .server = sync_server,
    .up = sync_up,
    .failed = sync_failed,
    .reply_max = BACKEND_SYNC_MAX,
};

/* Run the call on a loop of its own: connect, queue pre (if pre_argc > 0)
 * and the command behind the handshake, and turn the loop, writing what
 * is queued after each turn as the process's flush does, until the reply
 * or the deadline; then close everything it opened. */
static char *sync_run(const struct backend_server *sv, const struct backend_owner *own,
                      int pre_argc, const char *const *pre, int argc, const char *const *argv,
                      bool raw, size_t *len)
{
    struct sync_call c = {.sv = *sv, .raw = raw};
    struct loop l, *prev;
    uv_loop_t uv;

    if (loop_enter(&l, &uv, &prev) < 0)
        return NULL;
    backend_init_owned(&c.b, NULL, &c.sv.conf, own);
    uv_timer_init(&uv, &c.timer);
    sync_step(&c);
    backend_preconnect(&c.b);           /* (its handshake queued) */
    if (c.b.state == BACKEND_CONNECTING) {
        if (pre_argc > 0)
            backend_queue_own(&c.b, sync_step_reply, false, pre_argc, pre);
        backend_queue_own(&c.b, sync_reply, false, argc, argv);
    }
    while (c.b.state == BACKEND_CONNECTING || (c.b.state == BACKEND_UP && !c.done)) {
        loop_flush_backends();
        uv_run(&uv, UV_RUN_ONCE);
        if (!c.done && c.b.rx_ms != c.seen && c.b.state != BACKEND_FAILED)
            sync_step(&c);              /* a byte came: the step starts again */
    }
    backend_close(&c.b);
    uv_close((uv_handle_t *)&c.timer, NULL);
    loop_leave(&l, prev);
    *len = c.len;
    return c.val;
}

char *backend_sync(const struct backend_server *sv, int pre_argc, const char *const *pre,
                   int argc, const char *const *argv, bool raw, size_t *len)
{
    if (!sv->resolved) {
        /* (A pool with sentinels: where the file guessed may be a replica,
         * or another shard's server. Nothing is read from a guess.) */
        log_warn("pool '%s': %s: its master's address is not known: not asked",
                 sv->conf->name, sv->label);
        return NULL;
    }
    return sync_run(sv, raw ? &sync_internal_raw : &sync_internal, pre_argc, pre, argc, argv,
                    raw, len);
}

char *backend_sync_sentinel(const struct backend_server *sv, int argc, const char *const *argv,
                            size_t *len)
{
    return sync_run(sv, &sync_sentinel, 0, NULL, argc, argv, true, len);
}

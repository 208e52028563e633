/* backend_hello.c -- the handshake a server connection starts with (an
 * owned one has its owner's kind: hello_sentinel, hello_internal),
 * queued ahead of everything as the proxy's own requests
 * (backend_queue_own), each with the reply callback that judges it: AUTH
 * as the user its enum backend_as names (backend_auth_args, the one place
 * that decides; the pool's clients' user's steps are the pool's own:
 * hooks.sign_in), the keyless_user's check, SELECT, HELLO (which, where
 * the pool follows Sentinels, must say the server is a master), then what
 * other modules ask of a new connection (hooks.connecting; CLIENT ID of a
 * dedicated one, for mig.c). A refused step fails the connection: what
 * would follow it would run as the wrong user, in the wrong database or
 * on a replica. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/backend_int.h"
#include "proxy/base/log.h"
#include "proxy/transport/loop.h"
#include "proxy/base/util.h"

/* AUTH or SELECT: +OK; HELLO 3: the server's map (the connection speaks
 * RESP3 from here on). Anything else: the connection is no good. */
int backend_hello_reply(struct backend *b, struct req *r)
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
int backend_role_reply(struct backend *b, struct req *r)
{
    char *flat;
    bool master;
    char why[128];

    if (r->rsp.len == 0)
        return 0;                   /* failed: the connection has failed already */
    flat = xmalloc(r->rsp.len);
    msg_copy(&r->rsp, 0, r->rsp.len, flat);
    master = backend_above->says_master != NULL && backend_above->says_master(flat, r->rsp.len);
    free(flat);
    if (master) {
        b->checking = 0;
        loop_mark_backend(b);      /* what waited for it */
        return 0;
    }
    snprintf(why, sizeof(why), "%.96s does not say it is a master", backend_addr(b));
    backend_fail(b, why);
    if (backend_above->doubt != NULL)
        backend_above->doubt(b->pool, b->server, why);
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
    const char *user = (*b->conf)->keyless_user ? (*b->conf)->keyless_user : "?";
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
    log_error("backend %s: %s", backend_label(b), why);
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
    if (backend_hello_reply(b, r) < 0)
        return -1;
    b->verifying = 0;
    if (b->owner != NULL && backend_above->ready != NULL)
        backend_above->ready(b->owner);     /* its script may go */
    return 0;
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

/* A Sentinel's HELLO 3 [AUTH ...]: its map, as any HELLO's; answered,
 * the link is good, and a later failure backs off from the start. */
static int sentinel_hello_reply(struct backend *b, struct req *r)
{
    if (r->rsp.len == 0)
        return 0;                   /* failed: the connection has failed already */
    if (backend_hello_reply(b, r) < 0)
        return -1;
    holdoff_ok(&b->hold);
    return 0;
}

/* A lenient owner's handshake step (backend_owner.lenient): whatever it
 * got, its owner reads what the command after it gets. */
static int unjudged_reply(struct backend *b, struct req *r)
{
    (void)b, (void)r;
    return 0;
}

/* A Sentinel's handshake: HELLO 3, signed in as its default user where
 * the pool has a sentinel_auth (in RESP2, a blocking call's: that AUTH
 * alone). Nothing of a server's: no ACL user, no SELECT, no role to
 * check, nothing of the modules'. */
static void hello_sentinel(struct backend *b, const struct backend_server *sv)
{
    const char *password = sv->conf->sentinel_auth;
    req_reply_cb *judge = b->own->lenient ? unjudged_reply : sentinel_hello_reply;

    if (!b->resp3) {
        if (password != NULL)
            backend_queue_own(b, judge, true, 2, (const char *const[]){"AUTH", password});
    } else if (password != NULL) {
        backend_queue_own(b, judge, true, 5,
                          (const char *const[]){"HELLO", "3", "AUTH", "default", password});
    } else {
        backend_queue_own(b, judge, true, 2, (const char *const[]){"HELLO", "3"});
    }
}

/* shardis's own call on a pool's server (a blocking one, backend_sync.c):
 * signed in as its internal user, in its redis_db, in RESP2. Nothing of
 * a clients' connection's: no clients' user, no role to check (the caller
 * asks, sentinel.c), nothing of the modules'. */
static void hello_internal(struct backend *b, const struct backend_server *sv)
{
    req_reply_cb *judge = b->own->lenient ? unjudged_reply : backend_hello_reply;
    const char *auth[3];
    int nauth;

    if (b->db != 0) {
        char db[16];
        snprintf(db, sizeof(db), "%u", b->db);
        backend_queue_own(b, judge, true, 2, (const char *const[]){"SELECT", db});
    }
    if ((nauth = backend_auth_args(sv->conf, BACKEND_AS_INTERNAL, auth)) > 0)
        backend_queue_own(b, judge, true, nauth, auth);
}

/* The handshake goes first, ahead of anything already queued; each goes
 * to the front, so the last queued is the first sent. */
void backend_hello(struct backend *b, const struct backend_server *sv)
{
    const struct conf_pool *pc = sv->conf;

    b->client_id = 0;
    b->creds_gen = sv->creds_gen;           /* the credentials it authenticates with */
    if (b->own != NULL) {
        b->verifying = b->watched = b->checking = b->role_asked = 0;
        if (b->own->greeting == BACKEND_GREET_SENTINEL)
            hello_sentinel(b, sv);
        else
            hello_internal(b, sv);
        return;
    }
    /* (Sent last: after HELLO 3, in which its server pushes invalidations
     * on this connection, and after AUTH, which it needs.) */
    b->held_back = 0;
    if (b->tracking && backend_above->tracking_hello != NULL)
        backend_above->tracking_hello(b);
    if (backend_dedicated(b))   /* for CLIENT UNBLOCK when a reload moves keys (mig.c) */
        backend_queue_own(b, client_id_reply, true, 2, (const char *const[]){"CLIENT", "ID"});
    if (backend_above->connecting != NULL)
        backend_above->connecting(b);       /* (genkey.c: the shared ones' script) */
    b->verifying = b->as == BACKEND_AS_KEYLESS;
    /* A master's connection checks its role; a replica's carries only
     * reads, which any server may answer (a replica just promoted too). */
    b->watched = sv->sentinels;
    b->checking = sv->sentinels && b->replica == 0;
    b->role_asked = 0;
    if (b->checking)                        /* a master, or nothing is written */
        backend_queue_own(b, backend_role_reply, true, 2,
                          (const char *const[]){"HELLO", b->resp3 ? "3" : "2"});
    else if (b->resp3)
        backend_queue_own(b, backend_hello_reply, true, 2, (const char *const[]){"HELLO", "3"});
    if (b->db != 0) {
        char db[16];
        snprintf(db, sizeof(db), "%u", b->db);
        backend_queue_own(b, backend_hello_reply, true, 2, (const char *const[]){"SELECT", db});
    }
    if (b->as == BACKEND_AS_KEYLESS) {  /* checked as the internal user, then used */
        backend_queue_own(b, keyless_auth_reply, true, 3,
                          (const char *const[]){"AUTH", pc->keyless_user, pc->keyless_password});
        backend_queue_own(b, keyless_check_reply, true, 3,
                          (const char *const[]){"ACL", "GETUSER", pc->keyless_user});
    }
    /* A clients' connection signs in as the pool's clients' user where it
     * has one (core/srvuser.c queues those steps), after an AUTH as
     * shardis's own user, which may make that user. */
    enum backend_as as = b->as;
    if (as == BACKEND_AS_CLIENT && backend_above->sign_in != NULL && backend_above->sign_in(b))
        as = BACKEND_AS_INTERNAL;
    else if (as == BACKEND_AS_KEYLESS)
        as = BACKEND_AS_INTERNAL;
    const char *auth[3];
    int nauth = backend_auth_args(pc, as, auth);
    if (nauth > 0)
        backend_queue_own(b, backend_hello_reply, true, nauth, auth);
}

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
    r->deadline = backend_deadline(b, r, 0, uv_now(cur_loop->uv));
    if (front)
        TAILQ_INSERT_HEAD(&b->sendq, r, bq);
    else
        TAILQ_INSERT_TAIL(&b->sendq, r, bq);
}

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


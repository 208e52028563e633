/* pubsub.c -- publish and subscribe across the servers.
 *
 * PUBLISH and SPUBLISH go to the server that owns the channel's name on the
 * ring (the hash tag applies), like a key. A subscriber needs connections
 * of its own in subscriber mode, at most one to each server (dedicated
 * connections, pool_conn_acquire): SSUBSCRIBE goes to the channel's owner;
 * SUBSCRIBE and PSUBSCRIBE go to every server, so that a reload that gives
 * a channel another owner (and its PUBLISHes another server) leaves its
 * subscribers listening, and a pattern matches a channel anywhere; a
 * message is published on one server only, so it arrives once.
 *
 * Replies are shardis's own, counted over all the client's subscriptions
 * as redis-server counts (channels and patterns together, shard channels
 * apart), and sent once every server involved has confirmed, so no
 * message published after the client saw "subscribe" can be missed.
 * Unsubscribing answers at once, and from then on messages still in
 * flight for that name are dropped. Messages are relayed whole, as the
 * server's own bytes, so frames from several servers never interleave.
 * A subscriber connection that fails closes its client: its
 * subscriptions there are gone, and a client reconnects to restore them.
 *
 * RESP3: subscriber connections speak RESP2 whatever the client speaks (a
 * message is the same frame but its first byte: relayed as a push, '>'),
 * and a RESP3 subscriber may send any command meanwhile, routed as any
 * other; its replies and the messages keep one queue, in the order they
 * arrive.
 *
 * Channels under "__shardis:" are shardis's own (group.c registers each
 * proxy there, WAIT publishes its marker there): a client can neither
 * name one (PUBLISH, SPUBLISH, (S)SUBSCRIBE, or a pattern that starts
 * there) nor receive one's messages through a pattern that happens to
 * match it ("*", "__shard*"), which are dropped here on their way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/core/acl.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/modules/frag.h"
#include "proxy/core/gate.h"
#include "proxy/base/log.h"
#include "proxy/base/text.h"
#include "proxy/modules/pin.h"
#include "proxy/core/pool.h"
#include "proxy/core/pool_conn.h"
#include "proxy/modules/pubsub.h"
#include "proxy/core/route.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

enum sub_kind { SUB_CHANNEL, SUB_PATTERN, SUB_SHARD };

static const char *const sub_verb[] = {"subscribe", "psubscribe", "ssubscribe"};
static const char *const unsub_verb[] = {"unsubscribe", "punsubscribe", "sunsubscribe"};

#define PUBSUB_RESERVED_ERR "ERR channels under '" SHARDIS_RESERVED "' are shardis's own"

struct sub_name {
    char    *name;
    uint32_t len;
    uint32_t server;            /* SUB_SHARD: the server it was subscribed on */
    uint8_t  kind;              /* enum sub_kind */
};

/* A subscriber's state. Names are few per client: a list is enough. */
struct subs {
    struct client   *client;
    TAILQ_ENTRY(subs) link;     /* on pool.subscribers */
    struct backend **conns;     /* [nconns]: subscriber connection per server, or NULL */
    uint32_t        *sending;   /* [nconns]: its subscriptions there not yet confirmed,
                                   counted in pool.subscribing too */
    uint32_t         nconns;    /* the pool's servers when last grown (reloads add some) */
    struct sub_name *names;
    uint32_t         n, cap;
    uint32_t         count[3];  /* names of each kind */
};

static struct subs *subs_of(struct client *c)
{
    struct client_rare *rare = client_rare(c);

    if (rare->subs == NULL) {
        rare->subs = xcalloc(1, sizeof(*rare->subs));
        rare->subs->client = c;
        TAILQ_INSERT_TAIL(&c->pool->subscribers, rare->subs, link);
    }
    if (rare->subs->nconns < c->pool->nservers) {
        struct subs *s = rare->subs;
        s->conns = xrealloc(s->conns, c->pool->nservers * sizeof(*s->conns));
        memset(s->conns + s->nconns, 0, (c->pool->nservers - s->nconns) * sizeof(*s->conns));
        s->sending = xrealloc(s->sending, c->pool->nservers * sizeof(*s->sending));
        memset(s->sending + s->nconns, 0, (c->pool->nservers - s->nconns) * sizeof(*s->sending));
        s->nconns = c->pool->nservers;
    }
    return rare->subs;
}

static int find(const struct subs *s, int kind, const char *name, size_t len)
{
    for (uint32_t i = 0; s != NULL && i < s->n; i++)
        if (s->names[i].kind == kind && s->names[i].len == len &&
            memcmp(s->names[i].name, name, len) == 0)
            return (int)i;
    return -1;
}

/* The count redis-server reports after a (un)subscription of this kind. */
static uint32_t reported(const struct subs *s, int kind)
{
    if (s == NULL)
        return 0;
    return kind == SUB_SHARD ? s->count[SUB_SHARD] : s->count[SUB_CHANNEL] + s->count[SUB_PATTERN];
}

/* [verb, name (NULL: nil), count]: a push, as redis-server's (un)subscribe
 * confirmations are. */
static void reply_frame(struct client *c, struct req *r, const char *verb, const char *name,
                        size_t len, uint32_t count)
{
    struct resp_w w = client_w(c, &r->rsp);

    resp_w_push(&w, 3);
    resp_w_bulk_str(&w, verb);
    if (name == NULL)
        resp_w_null(&w);
    else
        resp_w_bulk(&w, name, len);
    resp_w_int(&w, count);
}

static struct backend *conn(struct client *c, uint32_t server)
{
    struct subs *s = subs_of(c);

    if (s->conns[server] == NULL) {
        s->conns[server] = pool_conn_acquire(c->pool, server, c, BACKEND_SUBSCRIBER);
    }
    return s->conns[server];
}

/* c's subscriptions on their way to server: delta more (or, confirmed or
 * gone, fewer). Publishers waiting for them go once there are none. */
static void sending(struct client *c, uint32_t server, int delta)
{
    struct subs *s = c->rare != NULL ? c->rare->subs : NULL;
    _Atomic uint32_t *all;

    if (s == NULL)
        return;                     /* (closed meanwhile: pubsub_client_gone counted) */
    s->sending[server] += (uint32_t)delta;
    all = pool_subscribing_counts(c->pool);
    /* (Publishers waiting on other loops go at their next tick.) */
    if (atomic_fetch_add_explicit(&all[server], (uint32_t)delta, memory_order_relaxed) +
        (uint32_t)delta == 0)
        gate_kick_publishers(c->pool);
}

/* Send verb and the names args[first..] whose server is server (every
 * name, for a pattern) to that server; wait (the client's r) for its
 * confirmations, or not (r NULL). */
static void send_names(struct client *c, struct req *r, struct args *a, uint32_t first,
                       const char *verb, uint32_t server, const uint32_t *owner)
{
    struct req *q = req_get();
    struct resp_w w = client_cmd_w(c, &q->out);
    uint32_t n = 0;

    for (uint32_t i = first; i < a->argc; i++)
        n += owner == NULL || owner[i] == server;
    if (n == 0) {
        req_maybe_free(q);
        return;
    }
    resp_w_array(&w, (long long)n + 1);
    resp_w_bulk_str(&w, verb);
    for (uint32_t i = first; i < a->argc; i++) {
        if (owner != NULL && owner[i] != server)
            continue;
        size_t len;
        const char *name = args_get(a, i, &len);
        resp_w_bulk(&w, name, len);
    }
    q->u.sub.left = n;              /* a confirmation for each name */
    q->u.sub.wait = r;
    if (r != NULL)
        r->u.sub.left++;
    if (r != NULL)                  /* a subscription: PUBLISHes there wait for it */
        sending(c, server, 1);
    backend_send(conn(c, server), q);
}

/* ---- (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE ------------------------------------------------ */

static void subscribe(struct client *c, struct req *r, struct args *a, const struct cmd *cmd,
                      int kind)
{
    struct pool *p = c->pool;
    uint32_t *owner = NULL;
    struct subs *s;

    if (client_in_multi(c) || !pin_let_go(c, r)) {
        client_reply_error(c, r, "ERR %s inside a transaction, or with WATCH or a blocking "
                           "command waiting, is not supported by shardis", sub_verb[kind]);
        c->tx_abort = client_in_multi(c);
        req_done(r);
        return;
    }
    for (uint32_t i = 1; i < a->argc; i++) {
        size_t len;
        const char *name = args_get(a, i, &len);
        if (route_internal(name, len)) {    /* a pattern too: it names the namespace */
            client_reply_error(c, r, PUBSUB_RESERVED_ERR);
            req_done(r);
            return;
        }
        if (!c->user->all && !acl_channel_ok(c->user, name, len, kind == SUB_PATTERN)) {
            client_reply_error(c, r, ACL_NOPERM_CHANNELS);
            route_refused(c, r);
            return;
        }
    }
    /* SSUBSCRIBE's channels, like a command's keys, must share a server. */
    if (kind == SUB_SHARD && route_owner(c, r, a, cmd) < 0)
        return;
    if (kind == SUB_SHARD) {
        owner = xmalloc(a->argc * sizeof(*owner));
        for (uint32_t i = 1; i < a->argc; i++) {
            size_t len;
            const char *name = args_get(a, i, &len);
            owner[i] = pool_owner(p, name, len);
        }
    }
    s = subs_of(c);
    for (uint32_t i = 1; i < a->argc; i++) {
        size_t len;
        const char *name = args_get(a, i, &len);
        if (find(s, kind, name, len) < 0) {
            if (s->n == s->cap) {
                s->cap = s->cap ? 2 * s->cap : 8;
                s->names = xrealloc(s->names, s->cap * sizeof(*s->names));
            }
            s->names[s->n].name = xmalloc(len > 0 ? len : 1);
            memcpy(s->names[s->n].name, name, len);
            s->names[s->n].len = (uint32_t)len;
            s->names[s->n].server = owner != NULL ? owner[i] : UINT32_MAX;
            s->names[s->n++].kind = (uint8_t)kind;
            s->count[kind]++;
        }
        reply_frame(c, r, sub_verb[kind], name, len, reported(s, kind));
    }
    c->subscribed = 1;
    r->u.sub.left = 0;
    /* (a subscriber connection that fails at once closes c: no more) */
    for (uint32_t server = 0; server < p->nservers && !c->closing; server++)
        if (p->servers[server].active)
            send_names(c, r, a, 1, sub_verb[kind], server, owner);
    free(owner);
}

/* Tell every server s was subscribed on that name is gone: the owner of a
 * channel may have changed since (a reload), and for a pattern that is
 * every server. Nobody waits for the confirmations. */
static void unsubscribe_servers(struct client *c, struct subs *s, int kind, const char *name,
                                uint32_t len)
{
    for (uint32_t server = 0; server < s->nconns; server++) {
        if (s->conns[server] == NULL)
            continue;
        struct req *q = req_get();
        struct resp_w w = client_cmd_w(c, &q->out);
        resp_w_command(&w, 2, (const char *const[]){unsub_verb[kind], name},
                       (const size_t[]){strlen(unsub_verb[kind]), len});
        q->u.sub.left = 1;
        backend_send(s->conns[server], q);
    }
}

/* Drop the name at s->names[at]: its servers are told, and its messages
 * still in flight are dropped on their way (pubsub_frame). */
static void forget(struct client *c, struct subs *s, uint32_t at)
{
    struct sub_name gone = s->names[at];

    s->names[at] = s->names[--s->n];    /* order does not matter */
    s->count[gone.kind]--;
    unsubscribe_servers(c, s, gone.kind, gone.name, gone.len);
    free(gone.name);
}

static void unsubscribe(struct client *c, struct req *r, struct args *a, int kind)
{
    struct subs *s = c->rare != NULL ? c->rare->subs : NULL;
    bool all = a->argc == 1, any = false;

    /* What to drop: the names given, or every name of this kind. Each is
     * answered now and told to its server without waiting. */
    for (uint32_t i = 1, k = 0; all ? s != NULL && k < s->n : i < a->argc; ) {
        size_t len;
        const char *name;
        int at;

        if (all) {
            if (s->names[k].kind != kind) {
                k++;
                continue;
            }
            at = (int)k;
            name = s->names[k].name;
            len = s->names[k].len;
        } else {
            name = args_get(a, i++, &len);
            at = find(s, kind, name, len);
        }
        any = true;
        if (at < 0) {
            reply_frame(c, r, unsub_verb[kind], name, len, reported(s, kind));
            continue;
        }
        reply_frame(c, r, unsub_verb[kind], s->names[at].name, s->names[at].len,
                    reported(s, kind) - 1);
        forget(c, s, (uint32_t)at);
    }
    if (!any)
        reply_frame(c, r, unsub_verb[kind], NULL, 0, reported(s, kind));
    if (s == NULL || s->n == 0)
        c->subscribed = 0;          /* back to normal commands */
    req_done(r);
}

void pubsub_reset(struct client *c)
{
    struct subs *s = c->rare != NULL ? c->rare->subs : NULL;

    while (s != NULL && s->n > 0)
        forget(c, s, s->n - 1);
    c->subscribed = 0;
}

char *pubsub_denied(const struct client *c, const struct acl_user *u)
{
    const struct subs *s = c->rare != NULL ? c->rare->subs : NULL;
    static const char *const what[] = {"channel", "pattern", "shard channel"};

    for (uint32_t i = 0; s != NULL && i < s->n; i++) {
        const struct sub_name *n = &s->names[i];
        if (acl_channel_ok(u, n->name, n->len, n->kind == SUB_PATTERN))
            continue;
        char *buf = NULL;
        size_t len = 0;
        FILE *f = xopen_memstream(&buf, &len);
        /* The client chose the name: escaped, so it cannot forge a log line. */
        fprintf(f, "%s \"", what[n->kind]);
        text_escape(f, n->name, n->len);
        fputc('"', f);
        fclose(f);
        return buf;
    }
    return NULL;
}

/* ---- routing -------------------------------------------------------------------------- */

/* A RESP2 subscriber's command that is not for subscribers: redis-server's
 * refusal, naming the command (a subcommand as "parent|sub"). */
static int not_in_this_context(struct client *c, struct req *r, struct args *a,
                               const struct cmd *cmd)
{
    size_t len, i;
    const char *name = args_get(a, 0, &len);
    char lower[65];

    for (i = 0; i < len && i < 64; i++)
        lower[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
    lower[i] = '\0';
    client_reply_error(c, r, "ERR Can't execute '%s': only (P|S)SUBSCRIBE / "
                       "(P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
                       cmd != NULL ? cmd->name : lower);
    r->rejected = 1;                /* as redis-server counts it */
    req_done(r);
    return 1;
}

/* PUBSUB CHANNELS, NUMSUB, NUMPAT and their SHARD forms: every server's
 * answer merged (frag.c), as one redis-server holding every subscription
 * would give it. Channels and patterns are subscribed on every server, a
 * shard channel on its owner, so each name counts its largest count and is
 * listed once; shardis's own channels are neither listed nor counted. */
static int introspect(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    static const struct { const char *sub; enum cmd_reply reply; } merges[] = {
        {"channels", CMD_REPLY_NAMES}, {"shardchannels", CMD_REPLY_NAMES},
        {"numsub", CMD_REPLY_NUMSUB}, {"shardnumsub", CMD_REPLY_NUMSUB},
        {"numpat", CMD_REPLY_MAX},
    };

    if (c->subscribed && !c->resp3)
        return not_in_this_context(c, r, a, cmd);
    if (client_in_multi(c))
        return 0;                               /* pin.c refuses it */
    for (size_t i = 0; i < ARRAY_SIZE(merges); i++) {
        if (!strcmp(cmd->name + 7, merges[i].sub)) {
            frag_broadcast(c, r, a, merges[i].reply, NULL, false);
            return 1;
        }
    }
    return 0;
}

int pubsub_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    const char *n;

    if (cmd == NULL || !(cmd->flags & CMD_PUBSUB)) {
        /* RESP3 tells messages (pushes) from replies: a subscriber may go
         * on sending any command, as to redis-server. */
        if (!c->subscribed || c->resp3)
            return 0;
        if (cmd != NULL && !strcmp(cmd->name, "ping")) {
            size_t len = 0;
            const char *msg = a->argc > 1 ? args_get(a, 1, &len) : "";
            struct resp_w w = client_w(c, &r->rsp);
            resp_w_array(&w, 2);
            resp_w_bulk_str(&w, "pong");
            resp_w_bulk(&w, msg, len);
            req_done(r);
            return 1;
        }
        if (cmd != NULL && !strcmp(cmd->name, "quit"))
            return 0;
        return not_in_this_context(c, r, a, cmd);
    }
    n = cmd->name;
    if (!strcmp(n, "publish") || !strcmp(n, "spublish")) {
        size_t clen;
        const char *ch = args_get(a, 1, &clen);
        if (!c->user->all && !acl_channel_ok(c->user, ch, clen, false)) {
            client_reply_error(c, r, ACL_NOPERM_CHANNELS);
            route_refused(c, r);
            return 1;
        }
        if (c->subscribed && !c->resp3)
            return pubsub_route(c, r, a, NULL);     /* not allowed in this context */
        size_t len;
        const char *channel = args_get(a, 1, &len);
        if (route_internal(channel, len)) {
            client_reply_error(c, r, PUBSUB_RESERVED_ERR);
            c->tx_abort = client_in_multi(c);
            req_done(r);
            return 1;
        }
        if (client_in_multi(c))
            return 0;               /* pin.c refuses or queues it */
        args_request(a, &r->out);
        /* Through the gate, like any command: not ahead of the client's
         * requests that wait there, nor of subscriptions on their way. */
        r->publish = 1;
        route_send(c, r, NULL, pool_backend(c->pool, pool_owner(c->pool, channel, len), c));
        return 1;
    }
    if (!strcmp(n, "subscribe"))
        subscribe(c, r, a, cmd, SUB_CHANNEL);
    else if (!strcmp(n, "psubscribe"))
        subscribe(c, r, a, cmd, SUB_PATTERN);
    else if (!strcmp(n, "ssubscribe"))
        subscribe(c, r, a, cmd, SUB_SHARD);
    else if (!strcmp(n, "unsubscribe"))
        unsubscribe(c, r, a, SUB_CHANNEL);
    else if (!strcmp(n, "punsubscribe"))
        unsubscribe(c, r, a, SUB_PATTERN);
    else if (!strcmp(n, "sunsubscribe"))
        unsubscribe(c, r, a, SUB_SHARD);
    else if (!strncmp(n, "pubsub|", 7))
        return introspect(c, r, a, cmd);
    else
        return 0;
    return 1;
}

/* ---- frames from subscriber connections --------------------------------------------- */

/* The next element of a frame, a bulk string: its bytes (in one run: v->p,
 * else a copy in buf, or on the heap in *heap for a long channel name). */
static const char *element(struct resp_rd *rd, struct resp_val *v, char *buf, size_t buflen,
                           char **heap)
{
    const char *s;

    if (resp_rd_next(rd, v) < 0 || v->type != RESP_BULK || v->nil)
        return NULL;
    if ((s = resp_rd_str(rd, v, buf, buflen)) != NULL)
        return s;
    free(*heap);
    *heap = xmalloc(v->len);
    resp_rd_copy(rd, v, *heap, v->len);
    return *heap;
}

/* The oldest request on b has a confirmation (or, whole: an error that
 * answers all of it): once all of its have come it is done, and so is the
 * client's request waiting for it when it was the last. */
static void confirmed(struct client *c, struct backend *b, bool whole)
{
    struct req *q = TAILQ_FIRST(&b->pendq);

    if (q == NULL)
        return;
    if (whole)
        q->u.sub.left = 1;
    if (--q->u.sub.left == 0) {
        struct req *r = q->u.sub.wait;
        TAILQ_REMOVE(&b->pendq, q, pq);
        q->pending = 0;
        q->u.sub.wait = NULL;
        req_maybe_free(q);
        if (r != NULL) {
            sending(c, b->server, -1);
            if (--r->u.sub.left == 0)
                req_done(r);
        }
    }
}

void pubsub_frame(struct backend *b, uint64_t start, uint64_t end)
{
    struct client *c = b->owner;
    struct msg g = {0};
    char buf[1024], *heap = NULL;
    const char *verb, *name, *channel;
    int kind;
    struct resp_rd rd;
    struct resp_val v;

    if (c == NULL || c->closing)
        return;
    rstream_slice(&b->in, start, end, &g);
    /* An array (RESP3: a push) whose first elements are bulk strings; or an
     * error refusing a (un)subscription (-NOPERM, -BUSY): it answers it. */
    resp_rd_init(&rd, &g);
    if (resp_rd_peek(&rd) == RESP_ERROR) {
        char text[200];
        resp_rd_head(&g, text, sizeof(text));
        log_warn("client %llu: %s refused a subscription change: %s",
                 (unsigned long long)c->id, b->pool->servers[b->server].label, text);
        confirmed(c, b, true);
        goto drop;
    }
    if (resp_rd_next(&rd, &v) < 0 || (v.type != RESP_ARRAY && v.type != RESP_PUSH) ||
        v.n < 1)
        goto drop;
    char frame = v.type;
    if ((verb = element(&rd, &v, buf, sizeof(buf), &heap)) == NULL)
        goto drop;
    /* A confirmation: the oldest request on this connection counts it. */
    for (kind = 0; kind < 3; kind++)
        if ((v.len == strlen(sub_verb[kind]) && !memcmp(verb, sub_verb[kind], v.len)) ||
            (v.len == strlen(unsub_verb[kind]) && !memcmp(verb, unsub_verb[kind], v.len))) {
            confirmed(c, b, false);
            goto drop;
        }
    /* A message, for a name the client still has. */
    if (v.len == 7 && !memcmp(verb, "message", 7))
        kind = SUB_CHANNEL;
    else if (v.len == 8 && !memcmp(verb, "pmessage", 8))
        kind = SUB_PATTERN;
    else if (v.len == 8 && !memcmp(verb, "smessage", 8))
        kind = SUB_SHARD;
    else
        goto drop;
    if ((name = element(&rd, &v, buf, sizeof(buf), &heap)) == NULL ||
        find(c->rare->subs, kind, name, v.len) < 0)
        goto drop;
    /* A pmessage's channel comes after the pattern. */
    channel = name;
    if (kind == SUB_PATTERN && (channel = element(&rd, &v, buf, sizeof(buf), &heap)) == NULL)
        goto drop;
    if (route_internal(channel, v.len))
        goto drop;                  /* shardis's own (see the top) */
    struct req *r = req_get();
    client_queue(c, r);
    if (c->resp3 && frame == RESP_ARRAY) {
        /* The connection speaks RESP2: the same frame, as a push. */
        struct resp_w w = client_w(c, &r->rsp);
        resp_w_raw(&w, ">", 1);
        msg_sub(&g, 1, g.len - 1, &r->rsp);
        msg_release(&g);
    } else {
        r->rsp = g;
    }
    req_done(r);
    free(heap);
    return;
drop:
    msg_release(&g);
    free(heap);
}

void pubsub_failed(struct backend *b)
{
    struct client *c = b->owner;

    log_warn("client %llu: its subscriber connection to %s failed (%s); closing it so "
             "that it subscribes again", (unsigned long long)c->id,
             b->pool->servers[b->server].label, b->reason);
    client_close(c);
}

void pubsub_client_gone(struct client *c)
{
    struct subs *s = c->rare != NULL ? c->rare->subs : NULL;

    if (s == NULL)
        return;
    TAILQ_REMOVE(&c->pool->subscribers, s, link);
    for (uint32_t i = 0; i < s->nconns; i++) {
        if (s->sending[i] != 0)
            sending(c, i, -(int)s->sending[i]);
        if (s->conns[i] != NULL)
            pool_conn_release(s->conns[i], false);
    }
    for (uint32_t i = 0; i < s->n; i++)
        free(s->names[i].name);
    free(s->names);
    free(s->conns);
    free(s->sending);
    free(s);
    c->rare->subs = NULL;
}

/* ---- servers joining and leaving (reload) ------------------------------------------ */

/* SUBSCRIBE and PSUBSCRIBE hold on every server: a server a reload adds
 * gets every subscriber's channels and patterns (nobody waits for the
 * confirmations). */
static void pubsub_server_added(struct pool *p, uint32_t server)
{
    struct subs *s;

    TAILQ_FOREACH(s, &p->subscribers, link) {
        struct client *c = s->client;
        if (c->closing || (server < s->nconns && s->conns[server] != NULL))
            continue;
        for (int kind = SUB_CHANNEL; kind <= SUB_PATTERN; kind++) {
            struct req *q = req_get();
            struct resp_w w = client_cmd_w(c, &q->out);
            uint32_t n = 0;
            if (s->count[kind] == 0) {
                req_maybe_free(q);
                continue;
            }
            resp_w_array(&w, (long long)s->count[kind] + 1);
            resp_w_bulk_str(&w, sub_verb[kind]);
            for (uint32_t i = 0; i < s->n; i++) {
                if (s->names[i].kind != kind)
                    continue;
                resp_w_bulk(&w, s->names[i].name, s->names[i].len);
                n++;
            }
            q->u.sub.left = n;
            backend_send(conn(c, server), q);
        }
    }
}

/* A server that left every ring: subscribers let their connection go
 * (closed, without closing them). */
static void pubsub_server_gone(struct pool *p, uint32_t server)
{
    struct subs *s;

    TAILQ_FOREACH(s, &p->subscribers, link)
        if (server < s->nconns && s->conns[server] != NULL) {
            if (s->sending[server] != 0)
                sending(s->client, server, -(int)s->sending[server]);
            pool_conn_release(s->conns[server], false);
            s->conns[server] = NULL;
        }
}

/* The ring changed (a reload switched it): a shard channel whose owner is
 * now another server would miss every SPUBLISH from now on, which goes to
 * the new owner. Its subscription ends where it was, and the client gets
 * redis-server's own push for it, "sunsubscribe <channel> <count>", as
 * Redis Cluster sends when a channel's slot moves to another node. The
 * clients that use SSUBSCRIBE are written for Redis Cluster, where that
 * push means "subscribe again": doing so here reaches the new owner. (Moving
 * the subscription behind the client's back instead would hide the
 * messages SPUBLISHed to the new owner before it was confirmed there, and
 * would split a client's shard channels over servers, which SSUBSCRIBE
 * refuses.) Plain channels and patterns hold on every server: nothing to
 * do for them. */
static void pubsub_ring_changed(struct pool *p)
{
    struct subs *s;

    TAILQ_FOREACH(s, &p->subscribers, link) {
        struct client *c = s->client;
        struct req *push = NULL;

        if (c->closing || s->count[SUB_SHARD] == 0)
            continue;
        for (uint32_t i = 0; i < s->n; ) {
            struct sub_name gone = s->names[i];
            if (gone.kind != SUB_SHARD || pool_owner(p, gone.name, gone.len) == gone.server) {
                i++;
                continue;
            }
            s->names[i] = s->names[--s->n];
            s->count[SUB_SHARD]--;
            if (push == NULL)
                push = req_get();
            reply_frame(c, push, unsub_verb[SUB_SHARD], gone.name, gone.len,
                        reported(s, SUB_SHARD));
            unsubscribe_servers(c, s, SUB_SHARD, gone.name, gone.len);
            free(gone.name);
        }
        if (push == NULL)
            continue;
        /* After whatever the client asked before (a confirmation still due). */
        client_queue(c, push);
        req_done(push);
        if (s->n == 0)
            c->subscribed = 0;      /* as redis-server: out of subscriber mode */
    }
}

void pubsub_counts(const struct client *c, uint32_t count[3])
{
    const struct subs *s = c->rare != NULL ? c->rare->subs : NULL;

    for (int k = 0; k < 3; k++)
        count[k] = s != NULL ? s->count[k] : 0;
}

/* ---- the module ---------------------------------------------------------------------- */

const struct module pubsub_module = {
    .name = "pubsub",
    .ring_changed = pubsub_ring_changed,
    .server_added = pubsub_server_added,
    .server_gone = pubsub_server_gone,
    .user_narrowed = pubsub_denied,
    .take = pubsub_route,
};

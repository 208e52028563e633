/* local_client.c -- CLIENT, answered by the proxy: the pool is the server
 * its clients see, so CLIENT LIST, INFO, KILL, PAUSE, UNBLOCK ... are
 * about the pool's clients; SETNAME (HELLO's too) and REPLY about the
 * client itself. Replies and errors follow redis-server 7.0. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/transport/args.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/ops/clientlist.h"
#include "proxy/base/log.h"
#include "proxy/ops/local_int.h"
#include "proxy/modules/mig.h"
#include "proxy/modules/track.h"
#include "proxy/core/pool.h"
#include "proxy/base/util.h"

/* Set c's name as CLIENT SETNAME and HELLO SETNAME do, or answer r with
 * redis-server's error for a name it refuses: false then. An empty name
 * removes it. */
bool local_set_name(struct client *c, struct req *r, const char *n, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (n[i] < '!' || n[i] > '~') {
            client_reply_error(c, r, "ERR Client names cannot contain spaces, newlines "
                               "or special characters.");
            return false;
        }
    free(client_rare(c)->name);
    c->rare->name = len > 0 ? xstrndup(n, len) : NULL;
    return true;
}

struct lines {
    const struct client_filter *f;
    FILE *fp;
};

static void lines_of(struct pool *q, void *arg)
{
    struct lines *l = arg;

    for (uint32_t i = 0; i < q->front.nclients; i++) {
        if (!client_matches(q->front.clients[i], l->f))
            continue;
        client_describe(q->front.clients[i], l->fp);
        fputc('\n', l->fp);
    }
}

/* CLIENT INFO's line (f NULL: c's) and CLIENT LIST's: those of the
 * pool's clients on every loop (a pool is the server its clients see) f
 * matches. */
static void client_lines(struct client *c, struct req *r, const struct client_filter *f)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = xopen_memstream(&buf, &len);
    struct resp_w w = local_w(c, r);

    if (f != NULL) {
        pool_each(c->pool, lines_of, &(struct lines){.f = f, .fp = fp});
    } else {
        client_describe(c, fp);
        fputc('\n', fp);
    }
    fclose(fp);
    resp_w_verbatim(&w, "txt", buf, len);
    free(buf);
}

static int client_type(struct args *a, uint32_t i)
{
    return args_is(a, i, "normal") ? 0 : args_is(a, i, "pubsub") ? 1
         : args_is(a, i, "master") || args_is(a, i, "replica") || args_is(a, i, "slave") ? 2
         : -1;
}

/* CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id ...] */
static void client_list(struct client *c, struct req *r, struct args *a)
{
    uint64_t *ids = NULL;
    uint32_t nids = 0;
    int type = -1;

    for (uint32_t i = 2; i < a->argc; i++) {
        long long v;
        if (args_is(a, i, "type") && i + 1 < a->argc && nids == 0) {
            if ((type = client_type(a, ++i)) < 0) {
                size_t len;
                const char *t = args_get(a, i, &len);
                client_reply_error(c, r, "ERR Unknown client type '%.*s'",
                                   (int)(len < 64 ? len : 64), t);
                free(ids);
                return;
            }
        } else if (args_is(a, i, "id") && i + 1 < a->argc) {
            for (i++; i < a->argc; i++) {
                if (!args_ll(a, i, &v) || v <= 0) {
                    client_reply_error(c, r, "ERR Invalid client ID");
                    free(ids);
                    return;
                }
                ids = xrealloc(ids, (nids + 1) * sizeof(*ids));
                ids[nids++] = (uint64_t)v;
            }
        } else {
            client_reply_error(c, r, "ERR syntax error");
            free(ids);
            return;
        }
    }
    if (type == 2) {                /* (shardis has no replicas of its own) */
        struct resp_w w = local_w(c, r);
        resp_w_verbatim(&w, "txt", "", 0);
    } else {
        client_lines(c, r, &(struct client_filter){.ids = ids, .nids = nids, .type = type});
    }
    free(ids);
}

struct kill {
    const struct client_filter *f;
    struct client *c;               /* the asker */
    struct req    *r;
    bool           skipme;
    long long     *n;
};

static void kill_of(struct pool *q, void *arg)
{
    struct kill *k = arg;

    /* From the end: closing one moves the last (seen already) into its slot. */
    for (uint32_t i = q->front.nclients; i-- > 0; ) {
        struct client *x = q->front.clients[i];
        if (!client_matches(x, k->f) || (x == k->c && k->skipme))
            continue;
        (*k->n)++;
        if (x == k->c) {
            k->c->quitting = 1;         /* closed once this reply is written */
            k->r->quit = 1;
        } else {
            log_info("client %llu killed by client %llu (CLIENT KILL)",
                     (unsigned long long)x->id, (unsigned long long)k->c->id);
            client_close(x);
        }
    }
}

/* CLIENT KILL ip:port (the old form: +OK, or an error if none) or
 * CLIENT KILL <filter value> ... (the number killed). A client killed
 * closes at once; c itself, after this reply (SKIPME no). */
static void client_kill(struct client *c, struct req *r, struct args *a)
{
    struct client_filter flt = {.type = -1};
    bool skipme = true, old = a->argc == 3;
    long long n = 0, v;
    uint64_t id;
    size_t len;
    char addr[256], laddr[256], user[256];
    bool none = false;              /* an address or user longer: no client has it */

    if (old) {
        const char *s = args_get(a, 2, &len);
        snprintf(addr, sizeof(addr), "%.*s", (int)(len < 255 ? len : 255), s);
        flt.addr = addr;
        skipme = false;
    } else {
        if (a->argc % 2 != 0) {
            client_reply_error(c, r, "ERR syntax error");
            return;
        }
        for (uint32_t i = 2; i + 1 < a->argc; i += 2) {
            const char *val = args_get(a, i + 1, &len);
            if (args_is(a, i, "id")) {
                if (!args_ll(a, i + 1, &v) || v <= 0) {
                    client_reply_error(c, r, "ERR client-id should be greater than 0");
                    return;
                }
                id = (uint64_t)v;
                flt.ids = &id;
                flt.nids = 1;
            } else if (args_is(a, i, "type")) {
                if ((flt.type = client_type(a, i + 1)) < 0) {
                    client_reply_error(c, r, "ERR Unknown client type '%.*s'",
                                       (int)(len < 64 ? len : 64), val);
                    return;
                }
            } else if (args_is(a, i, "skipme")) {
                if (!args_is(a, i + 1, "yes") && !args_is(a, i + 1, "no")) {
                    client_reply_error(c, r, "ERR syntax error");
                    return;
                }
                skipme = args_is(a, i + 1, "yes");
            } else if (args_is(a, i, "maxage")) {
                if (!args_ll(a, i + 1, &v) || v <= 0) {
                    client_reply_error(c, r, "ERR syntax error");
                    return;
                }
                flt.maxage = v;
            } else if (args_is(a, i, "addr") || args_is(a, i, "laddr") ||
                       args_is(a, i, "user")) {
                char *to = args_is(a, i, "addr") ? addr : args_is(a, i, "laddr") ? laddr : user;
                snprintf(to, sizeof(addr), "%.*s", (int)(len < 255 ? len : 255), val);
                *(to == addr ? &flt.addr : to == laddr ? &flt.laddr : &flt.user) = to;
                none |= len > 255;
            } else {
                client_reply_error(c, r, "ERR syntax error");
                return;
            }
        }
    }
    if (flt.type != 2 && !none)
        pool_each(c->pool, kill_of, &(struct kill){.f = &flt, .c = c, .r = r,
                                                 .skipme = skipme, .n = &n});
    if (old && n == 0) {
        client_reply_error(c, r, "ERR No such client");
    } else {
        struct resp_w w = local_w(c, r);
        if (old)
            resp_w_simple(&w, "OK");
        else
            resp_w_int(&w, n);
    }
}

struct unblock {
    uint64_t id;                    /* the shardis client's (CLIENT UNBLOCK's) */
    uint32_t server;                /* its pin's server ... */
    uint64_t client_id;             /* ... and id there; 0 none to unblock */
};

/* The pin to unblock, on whichever loop its client is: marked unblocking
 * there (in the world stop), its server and id kept. */
static void unblock_find(struct pool *q, void *arg)
{
    struct unblock *u = arg;

    for (uint32_t i = 0; i < q->front.nclients; i++) {
        struct backend *b = q->front.clients[i]->pin;
        if (q->front.clients[i]->id != u->id)
            continue;
        if (b != NULL && b->client_id != 0 && !b->unblocking && backend_has_blocking(b)) {
            b->unblocking = 1;
            u->server = b->server;
            u->client_id = b->client_id;
        }
        return;
    }
}

static void unblock_clear(struct pool *q, void *arg)
{
    const struct unblock *u = arg;

    mig_unblock_landed(q, u->server, u->client_id);
}

/* The CLIENT UNBLOCK sent for a client (client_unblock) has landed on
 * shardis's own connection, or failed: the pin it aimed at takes commands
 * again (mig.c's, which waits the same way for its own), on whichever
 * loop it is. */
static int unblock_landed(struct backend *b, struct req *u)
{
    pool_each(b->pool, unblock_clear,
              &(struct unblock){.server = b->server, .client_id = u->u.mig.unblock_id});
    return 0;
}

/* CLIENT UNBLOCK id [TIMEOUT|ERROR]: id is a shardis client's (CLIENT ID),
 * of this pool (the server its clients see). A client's blocking command
 * waits on a connection of its own (its pin, pin.c), whose id on its
 * server is known (backend.client_id): the server is asked to unblock
 * that, over shardis's own connection to it as mig.c does, and its :1 or
 * :0 is the answer. A client not blocked (nor known) gets :0 here, as from
 * redis-server; so does one a reload's drain is unblocking already. Like
 * CLIENT KILL it acts on another client: who may is local_exec's rule.
 *
 * Until the server has read it, nothing new goes to that pin (unblocking,
 * as gate.c holds for mig.c), and the pin is not handed to another client
 * once idle (pool_conn_release closes it): a command sent there meanwhile,
 * the client's own or another's, would be the one unblocked. A PING
 * behind it on the same connection says when it has been read, whatever
 * became of the client that asked. True if r was sent (it is answered
 * from there); false if it was answered here. */
static bool client_unblock(struct client *c, struct req *r, struct args *a)
{
    struct backend *own;
    long long id;
    char sid[24];

    if (a->argc > 4) {
        client_reply_bad_sub(c, r, a, "CLIENT");
        return false;
    }
    if (a->argc == 4 && !args_is(a, 3, "timeout") && !args_is(a, 3, "error")) {
        client_reply_error(c, r, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
        return false;
    }
    if (!args_ll(a, 2, &id)) {
        client_reply_error(c, r, "ERR value is not an integer or out of range");
        return false;
    }
    struct unblock ub = {.id = (uint64_t)id};
    if (id > 0)
        pool_each(c->pool, unblock_find, &ub);
    if (ub.client_id == 0) {
        struct resp_w w = local_w(c, r);
        resp_w_int(&w, 0);
        return false;
    }
    snprintf(sid, sizeof(sid), "%" PRIu64, ub.client_id);
    struct resp_w w = client_cmd_w(c, &r->out);
    resp_w_command(&w, a->argc == 4 ? 4 : 3, (const char *const[]){"CLIENT", "UNBLOCK", sid,
                   args_is(a, 3, "error") ? "ERROR" : "TIMEOUT"}, NULL);
    own = pool_own(c->pool, ub.server, false);  /* (:1 and :0 read the same in RESP3) */
    /* Sent now, not behind c's own earlier requests at its gate: it acts
     * on another client, whose command is waiting now (and its reply still
     * comes in c's order). Held there, the pin would go unguarded
     * meanwhile. */
    backend_send(own, r);
    struct req *u = req_get();
    struct mbuf *m = NULL;
    struct resp_w pw = resp_w_on(&u->out, &m, RESP2);
    resp_w_command(&pw, 1, (const char *const[]){"PING"}, NULL);
    mbuf_unref(m);
    u->on_reply = unblock_landed;
    u->u.mig.unblock_id = ub.client_id;
    backend_send(own, u);
    return true;
}

/* CLIENT's subcommands; route.c checked each one's arity by the table.
 * True if r was sent on (UNBLOCK): answered from there. */
static bool client_sub(struct client *c, struct req *r, struct args *a)
{
    struct resp_w w = local_w(c, r);
    size_t len;

    if (args_is(a, 1, "unblock")) {
        return client_unblock(c, r, a);
    } else if (args_is(a, 1, "setname")) {
        const char *n = args_get(a, 2, &len);
        if (local_set_name(c, r, n, len))
            local_reply_ok(c, r);
    } else if (args_is(a, 1, "getname")) {
        if (client_name(c) == NULL)
            resp_w_null(&w);
        else
            local_reply_str(c, r, client_name(c));
    } else if (args_is(a, 1, "id")) {
        resp_w_int(&w, (long long)c->id);
    } else if (args_is(a, 1, "reply")) {
        /* (route.c made r silent if the mode was OFF or SKIP) */
        if (args_is(a, 2, "on")) {
            c->reply = CLIENT_REPLY_ON;
            r->silent = 0;
            local_reply_ok(c, r);
        } else if (args_is(a, 2, "off") || args_is(a, 2, "skip")) {
            if (args_is(a, 2, "off"))
                c->reply = CLIENT_REPLY_OFF;
            else if (c->reply != CLIENT_REPLY_OFF)
                c->reply = CLIENT_REPLY_SKIP;
            r->silent = 1;
            local_reply_ok(c, r);                 /* dropped */
        } else {
            client_reply_error(c, r, "ERR syntax error");
        }
    } else if (args_is(a, 1, "no-evict")) {
        /* Redis 7.0's: shardis evicts no client for memory, so either
         * setting is what it does already. */
        if (args_is(a, 2, "on") || args_is(a, 2, "off"))
            local_reply_ok(c, r);
        else
            client_reply_error(c, r, "ERR syntax error");
    } else if (args_is(a, 1, "no-touch")) {
        /* Redis 7.2's: kept here, and put on the server connection around
         * each of its requests (gate.c go), the connections being shared. */
        if (args_is(a, 2, "on") || args_is(a, 2, "off")) {
            c->notouch = args_is(a, 2, "on");
            local_reply_ok(c, r);
        } else {
            client_reply_error(c, r, "ERR syntax error");
        }
    } else if (args_is(a, 1, "capa")) {
        /* Valkey 8's: a client says what it can take (redirect: -REDIRECT
         * replies, which a server sends to replica readers). shardis sends
         * none, so any is taken as Valkey takes them, and changes nothing. */
        local_reply_ok(c, r);
    } else if (args_is(a, 1, "setinfo")) {
        if (args_is(a, 2, "lib-name") || args_is(a, 2, "lib-ver"))
            local_reply_ok(c, r);
        else {
            const char *o = args_get(a, 2, &len);
            client_reply_error(c, r, "ERR Unrecognized option '%.*s'", (int)(len < 64 ? len : 64), o);
        }
    } else if (args_is(a, 1, "info") && a->argc == 2) {
        client_lines(c, r, NULL);
    } else if (args_is(a, 1, "list")) {
        client_list(c, r, a);
    } else if (args_is(a, 1, "kill")) {
        client_kill(c, r, a);
    } else if (args_is(a, 1, "pause")) {
        long long ms;
        bool all = a->argc == 3 || args_is(a, 3, "all");
        if (!args_ll(a, 2, &ms) || ms < 0) {
            client_reply_error(c, r, "ERR timeout is not an integer or out of range");
        } else if (a->argc > 4 || (a->argc == 4 && !all && !args_is(a, 3, "write"))) {
            client_reply_error(c, r, "ERR syntax error");
        } else {
            pool_pause(c->pool, ms > 0 ? (uint64_t)ms : 1, all);
            local_reply_ok(c, r);
        }
    } else if (args_is(a, 1, "tracking") || args_is(a, 1, "caching") ||
               args_is(a, 1, "getredir") || args_is(a, 1, "trackinginfo")) {
        return track_command(c, r, a);  /* (modules/track.c) */
    } else if (args_is(a, 1, "unpause") && a->argc == 2) {
        pool_pause(c->pool, 0, false);
        local_reply_ok(c, r);
    } else {
        const char *sub = args_get(a, 1, &len);
        client_reply_error(c, r, "ERR CLIENT %.*s is not supported by shardis",
                           (int)(len < 64 ? len : 64), sub);
    }
    return false;
}

void local_client_command(struct client *c, struct req *r, struct args *a)
{
    if (!client_sub(c, r, a))
        req_done(r);
}

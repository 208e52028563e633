/* route.c -- decide where each request goes.
 *
 * In redis-server's order: the command table (unknown commands,
 * subcommands, arity), then authentication. Then the client's state (the
 * modules that take a request first, module.h: pubsub.c for a
 * subscriber, pin.c for a transaction), and then what the command is
 * (route_kind, route_kind.c; printed by `shardis commands` for
 * doc/commands.md): answered by shardis (local.c), sent to
 * every server or the first (frag.c merges), answered whole by the module
 * registered for its kind (SCAN: scan.c, DEBUG: debug.c, WAIT: pin.c),
 * split per server (frag.c), or sent by its keys: every key is hashed
 * (hash tag applied) on the pool's current ring, and the request goes
 * whole to the one backend that owns them all, or is refused with
 * -CROSSSLOT without touching any backend. The ring is looked up per
 * request, so swapping pool->ring takes effect at the next one.
 *
 * The modules are reached only through module.h (module_role, and
 * module_route by kind: an indirect call, no search, per request).
 *
 * Forwarded array requests are the client's own bytes; only inline
 * commands are re-encoded (as RESP) on their way to a backend. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/core/acl.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/core/gate.h"
#include "proxy/core/head.h"
#include "proxy/core/keys.h"
#include "proxy/core/module.h"
#include "proxy/core/pool.h"
#include "proxy/core/pool_conn.h"
#include "proxy/transport/loop.h"
#include "proxy/core/route.h"
#include "proxy/core/route_int.h"
#include "proxy/base/util.h"

/* ---- keys --------------------------------------------------------------------------- */

/* Whether a key that starts with p[0 .. len) may be shardis's own. */
static bool may_be_reserved(const char *p, size_t len)
{
    static const char *const prefixes[] = {SHARDIS_RESERVED, SHARDIS_SEQUENCE};

    for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++) {
        size_t n = strlen(prefixes[i]);
        if (memcmp(p, prefixes[i], len < n ? len : n) == 0)
            return true;
    }
    return false;
}

/* SORT's BY and GET patterns name keys of their own (each element put in
 * for the first '*'), read on the key's server. Redis Cluster (7.4's rule
 * in sort.c) allows a pattern only when its hash tag, before any '*', is
 * the key's, so that every key it forms lives with the key; so does
 * shardis, by the pool's hash tag: the tag of the pattern's text up to
 * its first '*' must be complete there and equal to what the key hashes
 * by. A pattern without '*' (BY nosort, GET #, a constant) names no key.
 * A pattern whose keys would be shardis's own is refused too. Options are
 * read in redis-server's order, and reading stops where it would reply a
 * syntax error (the server says so). False after replying an error. */
static bool sort_patterns_ok(struct client *c, struct req *r, struct args *a, bool ro,
                             bool *forms_keys)
{
    const struct ring *ring = c->pool->ring;
    size_t klen, plen, kpart_len, ppart_len;
    const char *key, *kpart, *pat, *ppart, *star;
    long long v;

    for (uint32_t j = 2; j < a->argc; j++) {
        uint32_t left = a->argc - j - 1;
        bool by = args_is(a, j, "by");
        if (args_is(a, j, "asc") || args_is(a, j, "desc") || args_is(a, j, "alpha"))
            continue;
        if (args_is(a, j, "limit") && left >= 2) {
            if (!args_ll(a, j + 1, &v) || !args_ll(a, j + 2, &v))
                return true;
            j += 2;
            continue;
        }
        if (!ro && args_is(a, j, "store") && left >= 1) {
            j++;
            continue;
        }
        if (!(by || args_is(a, j, "get")) || left < 1)
            return true;
        pat = args_get(a, ++j, &plen);
        /* (redis-server refuses any GET, and BY with a pattern, to a
         * user without every key: the clients' user on the servers) */
        if (!by)
            *forms_keys = true;
        if ((star = memchr(pat, '*', plen)) == NULL)
            continue;
        /* As redis-server 7: keys a pattern forms could be any, so only a
         * user who may read every key may use one. */
        if (!c->user->allkeys) {
            client_reply_error(c, r, "ERR %s option of SORT denied due to insufficient ACL "
                               "permissions.", by ? "BY" : "GET");
            return false;
        }
        *forms_keys = true;
        plen = (size_t)(star - pat);        /* what every key formed starts with */
        ring_tag(ring, pat, plen, &ppart, &ppart_len);
        key = args_get(a, 1, &klen);        /* here: args_get keeps 8 copies at most */
        ring_tag(ring, key, klen, &kpart, &kpart_len);
        if ((ppart == pat && ppart_len == plen) || ppart_len != kpart_len ||
            memcmp(ppart, kpart, kpart_len) != 0) {
            client_reply_error(c, r, "ERR %s option of SORT denied in Cluster mode when keys "
                               "formed by the pattern may be in different slots.",
                               by ? "BY" : "GET");
            return false;
        }
        if (may_be_reserved(pat, plen)) {
            client_reply_error(c, r, SHARDIS_RESERVED_ERR);
            return false;
        }
    }
    return true;
}

/* Fold the owner of the key at pos into *owner; false (CROSSSLOT sent) if
 * it differs from the keys before it. */
static bool same_owner(struct client *c, struct req *r, struct args *a, uint32_t pos,
                       int *owner)
{
    size_t len;
    const char *key = args_get(a, pos, &len);
    int o = (int)pool_owner(c->pool, key, len);

    if (route_reserved(key, len)) {
        client_reply_error(c, r, SHARDIS_RESERVED_ERR);
        return false;
    }
    if (*owner >= 0 && o != *owner) {
        client_reply_error(c, r, "CROSSSLOT Keys in request don't hash to the same node");
        return false;
    }
    *owner = o;
    return true;
}

/* The first of the keys k that user u may not touch (its position), or
 * 0: every key is looked at before any owner, so a request gets NOPERM
 * before CROSSSLOT. */
static uint32_t key_denied(const struct acl_user *u, struct args *a, const struct keys *k)
{
    size_t len;
    const char *key;

    for (const struct keyspan *s = k->span; s < k->span + k->n; s++)
        for (uint32_t i = s->first; i <= s->last; i += s->step) {
            key = args_get(a, i, &len);
            if (!acl_key_ok(u, key, len))
                return i;
        }
    return 0;
}

/* The server owning every key, or -1 (an error was sent). */
static int owner_of_keys(struct client *c, struct req *r, struct args *a, const struct keys *k)
{
    int owner = -1;

    for (const struct keyspan *s = k->span; s < k->span + k->n; s++)
        for (uint32_t i = s->first; i <= s->last; i += s->step)
            if (!same_owner(c, r, a, i, &owner))
                return -1;
    return owner;
}

/* ---- blocking commands sent again ---------------------------------------------------
 *
 * A blocking command waits on the server of its keys. When a reload moves
 * those keys, mig.c unblocks it there; it is then routed again, as the
 * client sent it, with what is left of its timeout: so its arguments are
 * kept while it waits (blocking commands are few). */

struct req_kept {
    const struct cmd *cmd;
    uint32_t          argc;
    char            **av;
    size_t           *avlen;
    uint64_t          started_ms;
};

static void keep(struct req *r, struct args *a, const struct cmd *cmd)
{
    struct req_kept *k = xmalloc(sizeof(*k));

    k->cmd = cmd;
    k->argc = a->argc;
    k->av = xmalloc(a->argc * sizeof(*k->av));
    k->avlen = xmalloc(a->argc * sizeof(*k->avlen));
    for (uint32_t i = 0; i < a->argc; i++) {
        size_t len;
        const char *p = args_get(a, i, &len);
        k->av[i] = xmalloc(len + 1);
        memcpy(k->av[i], p, len);
        k->av[i][len] = '\0';
        k->avlen[i] = len;
    }
    k->started_ms = uv_now(cur_loop->uv);
    r->u.kept = k;
    r->kept = 1;
}

void route_kept_free(struct req *r)
{
    struct req_kept *k = r->u.kept;

    if (!r->kept)
        return;
    for (uint32_t i = 0; i < k->argc; i++)
        free(k->av[i]);
    free(k->av);
    free(k->avlen);
    free(k);
    r->kept = 0;
}

/* Replace argument i by what is left of a timeout of `unit` ms per unit
 * (1000: seconds, as BLPOP's; 1: ms, as XREAD's BLOCK) after elapsed ms. 0
 * (wait for ever) stays 0; one that ran out becomes the shortest wait. */
static void shorten(struct req_kept *k, uint32_t i, double unit, uint64_t elapsed)
{
    double t = strtod(k->av[i], NULL), left;
    char buf[48];

    if (t <= 0)
        return;
    left = t - (double)elapsed / unit;
    if (unit == 1)
        snprintf(buf, sizeof(buf), "%.0f", left >= 1 ? left : 1);
    else
        snprintf(buf, sizeof(buf), "%.3f", left >= 0.001 ? left : 0.001);
    free(k->av[i]);
    k->av[i] = xstrdup(buf);
    k->avlen[i] = strlen(buf);
}

int route_reissue(struct client *c, struct req *r)
{
    struct req_kept *k = r->u.kept;
    struct args a = {.c = c};
    uint64_t elapsed;
    const char *n;
    int owner;

    /* Not while its connection holds anything else of the client's: a
     * transaction, a WATCH, a request still waiting for it. */
    if (!r->kept || (c->pin != NULL && !backend_idle(c->pin)) || c->tx != TX_NONE)
        return 0;
    elapsed = uv_now(cur_loop->uv) - k->started_ms;
    n = k->cmd->name;
    if (!strcmp(n, "blmpop") || !strcmp(n, "bzmpop")) {
        shorten(k, 1, 1000, elapsed);
    } else if (!strcmp(n, "xread") || !strcmp(n, "xreadgroup")) {
        for (uint32_t i = 1; i + 1 < k->argc; i++)
            if (!strcasecmp(k->av[i], "block")) {
                shorten(k, i + 1, 1, elapsed);
                break;
            }
    } else {
        shorten(k, k->argc - 1, 1000, elapsed);     /* BLPOP ... timeout */
    }
    k->started_ms = uv_now(cur_loop->uv);
    if (c->pin != NULL) {           /* its connection to the old owner: idle now */
        pool_conn_release(c->pin, true);
        c->pin = NULL;
    }
    msg_release(&r->rsp);
    msg_release(&r->out);
    r->unblocked = 0;
    r->front = 1;                   /* older than what waits at the gate */
    a.argc = k->argc;
    a.av = k->av;
    a.avlen = k->avlen;
    if ((owner = route_owner(c, r, &a, k->cmd)) >= 0)
        module_role.send_pinned(c, r, &a, (uint32_t)owner, true);
    args_release(&a);
    return 1;
}

/* ---- sending ------------------------------------------------------------------------ */

void route_send(struct client *c, struct req *r, struct args *a, struct backend *b)
{
    r->epoch = c->pool->epoch;          /* (mig.c: a blocked one from before a switch) */
    if (c->pool->mig == NULL)
        gate_send(c, r, b);
    else
        module_role.send_moving(c, r, a, b);   /* its keys moved to b's server first */
}

/* ---- databases ---------------------------------------------------------------------- */

/* r may touch a database other than redis_db: a reshard cannot start
 * until the servers have said, since, which databases hold keys
 * (info_other_databases). */
static void other_db(struct client *c, struct req *r)
{
    if (!r->other_db) {
        r->other_db = 1;
        cur_loop->other_db_reqs++;
        cur_loop->other_db_routed++;
    }
    c->pool->other_db_seq = cur_loop->other_db_routed;
}

/* Set by route_init before any loop runs, only read after (rows keep
 * their addresses). */
static const struct cmd *move, *copy, *swapdb, *sort, *sort_ro;

/* Whether db_ok has anything to judge: a client in redis_db, no reshard
 * running, a command that names no database pays these three tests. */
static inline bool db_matters(const struct client *c, const struct cmd *cmd)
{
    return c->db != c->pool->conf->redis_db || c->pool->mig != NULL ||
           cmd == move || cmd == copy || cmd == swapdb;
}

/* Where a request's database is judged (a client's own, SELECT's, in
 * local.c): the database numbers MOVE, COPY ... DB and SWAPDB name must
 * be ones a client may SELECT (below `databases`), and SWAPDB may not
 * carry redis_db away (shardis's own keys are there: own.h); while keys
 * move after a reload (mig.c), which moves redis_db's keys only, a
 * request for keys in another database, or a SWAPDB, is told to retry:
 * its key may still be on its old server, and nothing would ever move
 * it; and a request that may touch another database is marked, for the
 * check before a reshard (other_db). A non-integer is the server's to
 * refuse. False after refusing r. */
static bool db_ok(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    const struct conf_pool *pc = c->pool->conf;
    uint32_t at = 0, n = 0, parsed = 0;
    long long db, swap[2] = {0, 0};
    bool moving;

    if (c->db != pc->redis_db)
        other_db(c, r);
    if (c->pool->mig == NULL && cmd != move && cmd != copy && cmd != swapdb &&
        c->db == pc->redis_db)
        return true;
    moving = c->pool->mig != NULL || module_role.ring_changing(c->pool);
    if (moving && (cmd == swapdb || (c->db != pc->redis_db &&
                                     keys_any(cmd))))
        goto tryagain;
    if (cmd == move) {
        at = 2;
        n = 1;
    } else if (cmd == swapdb) {
        at = 1;
        n = 2;
    } else if (cmd == copy) {           /* COPY src dst [DB db] [REPLACE] */
        for (uint32_t j = 3; j + 1 < a->argc; j++)
            if (args_is(a, j, "db")) {
                at = ++j;
                n = 1;
            }
    }
    for (uint32_t i = at; i < at + n; i++) {
        if (!args_ll(a, i, &db))
            continue;
        if (db < 0 || db >= pc->databases) {
            client_reply_error(c, r, "ERR DB index is out of range");
            route_refused(c, r);
            return false;
        }
        if (db != pc->redis_db && moving)
            goto tryagain;              /* (a key put there now would stay behind) */
        if (db != pc->redis_db)
            other_db(c, r);
        swap[parsed++] = db;
    }
    if (cmd == swapdb && parsed == 2 && swap[0] != swap[1] &&
        (swap[0] == pc->redis_db || swap[1] == pc->redis_db)) {
        client_reply_error(c, r, "ERR SWAPDB of database %d (redis_db) is not supported by "
                           "shardis: its own keys are there", pc->redis_db);
        route_refused(c, r);
        return false;
    }
    return true;
tryagain:
    client_reply_error(c, r, "TRYAGAIN resharding moves the keys of database %d only: "
                       "retry once SHARD.MIGRATION STATUS says it is done", pc->redis_db);
    route_refused(c, r);
    return false;
}

/* ---- the decision ------------------------------------------------------------------- */

static void reply_unknown(struct client *c, struct req *r, struct args *a)
{
    char list[300];
    size_t n = 0, len;
    const char *name = args_get(a, 0, &len);
    char cname[130];

    snprintf(cname, sizeof(cname), "%.*s", (int)(len < 128 ? len : 128), name);
    list[0] = '\0';
    for (uint32_t i = 1; i < a->argc && n < 128; i++) {
        size_t alen;
        const char *arg = args_get(a, i, &alen);
        int room = 128 - (int)n;
        n += (size_t)snprintf(list + n, sizeof(list) - n, "'%.*s' ",
                              (int)(alen < (size_t)room ? alen : (size_t)room), arg);
    }
    client_reply_error(c, r, "ERR unknown command '%s', with args beginning with: %s",
                       cname, list);
}

void args_request(struct args *a, struct msg *g)
{
    struct client *c = a->c;
    struct resp_w w;

    if (!c->scan.is_inline && a->av == NULL && a->name == NULL && a->minify == 0) {
        rstream_slice(&c->in, c->scan.start, c->scan.end, g);
        return;
    }
    if (a->minify != 0) {
        module_role.map_request(a, g);
        return;
    }
    /* Inline: the arguments are already unquoted, and a backend pipelines
     * arrays unambiguously. */
    w = client_cmd_w(c, g);
    resp_w_array(&w, a->argc);
    for (uint32_t i = 0; i < a->argc; i++) {
        size_t len;
        const char *p = args_get(a, i, &len);
        if (i == 0 && a->name != NULL)
            resp_w_bulk_str(&w, a->name);
        else
            resp_w_bulk(&w, p, len);
    }
}

/* ---- commands for every server ------------------------------------------------------
 *
 * Redis marks the commands a cluster client sends to every shard
 * (request_policy all_shards/all_nodes); shardis does the same (frag.c
 * merges). A few read every server's configuration or functions, where
 * the first server answers for all of them. Whatever changes or reveals
 * every server's data or setup wholesale (KEYS, FLUSHDB, CONFIG SET,
 * FUNCTION LOAD ...) is an admin command: only with admin_commands: true.
 * DBSIZE, RANDOMKEY and SCRIPT LOAD/EXISTS are for every client. */

bool route_admin_ok(struct client *c, struct req *r, const char *name)
{
    const struct conf_pool *pc = c->pool->conf;

    if (pc->admin_commands)
        return true;
    client_reply_error(c, r, "ERR '%s' is an admin command: shardis runs it on every "
                       "server only with admin_commands: true in pool '%s'", name, pc->name);
    route_refused(c, r);
    return false;
}

/* (route.h) The pool's users, where it has any, say who may: the
 * command's own permission (@admin @dangerous, as in Redis) was checked
 * before, by route_request or local_exec. A pool without users has one
 * user, the default, which may run everything: there admin_commands
 * says, as for the commands run on every server. */
bool route_admin_view_ok(struct client *c, struct req *r, const char *name)
{
    const struct conf_pool *pc = c->pool->conf;

    if (pc->nusers > 0 || pc->admin_commands)
        return true;
    client_reply_error(c, r, "ERR '%s' is an admin command: shardis runs it only with "
                       "admin_commands: true in pool '%s', or for a client user allowed it",
                       name, pc->name);
    route_refused(c, r);
    return false;
}

/* CONFIG RESETSTAT: shardis's own counters, as the servers', of the
 * visited loop's copy of pool *arg (loop_each). */
static void reset_counters(void *arg)
{
    struct pool *p = &cur_loop->pools[*(const size_t *)arg];

    module_role.reset_stats(p);
    p->front.requests = p->front.accepted = p->errors = 0;
}

/* Run cmd (ROUTE_EVERY*, ROUTE_FIRST*) on every server, or the first. */
static void every_server(struct client *c, struct req *r, struct args *a, const struct cmd *cmd,
                         enum route_kind kind)
{
    if ((kind == ROUTE_EVERY_ADMIN || kind == ROUTE_FIRST_ADMIN) &&
        !route_admin_ok(c, r, cmd->name))
        return;
    if (!strcmp(cmd->name, "config|resetstat")) {
        size_t pi = (size_t)(c->pool - cur_loop->pools);
        loop_each(reset_counters, &pi);     /* (every loop's copy of the pool) */
    }
    if (cmd->flags & CMD_ALLOW_BUSY) {
        module_role.send_dedicated(c, r, a, cmd, kind == ROUTE_FIRST_ADMIN);
    } else if ((kind == ROUTE_EVERY_ADMIN || kind == ROUTE_FIRST_ADMIN ||
                (cmd->flags & CMD_DANGEROUS) || route_broadcast_reply(cmd) == CMD_REPLY_DBSIZE ||
                route_broadcast_reply(cmd) == CMD_REPLY_RANDOMKEY)) {
        /* Admin or @dangerous and server-wide (FLUSHALL, CONFIG, KEYS,
         * INFO ...): what the least-privileged backend_user is not given;
         * the client's user was allowed it above. DBSIZE and RANDOMKEY
         * too: the EXISTS counting shardis's own keys names keys that user
         * may not touch, and RANDOMKEY's script (own.h) must see them to
         * pass them over. */
        bool first = kind == ROUTE_FIRST_ADMIN || kind == ROUTE_FIRST;
        module_role.send_as_own(c, r, a, route_broadcast_reply(cmd),
                                 first ? pool_first_up(c->pool) : UINT32_MAX, false,
                                 kind == ROUTE_EVERY_ADMIN);
    } else if (kind == ROUTE_FIRST_ADMIN || kind == ROUTE_FIRST) {
        args_request(a, &r->out);
        route_send(c, r, NULL, pool_backend(c->pool, pool_first_up(c->pool), c));
    } else {
        /* SAVE and BGREWRITEAOF take as long as the data: no deadline for
         * an admin's broadcast, which would fail every server's shared
         * connection at once. */
        module_role.broadcast(c, r, a, route_broadcast_reply(cmd), NULL,
                                   kind == ROUTE_EVERY_ADMIN);
    }
}

void route_init(void)
{
    route_kinds_init();
    move = cmd_lookup("move", 4);
    copy = cmd_lookup("copy", 4);
    swapdb = cmd_lookup("swapdb", 6);
    sort = cmd_lookup("sort", 4);
    sort_ro = cmd_lookup("sort_ro", 7);
}

void route_refused(struct client *c, struct req *r)
{
    c->pool->errors++;
    r->rejected = 1;
    if (client_in_multi(c))
        c->tx_abort = 1;
    req_done(r);
}

/* A script that declares no key (EVAL ... 0, FCALL ... 0) has nothing to
 * route by, and what it reads or writes is in its text, which shardis does
 * not interpret. Run anywhere as sent, its writes would land on a server
 * that need not own those keys, silently: the next GET of the key, routed
 * by the ring, would not find it. So it runs as its read-only form
 * (EVAL_RO, EVALSHA_RO, FCALL_RO), where redis-server refuses every write
 * ("Write commands are not allowed from read-only scripts", or for a
 * function not flagged no-writes "Can not execute a script with write
 * flag using *_ro command"), on the server of the client's transaction or
 * WATCH if it has one, else the pool's first server. What it computes, and
 * commands that touch no key, work as on one redis-server; a key it reads
 * without declaring it is read on that server, as with any script that
 * reads undeclared keys.
 *
 * With a keyless_user configured (an ACL user with no key access), it
 * runs as sent instead, as that user, on a connection of its own
 * (pin_keyless): a script that may write but touches no key (a function
 * not flagged no-writes, a shebang script) runs; one that touches a key,
 * read or write, gets NOPERM from redis-server. Not inside MULTI: the
 * transaction's connection is its client's user, so there it is read-only
 * as above. Only with admin_commands: true: a command that takes no key
 * (FLUSHALL, SWAPDB) is not stopped by the user's key patterns, and
 * shardis does not judge the user's commands, so without it such scripts
 * stay read-only. */
static int keyless_script(struct client *c, struct req *r, struct args *a,
                          const struct cmd *cmd)
{
    static const char *const ro[][2] = {
        {"eval", "EVAL_RO"}, {"evalsha", "EVALSHA_RO"}, {"fcall", "FCALL_RO"},
    };

    /* EVAL_RO and the like are read-only already: redis-server's own
     * refusal of a write ("... not allowed from read-only scripts") is
     * the answer, as the client's user. */
    if (c->pool->conf->keyless_user != NULL && c->pool->conf->admin_commands &&
        !client_in_multi(c) && strstr(cmd->name, "_ro") == NULL) {
        r->keyless = 1;
        return c->pin != NULL ? (int)c->pin->server : (int)pool_first_up(c->pool);
    }
    for (size_t i = 0; i < ARRAY_SIZE(ro); i++)
        if (!strcmp(cmd->name, ro[i][0]))
            a->name = ro[i][1];
    return c->pin != NULL ? (int)c->pin->server : (int)pool_first_up(c->pool);
}

/* What the clients' user on the servers may not run, though a client may
 * through shardis (srvuser.c): SORT with GET, or BY a pattern, which
 * redis-server allows only a user who may read every key (shardis's own
 * too: sort_patterns_ok keeps them out), and MOVE, whose database no ACL
 * rule can bound (db_ok does). They run as shardis's own user, in order
 * with the client's other requests (pin_internal); not inside MULTI,
 * whose connection is the client's. False after refusing r. */
static bool needs_own_user(struct client *c, struct req *r, const struct cmd *cmd)
{
    r->as_own = 1;
    if (!client_in_multi(c))
        return true;
    client_reply_error(c, r, "ERR %s inside MULTI is not supported by shardis: it runs as "
                       "shardis's own user, on a connection of its own",
                       cmd == move ? "MOVE" : "SORT with GET, or BY a pattern,");
    return false;
}

int route_owner(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    char err[KEYS_ERR_MAX];
    bool forms_keys = false;
    int owner;

    if ((cmd == sort || cmd == sort_ro) &&
        (!sort_patterns_ok(c, r, a, cmd == sort_ro, &forms_keys) ||
         (forms_keys && !needs_own_user(c, r, cmd))))
        goto refuse;
    if (cmd == move && !needs_own_user(c, r, cmd))
        goto refuse;
    switch (keys_find(cmd, a, &a->keys, err)) {
    case KEYS_BAD:
        client_reply_error(c, r, "%s", err);
        goto refuse;
    case KEYS_SERVER_SAYS:              /* (any server refuses it: the transaction's) */
        a->keys.n = 0;
        return c->pin != NULL ? (int)c->pin->server : (int)pool_first_up(c->pool);
    case KEYS_NONE:
        if (cmd->flags & CMD_MOVABLEKEYS)   /* a script declaring no key */
            return keyless_script(c, r, a, cmd);
        client_reply_error(c, r, "ERR command '%s' is not supported by shardis: it "
                           "names no key to route by", cmd->name);
        goto refuse;
    case KEYS_FOUND:
        break;
    }
    /* (SSUBSCRIBE's and SPUBLISH's are channels: pubsub.c) */
    if (!c->user->all && !(cmd->flags & CMD_PUBSUB) && key_denied(c->user, a, &a->keys) != 0) {
        client_reply_error(c, r, ACL_NOPERM_KEYS);
        goto refuse;
    }
    if ((owner = owner_of_keys(c, r, a, &a->keys)) < 0)
        goto refuse;
    /* Servers of different versions (an upgrade under way): only where
     * the command is known (cmdinfo.c). */
    if (!cmd_known(cmd, c->pool->servers[owner].kind)) {
        client_reply_error(c, r, "ERR unknown command '%s' on server %s (%s), which owns the "
                           "key: the pool's servers are of different versions (INFO "
                           "servers_versions)", cmd->name, c->pool->servers[owner].label,
                           cmd_kind_name(c->pool->servers[owner].kind));
        goto refuse;
    }
    return owner;
refuse:
    a->keys.n = 0;
    route_refused(c, r);
    return -1;
}

/* (route.h) The channels are those pubsub.c checks: (S)PUBLISH's one, and
 * every one a (P|S)SUBSCRIBE names (PSUBSCRIBE's as patterns). */
int route_dryrun(const struct acl_user *u, struct args *a, const struct cmd *cmd, uint32_t *at)
{
    char err[KEYS_ERR_MAX];
    struct keys ks;
    size_t len;
    const char *s;

    if (u->all)
        return 0;
    if (!(cmd->flags & CMD_NO_AUTH) && !acl_cmd_ok(u, cmd))    /* (as route_request) */
        return 1;
    if (cmd->flags & CMD_PUBSUB) {
        bool publish = !strcmp(cmd->name, "publish") || !strcmp(cmd->name, "spublish");
        bool pattern = !strcmp(cmd->name, "psubscribe");
        if (!publish && !pattern && strcmp(cmd->name, "subscribe") != 0 &&
            strcmp(cmd->name, "ssubscribe") != 0)
            return 0;
        for (uint32_t i = 1; i < (publish ? 2 : a->argc); i++) {
            s = args_get(a, i, &len);
            if (!acl_channel_ok(u, s, len, pattern)) {
                *at = i;
                return 3;
            }
        }
        return 0;
    }
    /* Arguments whose keys cannot be read (XREAD without STREAMS, a bad
     * numkeys) name none, as redis-server's DRYRUN finds none: the error
     * the request itself would get is not about permission. A script that
     * declares no key names none either. */
    if (keys_find(cmd, a, &ks, err) != KEYS_FOUND)
        return 0;
    *at = key_denied(u, a, &ks);
    return *at != 0 ? 2 : 0;
}

/* A module that takes r before its command's kind is looked at (module.h:
 * pubsub.c a subscriber's, pin.c a transaction's): true if one did. */
static inline bool taken(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    for (size_t i = 0; i < module_ntake; i++)
        if (module_take[i](c, r, a, cmd))
            return true;
    return false;
}

/* r's command, in redis-server's order: the command, then its subcommand.
 * NULL when there is none to route: r answered already (SHARD.*, what
 * shardis answers itself), or *refuse set after an error was sent. */
static const struct cmd *lookup(struct client *c, struct req *r, struct args *a, bool *refuse)
{
    size_t len, sublen;
    const char *name = args_get(a, 0, &len), *sub;
    const struct cmd *cmd = cmd_lookup(name, len), *sc;

    if (cmd != NULL && !cmd_current(cmd))
        cmd = NULL;                     /* what none of the servers has (cmd.h) */
    if (cmd == NULL) {
        /* SHARD.*: not in Redis's table, nor for a transaction or a subscriber. */
        if ((len > 6 && !strncasecmp(name, "shard.", 6) && taken(c, r, a, NULL)) ||
            module_role.answer(c, r, a, NULL))
            return NULL;
        reply_unknown(c, r, a);
        *refuse = true;
        return NULL;
    }
    if (!cmd_has_subcommands(cmd) || a->argc < 2)
        return cmd;
    sub = args_get(a, 1, &sublen);
    sc = cmd_lookup_sub(cmd, sub, sublen);
    if (sc == NULL || !cmd_current(sc)) {
        char upper[65];
        size_t i;
        for (i = 0; cmd->name[i] != '\0' && i < 64; i++)
            upper[i] = (char)(cmd->name[i] >= 'a' && cmd->name[i] <= 'z'
                                  ? cmd->name[i] - 32 : cmd->name[i]);
        upper[i] = '\0';
        client_reply_error(c, r, "ERR unknown subcommand '%.*s'. Try %s HELP.",
                           (int)(sublen < 128 ? sublen : 128), sub, upper);
        *refuse = true;
        return NULL;
    }
    return sc;
}

/* Whether c may run cmd now, as redis-server judges: its arity, then
 * authentication, then the user's permission (before anything about the
 * command is judged or it is split, fanned out or queued in MULTI: its
 * keys as route_owner and frag.c find them, its channels in pubsub.c),
 * then MULTI's own refusals. False after sending the error. */
static bool admitted(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    if (!cmd_arity_ok(cmd, a->argc)) {
        client_reply_error(c, r, "ERR wrong number of arguments for '%s' command", cmd->name);
        return false;
    }
    if (c->user == NULL && !(cmd->flags & CMD_NO_AUTH)) {
        client_reply_error(c, r, "NOAUTH Authentication required.");
        return false;
    }
    if (!(cmd->flags & CMD_NO_AUTH) && !c->user->all && !acl_cmd_ok(c->user, cmd)) {
        client_reply_error(c, r, "NOPERM this user has no permissions to run the '%s' command",
                           cmd->name);
        return false;
    }
    /* (MULTI itself on Valkey 8, SAVE, SHUTDOWN ...: the transaction aborts) */
    if ((cmd->flags & CMD_NO_MULTI) && client_in_multi(c)) {
        client_reply_error(c, r, "ERR Command not allowed inside a transaction");
        return false;
    }
    return true;
}

/* Send r to owner, the server of its keys: as the keyless_user, as
 * shardis's own user, on c's own connection (a transaction's, a blocking
 * command's), else on a shared one (a replica's for a read). False after
 * sending an error (r is to be refused). */
static bool forward(struct client *c, struct req *r, struct args *a, const struct cmd *cmd,
                    uint32_t owner)
{
    if (c->pool->minify != NULL && !module_role.map_fields(c, r, a, cmd))
        return true;                        /* (refused) */
    if (r->keyless) {
        module_role.send_keyless(c, r, a, owner);
    } else if (r->as_own) {
        module_role.send_as_own(c, r, a, CMD_REPLY_DEFAULT, owner, true, false);
    } else if (client_in_multi(c) || (cmd->flags & CMD_BLOCKING)) {
        if (!client_in_multi(c) && (cmd->flags & CMD_BLOCKING))
            keep(r, a, cmd);
        module_role.send_pinned(c, r, a, owner, cmd->flags & CMD_BLOCKING);
    } else {
        struct backend *b = pool_backend_read(c->pool, owner, c, cmd, pool_via_of(c), c->db);
        if (b == NULL) {
            client_reply_error(c, r, POOL_NO_REPLICA_ERR, c->pool->servers[owner].label);
            return false;
        }
        args_request(a, &r->out);
        route_send(c, r, a, b);
    }
    return true;
}

void route_request(struct client *c, struct req *r)
{
    struct args a = {.c = c, .argc = c->scan.argc};
    const struct cmd *cmd;
    bool refuse = false;
    enum route_kind kind;
    int owner;

    if (c->reply != CLIENT_REPLY_ON) {
        r->silent = 1;
        if (c->reply == CLIENT_REPLY_SKIP)
            c->reply = CLIENT_REPLY_ON;
    }
    /* redis-server's order: the command, its subcommand, its arity, then
     * authentication; only then is it run (here, or on a backend). */
    if ((cmd = lookup(c, r, &a, &refuse)) == NULL)
        goto out;
    r->cmd = cmd_number(cmd);               /* (stats.c) */
    c->last_cmd = r->cmd;                   /* (CLIENT LIST) */
    c->last_s = loop_seconds();
    if (r->silent && (cmd->flags & CMD_PUBSUB) && strstr(cmd->name, "subscribe") != NULL)
        r->silent = 0;                      /* confirmations are always written */
    if ((refuse = !admitted(c, r, &a, cmd)))
        goto out;
    if (c->tracking)
        module_role.track(c, r, &a, cmd);       /* (track.c: does r count?) */
    if (c->pool->monitor_loops != 0 && !(cmd->flags & CMD_ADMIN))   /* (as redis-server) */
        module_role.to_monitors(c, &a);
    if (head_wanted(c->pool))
        head_keep(r, c);
    /* RESET ends whatever state the client is in: before those states' rules. */
    if ((cmd->flags & CMD_NO_AUTH) && !strcmp(cmd->name, "reset")) {
        module_role.answer(c, r, &a, cmd);
        goto out;
    }
    if ((db_matters(c, cmd) && !db_ok(c, r, &a, cmd)) || taken(c, r, &a, cmd))
        goto out;                           /* pub/sub, MULTI ... EXEC, WATCH */
    switch ((kind = route_kind(cmd))) {
    case ROUTE_LOCAL:
        if (a.argc == 1 && !strcmp(cmd->name, "command"))
            every_server(c, r, &a, cmd, ROUTE_FIRST);   /* as COMMAND INFO: server_table */
        else
            module_route[ROUTE_LOCAL](c, r, &a, cmd);
        goto out;
    case ROUTE_EVERY:
    case ROUTE_EVERY_ADMIN:
    case ROUTE_FIRST_ADMIN:
    case ROUTE_FIRST:
        every_server(c, r, &a, cmd, kind);
        goto out;
    case ROUTE_SCAN:
    case ROUTE_DEBUG:
    case ROUTE_WAIT:                        /* scan.c, debug.c, pin.c */
        module_route[kind](c, r, &a, cmd);
        goto out;
    case ROUTE_UNSUPPORTED:
    case ROUTE_TX:                          /* (pin.c took them) */
    case ROUTE_PUBSUB:                      /* (pubsub.c took them, or PUBSUB ...) */
        client_reply_error(c, r, "ERR command '%s' is not supported by shardis", cmd->name);
        refuse = true;
        goto out;
    case ROUTE_KEYLESS:
        client_reply_error(c, r, "ERR command '%s' is not supported by shardis: it "
                           "names no key to route by", cmd->name);
        refuse = true;
        goto out;
    case ROUTE_SPLIT:
        /* In a transaction every key must be on its server: nothing is split. */
        if (!client_in_multi(c) && (owner = module_role.split(c, r, &a, cmd)) != -2) {
            if (owner < 0)
                goto out;                   /* split and sent, or refused */
            a.keys.n = 1;                   /* (what frag_route read: route_send) */
            a.keys.span[0] = (struct keyspan){1, a.argc - 1, (uint16_t)cmd->step, 0};
            refuse = !forward(c, r, &a, cmd, (uint32_t)owner);
            goto out;
        }
        break;
    default:                                /* ROUTE_KEY, _SAME_SERVER, _BLOCKING */
        break;
    }
    if ((owner = route_owner(c, r, &a, cmd)) >= 0)
        refuse = !forward(c, r, &a, cmd, (uint32_t)owner);
out:
    if (refuse)
        route_refused(c, r);
    args_release(&a);
}

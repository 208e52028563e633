/* slowlog.c -- SLOWLOG, answered by shardis from its own log: each
 * request of a pool whose reply took slowlog_log_slower_than
 * microseconds or more from the request being read (waiting at the gate,
 * on the wire and on the server included: the time the application saw),
 * newest first, at most slowlog_max_len of them, and at most as many
 * written a second (when every request is slow, logging must not add to
 * the load). A blocking command is not logged: its time is waiting.
 *
 * An entry is redis-server's six fields (id, unix time, microseconds, the
 * arguments, the client's address and name) and a seventh of shardis's:
 * the server the request went to ("" when shardis answered it or it was
 * split over several). The arguments are those in the request's first
 * 55 bytes as read (req_head, copied as each request is routed: cheaper
 * than keeping its bytes until its reply); what is cut is counted as
 * redis-server counts what it cuts. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "proxy/transport/args.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/transport/loop.h"
#include "proxy/base/resp.h"
#include "proxy/base/stream.h"
#include "proxy/core/route.h"
#include "proxy/ops/slowlog.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

/* Ids with several loops: one count for the process, so that an id names
 * one entry whichever loop logged it and GET orders every loop's entries
 * by it (an atomic per slow request: rare). One loop numbers each pool's
 * from 0, as it always did. */
static _Atomic uint64_t process_ids;

/* The most arguments an entry keeps (a head holds no more whole). */
#define ENTRY_ARGS 8

struct entry {
    uint64_t id;
    long long time;         /* unix seconds */
    uint64_t us;
    uint32_t argc;
    char   **argv;          /* (owned) */
    size_t  *argvlen;
    char    *client;        /* ip:port (owned) */
    char    *name;          /* CLIENT SETNAME's, or "" (owned) */
    char    *server;        /* the server's name, or "" (owned) */
};

struct slowlog {
    struct entry *ring;     /* [cap]: the newest at (head - 1) */
    uint32_t cap, head, n;
    uint64_t next_id;
    uint64_t second;        /* loop_seconds() of the entries counted in ... */
    uint32_t this_second;   /* ... (at most cap a second: below) */
    uint64_t skipped;       /* slow requests not logged for that */
};

static void entry_clear(struct entry *e)
{
    for (uint32_t i = 0; i < e->argc; i++)
        free(e->argv[i]);
    free(e->argv);
    free(e->argvlen);
    free(e->client);
    free(e->name);
    free(e->server);
    memset(e, 0, sizeof(*e));
}

static void reset(struct slowlog *sl)
{
    for (uint32_t i = 0; i < sl->cap; i++)
        entry_clear(&sl->ring[i]);
    sl->head = sl->n = 0;
}

void slowlog_free(struct pool *p)
{
    if (p->slowlog == NULL)
        return;
    reset(p->slowlog);
    free(p->slowlog->ring);
    free(p->slowlog);
    p->slowlog = NULL;
}

/* An argument of full bytes, of which the first len (at most
 * REQ_HEAD_BYTES) are at s: kept, and what was cut counted after. */
static char *dup_arg(const char *s, size_t len, size_t full, size_t *outlen)
{
    char *d = xmalloc(len + 64);
    int n = 0;

    memcpy(d, s, len);
    if (full > len)
        n = snprintf(d + len, 64, "... (%zu more bytes)", full - len);
    d[len + (size_t)n] = '\0';
    *outlen = len + (size_t)n;
    return d;
}

/* A decimal at *p up to CRLF within [.., lim); false if there is none. */
static bool head_num(const char **p, const char *lim, long long *n)
{
    const char *q = *p;

    *n = 0;
    if (q >= lim || *q < '0' || *q > '9')
        return false;
    while (q < lim && *q >= '0' && *q <= '9' && *n < (1LL << 40))
        *n = *n * 10 + (*q++ - '0');
    if (q + 2 > lim || q[0] != '\r' || q[1] != '\n')
        return false;
    *p = q + 2;
    return true;
}

/* Secrets are not kept, as redis-server keeps none (args_redacted). All
 * are decided before any is replaced: whether one is a secret may depend
 * on the arguments before it (HELLO's AUTH user pass). */
static void redact(struct entry *e)
{
    struct args a = {.argc = e->argc, .av = e->argv, .avlen = e->argvlen};
    bool secret[ENTRY_ARGS] = {false};

    for (uint32_t i = 1; i < e->argc && i < ARRAY_SIZE(secret); i++)
        secret[i] = args_redacted(&a, i);
    for (uint32_t i = 1; i < e->argc && i < ARRAY_SIZE(secret); i++) {
        if (!secret[i])
            continue;
        free(e->argv[i]);
        e->argv[i] = dup_arg("(redacted)", 10, 10, &e->argvlen[i]);
    }
}

/* The request's arguments from its head (head_keep, core/head.h): those whole in
 * it, the one it cuts (its bytes counted as redis-server counts what it
 * cuts), and how many more; false if none can be read from it. */
static bool args_of(const struct req *r, struct entry *e)
{
    const struct req_head *h = &r->head;
    const char *p = h->raw, *lim = h->raw + h->kept;
    long long argc, len;
    char buf[64];

    if (h->len == 0 || h->kept < 4 || *p++ != '*' || !head_num(&p, lim, &argc) || argc <= 0)
        return false;
    e->argv = xcalloc((size_t)(argc < ENTRY_ARGS ? argc : ENTRY_ARGS) + 1, sizeof(*e->argv));
    e->argvlen = xcalloc((size_t)(argc < ENTRY_ARGS ? argc : ENTRY_ARGS) + 1,
                         sizeof(*e->argvlen));
    while (e->argc < argc && e->argc < ENTRY_ARGS && p < lim && *p == '$') {
        const char *at = p + 1;
        if (!head_num(&at, lim, &len))
            break;
        size_t have = (size_t)(lim - at) < (size_t)len ? (size_t)(lim - at) : (size_t)len;
        e->argv[e->argc] = dup_arg(at, have, (size_t)len, &e->argvlen[e->argc]);
        e->argc++;
        if (have < (size_t)len)
            break;
        p = at + len + 2;
    }
    if (e->argc == 0)
        return false;
    redact(e);
    if (e->argc < argc) {
        int n = snprintf(buf, sizeof(buf), "... (%lld more arguments)", argc - e->argc);
        e->argv[e->argc] = dup_arg(buf, (size_t)n, (size_t)n, &e->argvlen[e->argc]);
        e->argc++;
    }
    return true;
}

void slowlog_reply(struct pool *p, struct client *c, const struct req *r, uint64_t us)
{
    struct slowlog *sl = p->slowlog;
    const struct conf_pool *pc = p->conf;
    struct entry *e;
    struct timeval tv;
    char peer[80];

    if (pc->slowlog_max_len == 0)
        return;
    if (sl == NULL)
        sl = p->slowlog = xcalloc(1, sizeof(*sl));
    /* Under a backlog every request is slow: at most a log's worth a
     * second is written, so that logging costs no more when it is busiest
     * (the log would keep no more of them anyway). */
    if (sl->second != loop_seconds()) {
        sl->second = loop_seconds();
        sl->this_second = 0;
    }
    if (sl->this_second >= (uint32_t)pc->slowlog_max_len) {
        sl->skipped++;
        return;
    }
    sl->this_second++;
    if (sl->cap != (uint32_t)pc->slowlog_max_len) {     /* (a reload changed it) */
        reset(sl);
        free(sl->ring);
        sl->cap = (uint32_t)pc->slowlog_max_len;
        sl->ring = xcalloc(sl->cap, sizeof(*sl->ring));
    }
    e = &sl->ring[sl->head];
    entry_clear(e);
    sl->head = (sl->head + 1) % sl->cap;
    sl->n += sl->n < sl->cap;
    e->id = loop_count() > 1 ? atomic_fetch_add(&process_ids, 1) : sl->next_id++;
    gettimeofday(&tv, NULL);
    e->time = (long long)tv.tv_sec;
    e->us = us;
    if (!args_of(r, e)) {           /* (none kept: its name) */
        for (uint32_t i = 0; i < e->argc; i++)
            free(e->argv[i]);
        const char *name = cmd_numbered(r->cmd)->name;
        free(e->argv);
        free(e->argvlen);
        e->argv = xcalloc(1, sizeof(*e->argv));
        e->argvlen = xcalloc(1, sizeof(*e->argvlen));
        e->argv[0] = dup_arg(name, strlen(name), strlen(name), &e->argvlen[0]);
        e->argc = 1;
    }
    client_peer(c, peer, sizeof(peer));
    e->client = xstrdup(peer);
    e->name = xstrdup(client_name(c) != NULL ? client_name(c) : "");
    e->server = xstrdup(r->backend != NULL && r->frag == NULL && r->server < p->nservers
                            ? p->servers[r->server].label : "");
}

uint64_t slowlog_skipped(const struct pool *p)
{
    return p->slowlog != NULL ? p->slowlog->skipped : 0;
}

/* ---- over every loop -------------------------------------------------------------
 *
 * Each loop logs its own clients' slow requests in its copy of the pool:
 * SLOWLOG answers for them all, by visiting every loop's (loop_each). */

struct visit {
    size_t        pi;       /* the pool's index, the same on every loop */
    uint64_t      want;     /* GET's count: each loop's newest that many */
    uint64_t      len;      /* LEN: the entries on every loop */
    struct entry *got;      /* GET: copies (owned), [ngot] */
    uint32_t      ngot;
};

static char **dup_argv(const struct entry *e)
{
    char **v = xcalloc(e->argc + 1, sizeof(*v));

    for (uint32_t i = 0; i < e->argc; i++) {
        v[i] = xmalloc(e->argvlen[i] + 1);
        memcpy(v[i], e->argv[i], e->argvlen[i] + 1);
    }
    return v;
}

static void count_one(void *arg)
{
    struct visit *v = arg;
    const struct slowlog *sl = cur_loop->pools[v->pi].slowlog;

    v->len += sl != NULL ? sl->n : 0;
}

static void reset_one(void *arg)
{
    struct visit *v = arg;
    struct slowlog *sl = cur_loop->pools[v->pi].slowlog;

    if (sl != NULL)
        reset(sl);
}

static void get_one(void *arg)
{
    struct visit *v = arg;
    const struct slowlog *sl = cur_loop->pools[v->pi].slowlog;
    uint32_t n = sl == NULL ? 0 : v->want < sl->n ? (uint32_t)v->want : sl->n;

    v->got = xrealloc(v->got, (v->ngot + n + 1) * sizeof(*v->got));
    for (uint32_t i = 0; i < n; i++) {
        const struct entry *e = &sl->ring[(sl->head + sl->cap - 1 - i) % sl->cap];
        struct entry *c = &v->got[v->ngot++];
        *c = *e;
        c->argv = dup_argv(e);
        c->argvlen = xmalloc((e->argc + 1) * sizeof(*c->argvlen));
        memcpy(c->argvlen, e->argvlen, e->argc * sizeof(*c->argvlen));
        c->client = xstrdup(e->client);
        c->name = xstrdup(e->name);
        c->server = xstrdup(e->server);
    }
}

static int newest_first(const void *a, const void *b)
{
    uint64_t x = ((const struct entry *)a)->id, y = ((const struct entry *)b)->id;

    return x < y ? 1 : x > y ? -1 : 0;
}

void slowlog_command(struct client *c, struct req *r, struct args *a)
{
    struct visit v = {.pi = (size_t)(c->pool - cur_loop->pools)};
    struct resp_w w = client_w(c, &r->rsp);
    long long count = 10;

    /* (With several loops each keeps up to slowlog_max_len: the log is
     * the newest that many of all of them, as one redis-server's.) */
    uint64_t max = (uint64_t)c->pool->conf->slowlog_max_len;

    if (args_is(a, 1, "len") && a->argc == 2) {
        loop_each(count_one, &v);
        resp_w_int(&w, (long long)(v.len < max ? v.len : max));
    } else if (args_is(a, 1, "reset") && a->argc == 2) {
        loop_each(reset_one, &v);
        resp_w_simple(&w, "OK");
    } else if (args_is(a, 1, "get") && a->argc <= 3) {
        if (a->argc == 3 && (!args_ll(a, 2, &count) || count < -1)) {
            client_reply_error(c, r, "ERR count should be greater than or equal to -1");
            return;
        }
        v.want = count < 0 || (uint64_t)count > max ? max : (uint64_t)count;
        loop_each(get_one, &v);
        qsort(v.got, v.ngot, sizeof(*v.got), newest_first);
        uint32_t n = v.want < v.ngot ? (uint32_t)v.want : v.ngot;
        resp_w_array(&w, n);
        for (uint32_t i = 0; i < n; i++) {
            const struct entry *e = &v.got[i];
            resp_w_array(&w, 7);
            resp_w_int(&w, (long long)e->id);
            resp_w_int(&w, e->time);
            resp_w_int(&w, (long long)e->us);
            resp_w_array(&w, e->argc);
            for (uint32_t k = 0; k < e->argc; k++)
                resp_w_bulk(&w, e->argv[k], e->argvlen[k]);
            resp_w_bulk_str(&w, e->client);
            resp_w_bulk_str(&w, e->name);
            resp_w_bulk_str(&w, e->server);
        }
        for (uint32_t i = 0; i < v.ngot; i++)
            entry_clear(&v.got[i]);
        free(v.got);
    } else if (args_is(a, 1, "help") && a->argc == 2) {
        static const char *const help[] = {
            "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name, and (shardis) the server the request went to",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
            "HELP",
            "    Print this help.",
        };
        client_reply_help(c, r, help, ARRAY_SIZE(help));
    } else {
        client_reply_bad_sub(c, r, a, "SLOWLOG");
    }
}

/* ---- the module ---------------------------------------------------------------------- */

const struct module slowlog_module = {
    .name = "slowlog",
    .pool_free = slowlog_free,
};

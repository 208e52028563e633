/* info.c -- INFO: the pool as one redis-server holding all its keys would
 * describe itself, in redis-server's sections and field names, so that
 * the tools that read one (redis-cli --stat, redis_exporter, client
 * libraries' checks) read shardis.
 *
 * Two kinds of figures meet here:
 *
 *   the proxy's own   clients, requests, errors, commandstats, latency,
 *                     CPU, its memory in shardis_* fields, as they are now
 *   the servers'      memory, keyspace, hits and misses, persistence:
 *                     each server's own INFO, asked every INFO_REFRESH_MS
 *                     on shardis's own connection to it (pool_own) and
 *                     kept as its text; INFO sums (or takes the worst of)
 *                     the last answers, never waiting for one: the age of
 *                     each is shown (info_age_ms in the Shardis section)
 *
 * A server that has not answered yet counts as nothing. Which figure is
 * summed and which is a maximum, a minimum or the worst status is the
 * table `server_fields`; what redis-server prints that a proxy has no
 * meaning for (replication offsets, the loading progress) is a constant.
 *
 * This file asks the servers, keeps their answers and answers INFO (now,
 * or once the keyspace's answers came); info_sections.c writes the text. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/core/cmdinfo.h"
#include "proxy/ops/info.h"
#include "proxy/ops/info_int.h"
#include "proxy/base/mbuf.h"
#include "proxy/modules/own.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/core/pool_conn.h"
#include "proxy/base/resp.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

/* ---- the servers' figures ------------------------------------------------------- */

struct info *info_of(struct pool *p)
{
    struct info *in = p->info;

    if (in == NULL) {
        in = p->info = xcalloc(1, sizeof(*in));
        in->version_stale = true;
    }
    if (in->nservers < p->nservers) {
        in->servers = xrealloc(in->servers, p->nservers * sizeof(*in->servers));
        memset(in->servers + in->nservers, 0,
               (p->nservers - in->nservers) * sizeof(*in->servers));
        in->nservers = p->nservers;
    }
    return in;
}

/* Server s's INFO text (taken), answered at loop ms at_ms. */
static void keep(struct pool *p, uint32_t s, char *text, uint64_t at_ms, uint64_t clean)
{
    struct info *in = info_of(p);
    struct info_server *is = &in->servers[s];

    free(is->text);
    is->text = text;
    is->at_ms = at_ms;
    in->version_stale = true;
    if (clean > is->clean)
        is->clean = clean;
    cmdinfo_seen(p, s, is->text);     /* (its commands, if new) */
}

/* With several loops loop 0 alone polls the servers (info_tick), and the
 * loop that asks (the poll, or a client's INFO keyspace) mails each
 * answer to the other loops' copies of the pool: a server sees one poll
 * however many loops there are, and each loop still learns what its
 * servers are (cmdinfo_seen) and what databases hold keys. */
struct told {
    size_t   pi;                /* the pool's index (the same on every loop) ... */
    char    *name;              /* ... and name: a reload may have moved it */
    uint32_t server;
    char    *text;
    uint64_t at_ms;             /* (uv_now: one clock on every loop) */
    uint64_t asked_ns;          /* when the asking loop asked it (uv_hrtime) */
};

static void told_free(struct told *t)
{
    free(t->name);
    free(t->text);
    free(t);
}

static void info_told(void *arg)
{
    struct told *t = arg;
    struct pool *p = t->pi < cur_loop->npools ? &cur_loop->pools[t->pi] : NULL;

    if (p != NULL && !cur_loop->stopping && !strcmp(p->conf->name, t->name) &&
        t->server < p->nservers) {
        /* Clean for this loop's requests in other databases (their count
         * is this loop's: info_other_databases) if every one had been
         * answered before the asking loop asked: none alive since. */
        uint64_t clean = cur_loop->other_db_reqs == 0 &&
                         cur_loop->other_db_quiet_ns <= t->asked_ns
                         ? cur_loop->other_db_routed + 1 : 0;
        keep(p, t->server, t->text, t->at_ms, clean);
        t->text = NULL;
    }
    told_free(t);
}

static void tell_others(struct pool *p, uint32_t s, const char *text)
{
    for (uint32_t i = 0; i < loop_count(); i++) {
        if (i == cur_loop->id)
            continue;
        struct told *t = xmalloc(sizeof(*t));
        *t = (struct told){(size_t)(p - cur_loop->pools), xstrdup(p->conf->name), s,
                           xstrdup(text), uv_now(cur_loop->uv),
                           p->info->servers[s].asked_ns};
        if (!loop_post(loop_at(i), info_told, t))
            told_free(t);               /* (it is stopping) */
    }
}

/* A server's INFO: its bulk's text is kept. A failed one (no reply) or an
 * error keeps the last. */
static int server_info_reply(struct backend *b, struct req *r)
{
    struct info *in = b->pool->info;
    struct info_server *is;
    struct resp_rd rd;
    struct resp_val v;

    if (in == NULL || b->server >= in->nservers)
        return 0;
    is = &in->servers[b->server];
    is->asking = false;
    if (r->rsp.len == 0 || r->rsp.len > INFO_TEXT_MAX)
        return 0;
    resp_rd_init(&rd, &r->rsp);
    if (resp_rd_next(&rd, &v) == 0 && (v.type == RESP_BULK || v.type == RESP_VERBATIM) &&
        !v.nil) {
        char *text = xmalloc(v.len + 1);
        resp_rd_copy(&rd, &v, text, v.len);
        text[v.len] = '\0';
        if (loop_count() > 1)
            tell_others(b->pool, b->server, text);
        keep(b->pool, b->server, text, uv_now(cur_loop->uv), r->u.clean);
    }
    return 0;
}

static void answer_waits(struct pool *p);

/* How many of shardis's own keys the server holds: a failed answer keeps
 * the last. */
static int own_reply(struct backend *b, struct req *r)
{
    struct info *in = b->pool->info;
    struct resp_rd rd;
    struct resp_val v;

    if (in == NULL || b->server >= in->nservers)
        return 0;
    resp_rd_init(&rd, &r->rsp);
    if (resp_rd_next(&rd, &v) == 0 && v.type == RESP_INTEGER && v.n >= 0)
        in->servers[b->server].own = (uint64_t)v.n;
    in->servers[b->server].answered++;      /* (the pair's last answer) */
    if (in->nwaits > 0)
        answer_waits(b->pool);
    return 0;
}

/* Ask server its INFO and, for a client's INFO of the keyspace (own),
 * how many of shardis's own keys it holds right behind: about 1,000 key
 * names, which the background poll does without (only the keyspace
 * section reads them, and that asks anew). */
static void ask(struct pool *p, struct info *in, uint32_t server, uint64_t now, bool own)
{
    struct req *r = req_get(), *q;
    struct resp_w w = resp_w_on(&r->out, &in->buf, RESP2);
    struct backend *b = pool_own(p, server, false);

    resp_w_command(&w, 1, (const char *const[]){"INFO"}, NULL);
    r->on_reply = server_info_reply;
    r->u.clean = cur_loop->other_db_reqs == 0 ? cur_loop->other_db_routed + 1 : 0;
    in->servers[server].asked_ms = now;
    in->servers[server].asked_ns = uv_hrtime();
    in->servers[server].asking = true;
    backend_send(b, r);
    if (!own)
        return;
    q = req_get();
    in->servers[server].asked++;
    w = resp_w_on(&q->out, &in->buf, RESP2);
    own_exists(p, server, &w);
    q->on_reply = own_reply;
    backend_send(b, q);
}

/* (info.h) With pool_conn_call's second at most per server: a server
 * down at start costs that second, as the migration record's read does. */
void info_prime(struct pool *p)
{
    struct info *in = info_of(p);

    for (uint32_t s = 0; s < p->nservers; s++) {
        size_t len;
        char *text = p->servers[s].active
                     ? pool_conn_call(p, s, 2,
                                         (const char *const[]){"INFO", "server"}, &len)
                     : NULL;
        if (text == NULL)
            continue;
        free(in->servers[s].text);
        in->servers[s].text = text;     /* (clean 0: it says nothing of databases) */
        in->version_stale = true;
        in->servers[s].at_ms = uv_now(cur_loop->uv);
        cmdinfo_seen(p, s, text);
        if (in->modules == NULL)
            in->modules = pool_conn_call_raw(p, s, 2,
                                           (const char *const[]){"MODULE", "LIST"},
                                           &in->modules_len);
    }
}

/* (info.h) Each module [name n ver v path p args [..]] as a map in RESP3,
 * as its array of pairs in RESP2, as redis-server writes them. */
void info_modules(const struct pool *p, struct resp_w *w)
{
    const struct info *in = p->info;
    struct resp_rd rd;
    struct resp_val top, m, v;

    if (in == NULL || in->modules == NULL) {
        resp_w_array(w, 0);
        return;
    }
    /* (flat: every string is in one piece, v.p) */
    resp_rd_init_flat(&rd, in->modules, in->modules_len);
    if (resp_rd_next(&rd, &top) < 0 || top.type != RESP_ARRAY || top.nil) {
        resp_w_array(w, 0);
        return;
    }
    resp_w_array(w, (long long)top.elems);
    for (size_t i = 0; i < top.elems; i++) {
        if (resp_rd_next(&rd, &m) < 0 || m.type != RESP_ARRAY || m.elems % 2 != 0)
            return;                     /* (not reached for a server's reply) */
        resp_w_map(w, (long long)m.elems / 2);
        for (size_t j = 0; j < m.elems; j++) {
            if (resp_rd_next(&rd, &v) < 0)
                return;
            if (v.type == RESP_INTEGER) {
                resp_w_int(w, v.n);
            } else if (v.type == RESP_ARRAY) {
                size_t k = v.elems;
                resp_w_array(w, (long long)k);
                for (size_t e = 0; e < k && resp_rd_next(&rd, &v) == 0; e++)
                    resp_w_bulk(w, v.p != NULL ? v.p : "", v.p != NULL ? v.len : 0);
            } else {
                resp_w_bulk(w, v.p != NULL ? v.p : "", v.p != NULL ? v.len : 0);
            }
        }
    }
}

void info_tick(struct pool *p, uint64_t now)
{
    struct info *in = info_of(p);

    if (in->nwaits > 0)
        answer_waits(p);                /* (those whose time is up) */
    if (now >= in->sample_ms + INFO_SAMPLE_MS) {
        if (in->sample_ms != 0)
            in->samples[in->nsample++ % INFO_SAMPLES] =
                (double)(p->front.requests - in->sample_requests) * 1000.0 /
                (double)(now - in->sample_ms);
        in->sample_ms = now;
        in->sample_requests = p->front.requests;
    }
    /* (loop 0 asks for every loop: tell_others) */
    if (cur_loop->stopping || cur_loop->id != 0)
        return;
    for (uint32_t s = 0; s < p->nservers; s++) {
        struct info_server *is = &in->servers[s];
        /* Once per INFO_REFRESH_MS, answered or failed (an error is asked
         * again no sooner); one unanswered for 10 s is asked again. */
        if (!p->servers[s].active || now < is->asked_ms + INFO_REFRESH_MS ||
            (is->asking && now < is->asked_ms + 10000))
            continue;
        ask(p, in, s, now, false);
    }
}

void info_free(struct pool *p)
{
    struct info *in = p->info;

    if (in == NULL)
        return;
    for (uint32_t s = 0; s < in->nservers; s++)
        free(in->servers[s].text);
    free(in->servers);
    for (uint32_t i = 0; i < in->nwaits; i++)  /* (their clients are gone by now) */
        free(in->waits[i].need);
    free(in->modules);
    free(in->waits);
    if (in->buf != NULL)
        mbuf_unref(in->buf);
    free(in);
    p->info = NULL;
}

/* ---- INFO keyspace: asked when it is asked ------------------------------------------ */

/* Whether w may be answered: every server it waits for has answered (or
 * failed) the question asked for it, or its time is up. */
static bool wait_ready(const struct pool *p, const struct info_wait *w, uint64_t now)
{
    const struct info *in = p->info;

    if (now >= w->until_ms)
        return true;
    for (uint32_t s = 0; s < w->n; s++)
        if (p->servers[s].active && (int32_t)(in->servers[s].answered - w->need[s]) < 0)
            return false;
    return true;
}

/* Answer the waiting INFOs that may be, one at a time: answering one may
 * close its client (a write that fails), which drops its other entries. */
static void answer_waits(struct pool *p)
{
    struct info *in = p->info;
    uint64_t now = uv_now(cur_loop->uv);

    for (;;) {
        uint32_t i = 0;
        while (i < in->nwaits && !wait_ready(p, &in->waits[i], now))
            i++;
        if (i == in->nwaits)
            return;
        struct info_wait w = in->waits[i];
        in->waits[i] = in->waits[--in->nwaits];
        free(w.need);
        info_render(w.c, w.r, w.mask);
        req_done(w.r);
    }
}

void info_client_gone(struct client *c)
{
    struct info *in = c->pool->info;

    for (uint32_t i = 0; in != NULL && i < in->nwaits;) {
        if (in->waits[i].c != c) {
            i++;
            continue;
        }
        free(in->waits[i].need);
        in->waits[i] = in->waits[--in->nwaits];
    }
}

/* The keyspace is what clients wrote a moment ago (a count right after a
 * load, redis-cli --stat): an INFO with that section asks every server
 * again and answers once they have (INFO_WAIT_MS at most: a server that
 * does not answer is shown as it last was, info_age_ms says how old),
 * rather than from answers up to INFO_REFRESH_MS old, or none yet right
 * after a start. The other sections answer at once from what is there
 * (a client library's INFO server at connect waits for nothing). A
 * client's INFO sent in a pipeline behind its writes may be asked before
 * those are answered: the servers are asked when the INFO is read. */
void info_command(struct client *c, struct req *r, struct args *a)
{
    struct pool *p = c->pool;
    struct info *in = info_of(p);
    uint32_t mask = info_sections_of(a);
    uint64_t now = uv_now(cur_loop->uv);
    struct info_wait *w;

    if (!WANT(mask, S_KEYSPACE) || cur_loop->stopping) {
        info_render(c, r, mask);
        req_done(r);
        return;
    }
    if (in->nwaits == in->waits_cap) {
        in->waits_cap = in->waits_cap ? 2 * in->waits_cap : 4;
        in->waits = xrealloc(in->waits, in->waits_cap * sizeof(*in->waits));
    }
    w = &in->waits[in->nwaits++];
    *w = (struct info_wait){c, r, mask, now + INFO_WAIT_MS, p->nservers,
                            xcalloc(p->nservers, sizeof(uint32_t))};
    /* What answers it is the next question's answer; the entry is there
     * first, as a failed connection answers at once (inside ask). */
    for (uint32_t s = 0; s < p->nservers; s++)
        if (p->servers[s].active)
            w->need[s] = in->servers[s].asked + 1;
    for (uint32_t s = 0; s < p->nservers; s++)
        if (p->servers[s].active)
            ask(p, in, s, now, true);
    answer_waits(p);
}

/* ---- the module ---------------------------------------------------------------------- */

const struct module info_module = {
    .name = "info",
    .pool_free = info_free,
    .tick = info_tick,
};

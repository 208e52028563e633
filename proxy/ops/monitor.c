/* monitor.c -- MONITOR, in redis-server's format:
 *
 *   +1700000000.123456 [0 127.0.0.1:52555] "set" "k" "v"
 *
 * one line per command a client of the pool sends that passes its
 * checks (arity, AUTH, ACL), written to each client of the pool that sent
 * MONITOR, after whatever it asked before. Arguments are quoted as
 * redis-server's sdscatrepr quotes them; secrets (args_redacted: AUTH's,
 * HELLO's, MIGRATE's ...) are shown as "(redacted)". A monitor sees every
 * client's data: who may ask is the rule for every view of the pool's
 * other clients (local.c, route_admin_view_ok).
 *
 * Who monitors is pool.monitors, on each loop its own clients; a client
 * leaves it when it closes (monitor_gone, from client_close) or sends
 * RESET. Every loop's copy of the pool knows which loops have monitors
 * (monitor_loops, changed in a world stop as a loop gets its first or
 * loses its last): a line goes to the monitors of its own loop at once,
 * and to another loop's by its mail, one message per line. Nothing is
 * formatted while no loop has a monitor. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/ops/monitor.h"
#include "proxy/core/pool.h"
#include "proxy/base/resp.h"
#include "proxy/core/route.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"
#include "proxy/transport/loop.h"

static void repr(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '\\': fputs("\\\\", f); break;
        case '"':  fputs("\\\"", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\a': fputs("\\a", f); break;
        case '\b': fputs("\\b", f); break;
        default:
            if (isprint(ch))
                fputc(ch, f);
            else
                fprintf(f, "\\x%02x", ch);
        }
    }
    fputc('"', f);
}

/* Write line to p's monitors (of this loop), but c. */
static void feed(struct pool *p, const struct client *c, const char *line, size_t len)
{
    /* From the end: a monitor over its reply limit closes, and the last
     * (seen already) takes its place. */
    for (uint32_t i = p->nmonitors; i-- > 0; ) {
        struct client *m = p->monitors[i];
        struct req *r;
        if (m->closing || m == c)
            continue;               /* (redis-server shows a monitor its own commands not) */
        r = req_get();
        client_queue(m, r);
        struct resp_w w = client_w(m, &r->rsp);
        resp_w_raw(&w, line, len);
        req_done(r);
    }
}

/* A line from another loop's client, for this loop's monitors of the pool. */
struct line {
    size_t pool;
    size_t len;
    char   text[];
};

static void line_cb(void *arg)
{
    struct line *m = arg;

    feed(&cur_loop->pools[m->pool], NULL, m->text, m->len);
    free(m);
}

/* Loop `loop` has monitors of the pool now (on), or has none: said on
 * every loop's copy. */
struct mark {
    uint32_t loop;
    bool     on;
};

static void mark_one(struct pool *q, void *arg)
{
    const struct mark *m = arg;

    if (m->on)
        q->monitor_loops |= 1ULL << m->loop;
    else
        q->monitor_loops &= ~(1ULL << m->loop);
}

static void mark(struct pool *p, bool on)
{
    pool_each(p, mark_one, &(struct mark){.loop = cur_loop->id, .on = on});
}

void monitor_feed(struct client *c, struct args *a)
{
    struct pool *p = c->pool;
    char *line = NULL, peer[80];
    size_t len = 0;
    FILE *f;
    struct timeval tv;

    gettimeofday(&tv, NULL);
    client_peer(c, peer, sizeof(peer));
    f = xopen_memstream(&line, &len);
    fprintf(f, "+%ld.%06ld [0 %s]", (long)tv.tv_sec, (long)tv.tv_usec, peer);
    for (uint32_t i = 0; i < a->argc; i++) {
        size_t n;
        fputc(' ', f);
        if (args_redacted(a, i)) {
            repr(f, "(redacted)", 10);
        } else {
            const char *s = args_get(a, i, &n);     /* (valid only until the next) */
            repr(f, s, n);
        }
    }
    fputs("\r\n", f);
    fclose(f);
    for (uint32_t l = 0; l < loop_count(); l++) {
        if (!(p->monitor_loops & (1ULL << l)) || l == cur_loop->id)
            continue;
        struct line *m = xmalloc(sizeof(*m) + len);
        m->pool = (size_t)(p - cur_loop->pools);
        m->len = len;
        memcpy(m->text, line, len);
        if (!loop_post(loop_at(l), line_cb, m))
            free(m);                /* (that loop is stopping) */
    }
    if (p->monitor_loops & (1ULL << cur_loop->id))
        feed(p, c, line, len);
    free(line);
}

void monitor_command(struct client *c, struct req *r, struct args *a)
{
    struct pool *p = c->pool;
    struct client_rare *rare;

    (void)a;
    rare = client_rare(c);
    if (!rare->monitor) {
        if (p->nmonitors == p->monitors_cap) {
            p->monitors_cap = p->monitors_cap ? 2 * p->monitors_cap : 4;
            p->monitors = xrealloc(p->monitors, p->monitors_cap * sizeof(*p->monitors));
        }
        p->monitors[p->nmonitors++] = c;
        rare->monitor = true;
        if (p->nmonitors == 1)
            mark(p, true);
    }
    struct resp_w w = client_w(c, &r->rsp);
    resp_w_simple(&w, "OK");
}

void monitor_gone(struct client *c)
{
    struct pool *p = c->pool;

    if (c->rare == NULL || !c->rare->monitor)
        return;
    c->rare->monitor = false;
    for (uint32_t i = 0; i < p->nmonitors; i++)
        if (p->monitors[i] == c) {
            p->monitors[i] = p->monitors[--p->nmonitors];
            if (p->nmonitors == 0)
                mark(p, false);
            break;
        }
}

/* ---- the module ---------------------------------------------------------------------- */

const struct module monitor_module = {
    .name = "monitor",
    .roles = &(const struct module_roles){.to_monitors = monitor_feed},
};

/* totals.c -- INFO's and /metrics' figures over every loop: one world
 * stop (loop_each) visits each loop's copies of the pools and adds their
 * counters, merges their commandstats and histograms (stats_merge). With
 * one loop the visit is the loop itself and each figure is its own. */
#include <stdlib.h>
#include <string.h>

#include "proxy/base/mbuf.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/transport/loop.h"
#include "proxy/transport/req.h"
#include "proxy/ops/info.h"
#include "proxy/ops/slowlog.h"
#include "proxy/ops/totals.h"
#include "proxy/base/util.h"

/* Clients waiting in a blocking command: its request is the oldest on
 * their dedicated connection. */
static uint32_t blocked_clients(void)
{
    uint32_t n = 0;

    for (size_t i = 0; i < cur_loop->npools; i++) {
        struct backend *b;
        TAILQ_FOREACH(b, &cur_loop->pools[i].dedicated, link) {
            struct req *r = TAILQ_FIRST(&b->pendq);
            n += b->role == BACKEND_PIN && r != NULL && r->blocking;
        }
    }
    return n;
}

static void add_pool(struct pool_totals *t, struct pool *p)
{
    uint64_t now = uv_now(cur_loop->uv), in, out;
    uint32_t n = p->nservers < t->nservers ? p->nservers : t->nservers;

    t->nclients += p->front.nclients;
    t->accepted += p->front.accepted;
    t->rejected += p->front.rejected;
    t->requests += p->front.requests;
    t->evicted_clients += p->front.evicted_clients;
    t->obl_disconnections += p->front.obl_disconnections;
    t->clients_mem += p->front.clients_mem;
    client_peaks(&p->front, now, &in, &out);
    t->peak_in = in > t->peak_in ? in : t->peak_in;
    t->peak_out = out > t->peak_out ? out : t->peak_out;
    t->ops_per_sec += info_ops_per_sec(p);
    t->errors += p->errors;
    t->slowlog_skipped += slowlog_skipped(p);
    track_figures(p, &t->track);
    if (p->stats != NULL)
        stats_merge(&t->stats, p->stats);
    for (uint32_t s = 0; s < n; s++) {
        struct pool_server_totals *to = &t->servers[s], one;
        pool_server_totals(p, s, &one);
        to->up = one.up > to->up ? one.up : to->up;
        to->conns += one.conns;
        to->queued += one.queued;
        to->requests += one.requests;
        to->errors += one.errors;
        to->timeouts += one.timeouts;
        to->rx_bytes += one.rx_bytes;
        to->tx_bytes += one.tx_bytes;
        stats_hist_merge(&t->latency[s], p->servers[s].latency);
        t->ejections[s] += p->servers[s].ejections;
        t->ejected[s] |= pool_held_off(p, s, 0, now);
    }
}

static void add_loop(void *arg)
{
    struct totals *t = arg;
    size_t n = cur_loop->npools < t->npools ? cur_loop->npools : t->npools;

    t->nclients += cur_loop->nclients;
    if (cur_loop->id < LOOP_MAX) {
        t->loops[cur_loop->id].clients = cur_loop->nclients;
        t->loops[cur_loop->id].commands = cur_loop->total_commands;
        t->nloops = cur_loop->id + 1 > t->nloops ? cur_loop->id + 1 : t->nloops;
    }
    /* (a loop not run by loop_run: this thread's) */
    t->chunks_alloc += cur_loop->chunks_alloc != NULL ? *cur_loop->chunks_alloc : mbuf_nalloc();
    t->chunks_free += cur_loop->chunks_free != NULL ? *cur_loop->chunks_free : mbuf_nfree();
    t->blocked += blocked_clients();
    for (size_t i = 0; i < n; i++)
        add_pool(&t->pools[i], &cur_loop->pools[i]);
}

void totals_get(struct totals *t)
{
    memset(t, 0, sizeof(*t));
    t->npools = cur_loop->npools;
    t->pools = xcalloc(t->npools ? t->npools : 1, sizeof(*t->pools));
    for (size_t i = 0; i < t->npools; i++) {
        struct pool_totals *pt = &t->pools[i];
        uint32_t n = cur_loop->pools[i].nservers;
        pt->nservers = n;
        pt->servers = xcalloc(n ? n : 1, sizeof(*pt->servers));
        for (uint32_t s = 0; s < n; s++)
            pt->servers[s].up = -1;     /* (none needed yet, until a loop says more) */
        pt->latency = xcalloc(n ? n : 1, sizeof(*pt->latency));
        pt->ejections = xcalloc(n ? n : 1, sizeof(*pt->ejections));
        pt->ejected = xcalloc(n ? n : 1, sizeof(*pt->ejected));
    }
    loop_each(add_loop, t);
}

void totals_free(struct totals *t)
{
    for (size_t i = 0; i < t->npools; i++) {
        struct pool_totals *pt = &t->pools[i];
        stats_free(&pt->stats);
        for (uint32_t s = 0; s < pt->nservers; s++)
            free(pt->latency[s]);
        free(pt->latency);
        free(pt->servers);
        free(pt->ejections);
        free(pt->ejected);
    }
    free(t->pools);
    memset(t, 0, sizeof(*t));
}

struct stats_visit {
    size_t        pi;
    struct stats *into;
};

static void add_stats(void *arg)
{
    struct stats_visit *v = arg;
    const struct pool *p = &cur_loop->pools[v->pi];

    if (v->pi < cur_loop->npools && p->stats != NULL)
        stats_merge(v->into, p->stats);
}

void totals_stats(const struct pool *p, struct stats *into)
{
    struct stats_visit v = {(size_t)(p - cur_loop->pools), into};

    memset(into, 0, sizeof(*into));
    loop_each(add_stats, &v);
}


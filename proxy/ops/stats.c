/* stats.c -- INFO's commandstats and errorstats, counted where each reply
 * of a client's request is complete (req_done), the one place every
 * request passes, whoever answered it: a server, a merge of several, or
 * shardis itself.
 *
 * Measured at the proxy, as an application sees it: a command's usec runs
 * from its request being read to its reply being complete (waiting at the
 * gate and on the server included), not the server's own time. The clock
 * is read once per read callback (cur_loop->now_us), not per request: every
 * request framed from one read shares its start, every reply completed by
 * one read shares its end.
 *
 * What redis-server counts and this does not: errors inside an array
 * (EXEC's, a script's pcall) are not top-level replies here; commands a
 * script runs are the server's, not seen. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/base/cmd.h"
#include "proxy/base/mbuf.h"
#include "proxy/core/pool.h"
#include "proxy/transport/req.h"
#include "proxy/base/resp.h"
#include "proxy/ops/stats.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

/* The error code of an error reply ("-CODE message"): the word before the
 * first space within STATS_CODE_MAX bytes, or ERR if there is none, as
 * redis-server's afterErrorReply takes it. */
static COLD void count_error(struct stats *st, const struct msg *rsp)
{
    char line[STATS_CODE_MAX];
    size_t n = rsp->len < sizeof(line) ? rsp->len : sizeof(line);
    const char *sp;
    size_t len;
    uint32_t i;

    st->error_replies++;
    msg_copy(rsp, 0, n, line);
    sp = memchr(line, ' ', n);
    if (sp == NULL || sp == line + 1) {
        memcpy(line, "-ERR", 4);
        len = 3;
    } else {
        len = (size_t)(sp - line) - 1;
    }
    for (i = 0; i < st->nerrs; i++)
        if (strlen(st->errs[i].code) == len && !memcmp(st->errs[i].code, line + 1, len))
            break;
    if (i == st->nerrs) {
        if (st->nerrs == STATS_ERRORS_MAX)
            return;
        if (st->errs == NULL)
            st->errs = xcalloc(STATS_ERRORS_MAX, sizeof(*st->errs));
        memcpy(st->errs[i].code, line + 1, len);
        st->errs[i].code[len] = '\0';
        st->nerrs++;
    }
    st->errs[i].count++;
}

/* ---- histograms ----------------------------------------------------------------- */

#define B(m) 10 * (m), 12 * (m), 15 * (m), 20 * (m), 25 * (m), 30 * (m), 40 * (m), \
             50 * (m), 60 * (m), 80 * (m)
const uint64_t stats_bounds[STATS_BUCKETS - 1] = {
    B(1ull), B(10ull), B(100ull), B(1000ull), B(10000ull), B(100000ull), B(1000000ull),
    100000000ull,
};
#undef B

/* by_log2[n]: the first bucket whose bound is >= 2^n, the smallest time
 * of bit length n + 1. A power of two spans at most three buckets, so from
 * there a step or two finds any time's: cheaper than a binary search's
 * seven unpredictable branches, on every request. Made on first use by
 * each thread for itself: loops never write what another reads. */
static _Thread_local uint8_t by_log2[64] __attribute__((tls_model("initial-exec")));

static void by_log2_init(void)
{
    for (uint32_t n = 0, b = 0; n < 64; n++) {
        uint64_t low = 1ull << n;
        while (b < STATS_BUCKETS - 1 && stats_bounds[b] < low)
            b++;
        by_log2[n] = (uint8_t)b;
    }
}

/* The bucket of us: the first whose bound is >= us, or the last. */
static uint32_t bucket_of(uint64_t us)
{
    uint32_t b;

    if (by_log2[63] == 0)
        by_log2_init();
    b = us == 0 ? 0 : by_log2[63 - __builtin_clzll(us)];
    while (b < STATS_BUCKETS - 1 && stats_bounds[b] < us)
        b++;
    return b;
}

static void hist_add_at(struct stats_hist *h, uint32_t b, uint64_t us)
{
    h->bucket[b]++;
    if (h->count == 0 || us < h->min_us)
        h->min_us = us;
    if (us > h->max_us)
        h->max_us = us;
    h->count++;
    h->sum_us += us;
}


/* The q-quantile (0 < q <= 1) of h in microseconds, interpolated within
 * its bucket and kept within the least and the most seen; 0 for an
 * empty h. */
static double hist_quantile(const struct stats_hist *h, double q)
{
    double want = q * (double)h->count, seen = 0;

    if (h->count == 0)
        return 0;
    for (uint32_t i = 0; i < STATS_BUCKETS; i++) {
        double n = (double)h->bucket[i];
        if (n > 0 && seen + n >= want) {
            double lo = i == 0 ? 0 : (double)stats_bounds[i - 1];
            double hi = i < STATS_BUCKETS - 1 ? (double)stats_bounds[i] : (double)h->max_us;
            double x = lo + (hi - lo) * (want - seen) / n;
            return x < (double)h->min_us ? (double)h->min_us
                 : x > (double)h->max_us ? (double)h->max_us : x;
        }
        seen += n;
    }
    return (double)h->max_us;
}

/* into += from: the buckets and sums added, the least and the most kept. */
static void hist_merge(struct stats_hist *into, const struct stats_hist *from)
{
    if (from->count == 0)
        return;
    if (into->count == 0 || from->min_us < into->min_us)
        into->min_us = from->min_us;
    if (from->max_us > into->max_us)
        into->max_us = from->max_us;
    into->count += from->count;
    into->sum_us += from->sum_us;
    for (uint32_t i = 0; i < STATS_BUCKETS; i++)
        into->bucket[i] += from->bucket[i];
}

/* ---- counting ------------------------------------------------------------------ */

/* The first reply of a pool, of a command or to a server needs these. */
static COLD void cmds_new(struct stats *st)
{
    st->cmds = xcalloc(CMD_MAX, sizeof(*st->cmds));     /* (the table's rows ever) */
}

static COLD struct stats_hist *hist_new(struct stats_hist **at)
{
    return *at = xcalloc(1, sizeof(**at));
}

void stats_reply(struct stats *st, const struct req *r, uint64_t us, struct stats_hist **server)
{
    bool error = msg_first(&r->rsp) == '-';
    struct stats_cmd *sc;
    struct stats_hist *h;
    uint32_t b;

    if (error)
        count_error(st, &r->rsp);
    if (r->cmd == 0)
        return;                     /* unknown, or not a command (a message) */
    if (st->cmds == NULL)
        cmds_new(st);
    sc = &st->cmds[r->cmd - 1];
    if (r->rejected) {
        sc->rejected++;
        return;
    }
    sc->calls++;
    sc->usec += us;
    sc->failed += error;
    if (r->blocking)
        return;                     /* (its time is mostly waiting: not latency) */
    b = bucket_of(us);
    if ((h = sc->hist) == NULL)
        h = hist_new(&sc->hist);
    hist_add_at(h, b, us);
    if (server != NULL) {
        if ((h = *server) == NULL)
            h = hist_new(server);
        hist_add_at(h, b, us);
    }
}

void stats_reset(struct stats *st)
{
    stats_free(st);
    memset(st, 0, sizeof(*st));
}

void stats_free(struct stats *st)
{
    size_t n;

    cmd_table(&n);
    for (size_t i = 0; st->cmds != NULL && i < n; i++)
        free(st->cmds[i].hist);
    free(st->cmds);
    free(st->errs);
}

void stats_merge(struct stats *into, const struct stats *from)
{
    size_t n;

    cmd_table(&n);
    into->error_replies += from->error_replies;
    for (uint32_t k = 0; k < from->nerrs; k++) {
        const struct stats_err *e = &from->errs[k];
        uint32_t i = 0;
        while (i < into->nerrs && strcmp(into->errs[i].code, e->code) != 0)
            i++;
        if (i == into->nerrs) {
            if (into->nerrs == STATS_ERRORS_MAX)
                continue;
            if (into->errs == NULL)
                into->errs = xcalloc(STATS_ERRORS_MAX, sizeof(*into->errs));
            memcpy(into->errs[i].code, e->code, sizeof(e->code));
            into->nerrs++;
        }
        into->errs[i].count += e->count;
    }
    for (size_t i = 0; from->cmds != NULL && i < n; i++) {
        const struct stats_cmd *f = &from->cmds[i];
        struct stats_cmd *t;
        if (f->calls == 0 && f->rejected == 0)
            continue;
        if (into->cmds == NULL)
            cmds_new(into);
        t = &into->cmds[i];
        t->calls += f->calls;
        t->usec += f->usec;
        t->rejected += f->rejected;
        t->failed += f->failed;
        if (f->hist != NULL)
            hist_merge(t->hist != NULL ? t->hist : hist_new(&t->hist), f->hist);
    }
}

void stats_hist_merge(struct stats_hist **into, const struct stats_hist *from)
{
    if (from != NULL)
        hist_merge(*into != NULL ? *into : hist_new(into), from);
}

void stats_info_commandstats(const struct stats *st, FILE *f)
{
    size_t n;
    const struct cmd *table = cmd_table(&n);

    for (size_t i = 0; st->cmds != NULL && i < n; i++) {
        const struct stats_cmd *sc = &st->cmds[i];
        if (sc->calls == 0 && sc->rejected == 0)
            continue;
        fprintf(f, "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,"
                "failed_calls=%llu\r\n", table[i].name, (unsigned long long)sc->calls,
                (unsigned long long)sc->usec,
                sc->calls ? (double)sc->usec / (double)sc->calls : 0.0,
                (unsigned long long)sc->rejected, (unsigned long long)sc->failed);
    }
}

static int by_code(const void *a, const void *b)
{
    return strcmp(((const struct stats_err *)a)->code, ((const struct stats_err *)b)->code);
}

/* In code order, as redis-server lists them (its rax is sorted). */
void stats_info_errorstats(const struct stats *st, FILE *f)
{
    struct stats_err *sorted;

    if (st->nerrs == 0)
        return;
    sorted = xmalloc(st->nerrs * sizeof(*sorted));
    memcpy(sorted, st->errs, st->nerrs * sizeof(*sorted));
    qsort(sorted, st->nerrs, sizeof(*sorted), by_code);
    for (uint32_t i = 0; i < st->nerrs; i++)
        fprintf(f, "errorstat_%s:count=%llu\r\n", sorted[i].code,
                (unsigned long long)sorted[i].count);
    free(sorted);
}

void stats_info_latencystats(const struct stats *st, FILE *f)
{
    size_t n;
    const struct cmd *table = cmd_table(&n);

    for (size_t i = 0; st->cmds != NULL && i < n; i++) {
        const struct stats_hist *h = st->cmds[i].hist;
        if (h == NULL || h->count == 0)
            continue;
        fprintf(f, "latency_percentiles_usec_%s:p50=%.3f,p99=%.3f,p99.9=%.3f\r\n",
                table[i].name, hist_quantile(h, 0.5), hist_quantile(h, 0.99),
                hist_quantile(h, 0.999));
    }
}

static void histogram_of(struct resp_w *w, const char *name, const struct stats_hist *h)
{
    uint32_t nb = 0;
    uint64_t cum = 0;

    for (uint32_t i = 0; i < STATS_BUCKETS - 1; i++)
        nb += h->bucket[i] > 0;
    resp_w_bulk_str(w, name);
    resp_w_map(w, 2);
    resp_w_bulk_str(w, "calls");
    resp_w_int(w, (long long)h->count);
    resp_w_bulk_str(w, "histogram_usec");
    resp_w_map(w, nb);
    for (uint32_t i = 0; i < STATS_BUCKETS - 1; i++) {
        cum += h->bucket[i];
        if (h->bucket[i] == 0)
            continue;
        resp_w_int(w, (long long)stats_bounds[i]);
        resp_w_int(w, (long long)cum);
    }
}

void stats_latency_histogram(const struct stats *st, struct resp_w *w, const uint16_t *named,
                             uint32_t nnamed)
{
    size_t n;
    const struct cmd *table = cmd_table(&n);
    uint32_t count = 0;
    bool *want = xcalloc(n, sizeof(*want));

    for (uint32_t k = 0; k < nnamed; k++)
        if (named[k] != 0)
            want[named[k] - 1] = true;
    for (size_t i = 0; i < n; i++) {
        want[i] = (nnamed == 0 || want[i]) && st->cmds != NULL && st->cmds[i].hist != NULL &&
                  st->cmds[i].hist->count > 0;
        count += want[i];
    }
    resp_w_map(w, count);
    for (size_t i = 0; i < n && count > 0; i++)
        if (want[i])
            histogram_of(w, table[i].name, st->cmds[i].hist);
    free(want);
}

/* ---- the module ---------------------------------------------------------------------- */

static void stats_pool_init(struct pool *p)
{
    p->stats = xcalloc(1, sizeof(*p->stats));
}

static void stats_pool_free(struct pool *p)
{
    if (p->stats == NULL)
        return;
    stats_free(p->stats);
    free(p->stats);
    p->stats = NULL;
}

static void stats_pool_reset(struct pool *p)
{
    stats_reset(p->stats);
}

const struct module stats_module = {
    .name = "stats",
    .pool_init = stats_pool_init,
    .pool_free = stats_pool_free,
    .roles = &(const struct module_roles){.reset_stats = stats_pool_reset},
};

/* metrics.c -- Prometheus: a pool's figures in the text exposition format
 * (version 0.0.4), served on stats_listen to GET /metrics; off unless
 * configured.
 *
 * The HTTP side is as small as a scrape needs: one request per
 * connection (HTTP/1.0 and 1.1 alike; the reply says Connection: close),
 * its head at most METRICS_HEAD_MAX bytes, a connection still open
 * METRICS_IDLE_MS after it came closed (its head never ended, or its reply
 * was never read), and past METRICS_CONNS_MAX the oldest. Each goes
 *
 *   accepted --head read--> writing --written--> closing --close cb--> freed
 *       |                                           ^
 *       +-- EOF, error, too long, idle -------------+
 *
 * Names follow Prometheus's conventions: shardis_ prefix, base units
 * (seconds, bytes), _total for counters, histograms for latency whose
 * buckets are bounds of stats.c's (exact: no bucket is estimated), from
 * 25 us so that a sub-millisecond p99 shows. Labels: pool, server, cmd. */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "proxy/transport/backend.h"
#include "proxy/base/cmd.h"
#include "proxy/ops/hotkeys.h"
#include "proxy/ops/info.h"
#include "proxy/base/log.h"
#include "proxy/ops/metrics.h"
#include "proxy/base/text.h"
#include "proxy/modules/mig.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/modules/sentinel.h"
#include "proxy/ops/stats.h"
#include "proxy/ops/totals.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

#define METRICS_HEAD_MAX 8192
#define METRICS_IDLE_MS  10000
#define METRICS_CONNS_MAX 64        /* more at once: the oldest is closed */

enum http_state { HTTP_READING, HTTP_WRITING, HTTP_CLOSING };

struct http_conn {
    uv_tcp_t         tcp;
    uv_write_t       wreq;
    struct metrics  *m;
    enum http_state  state;
    uint64_t         since;         /* loop ms accepted */
    size_t           len;
    char             head[METRICS_HEAD_MAX];
    char            *reply;         /* (owned) while writing */
    TAILQ_ENTRY(http_conn) link;
};

struct metrics {
    struct pool     *p;
    uv_tcp_t         listener;
    bool             listening;     /* listener initialized and not closed */
    TAILQ_HEAD(, http_conn) conns;
    uint32_t         nconns;
};

/* ---- the text ---------------------------------------------------------------------- */

/* Bucket bounds shown, in us: each one of stats_bounds. */
static const uint64_t shown[] = {
    25, 50, 100, 150, 200, 300, 400, 500, 600, 800, 1000, 1500, 2000, 2500, 5000, 10000,
    25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000,
};

static void label(FILE *f, const char *s)
{
    text_escape(f, s, strlen(s));
}

void metrics_head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* "name{pool="..."" and ",lname="lvalue"" unless lname is NULL, escaped:
 * the brace left open. */
static void series(FILE *f, const char *name, const char *suffix, const char *pool,
                   const char *lname, const char *lvalue)
{
    fprintf(f, "%s%s{pool=\"", name, suffix);
    label(f, pool);
    fputc('"', f);
    if (lname != NULL) {
        fprintf(f, ",%s=\"", lname);
        label(f, lvalue);
        fputc('"', f);
    }
}

/* A family of one series, labelled pool. */
static void pool_family(FILE *f, const char *name, const char *type, const char *help,
                        const char *pool, unsigned long long value)
{
    metrics_head(f, name, type, help);
    series(f, name, "", pool, NULL, NULL);
    fprintf(f, "} %llu\n", value);
}

/* A histogram's series, labelled pool and lname=lvalue. */
static void histogram(FILE *f, const char *name, const char *pool, const char *lname,
                      const char *lvalue, const struct stats_hist *h)
{
    uint64_t cum = 0;
    uint32_t b = 0;

    for (size_t i = 0; i < ARRAY_SIZE(shown); i++) {
        while (b < STATS_BUCKETS - 1 && stats_bounds[b] <= shown[i])
            cum += h->bucket[b++];
        series(f, name, "_bucket", pool, lname, lvalue);
        fprintf(f, ",le=\"%g\"} %llu\n", (double)shown[i] / 1e6, (unsigned long long)cum);
    }
    series(f, name, "_bucket", pool, lname, lvalue);
    fprintf(f, ",le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
    series(f, name, "_sum", pool, lname, lvalue);
    fprintf(f, "} %.6f\n", (double)h->sum_us / 1e6);
    series(f, name, "_count", pool, lname, lvalue);
    fprintf(f, "} %llu\n", (unsigned long long)h->count);
}

/* Per server: a line of one figure, summed over its shared connections,
 * its replicas' (read_from) included: the shard's traffic. Up is its
 * master's. */
enum server_fig {
    FIG_UP, FIG_CONNS, FIG_QUEUE, FIG_REQUESTS, FIG_ERRORS, FIG_TIMEOUTS, FIG_RX, FIG_TX,
    FIG_EJECTED, FIG_EJECTIONS, FIG_SWITCHES,
};

static const struct {
    const char *name, *type, *help;
} server_figs[] = {
    {"shardis_server_up", "gauge", "1 if a connection to the server (its master) is up, 0 "
     "if its connections failed, -1 if none was needed yet"},
    {"shardis_server_connections", "gauge", "Open connections to the server, shared and "
     "dedicated"},
    {"shardis_server_queue_depth", "gauge", "Requests queued or awaiting their replies on "
     "the server's shared connections"},
    {"shardis_server_requests_total", "counter", "Requests sent to the server (its "
     "replicas' reads included)"},
    {"shardis_server_errors_total", "counter", "Requests the server's connections failed"},
    {"shardis_server_timeouts_total", "counter", "Requests that timed out on the server"},
    {"shardis_server_received_bytes_total", "counter", "Bytes read from the server"},
    {"shardis_server_sent_bytes_total", "counter", "Bytes written to the server"},
    {"shardis_server_ejected", "gauge", "1 while eject_mode: rehash keeps the server out "
     "of the ring"},
    {"shardis_server_ejections_total", "counter", "Times the server was ejected"},
    {"shardis_server_failovers_total", "counter", "Master switches followed (Sentinel)"},
};

/* (Sentinels run on one loop only: p's are the process's.) */
static long long server_fig(const struct pool *p, const struct pool_totals *pt, uint32_t s,
                            enum server_fig fig)
{
    const struct pool_server_totals *t = &pt->servers[s];

    switch (fig) {
    case FIG_EJECTED:   return pt->ejected[s];
    case FIG_EJECTIONS: return (long long)pt->ejections[s];
    case FIG_SWITCHES:  return p->sentinel != NULL ? sentinel_switches(p, s) : 0;
    case FIG_UP:        return t->up;
    case FIG_CONNS:     return t->conns;
    case FIG_QUEUE:     return t->queued;
    case FIG_REQUESTS:  return (long long)t->requests;
    case FIG_ERRORS:    return (long long)t->errors;
    case FIG_TIMEOUTS:  return (long long)t->timeouts;
    case FIG_RX:        return (long long)t->rx_bytes;
    default:            return (long long)t->tx_bytes;
    }
}

void metrics_write(const struct pool *p, FILE *f)
{
    const char *pool = p->conf->name;
    size_t ncmds;
    const struct cmd *table = cmd_table(&ncmds);
    struct rusage ru;
    struct mig_progress mp;
    struct totals all;
    const struct pool_totals *pt;

    totals_get(&all);
    pt = &all.pools[p - cur_loop->pools];

    metrics_head(f, "shardis_build_info", "gauge", "shardis's version");
    fprintf(f, "shardis_build_info{version=\"%s\"} 1\n", SHARDIS_VERSION);
    metrics_head(f, "process_start_time_seconds", "gauge",
                 "Start time of the process since unix epoch in seconds");
    fprintf(f, "process_start_time_seconds %.3f\n", cur_loop->start_unix);
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        metrics_head(f, "process_cpu_seconds_total", "counter",
                     "Total user and system CPU time spent in seconds");
        fprintf(f, "process_cpu_seconds_total %.6f\n",
                (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
    }
    pool_family(f, "shardis_clients", "gauge", "Clients connected to the pool", pool,
                pt->nclients);
    pool_family(f, "shardis_connections_received_total", "counter",
                "Client connections accepted", pool, pt->accepted);
    pool_family(f, "shardis_connections_rejected_total", "counter",
                "Client connections refused (client_connections)", pool, pt->rejected);
    pool_family(f, "shardis_requests_total", "counter", "Requests read from clients", pool,
                pt->requests);
    pool_family(f, "shardis_error_replies_total", "counter", "Error replies sent to clients",
                pool, pt->stats.error_replies);
    mig_progress(p, &mp);
    pool_family(f, "shardis_migration_keys_scanned_total", "counter",
                "Keys the current reshard's mover scanned", pool, mp.scanned);
    pool_family(f, "shardis_migration_keys_moved_total", "counter",
                "Keys the current reshard moved, by the mover and on touch", pool,
                mp.moved + mp.moved_on_touch);
    pool_family(f, "shardis_migration_tryagain_total", "counter",
                "Requests the current reshard answered -TRYAGAIN", pool, mp.tryagain);
    pool_family(f, "shardis_migration_active", "gauge",
                "1 while keys move after a reload (2 while it drains)", pool,
                mp.draining ? 2 : mp.active ? 1 : 0);

    /* Per command: counts, then latency. */
    static const struct {
        const char *name, *help;
    } cmd_counters[] = {
        {"shardis_commands_total", "Calls of the command"},
        {"shardis_commands_failed_total", "Calls answered with an error"},
        {"shardis_commands_rejected_total", "Calls refused before they ran"},
    };
    for (size_t k = 0; k < ARRAY_SIZE(cmd_counters); k++) {
        metrics_head(f, cmd_counters[k].name, "counter", cmd_counters[k].help);
        for (size_t i = 0; pt->stats.cmds != NULL && i < ncmds; i++) {
            const struct stats_cmd *sc = &pt->stats.cmds[i];
            if (sc->calls == 0 && sc->rejected == 0)
                continue;
            series(f, cmd_counters[k].name, "", pool, "cmd", table[i].name);
            fprintf(f, "} %llu\n", (unsigned long long)(k == 0 ? sc->calls : k == 1 ? sc->failed
                                                                              : sc->rejected));
        }
    }
    metrics_head(f, "shardis_command_duration_seconds", "histogram",
                 "Time from a request read to its reply complete, as the client sees it, "
                 "by command");
    for (size_t i = 0; pt->stats.cmds != NULL && i < ncmds; i++) {
        const struct stats_hist *h = pt->stats.cmds[i].hist;
        if (h == NULL || h->count == 0)
            continue;
        histogram(f, "shardis_command_duration_seconds", pool, "cmd", table[i].name, h);
    }

    hotkeys_metrics(p, f);

    /* Per server. */
    for (size_t k = 0; k < ARRAY_SIZE(server_figs); k++) {
        metrics_head(f, server_figs[k].name, server_figs[k].type, server_figs[k].help);
        for (uint32_t s = 0; s < p->nservers && s < pt->nservers; s++) {
            if (!p->servers[s].active)
                continue;
            series(f, server_figs[k].name, "", pool, "server", p->servers[s].label);
            fprintf(f, "} %lld\n", server_fig(p, pt, s, (enum server_fig)k));
        }
    }
    metrics_head(f, "shardis_server_request_duration_seconds", "histogram",
                 "Time from a request read to its reply complete, as the client sees it, "
                 "by the server that answered");
    for (uint32_t s = 0; s < p->nservers && s < pt->nservers; s++) {
        const struct stats_hist *h = pt->latency[s];
        if (!p->servers[s].active || h == NULL)
            continue;
        histogram(f, "shardis_server_request_duration_seconds", pool, "server",
                  p->servers[s].label, h);
    }
    totals_free(&all);
}

/* ---- HTTP -------------------------------------------------------------------------- */

static void conn_close_cb(uv_handle_t *h)
{
    struct http_conn *hc = container_of((uv_tcp_t *)h, struct http_conn, tcp);

    TAILQ_REMOVE(&hc->m->conns, hc, link);
    hc->m->nconns--;
    free(hc->reply);
    free(hc);
}

static void conn_close(struct http_conn *hc)
{
    hc->state = HTTP_CLOSING;
    if (!uv_is_closing((uv_handle_t *)&hc->tcp))
        uv_close((uv_handle_t *)&hc->tcp, conn_close_cb);
}

static void written_cb(uv_write_t *w, int status)
{
    struct http_conn *hc = container_of(w, struct http_conn, wreq);

    (void)status;
    free(hc->reply);
    hc->reply = NULL;
    conn_close(hc);
}

static void respond(struct http_conn *hc, const char *status, const char *type,
                    const char *body, size_t len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = xopen_memstream(&buf, &n);
    uv_buf_t b;

    fprintf(f, "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n", status, type, len);
    fwrite(body, 1, len, f);
    fclose(f);
    hc->reply = buf;
    hc->state = HTTP_WRITING;
    uv_read_stop((uv_stream_t *)&hc->tcp);
    b = uv_buf_init(buf, (unsigned)n);
    if (uv_write(&hc->wreq, (uv_stream_t *)&hc->tcp, &b, 1, written_cb) < 0)
        conn_close(hc);
}

/* The request's head is in: answer it. */
static void serve(struct http_conn *hc)
{
    const char *line = hc->head;
    size_t mlen = strcspn(line, " "), plen;
    const char *path = line + mlen + (line[mlen] == ' ');

    plen = strcspn(path, " ?\r\n");
    if (mlen != 3 || memcmp(line, "GET", 3) != 0) {
        static const char no[] = "only GET\n";
        respond(hc, "405 Method Not Allowed", "text/plain; charset=utf-8", no, sizeof(no) - 1);
        return;
    }
    if (plen == 8 && memcmp(path, "/metrics", 8) == 0) {
        char *buf = NULL;
        size_t n = 0;
        FILE *f = xopen_memstream(&buf, &n);
        metrics_write(hc->m->p, f);
        fclose(f);
        respond(hc, "200 OK", "text/plain; version=0.0.4; charset=utf-8", buf, n);
        free(buf);
        return;
    }
    if (plen == 1 && path[0] == '/') {
        static const char index[] = "<html><head><title>shardis</title></head><body>"
                                    "<a href=\"/metrics\">metrics</a></body></html>\n";
        respond(hc, "200 OK", "text/html; charset=utf-8", index, sizeof(index) - 1);
        return;
    }
    static const char none[] = "not found: try /metrics\n";
    respond(hc, "404 Not Found", "text/plain; charset=utf-8", none, sizeof(none) - 1);
}

static void conn_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct http_conn *hc = container_of((uv_tcp_t *)h, struct http_conn, tcp);

    (void)suggested;
    *buf = uv_buf_init(hc->head + hc->len, (unsigned)(sizeof(hc->head) - 1 - hc->len));
}

static void conn_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct http_conn *hc = container_of((uv_tcp_t *)s, struct http_conn, tcp);

    size_t from = hc->len > 3 ? hc->len - 3 : 0;    /* (an end split over reads) */

    (void)buf;
    if (nread < 0) {
        conn_close(hc);
        return;
    }
    hc->len += (size_t)nread;
    hc->head[hc->len] = '\0';
    if (strstr(hc->head + from, "\r\n\r\n") != NULL || strstr(hc->head + from, "\n\n") != NULL)
        serve(hc);
    else if (hc->len >= sizeof(hc->head) - 1)
        conn_close(hc);                     /* a head too long: no scraper's */
}

static void accept_cb(uv_stream_t *listener, int status)
{
    struct metrics *m = container_of((uv_tcp_t *)listener, struct metrics, listener);
    struct http_conn *hc, *old;

    if (status < 0)
        return;
    hc = xcalloc(1, sizeof(*hc));
    hc->m = m;
    hc->since = uv_now(cur_loop->uv);
    uv_tcp_init(cur_loop->uv, &hc->tcp);
    TAILQ_INSERT_TAIL(&m->conns, hc, link);
    m->nconns++;
    /* Too many: the oldest goes (one that never sends its head must not
     * lock scrapers out). */
    if (m->nconns > METRICS_CONNS_MAX)
        TAILQ_FOREACH(old, &m->conns, link)
            if (old->state != HTTP_CLOSING) {
                conn_close(old);
                break;
            }
    if (uv_accept(listener, (uv_stream_t *)&hc->tcp) < 0 ||
        uv_read_start((uv_stream_t *)&hc->tcp, conn_alloc_cb, conn_read_cb) < 0)
        conn_close(hc);
}

int metrics_start(struct pool *p, char *err, size_t errlen)
{
    const struct conf_addr *a = &p->conf->stats_listen;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai;
    struct metrics *m;
    char port[8];
    int rc;

    if (a->text == NULL)
        return 0;
    snprintf(port, sizeof(port), "%u", a->port);
    if ((rc = getaddrinfo(a->host, port, &hints, &ai)) != 0) {
        snprintf(err, errlen, "stats_listen: cannot resolve '%s': %s", a->host,
                 gai_strerror(rc));
        return -EINVAL;
    }
    m = p->metrics = xcalloc(1, sizeof(*m));
    m->p = p;
    TAILQ_INIT(&m->conns);
    uv_tcp_init(cur_loop->uv, &m->listener);
    m->listening = true;
    rc = uv_tcp_bind(&m->listener, ai->ai_addr, 0);
    freeaddrinfo(ai);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&m->listener, 64, accept_cb);
    if (rc < 0) {
        snprintf(err, errlen, "cannot listen on stats_listen %s: %s", a->text, uv_strerror(rc));
        /* (The process stops without running the loop again: closed now.) */
        uv_close((uv_handle_t *)&m->listener, NULL);
        m->listening = false;
        return rc;
    }
    log_notice("pool '%s': metrics on http://%s/metrics", p->conf->name, a->text);
    return 0;
}

void metrics_tick(struct pool *p, uint64_t now)
{
    struct metrics *m = p->metrics;
    struct http_conn *hc;

    if (m == NULL)
        return;
    /* (A reply a scraper stopped reading goes too, with its memory.) */
    TAILQ_FOREACH(hc, &m->conns, link)
        if (hc->state != HTTP_CLOSING && now >= hc->since + METRICS_IDLE_MS)
            conn_close(hc);
}

static void listener_close_cb(uv_handle_t *h)
{
    struct metrics *m = container_of((uv_tcp_t *)h, struct metrics, listener);

    m->listening = false;
}

bool metrics_close_handle(struct pool *p, void *h)
{
    struct metrics *m = p->metrics;
    struct http_conn *hc;

    if (m == NULL)
        return false;
    if (h == (void *)&m->listener) {
        if (!uv_is_closing((uv_handle_t *)&m->listener))
            uv_close((uv_handle_t *)&m->listener, listener_close_cb);
        return true;
    }
    TAILQ_FOREACH(hc, &m->conns, link)
        if (h == (void *)&hc->tcp) {
            conn_close(hc);
            return true;
        }
    return false;
}

void metrics_free(struct pool *p)
{
    struct metrics *m = p->metrics;

    if (m == NULL)
        return;
    ASSERT(TAILQ_EMPTY(&m->conns) && !m->listening);
    free(m);
    p->metrics = NULL;
}

/* ---- the module ---------------------------------------------------------------------- */

const struct module metrics_module = {
    .name = "metrics",
    .pool_free = metrics_free,
    .tick = metrics_tick,
};

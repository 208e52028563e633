/* hotkeys.c -- HOTKEYS, as Redis 8.6 has it, but over every server of the
 * pool at once: a redis-server sees only its own keys, shardis sees them
 * all.
 *
 *   HOTKEYS START METRICS n [CPU] [NET] [COUNT k] [DURATION s] [SAMPLE r]
 *   HOTKEYS STOP | GET | RESET
 *
 * CPU is the time a request took as its client saw it (read to reply
 * complete, microseconds), NET its bytes both ways; each is charged to
 * the request's first key (a command of no key, or one split over
 * servers, is not). One request in r is looked at (SAMPLE). The top k of
 * each metric are kept by the Space-Saving algorithm in HOTKEYS_SLOTS(k)
 * slots: memory is bounded whatever the keys, and a key whose share is
 * above 1/slots is surely among them, its figure overstated by at most
 * the smallest slot's (Metwally, Agrawal, El Abbadi 2005). A key is kept
 * to HOTKEYS_KEY_MAX bytes. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>

#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/ops/hotkeys.h"
#include "proxy/core/keys.h"
#include "proxy/ops/metrics.h"
#include "proxy/base/text.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/transport/req.h"
#include "proxy/base/resp.h"
#include "proxy/core/route.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

#define HOTKEYS_K_MAX    64
#define HOTKEYS_SLOTS(k) (4 * (k) < 32 ? 32 : 4 * (k))
#define HOTKEYS_KEY_MAX  256

struct slot {
    char    *key;           /* (owned) NULL: free */
    uint32_t len;
    uint64_t value;         /* the metric charged to it (an overestimate by ... */
    uint64_t error;         /* ... at most this) */
};

/* One metric's top keys. */
struct top {
    struct slot *slots;     /* [nslots] */
    uint32_t nslots;
};

enum { METRIC_CPU, METRIC_NET, METRICS };

struct hotkeys {
    bool     active;
    bool     on[METRICS];
    uint32_t k, sample;
    uint64_t duration_ms;   /* 0: until STOP */
    uint64_t start_unix_ms, start_ms, stop_ms;
    uint64_t total[METRICS];
    struct rusage ru0, ru1; /* CPU at the start, and at the stop */
    struct top top[METRICS];
};

static const char *const metric_field[METRICS] = {"by-cpu-time-us", "by-net-bytes"};

bool hotkeys_active(const struct pool *p)
{
    return p->hotkeys != NULL && p->hotkeys->active;
}

static void stop(struct hotkeys *h)
{
    h->active = false;
    h->stop_ms = uv_now(cur_loop->uv);
    getrusage(RUSAGE_SELF, &h->ru1);
}

static void top_charge(struct top *t, const char *key, size_t len, uint64_t v)
{
    struct slot *free_slot = NULL, *min = NULL;

    if (len > HOTKEYS_KEY_MAX)
        len = HOTKEYS_KEY_MAX;
    for (uint32_t i = 0; i < t->nslots; i++) {
        struct slot *s = &t->slots[i];
        if (s->key == NULL) {
            if (free_slot == NULL)
                free_slot = s;
        } else if (s->len == len && memcmp(s->key, key, len) == 0) {
            s->value += v;
            return;
        } else if (min == NULL || s->value < min->value) {
            min = s;
        }
    }
    /* Not kept: a free slot, else the smallest one's place and its count,
     * which the key may have had (the error). */
    if (free_slot != NULL)
        min = free_slot;
    uint64_t floor = min->key != NULL ? min->value : 0;
    free(min->key);
    min->key = xmalloc(len ? len : 1);
    memcpy(min->key, key, len);
    min->len = (uint32_t)len;
    min->error = floor;
    min->value = floor + v;
}

/* The request's first key, from its bytes as sent; false if it has none
 * to charge. */
static bool first_key(const struct req *r, char *buf, size_t size, const char **key,
                      size_t *len)
{
    const struct cmd *cmd;
    struct resp_rd rd;
    struct resp_val top, v;
    uint32_t first;

    if ((cmd = cmd_numbered(r->cmd)) == NULL || r->out.len == 0 || r->frag != NULL)
        return false;
    if ((first = keys_first_fixed(cmd)) == 0)
        return false;
    resp_rd_init(&rd, &r->out);
    if (resp_rd_next(&rd, &top) < 0 || top.type != RESP_ARRAY || top.elems <= first)
        return false;
    for (uint32_t i = 0; i < first; i++)
        if (resp_rd_skip(&rd, &v) < 0)
            return false;
    if (resp_rd_next(&rd, &v) < 0 || v.type != RESP_BULK)
        return false;
    *len = v.len < size ? v.len : size;
    *key = resp_rd_str(&rd, &v, buf, size);
    if (*key == NULL) {                 /* longer than buf: its head */
        resp_rd_copy(&rd, &v, buf, size);
        *key = buf;
    }
    return true;
}

void hotkeys_reply(struct pool *p, const struct req *r, uint64_t us)
{
    struct hotkeys *h = p->hotkeys;
    char buf[HOTKEYS_KEY_MAX];
    const char *key;
    size_t len;
    uint64_t bytes = r->out.len + r->rsp.len;

    if (h->duration_ms > 0 && uv_now(cur_loop->uv) >= h->start_ms + h->duration_ms) {
        stop(h);
        return;
    }
    h->total[METRIC_CPU] += us;
    h->total[METRIC_NET] += bytes;
    if (h->sample > 1 && loop_random() % h->sample != 0)
        return;
    if (!first_key(r, buf, sizeof(buf), &key, &len))
        return;
    if (h->on[METRIC_CPU])
        top_charge(&h->top[METRIC_CPU], key, len, us);
    if (h->on[METRIC_NET])
        top_charge(&h->top[METRIC_NET], key, len, bytes);
}

/* A session (a pool's, or loops' added up: sessions) and its keys. */
static void session_free(struct hotkeys *h)
{
    if (h == NULL)
        return;
    for (int m = 0; m < METRICS; m++) {
        for (uint32_t i = 0; i < h->top[m].nslots; i++)
            free(h->top[m].slots[i].key);
        free(h->top[m].slots);
    }
    free(h);
}

void hotkeys_free(struct pool *p)
{
    session_free(p->hotkeys);
    p->hotkeys = NULL;
}

static int by_value(const void *a, const void *b)
{
    const struct slot *x = a, *y = b;

    if (x->key == NULL || y->key == NULL)
        return (x->key == NULL) - (y->key == NULL);
    return x->value < y->value ? 1 : x->value > y->value ? -1 : 0;
}

/* A metric's top k, largest first, into sorted (h->top's size). */
static uint32_t ranked(const struct hotkeys *h, int m, struct slot *sorted)
{
    uint32_t n = 0;

    memcpy(sorted, h->top[m].slots, h->top[m].nslots * sizeof(*sorted));
    qsort(sorted, h->top[m].nslots, sizeof(*sorted), by_value);
    while (n < h->top[m].nslots && n < h->k && sorted[n].key != NULL)
        n++;
    return n;
}

static long long ms_of(const struct timeval *tv)
{
    return (long long)tv->tv_sec * 1000 + tv->tv_usec / 1000;
}

/* ---- over every loop -------------------------------------------------------------
 *
 * Each loop tracks the requests of its own clients in its copy of the
 * pool (its own session, started and stopped on every loop at once), so
 * GET and /metrics add the loops' sessions up (loop_each). */

/* A visit of every loop's copy of pool `pi` (the same index on each). */
struct visit {
    size_t          pi;
    bool            active;         /* a session tracking on some loop */
    struct hotkeys *sum;            /* the sessions added up (merge) */
    const struct hotkeys *like;     /* the one to start (start_one) */
};

static char *key_dup(const struct slot *s)
{
    char *k = xmalloc(s->len ? s->len : 1);

    memcpy(k, s->key, s->len);
    return k;
}

static struct hotkeys *visited(struct visit *v)
{
    struct pool *p = &cur_loop->pools[v->pi];
    struct hotkeys *h = p->hotkeys;

    if (h != NULL && h->active && h->duration_ms > 0 &&
        uv_now(cur_loop->uv) >= h->start_ms + h->duration_ms)
        stop(h);                        /* (its time is up: nothing counted it yet) */
    v->active |= h != NULL && h->active;
    return h;
}

static void look(void *arg)
{
    visited(arg);
}

static void stop_one(void *arg)
{
    struct hotkeys *h = visited(arg);

    if (h != NULL && h->active)
        stop(h);
}

static void reset_one(void *arg)
{
    struct visit *v = arg;

    hotkeys_free(&cur_loop->pools[v->pi]);
}

static void start_one(void *arg)
{
    struct visit *v = arg;
    struct pool *p = &cur_loop->pools[v->pi];
    struct hotkeys *h;

    hotkeys_free(p);
    h = p->hotkeys = xmalloc(sizeof(*h));
    *h = *v->like;
    for (int m = 0; m < METRICS; m++)
        h->top[m].slots = h->on[m] ? xcalloc(h->top[m].nslots, sizeof(struct slot)) : NULL;
}

/* The first loop's session is copied whole (its slots in their order,
 * room after them for every other loop's: a session fills its slots from
 * the first, so the keys kept are the first ones); the others' totals
 * and keys are added to it. */
static void merge(void *arg)
{
    struct visit *v = arg;
    struct hotkeys *h = visited(v), *sum = v->sum;

    if (h == NULL)
        return;
    if (sum == NULL) {
        sum = v->sum = xmalloc(sizeof(*sum));
        *sum = *h;
        for (int m = 0; m < METRICS; m++) {
            uint32_t n = h->top[m].nslots;
            sum->top[m].nslots = n * loop_count();
            sum->top[m].slots = xcalloc(sum->top[m].nslots ? sum->top[m].nslots : 1,
                                        sizeof(struct slot));
            for (uint32_t i = 0; i < n; i++) {
                struct slot *to = &sum->top[m].slots[i];
                *to = h->top[m].slots[i];
                if (to->key != NULL)
                    to->key = key_dup(to);
            }
        }
        return;
    }
    sum->active |= h->active;
    sum->stop_ms = h->stop_ms > sum->stop_ms ? h->stop_ms : sum->stop_ms;
    for (int m = 0; m < METRICS; m++) {
        struct top *t = &sum->top[m];
        sum->total[m] += h->total[m];
        for (uint32_t i = 0; i < h->top[m].nslots && sum->on[m]; i++) {
            const struct slot *from = &h->top[m].slots[i];
            uint32_t j = 0;
            if (from->key == NULL)
                continue;
            while (j < t->nslots && t->slots[j].key != NULL &&
                   (t->slots[j].len != from->len ||
                    memcmp(t->slots[j].key, from->key, from->len) != 0))
                j++;
            if (j == t->nslots)
                continue;               /* (not reached: room for every loop's) */
            if (t->slots[j].key == NULL) {
                t->slots[j] = *from;
                t->slots[j].key = key_dup(from);
            } else {
                t->slots[j].value += from->value;
                t->slots[j].error += from->error;
            }
        }
    }
}

/* Pool pi's sessions on every loop, added up (NULL: none has one). */
static struct hotkeys *sessions(size_t pi)
{
    struct visit v = {.pi = pi};

    loop_each(merge, &v);
    return v.sum;
}

static void reply_get(struct client *c, struct req *r, struct hotkeys *h)
{
    struct resp_w w = client_w(c, &r->rsp);
    uint64_t now = uv_now(cur_loop->uv), end = h->active ? now : h->stop_ms;
    struct rusage ru;
    uint32_t fields = 7 + (h->on[METRIC_CPU] ? 2 : 0);

    for (int m = 0; m < METRICS; m++)
        fields += h->on[m];
    if (h->active)
        getrusage(RUSAGE_SELF, &ru);
    else
        ru = h->ru1;
    resp_w_map(&w, fields);
    resp_w_bulk_str(&w, "tracking-active");
    resp_w_int(&w, h->active);
    resp_w_bulk_str(&w, "sample-ratio");
    resp_w_int(&w, h->sample);
    resp_w_bulk_str(&w, "selected-slots");
    resp_w_array(&w, 0);
    resp_w_bulk_str(&w, "all-commands-all-slots-us");
    resp_w_int(&w, (long long)h->total[METRIC_CPU]);
    resp_w_bulk_str(&w, "net-bytes-all-commands-all-slots");
    resp_w_int(&w, (long long)h->total[METRIC_NET]);
    resp_w_bulk_str(&w, "collection-start-time-unix-ms");
    resp_w_int(&w, (long long)h->start_unix_ms);
    resp_w_bulk_str(&w, "collection-duration-ms");
    resp_w_int(&w, (long long)(end - h->start_ms));
    if (h->on[METRIC_CPU]) {
        resp_w_bulk_str(&w, "total-cpu-time-user-ms");
        resp_w_int(&w, ms_of(&ru.ru_utime) - ms_of(&h->ru0.ru_utime));
        resp_w_bulk_str(&w, "total-cpu-time-sys-ms");
        resp_w_int(&w, ms_of(&ru.ru_stime) - ms_of(&h->ru0.ru_stime));
    }
    for (int m = 0; m < METRICS; m++) {
        if (!h->on[m])
            continue;
        struct slot *sorted = xmalloc(h->top[m].nslots * sizeof(*sorted));
        uint32_t n = ranked(h, m, sorted);
        resp_w_bulk_str(&w, metric_field[m]);
        resp_w_array(&w, 2 * n);
        for (uint32_t i = 0; i < n; i++) {
            resp_w_bulk(&w, sorted[i].key, sorted[i].len);
            resp_w_int(&w, (long long)sorted[i].value);
        }
        free(sorted);
    }
}

static void start(struct client *c, struct req *r, struct args *a)
{
    struct pool *p = c->pool;
    struct hotkeys *h;
    bool on[METRICS] = {false, false};
    long long k = 10, duration = 0, sample = 1, n;
    uint32_t i = 2;
    struct timeval tv;

    struct visit v = {.pi = (size_t)(p - cur_loop->pools)};

    loop_each(look, &v);
    if (v.active) {
        client_reply_error(c, r, "ERR hotkeys tracking is already in progress");
        return;
    }
    if (!args_is(a, i, "metrics") || !args_ll(a, i + 1, &n) || n < 1 || n > METRICS ||
        i + 2 + (uint32_t)n > a->argc) {
        client_reply_error(c, r, "ERR syntax error: HOTKEYS START METRICS count [CPU] [NET] "
                           "[COUNT k] [DURATION seconds] [SAMPLE ratio]");
        return;
    }
    for (i += 2; n-- > 0; i++) {
        int m = args_is(a, i, "cpu") ? METRIC_CPU : args_is(a, i, "net") ? METRIC_NET : -1;
        if (m < 0 || on[m]) {
            client_reply_error(c, r, "ERR syntax error: METRICS takes CPU and NET, once each");
            return;
        }
        on[m] = true;
    }
    for (; i < a->argc; i += 2) {
        long long *to = args_is(a, i, "count") ? &k : args_is(a, i, "duration") ? &duration
                      : args_is(a, i, "sample") ? &sample : NULL;
        if (to == NULL || i + 1 >= a->argc || !args_ll(a, i + 1, to)) {
            client_reply_error(c, r, "ERR syntax error");
            return;
        }
    }
    if (k < 1 || k > HOTKEYS_K_MAX || duration < 0 || sample < 1 || sample > 1000000) {
        client_reply_error(c, r, "ERR COUNT must be 1..%d, DURATION >= 0, SAMPLE 1..1000000",
                           HOTKEYS_K_MAX);
        return;
    }
    h = xcalloc(1, sizeof(*h));
    h->active = true;
    memcpy(h->on, on, sizeof(on));
    h->k = (uint32_t)k;
    h->sample = (uint32_t)sample;
    h->duration_ms = (uint64_t)duration * 1000;
    h->start_ms = uv_now(cur_loop->uv);
    gettimeofday(&tv, NULL);
    h->start_unix_ms = (uint64_t)ms_of(&tv);
    getrusage(RUSAGE_SELF, &h->ru0);
    for (int m = 0; m < METRICS; m++)
        h->top[m].nslots = on[m] ? HOTKEYS_SLOTS(h->k) : 0;
    v.like = h;
    loop_each(start_one, &v);           /* (each loop its own copy, slots made there) */
    free(h);
    struct resp_w w = client_w(c, &r->rsp);
    resp_w_simple(&w, "OK");
}

void hotkeys_command(struct client *c, struct req *r, struct args *a)
{
    struct visit v = {.pi = (size_t)(c->pool - cur_loop->pools)};
    struct resp_w w = client_w(c, &r->rsp);

    /* Not in Redis 7.0's table, so route.c checked not its arity (its
     * permission local_exec did: @admin @slow @dangerous, as Redis's). */
    if (a->argc < 2) {
        client_reply_error(c, r, "ERR wrong number of arguments for 'hotkeys' command");
        return;
    }
    if (args_is(a, 1, "start")) {
        start(c, r, a);
    } else if (args_is(a, 1, "stop") && a->argc == 2) {
        loop_each(stop_one, &v);
        if (!v.active) {
            client_reply_error(c, r, "ERR hotkeys tracking is not active");
            return;
        }
        resp_w_simple(&w, "OK");
    } else if (args_is(a, 1, "get") && a->argc == 2) {
        struct hotkeys *sum = sessions(v.pi);
        if (sum == NULL)
            resp_w_null(&w);
        else
            reply_get(c, r, sum);
        session_free(sum);
    } else if (args_is(a, 1, "reset") && a->argc == 2) {
        loop_each(look, &v);
        if (v.active) {
            client_reply_error(c, r, "ERR hotkeys tracking is active: HOTKEYS STOP first");
            return;
        }
        loop_each(reset_one, &v);
        resp_w_simple(&w, "OK");
    } else if (args_is(a, 1, "help") && a->argc == 2) {
        static const char *const help[] = {
            "HOTKEYS <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "START METRICS <count> [CPU] [NET] [COUNT <k>] [DURATION <seconds>] [SAMPLE <ratio>]",
            "    Track the keys of every server of the pool: CPU is the time a request took",
            "    as its client saw it (us), NET its bytes both ways.",
            "STOP", "    Stop tracking; GET still answers.",
            "GET", "    The session's figures and its top keys.",
            "RESET", "    Forget the session.",
        };
        client_reply_help(c, r, help, ARRAY_SIZE(help));
    } else {
        client_reply_bad_sub(c, r, a, "HOTKEYS");
    }
}

void hotkeys_metrics(const struct pool *p, FILE *f)
{
    static const char *const names[METRICS] = {"shardis_hotkey_seconds",
                                               "shardis_hotkey_bytes"};
    static const char *const help[METRICS] = {
        "HOTKEYS: time the key's requests took as clients saw it in the tracking session",
        "HOTKEYS: bytes both ways of the key's requests in the tracking session"};
    struct hotkeys *h = sessions((size_t)(p - cur_loop->pools));

    for (int m = 0; m < METRICS; m++) {
        if (h == NULL || !h->on[m])
            continue;
        struct slot *sorted = xmalloc(h->top[m].nslots * sizeof(*sorted));
        uint32_t n = ranked(h, m, sorted);
        metrics_head(f, names[m], "gauge", help[m]);
        for (uint32_t i = 0; i < n; i++) {
            fprintf(f, "%s{pool=\"", names[m]);
            text_escape(f, p->conf->name, strlen(p->conf->name));
            fprintf(f, "\",key=\"");
            text_escape(f, sorted[i].key, sorted[i].len);
            if (m == METRIC_CPU)
                fprintf(f, "\"} %.6f\n", (double)sorted[i].value / 1e6);
            else
                fprintf(f, "\"} %llu\n", (unsigned long long)sorted[i].value);
        }
        free(sorted);
    }
    session_free(h);
}

/* ---- the module ---------------------------------------------------------------------- */

const struct module hotkeys_module = {
    .name = "hotkeys",
    .pool_free = hotkeys_free,
};

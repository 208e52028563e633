/* client_limits.c -- what a client makes shardis hold, and the limits on
 * it (client.c reads and frames, client_write.c writes).
 *
 * Memory: c->mem is everything a client makes shardis hold: each request
 * object, a request's bytes while it is in flight, its reply's until
 * written, a request being read. client_hold moves it, and its pool's sum
 * (pool.clients_mem) with it; client_limit, where it grew, applies the
 * limits, which are redis-server's:
 *   - client_output_buffer_limit, by class (a subscribed client is pubsub,
 *     every other normal): past hard, closed at once; past soft for
 *     soft_seconds on end, closed (the tick looks at those over soft, so a
 *     client that gets nothing more is closed too). What pushed it past
 *     hard passes when it is the only reply or request it holds: one
 *     value of any size always can be read.
 *   - maxmemory_clients: past it, the pool's client holding most is closed
 *     (redis-server 7's client eviction). With several loops, each holds
 *     its own clients' sum and evicts past its share of the bound (an
 *     atomic sum over loops would cost one per request).
 *   - a normal client holding more than its soft limit (half its hard one
 *     without) is read no more, as it asks for no more, and read again
 *     below half that: most clients that pipeline faster than they read
 *     never reach a limit.
 * Each close is logged and counted (INFO: evicted_clients,
 * client_output_buffer_limit_disconnections). A limit never closes a
 * client where it is found over it: that is inside some caller's work (a
 * reply handed on in a loop over a server's subscribers, a request being
 * routed that fed a monitor), often another client's. It dooms it
 * (client_doom): its memory leaves the pool's sum at once, it is read no
 * more, and flush_cb closes it, with nothing of its on the stack. */
#include <stdbool.h>
#include <stdint.h>

#include "proxy/transport/client_int.h"
#include "proxy/base/log.h"
#include "proxy/transport/loop.h"

#define CLIENT_STALL_BYTES   (256u << 20) /* what a client holds: stop reading it, with
                                            no limit configured */
#define CLIENT_PEAK_MS       4000        /* INFO's recent peaks: two periods this long */

/* maxmemory_clients, this loop's share of it (above); 0 none. */
static uint64_t clients_mem_max(const struct front *f)
{
    uint32_t n = loop_count();

    return f->conf->maxmemory_clients > 0
           ? (uint64_t)f->conf->maxmemory_clients / (n > 1 ? n : 1) : 0;
}

static const struct conf_client_limit *client_limits(const struct client *c)
{
    return &c->front->conf->client_limits[c->subscribed ? CONF_CLIENT_PUBSUB
                                                       : CONF_CLIENT_NORMAL];
}

/* Past this a normal client is read no more; read again below half. */
static size_t client_stall_at(const struct conf_client_limit *l)
{
    return l->soft > 0 ? (size_t)l->soft : l->hard > 0 ? (size_t)l->hard / 2
                                                       : CLIENT_STALL_BYTES;
}

/* On cur_loop->stalled while stalled or over its soft limit, where the tick
 * looks: set after either changes. */
static void client_rewatch(struct client *c)
{
    struct client_rare *rare = c->rare;
    bool want = rare->stalled_ms != 0 || rare->soft_ms != 0;

    if (want && !rare->watched) {
        rare->client = c;
        TAILQ_INSERT_TAIL(&cur_loop->stalled, rare, stalled);
    } else if (!want && rare->watched) {
        TAILQ_REMOVE(&cur_loop->stalled, rare, stalled);
    }
    rare->watched = want;
}

/* c holds more than it may: read it no more (it asks for no more). */
static void client_stall(struct client *c)
{
    client_pause(c);
    client_rare(c)->stalled_ms = uv_now(cur_loop->uv);
    client_rewatch(c);
}

void client_unwatch(struct client *c)
{
    if (c->rare != NULL) {
        c->rare->stalled_ms = c->rare->soft_ms = 0;
        client_rewatch(c);
    }
}

static void client_evict(struct front *f);

/* c is to be closed for a limit: it counts as gone from the pool's sum
 * now, and is closed at the loop's next flush (see the top). */
static void client_doom(struct client *c)
{
    c->front->clients_mem -= c->mem;
    c->mem = c->qbuf = 0;
    c->doomed = 1;
    client_pause(c);
    loop_mark_client(c);
}

/* A limit dooms c: say which, and count it. */
static void client_over(struct client *c, const char *which, const struct conf_client_limit *l)
{
    log_warn("client %llu: holds %zu bytes (%zu of replies not read), over the limit: "
             "client_output_buffer_limit %s %s %lld bytes%s; closing it, as redis-server does",
             (unsigned long long)c->id, c->mem, c->rsp_bytes,
             c->subscribed ? "pubsub" : "normal", which, which[0] == 'h' ? l->hard : l->soft,
             which[0] == 'h' ? "" : " for longer than its seconds");
    c->front->obl_disconnections++;
    client_doom(c);
}

/* c's holding grew, by added (a reply's bytes, or a request's): apply the
 * limits. Returns -1 if c is doomed (client_doom). One reply or request passes the
 * hard limit when c holds nothing else of its kind. A request still being
 * read counts in maxmemory_clients only: stopping to read it half way
 * would leave it never whole (redis-server bounds it by
 * client-query-buffer-limit, shardis by the request's own limits, resp.h). */
int client_limit_slow(struct client *c, size_t added, bool reply)
{
    const struct conf_client_limit *l = client_limits(c);
    struct front *f = c->front;
    size_t held = c->mem - c->qbuf;
    uint64_t now;

    if (c->closing || c->doomed)
        return -1;
    if (l->hard > 0 && held > (size_t)l->hard &&
        (reply ? c->rsp_bytes > added : c->inflight > 1)) {
        client_over(c, "hard", l);
        return -1;
    }
    if (l->soft > 0 && held > (size_t)l->soft) {
        now = uv_now(cur_loop->uv);
        if (c->rare == NULL || c->rare->soft_ms == 0) {
            client_rare(c)->soft_ms = now;
            client_rewatch(c);
        } else if (now - c->rare->soft_ms > (uint64_t)l->soft_seconds * 1000) {
            client_over(c, "soft", l);
            return -1;
        }
    }
    if (!c->subscribed && held > client_stall_at(l) &&
        (c->rare == NULL || c->rare->stalled_ms == 0))
        client_stall(c);
    if (clients_mem_max(f) > 0 && f->clients_mem > clients_mem_max(f)) {
        client_evict(f);
        if (c->doomed)
            return -1;
    }
    return 0;
}

/* Below what a client and all clients may hold before any limit has a
 * word to say (the pool's conf's, worked out again when a reload swaps
 * it), a request or reply costs client_limit two tests. */
void client_quiet_of(struct front *f)
{
    size_t held = SIZE_MAX;

    for (int k = 0; k < CONF_CLIENT_CLASSES; k++) {
        const struct conf_client_limit *l = &f->conf->client_limits[k];
        if (l->soft > 0 && (size_t)l->soft < held)
            held = (size_t)l->soft;
        if (l->hard > 0 && (size_t)l->hard < held)
            held = (size_t)l->hard;
        if (client_stall_at(l) < held)
            held = client_stall_at(l);
    }
    f->quiet_held = held;
    f->quiet_total = clients_mem_max(f) > 0 ? clients_mem_max(f) : UINT64_MAX;
    f->quiet_gen = f->conf_gen;
}

/* c's holding fell: under half the point where it stopped being read, it
 * is read again (by the caller); under its soft limit, its soft clock
 * stops. A normal client's stops only with its reads again: one stopped
 * at its soft limit that takes a few bytes is still one that does not
 * read, and would be neither read nor closed, ever. */
void client_relieved(struct client *c)
{
    const struct conf_client_limit *l;
    size_t held, calm;

    if (c->rare == NULL || (c->rare->stalled_ms == 0 && c->rare->soft_ms == 0))
        return;
    l = client_limits(c);
    held = c->mem - c->qbuf;
    calm = c->subscribed ? (size_t)l->soft : client_stall_at(l) / 2;
    if (c->rare->soft_ms != 0 && (l->soft == 0 || held <= calm))
        c->rare->soft_ms = 0;
    if (c->rare->stalled_ms != 0 && held <= client_stall_at(l) / 2)
        c->rare->stalled_ms = 0;        /* (read again by the caller) */
    client_rewatch(c);
}

/* The pool's clients hold more than maxmemory_clients: close the one that
 * holds most, as redis-server 7 evicts clients. */
static void client_evict(struct front *f)
{
    struct client *worst = NULL;

    for (uint32_t i = 0; i < f->nclients; i++) {
        struct client *c = f->clients[i];
        if (!c->closing && !c->doomed && (worst == NULL || c->mem > worst->mem))
            worst = c;
    }
    if (worst == NULL)
        return;
    log_warn("client %llu: evicted, holding %zu bytes, the most of any client, while all "
             "of pool '%s''s hold %llu, over maxmemory_clients (%lld)",
             (unsigned long long)worst->id, worst->mem, f->conf->name,
             (unsigned long long)f->clients_mem, f->conf->maxmemory_clients);
    f->evicted_clients++;
    client_doom(worst);
}

void client_check_stalled(uint64_t now)
{
    struct client_rare *rare, *next;

    for (rare = TAILQ_FIRST(&cur_loop->stalled); rare != NULL; rare = next) {
        next = TAILQ_NEXT(rare, stalled);
        struct client *c = rare->client;
        const struct conf_client_limit *l = client_limits(c);
        /* (what it holds may have fallen since, with nothing written) */
        client_relieved(c);
        if (!c->reading)
            client_resume(c);
        if (rare->soft_ms != 0 && now - rare->soft_ms > (uint64_t)l->soft_seconds * 1000)
            client_over(c, "soft", l);
    }
}

static inline uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

void client_peaks(const struct front *f, uint64_t now, uint64_t *in, uint64_t *out)
{
    bool turned = now / CLIENT_PEAK_MS != f->peak_period;
    bool last = now / CLIENT_PEAK_MS == f->peak_period + 1;

    /* (periods are turned by the tick: one may have ended since) */
    *in = turned ? (last ? f->peak_in[0] : 0) : max_u64(f->peak_in[0], f->peak_in[1]);
    *out = turned ? (last ? f->peak_out[0] : 0) : max_u64(f->peak_out[0], f->peak_out[1]);
}

void client_tick(struct front *f, uint64_t now)
{
    uint64_t period = now / CLIENT_PEAK_MS;

    if (period == f->peak_period)
        return;
    f->peak_in[1] = period == f->peak_period + 1 ? f->peak_in[0] : 0;
    f->peak_out[1] = period == f->peak_period + 1 ? f->peak_out[0] : 0;
    f->peak_in[0] = f->peak_out[0] = 0;
    f->peak_period = period;
}

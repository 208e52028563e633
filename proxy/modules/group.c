/* group.c -- several shardis processes in front of the same servers agree
 * on a change of servers before any of them routes by it.
 *
 * Every proxy is subscribed, on each server that holds keys, to a channel
 * that says where it is:
 *
 *   __shardis:group:<pool>:<id>:<phase>:<applied>:<target>
 *
 * (applied and target: checksums of server lists, the one routed by and
 * the one a reload asks for; 0 for none). Nobody publishes there: the
 * subscription is the registration. It lives exactly as long as the
 * proxy's connection, adds no key to any server, and PUBSUB CHANNELS lists
 * the group. When its phase changes a proxy subscribes to the new name
 * before it leaves the old one, so it is never missing (two names at once
 * only hold the others back a round).
 *
 * A reload that changes a pool's servers does not switch at once:
 *
 *   S steady    routing by applied (keys may still be moving)
 *   P prepared  the reload's target is known, still routing by applied;
 *               waits until every proxy is P, H or L with the same target
 *               (every proxy was reloaded with the same servers)
 *   H holding   routing by the target, but requests for moving keys are
 *               held (mig.c's drain, kept closed) while its own requests
 *               sent before the switch are answered
 *   L locked    drained: waits until every proxy is L, or has the target
 *               applied (released); then keys move (mig.c) and it is S
 *               again
 *
 * So no proxy sends a request for a moving key to its new owner while
 * another may still send one to the old owner. A proxy that was not
 * reloaded keeps the others in P, and so do proxies whose files disagree;
 * both are reported (SHARD.MIGRATION STATUS, the log) and nothing moves. A
 * request held past lock_max_ms gets -TRYAGAIN. A proxy that starts while
 * others route by other servers refuses to start. A proxy that goes away
 * leaves the group when its connections close.
 *
 * What this does not protect against: a proxy that cannot reach the
 * servers where the others look for it, yet still serves clients. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proxy/transport/backend.h"
#include "proxy/modules/group.h"
#include "proxy/base/log.h"
#include "proxy/modules/mig.h"
#include "proxy/core/pool.h"
#include "proxy/core/pool_conn.h"
#include "proxy/transport/loop.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

#define GROUP_POLL_MS       100     /* while a reload waits for the group */
#define GROUP_REFRESH_MS    1000    /* while steady */
#define GROUP_LOG_MS        5000
#define GROUP_PREFIX        "__shardis:group:"

enum group_phase { GROUP_STEADY = 'S', GROUP_PREPARED = 'P', GROUP_HOLDING = 'H',
                   GROUP_LOCKED = 'L' };

struct member {
    char     id[40];
    char     phase;
    uint64_t applied, target;
};

/* Per server: the connection subscribed to our channel, and its name. */
struct group_sub {
    struct backend *conn;               /* (owned) */
    char            channel[160];       /* subscribed to; "" none */
};

struct group {
    char              id[40];
    enum group_phase  phase;
    uint64_t          applied;      /* checksum of the servers routed by */
    uint64_t          target;       /* of the reload waiting; 0 none */
    struct ring      *ring;         /* P: the target's ring (owned) */
    const struct conf_pool *pc;     /* P: the target's pool, in a conf kept alive */
    char             *from_text;    /* P: the config routed by now (for the record) */
    char             *to_text;      /* P: the target's config */
    uint32_t          polls;        /* PUBSUB CHANNELS unanswered this round (+1 while
                                       the round is being sent) */
    uint32_t          listed;       /* servers that answered a list this round */
    bool              self_seen;    /* ... with our own channel in it */
    struct group_sub *subs;         /* [nsubs], by server */
    uint32_t          nsubs;
    struct member    *seen;         /* merged from this round's replies */
    uint32_t          nseen;
    struct member    *last;         /* the last complete round's */
    uint32_t          nlast;
    uint64_t          poll_ms, log_ms;
    struct mbuf      *buf;
};

uint64_t group_checksum(const struct conf_pool *pc)
{
    uint64_t h = 0xcbf29ce484222325ULL;    /* FNV-1a 64 over "addr:weight name\n" */
    char line[600];

    /* With sentinels a server is its name: the address written is a first
     * guess, which proxies in front of the same masters may differ on. */
    for (size_t i = 0; i < pc->nservers; i++) {
        int n = snprintf(line, sizeof(line), "%s:%u %s\n",
                         pc->nsentinels > 0 ? "" : pc->servers[i].addr.text,
                         pc->servers[i].weight, pc->servers[i].name ? pc->servers[i].name : "");
        for (int k = 0; k < n && k < (int)sizeof(line); k++)
            h = (h ^ (unsigned char)line[k]) * 0x100000001b3ULL;
    }
    return h != 0 ? h : 1;
}

void group_init(struct pool *p)
{
    struct group *g = xcalloc(1, sizeof(*g));

    /* Unique enough among a few proxies: the pid, and the clock's nanoseconds. */
    snprintf(g->id, sizeof(g->id), "%d-%" PRIx64, (int)getpid(),
             ((uint64_t)time(NULL) << 30) ^ uv_hrtime());
    g->phase = GROUP_STEADY;
    g->applied = group_checksum(p->conf);
    p->group = g;
}

void group_free(struct pool *p)
{
    struct group *g = p->group;

    if (g == NULL)
        return;
    ring_unref(g->ring);
    free(g->from_text);
    free(g->to_text);
    free(g->seen);
    free(g->last);
    for (uint32_t i = 0; i < g->nsubs; i++)
        free(g->subs[i].conn);
    free(g->subs);
    if (g->buf != NULL)
        mbuf_unref(g->buf);
    free(g);
    p->group = NULL;
}

static req_reply_cb subscribed, listed;

/* ---- a round ----------------------------------------------------------------------- */

static void send_cmd(struct group *g, struct backend *b, req_reply_cb *on_reply, int argc,
                     const char *const *argv)
{
    struct req *r = req_get();
    struct resp_w w = resp_w_on(&r->out, &g->buf, RESP2);

    resp_w_command(&w, argc, argv, NULL);
    r->on_reply = on_reply;
    backend_send(b, r);
}

static struct group_sub *sub_of(struct pool *p, struct group *g, uint32_t server)
{
    if (g->nsubs < p->nservers) {
        g->subs = xrealloc(g->subs, p->nservers * sizeof(*g->subs));
        memset(g->subs + g->nsubs, 0, (p->nservers - g->nsubs) * sizeof(*g->subs));
        g->nsubs = p->nservers;
    }
    struct group_sub *gs = &g->subs[server];
    if (gs->conn == NULL) {
        gs->conn = xmalloc(sizeof(*gs->conn));
        backend_init(gs->conn, p, server);
        gs->conn->as = BACKEND_AS_INTERNAL;
    }
    return gs;
}

static void round_end(struct pool *p, struct group *g);

/* server's master moved (pool_server_move): the registration follows. */
static void group_server_moved(struct pool *p, uint32_t server, const char *why)
{
    struct group *g = p->group;

    if (g == NULL || server >= g->nsubs || g->subs[server].conn == NULL)
        return;
    backend_move(g->subs[server].conn, why);
    g->subs[server].channel[0] = '\0';  /* the next round subscribes there */
}

/* Our channel on every server that holds keys (subscribed anew where the
 * connection was lost), then every server's list of the group. */
static void poll_round(struct pool *p, struct group *g)
{
    char channel[160], pattern[300];

    snprintf(channel, sizeof(channel), "%s%s:%s:%c:%016" PRIx64 ":%016" PRIx64, GROUP_PREFIX,
             p->conf->name, g->id, g->phase, g->applied, g->target);
    snprintf(pattern, sizeof(pattern), "%s%s:*", GROUP_PREFIX, p->conf->name);
    g->nseen = 0;
    g->listed = 0;
    g->self_seen = false;
    g->polls = 1;                       /* a reply failing at once must not end the round */
    for (uint32_t s = 0; s < p->nservers; s++) {
        if (!p->servers[s].active)
            continue;
        struct group_sub *gs = sub_of(p, g, s);
        if (gs->conn->state != BACKEND_UP && gs->conn->state != BACKEND_CONNECTING)
            gs->channel[0] = '\0';     /* a new connection subscribes to nothing */
        if (strcmp(gs->channel, channel) != 0) {
            send_cmd(g, gs->conn, subscribed, 2, (const char *[]){"SUBSCRIBE", channel});
            if (gs->channel[0] != '\0')
                send_cmd(g, gs->conn, subscribed, 2,
                         (const char *[]){"UNSUBSCRIBE", gs->channel});
            snprintf(gs->channel, sizeof(gs->channel), "%s", channel);
        }
        g->polls++;
        send_cmd(g, pool_own(p, s, false), listed, 3,
                 (const char *[]){"PUBSUB", "CHANNELS", pattern});
    }
    g->poll_ms = uv_now(cur_loop->uv);
    round_end(p, g);
}

/* One channel name: "__shardis:group:<pool>:<id>:<phase>:<applied>:<target>". */
static void merge_line(struct pool *p, struct group *g, const char *line, size_t len)
{
    struct member m = {0};
    char buf[300];
    size_t plen = strlen(GROUP_PREFIX) + strlen(p->conf->name) + 1;
    unsigned long long a, t;

    if (len >= sizeof(buf) || len <= plen)
        return;
    memcpy(buf, line + plen, len - plen);
    buf[len - plen] = '\0';
    if (sscanf(buf, "%39[^:]:%c:%llx:%llx", m.id, &m.phase, &a, &t) != 4)
        return;
    m.applied = a;
    m.target = t;
    if (!strcmp(m.id, g->id))
        g->self_seen = true;
    for (uint32_t i = 0; i < g->nseen; i++)
        if (!strcmp(g->seen[i].id, m.id) && g->seen[i].phase == m.phase &&
            g->seen[i].applied == m.applied && g->seen[i].target == m.target)
            return;                     /* the same name, seen on another server */
    g->seen = xrealloc(g->seen, (g->nseen + 1) * sizeof(*g->seen));
    g->seen[g->nseen++] = m;
}

static void advance(struct pool *p, struct group *g);
static void advance_phase(struct pool *p, struct group *g);

/* (UN)SUBSCRIBE of the proxy's own channel. */
static int subscribed(struct backend *b, struct req *r)
{
    struct group *g = b->pool->group;

    if (g != NULL && r->rsp.len == 0 && g->nsubs > b->server)
        g->subs[b->server].channel[0] = '\0';  /* lost: subscribe again */
    return 0;
}

/* PUBSUB CHANNELS: the proxies this server lists. */
static int listed(struct backend *b, struct req *r)
{
    struct pool *p = b->pool;
    struct group *g = p->group;
    struct resp_rd rd;
    struct resp_val top, v;

    if (g == NULL)
        return 0;
    resp_rd_init(&rd, &r->rsp);
    if (resp_rd_peek(&rd) == '*' && resp_rd_next(&rd, &top) == 0) {
        g->listed++;
        /* The channels: bulk strings, one per member. */
        for (long long i = 0; i < top.n && resp_rd_next(&rd, &v) == 0 &&
                              v.type == RESP_BULK && !v.nil; i++) {
            char name[512], *heap = NULL;
            const char *s = resp_rd_str(&rd, &v, name, sizeof(name));
            if (s == NULL)
                resp_rd_copy(&rd, &v, heap = xmalloc(v.len), v.len);
            merge_line(p, g, s != NULL ? s : heap, v.len);
            free(heap);
        }
    } else if (r->rsp.len > 0) {
        char text[512];
        resp_rd_head(&r->rsp, text, sizeof(text));
        log_warn("pool '%s': cannot list the proxies on %s: %s", p->conf->name,
                 p->servers[b->server].label, text);
    }
    round_end(p, g);
    return 0;
}

/* One reply (or the end of sending) less; when none is left the round is
 * over. Only a round in which some server listed the group, us included,
 * tells who is there: one where every list failed, or came from a server
 * that lost the subscriptions, would look like a group of one. */
static void round_end(struct pool *p, struct group *g)
{
    if (g->polls == 0 || --g->polls > 0)
        return;
    if (g->listed == 0 || !g->self_seen) {
        g->nseen = 0;
        return;
    }
    free(g->last);
    g->last = g->seen;
    g->nlast = g->nseen;
    g->seen = NULL;
    g->nseen = 0;
    advance(p, g);
}

/* ---- the phases ------------------------------------------------------------------ */

/* Whether every other proxy is in one of phases with our target, or
 * (done_ok) has our target applied already: released, and maybe
 * preparing a later reload. */
static bool all(const struct group *g, const char *phases, bool done_ok)
{
    for (uint32_t i = 0; i < g->nlast; i++) {
        const struct member *m = &g->last[i];
        if (!strcmp(m->id, g->id))
            continue;
        if (m->target == g->target && strchr(phases, m->phase) != NULL)
            continue;
        if (done_ok && m->applied == g->target)
            continue;
        return false;
    }
    return true;
}

/* Why member m keeps a prepared reload waiting, or NULL if it does not. */
static const char *holds_back(const struct group *g, const struct member *m)
{
    if (!strcmp(m->id, g->id) || (m->target == g->target && m->phase != GROUP_STEADY))
        return NULL;
    return m->phase == GROUP_STEADY ? "not reloaded" : "reloaded with other servers";
}

static void report(struct pool *p, struct group *g)
{
    uint64_t now = uv_now(cur_loop->uv);

    if (now - g->log_ms < GROUP_LOG_MS)
        return;
    g->log_ms = now;
    for (uint32_t i = 0; i < g->nlast; i++) {
        const char *why = holds_back(g, &g->last[i]);
        if (why != NULL)
            log_warn("pool '%s': waiting for proxy %s (%s): nothing moves until every proxy "
                     "has the same servers", p->conf->name, g->last[i].id, why);
    }
}

/* One loop's copy of the pool takes the new ring, and keys begin to move
 * (mig_start: its drain, its earlier ring). */
static void switch_one(struct pool *q, void *arg)
{
    const struct group *g = arg;
    char why[256];
    uint32_t *old_slot;
    struct ring *was = pool_set_ring(q, g->pc, ring_ref(g->ring), &old_slot);

    mig_start(q, was, old_slot, g->from_text, g->to_text, why, sizeof(why));
}

/* Every loop switches in one world stop (the caller's: advance_phase): no
 * loop routes a key by the old ring once another routes it by the new.
 * Loop 0's migration leads. */
static void switch_ring(struct pool *p, struct group *g)
{
    pool_each(p, switch_one, g);
    ring_unref(g->ring);
    g->ring = NULL;
    mig_hold(p, true);
    free(g->from_text);
    g->from_text = NULL;
    free(g->to_text);
    g->to_text = NULL;
    g->phase = GROUP_HOLDING;
    log_notice("pool '%s': every proxy has the new servers: switched, holding requests for "
               "moving keys until every proxy has drained", p->conf->name);
}

static void advance(struct pool *p, struct group *g)
{
    enum group_phase was = g->phase;

    advance_phase(p, g);
    if (g->phase != was)
        g->poll_ms = 0;                 /* tell the others at the next tick */
}

static void advance_phase(struct pool *p, struct group *g)
{
    switch (g->phase) {
    case GROUP_PREPARED:
        if (!all(g, "PHL", false)) {
            report(p, g);
            break;
        }
        /* Every loop switches in the stop; a reload taken on another loop
         * while this one waited for it may have replaced or dropped what
         * was agreed (reload.c): asked again once every loop is parked. */
        loop_world_stop();
        if (g->phase == GROUP_PREPARED && g->ring != NULL && all(g, "PHL", false))
            switch_ring(p, g);
        loop_world_go();
        break;
    case GROUP_LOCKED:
        if (all(g, "L", true)) {
            g->applied = g->target;
            g->target = 0;
            g->phase = GROUP_STEADY;
            mig_hold(p, false);
            log_notice("pool '%s': every proxy holds and has drained: keys move",
                       p->conf->name);
        }
        break;
    default:
        break;
    }
}

void group_tick(struct pool *p, uint64_t now)
{
    struct group *g = p->group;
    uint64_t every = g->phase == GROUP_STEADY ? GROUP_REFRESH_MS : GROUP_POLL_MS;

    if (g->phase == GROUP_HOLDING && mig_drained(p)) {
        g->phase = GROUP_LOCKED;        /* said at once */
        g->poll_ms = 0;
    }
    if (g->polls == 0 && now - g->poll_ms >= every)
        poll_round(p, g);
}

int group_close_handle(struct pool *p, uv_handle_t *h)
{
    struct group *g = p->group;

    for (uint32_t i = 0; g != NULL && i < g->nsubs; i++)
        if (g->subs[i].conn != NULL && h == &g->subs[i].conn->h.handle) {
            backend_close(g->subs[i].conn);
            return 1;
        }
    return 0;
}

/* server left every ring: its group connection is closed. */
static void group_server_gone(struct pool *p, uint32_t server)
{
    struct group *g = p->group;

    if (g != NULL && server < g->nsubs && g->subs[server].conn != NULL) {
        backend_close(g->subs[server].conn);
        g->subs[server].channel[0] = '\0';
    }
}

const char *group_phase_name(const struct pool *p)
{
    switch (p->group != NULL ? p->group->phase : GROUP_STEADY) {
    case GROUP_PREPARED: return "prepared";
    case GROUP_HOLDING:  return "holding";
    case GROUP_LOCKED:   return "locked";
    default:             return "steady";
    }
}

bool group_changing(const struct pool *p)
{
    return p->group != NULL && p->group->phase != GROUP_STEADY;
}

bool group_switching(const struct pool *p)
{
    return p->group != NULL && (p->group->phase == GROUP_HOLDING ||
                                p->group->phase == GROUP_LOCKED);
}

int group_check_start(struct pool *p, char *err, size_t errlen)
{
    uint64_t mine = group_checksum(p->conf);
    char pattern[300];
    struct group g = {0};

    snprintf(pattern, sizeof(pattern), "%s%s:*", GROUP_PREFIX, p->conf->name);
    for (uint32_t s = 0; s < p->nservers; s++) {
        size_t len;
        char *text;
        if (!p->servers[s].active ||
            (text = pool_conn_call(p, s, 3, (const char *[]){
                 "PUBSUB", "CHANNELS", pattern}, &len)) == NULL)
            continue;
        for (char *line = text, *end; *line != '\0'; line = *end ? end + 1 : end) {
            end = line + strcspn(line, "\n");
            merge_line(p, &g, line, (size_t)(end - line));
        }
        free(text);
    }
    /* A proxy switching to these servers and done draining (locked) holds
     * every moving key: one more may route by them. One still draining may
     * have writes on their way to old owners. */
    for (uint32_t i = 0; i < g.nseen; i++)
        if (g.seen[i].applied != mine && !(g.seen[i].target == mine &&
                                           g.seen[i].phase == GROUP_LOCKED)) {
            snprintf(err, errlen, "shardis %s routes this pool by other servers (checksum "
                     "%016" PRIx64 ") than this file lists (%016" PRIx64 "): a reload it has "
                     "not finished, or another file; start this one with its servers, then "
                     "reload them together", g.seen[i].id, g.seen[i].applied, mine);
            free(g.seen);
            return -EBUSY;
        }
    free(g.seen);
    return 0;
}

void group_cancel(struct pool *p)
{
    struct group *g = p->group;

    if (g == NULL || g->phase != GROUP_PREPARED)
        return;
    ring_unref(g->ring);
    g->ring = NULL;
    free(g->from_text);
    g->from_text = NULL;
    free(g->to_text);
    g->to_text = NULL;
    g->target = 0;
    g->phase = GROUP_STEADY;
    log_notice("pool '%s': the reload waiting for the other proxies is dropped",
               p->conf->name);
}

void group_prepare(struct pool *p, const struct conf_pool *pc, struct ring *ring,
                   const char *from_text, const char *to_text)
{
    struct group *g = p->group;

    free(g->to_text);
    g->to_text = xstrdup(to_text);
    ring_unref(g->ring);
    g->ring = ring;
    g->pc = pc;
    if (g->from_text == NULL)           /* a reload replacing a waiting one: */
        g->from_text = xstrdup(from_text);  /* still the config routed by */
    g->target = group_checksum(pc);
    g->phase = GROUP_PREPARED;
    g->log_ms = uv_now(cur_loop->uv);     /* a round first, then reports */
    g->poll_ms = 0;                     /* a round at the next tick (not over one in
                                           flight, whose counts it would reset) */
}

/* Lines of SHARD.MIGRATION STATUS's text: a bulk's payload, its lines
 * ended by CRLF as INFO's are, not RESP. */
void group_status(const struct pool *p, FILE *f)
{
    const struct group *g = p->group;

    fprintf(f, "group_phase:%s\r\ngroup_proxies:%u\r\n", group_phase_name(p), g->nlast);
    if (g->phase != GROUP_PREPARED)
        return;
    for (uint32_t i = 0; i < g->nlast; i++) {
        const char *why = holds_back(g, &g->last[i]);
        if (why != NULL)
            fprintf(f, "group_waiting_for:%s,%s\r\n", g->last[i].id, why);
    }
}

/* ---- the module ---------------------------------------------------------------------- */

static void group_tick_hook(struct pool *p, uint64_t now)
{
    if (p->group != NULL)
        group_tick(p, now);
}

const struct module group_module = {
    .name = "group",
    .pool_free = group_free,
    .server_gone = group_server_gone,
    .server_moved = group_server_moved,
    .tick = group_tick_hook,
    .roles = &(const struct module_roles){.ring_changing = group_changing},
};

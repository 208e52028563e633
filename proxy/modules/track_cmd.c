/* track_cmd.c -- client-side caching's commands: CLIENT TRACKING (its
 * options checked in redis-server's order, REDIRECT's target found on any
 * loop, BCAST answered once its connections are up), CACHING, GETREDIR,
 * TRACKINGINFO; RESET's and SELECT's part; INFO's figures. What they set
 * is read by track.c (the design is its first comment). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/base/cmd.h"
#include "proxy/base/resp.h"
#include "proxy/base/util.h"
#include "proxy/core/gate.h"
#include "proxy/core/pool.h"
#include "proxy/modules/track.h"
#include "proxy/modules/track_int.h"
#include "proxy/transport/args.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/transport/loop.h"

static bool has_prefix(const struct track_client *t, const char *p, uint32_t len)
{
    const char *q;
    uint32_t qlen;

    for (size_t at = 0; (q = klist_next(&t->prefixes, &at, &qlen)) != NULL;)
        if (qlen == len && !memcmp(p, q, len))
            return true;
    return false;
}

/* A BCAST client's TRACKING ON waits for every server's BCAST connection:
 * a PING over each; it is answered once all are. The client's request is
 * reached through its track_client's list of waits (waiting), never
 * through a wait alone: a client that goes takes its requests with it. */
struct track_wait {
    struct track_sink *sink;    /* the client's (counted) */
    struct req        *r;       /* its CLIENT TRACKING, while it waits */
    struct track_wait *next;    /* its other waits */
    uint32_t           left;
};

/* w is over: its request answered if its client is still there. */
static void wait_end(struct track_wait *w)
{
    struct client *c = w->sink->c;
    struct track_client *t = c != NULL ? state(c) : NULL;

    for (struct track_wait **at = t != NULL ? &t->waiting : NULL; at != NULL && *at != NULL;
         at = &(*at)->next)
        if (*at == w) {
            *at = w->next;
            req_done(w->r);
            break;
        }
    sink_unref(w->sink);
    free(w);
}

static int bcast_pinged(struct backend *b, struct req *q)
{
    struct track_wait *w = q->u.track_wait;

    (void)b;
    q->u.track_wait = NULL;
    if (w != NULL && --w->left == 0)
        wait_end(w);
    return 0;
}

/* Whether prefix p (len bytes) and q (qlen) overlap: one starts the other. */
static bool overlap(const char *p, size_t len, const char *q, size_t qlen)
{
    return !memcmp(p, q, len < qlen ? len : qlen);
}

/* redis-server's checkPrefixCollisionsOrReply: the new prefixes against
 * the client's and against each other. */
static bool prefixes_ok(struct client *c, struct req *r, const struct track_client *t,
                        struct args *a, const uint32_t *at, uint32_t n)
{
    const char *q;
    uint32_t qlen;
    size_t len, len2;

    for (uint32_t i = 0; i < n; i++) {
        const char *p = args_get(a, at[i], &len);
        for (size_t k = 0; t != NULL && (q = klist_next(&t->prefixes, &k, &qlen)) != NULL;)
            if (overlap(p, len, q, qlen)) {
                client_reply_error(c, r, "ERR Prefix '%.*s' overlaps with an existing prefix "
                                   "'%.*s'. Prefixes for a single client must not overlap.",
                                   (int)(len < 128 ? len : 128), p,
                                   (int)(qlen < 128 ? qlen : 128), q);
                return false;
            }
        for (uint32_t j = i + 1; j < n; j++) {
            const char *p2 = args_get(a, at[j], &len2);
            p = args_get(a, at[i], &len);
            if (overlap(p, len, p2, len2)) {
                client_reply_error(c, r, "ERR Prefix '%.*s' overlaps with another provided "
                                   "prefix '%.*s'. Prefixes for a single client must not "
                                   "overlap.", (int)(len < 128 ? len : 128), p,
                                   (int)(len2 < 128 ? len2 : 128), p2);
                return false;
            }
        }
    }
    return true;
}

/* Where client id is, for a REDIRECT: this loop (*sink), or another
 * (*loop). False: nowhere in c's pool. */
struct seek {
    uint64_t id;
    bool     found;
    uint32_t loop;
};

static void seek_one(struct pool *q, void *arg)
{
    struct seek *s = arg;

    if (!s->found && by_id(q, s->id) != NULL) {
        s->found = true;
        s->loop = cur_loop->id;
    }
}

static bool redir_find(struct client *c, uint64_t id, struct track_redir *rd)
{
    struct client *x = by_id(c->pool, id);
    struct seek s = {.id = id};

    memset(rd, 0, sizeof(*rd));
    rd->id = id;
    rd->pool = (uint32_t)(c->pool - cur_loop->pools);
    if (x != NULL) {
        rd->sink = state_make(x)->sink;
        rd->sink->refs++;
        return true;
    }
    if (loop_count() > 1)
        pool_each(c->pool, seek_one, &s);
    rd->loop = s.loop;
    return s.found;
}

/* BCAST: every server's BCAST connection up before r is answered: true
 * if r waits (its reply written, answered once the PINGs are), false if
 * nothing was to wait for. */
static bool bcast_start(struct client *c, struct track_client *t, struct req *r)
{
    struct pool *p = c->pool;
    struct track_wait *w = xcalloc(1, sizeof(*w));

    w->sink = t->sink;
    w->sink->refs++;
    w->r = r;
    w->left = 1;                    /* (until every PING is sent) */
    for (uint32_t s = 0; s < p->nservers; s++) {
        if (!p->servers[s].active)
            continue;
        struct req *q = req_get();
        struct resp_w rw = client_cmd_w(c, &q->out);
        resp_w_command(&rw, 1, (const char *const[]){"PING"}, NULL);
        q->on_reply = bcast_pinged;
        q->u.track_wait = w;
        w->left++;
        backend_send(&p->servers[s].conns[POOL_CONN_BCAST(p)], q);
    }
    if (--w->left == 0) {           /* (none to wait for, or each failed at once) */
        sink_unref(w->sink);
        free(w);
        return false;
    }
    w->next = t->waiting;
    t->waiting = w;
    return true;
}

/* CLIENT TRACKING ON: false if refused (answered), else r is answered or
 * will be (*later: BCAST's connections first). */
static bool tracking_on(struct client *c, struct req *r, struct args *a, uint8_t flags,
                        const struct track_redir *rd, const uint32_t *pfx, uint32_t npfx,
                        bool *later)
{
    struct track_client *t = state(c);
    bool was = c->tracking;
    size_t len;

    if (c->db != c->pool->conf->redis_db) {
        client_reply_error(c, r, "ERR shardis tracks keys in database %d only: SELECT %d "
                           "first", c->pool->conf->redis_db, c->pool->conf->redis_db);
        return false;
    }
    if ((flags & TRACK_BCAST) && !prefixes_ok(c, r, was ? t : NULL, a, pfx, npfx))
        return false;
    t = state_make(c);
    if (!was)
        klist_clear(&t->prefixes);
    for (uint32_t i = 0; i < npfx; i++) {
        const char *p = args_get(a, pfx[i], &len);
        klist_add(&t->prefixes, p, len);
    }
    /* BCAST without a prefix: the empty one, every key (redis-server's). */
    if ((flags & TRACK_BCAST) && npfx == 0 && !has_prefix(t, "", 0))
        klist_add(&t->prefixes, "", 0);
    sink_unref(t->redir.sink);
    t->redir = *rd;
    t->flags = flags;               /* (CACHING given stays, as in redis-server) */
    t->dirty = true;
    c->tracking = 1;
    /* Its later requests go over other connections (BCAST NOLOOP's too, so
     * that their replies are seen): none may run before its earlier ones
     * are answered, as after HELLO. */
    bool via = !(flags & TRACK_BCAST) || (flags & TRACK_NOLOOP);
    if (via != c->track_via)
        gate_hold(c, r);
    c->track_via = via;
    if (flags & TRACK_BCAST) {
        track_bcast_join(c->pool, t->sink);
        if (!was)
            *later = bcast_start(c, t, r);
    }
    return true;
}

static void tracking_off(struct client *c, struct req *r)
{
    struct track_client *t = state(c);

    if (c->track_via && r != NULL)
        gate_hold(c, r);
    c->tracking = 0;
    c->track_via = 0;
    if (t != NULL) {
        t->flags = 0;
        t->caching = false;
        klist_clear(&t->prefixes);
        own_clear(t);
        sink_unref(t->redir.sink);
        memset(&t->redir, 0, sizeof(t->redir));
    }
}

void track_reset(struct client *c)
{
    tracking_off(c, NULL);          /* (RESET holds the gate itself) */
}

bool track_may_select(struct client *c, struct req *r)
{
    if (!c->tracking)
        return true;
    client_reply_error(c, r, "ERR shardis tracks keys in database %d only: CLIENT TRACKING "
                       "OFF first", c->pool->conf->redis_db);
    return false;
}

/* CLIENT TRACKING, in redis-server's order of checks. True if r is to be
 * answered later (BCAST's connections). */
static bool cmd_tracking(struct client *c, struct req *r, struct args *a)
{
    struct track_client *t = state(c);
    struct track_redir rd = {0};
    uint8_t flags = 0;
    uint32_t pfx[64], npfx = 0;
    bool later = false;

    for (uint32_t j = 3; j < a->argc; j++) {
        bool more = j + 1 < a->argc;
        if (args_is(a, j, "redirect") && more) {
            long long id;
            j++;
            if (rd.id != 0) {
                client_reply_error(c, r, "ERR A client can only redirect to a single other "
                                   "client");
                goto refused;
            }
            if (!args_ll(a, j, &id)) {
                client_reply_error(c, r, "ERR value is not an integer or out of range");
                goto refused;
            }
            if (id <= 0 || !redir_find(c, (uint64_t)id, &rd)) {
                client_reply_error(c, r, "ERR The client ID you want redirect to does not "
                                   "exist");
                goto refused;
            }
        } else if (args_is(a, j, "bcast")) {
            flags |= TRACK_BCAST;
        } else if (args_is(a, j, "optin")) {
            flags |= TRACK_OPTIN;
        } else if (args_is(a, j, "optout")) {
            flags |= TRACK_OPTOUT;
        } else if (args_is(a, j, "noloop")) {
            flags |= TRACK_NOLOOP;
        } else if (args_is(a, j, "prefix") && more) {
            if (npfx == ARRAY_SIZE(pfx)) {
                client_reply_error(c, r, "ERR shardis takes at most %zu prefixes in one "
                                   "CLIENT TRACKING", ARRAY_SIZE(pfx));
                goto refused;
            }
            pfx[npfx++] = ++j;
        } else {
            client_reply_error(c, r, "ERR syntax error");
            goto refused;
        }
    }
    if (args_is(a, 2, "on")) {
        if (!(flags & TRACK_BCAST) && npfx > 0) {
            client_reply_error(c, r, "ERR PREFIX option requires BCAST mode to be enabled");
            goto refused;
        }
        if (c->tracking && t != NULL && !!(t->flags & TRACK_BCAST) != !!(flags & TRACK_BCAST)) {
            client_reply_error(c, r, "ERR You can't switch BCAST mode on/off before disabling "
                               "tracking for this client, and then re-enabling it with a "
                               "different mode.");
            goto refused;
        }
        if ((flags & TRACK_BCAST) && (flags & (TRACK_OPTIN | TRACK_OPTOUT))) {
            client_reply_error(c, r, "ERR OPTIN and OPTOUT are not compatible with BCAST");
            goto refused;
        }
        if ((flags & TRACK_OPTIN) && (flags & TRACK_OPTOUT)) {
            client_reply_error(c, r, "ERR You can't specify both OPTIN mode and OPTOUT mode");
            goto refused;
        }
        if (c->tracking && t != NULL &&
            (((flags & TRACK_OPTIN) && (t->flags & TRACK_OPTOUT)) ||
             ((flags & TRACK_OPTOUT) && (t->flags & TRACK_OPTIN)))) {
            client_reply_error(c, r, "ERR You can't switch OPTIN/OPTOUT mode before disabling "
                               "tracking for this client, and then re-enabling it with a "
                               "different mode.");
            goto refused;
        }
        if (!tracking_on(c, r, a, flags, &rd, pfx, npfx, &later))
            goto refused;
    } else if (args_is(a, 2, "off")) {
        sink_unref(rd.sink);
        tracking_off(c, r);
    } else {
        client_reply_error(c, r, "ERR syntax error");
        goto refused;
    }
    struct resp_w w = client_w(c, &r->rsp);
    resp_w_simple(&w, "OK");
    return later;
refused:
    sink_unref(rd.sink);
    return false;
}

static void cmd_caching(struct client *c, struct req *r, struct args *a)
{
    struct track_client *t = state(c);

    if (!c->tracking || t == NULL) {
        client_reply_error(c, r, "ERR CLIENT CACHING can be called only when the client is in "
                           "tracking mode with OPTIN or OPTOUT mode enabled");
        return;
    }
    if (args_is(a, 2, "yes")) {
        if (!(t->flags & TRACK_OPTIN)) {
            client_reply_error(c, r, "ERR CLIENT CACHING YES is only valid when tracking is "
                               "enabled in OPTIN mode.");
            return;
        }
    } else if (args_is(a, 2, "no")) {
        if (!(t->flags & TRACK_OPTOUT)) {
            client_reply_error(c, r, "ERR CLIENT CACHING NO is only valid when tracking is "
                               "enabled in OPTOUT mode.");
            return;
        }
    } else {
        client_reply_error(c, r, "ERR syntax error");
        return;
    }
    t->caching = true;
    struct resp_w w = client_w(c, &r->rsp);
    resp_w_simple(&w, "OK");
}

/* CLIENT TRACKINGINFO, as redis-server's: flags (a set), redirect,
 * prefixes. */
static void cmd_trackinginfo(struct client *c, struct req *r)
{
    const struct track_client *t = c->tracking ? state(c) : NULL;
    uint8_t f = t != NULL ? t->flags : 0;
    bool caching = t != NULL && t->caching;
    const char *list[8], *p;
    uint32_t plen;
    int m = 0;

    list[m++] = c->tracking ? "on" : "off";
    if (f & TRACK_BCAST)
        list[m++] = "bcast";
    if (f & TRACK_OPTIN) {
        list[m++] = "optin";
        if (caching)
            list[m++] = "caching-yes";
    }
    if (f & TRACK_OPTOUT) {
        list[m++] = "optout";
        if (caching)
            list[m++] = "caching-no";
    }
    if (f & TRACK_NOLOOP)
        list[m++] = "noloop";
    if (t != NULL && t->redir.broken)
        list[m++] = "broken_redirect";
    struct resp_w w = client_w(c, &r->rsp);
    resp_w_map(&w, 3);
    resp_w_bulk_str(&w, "flags");
    resp_w_set(&w, m);
    for (int i = 0; i < m; i++)
        resp_w_bulk_str(&w, list[i]);
    resp_w_bulk_str(&w, "redirect");
    resp_w_int(&w, t != NULL ? (long long)t->redir.id : -1);
    resp_w_bulk_str(&w, "prefixes");
    resp_w_array(&w, t != NULL ? t->prefixes.n : 0);
    for (size_t at = 0; t != NULL && (p = klist_next(&t->prefixes, &at, &plen)) != NULL;)
        resp_w_bulk(&w, p, plen);
}

bool track_command(struct client *c, struct req *r, struct args *a)
{
    if (args_is(a, 1, "tracking"))
        return cmd_tracking(c, r, a);
    if (args_is(a, 1, "caching")) {
        cmd_caching(c, r, a);
    } else if (args_is(a, 1, "getredir")) {
        const struct track_client *t = c->tracking ? state(c) : NULL;
        struct resp_w w = client_w(c, &r->rsp);
        resp_w_int(&w, t != NULL ? (long long)t->redir.id : -1);
    } else {
        cmd_trackinginfo(c, r);
    }
    return false;
}

/* ---- figures ------------------------------------------------------------------------ */

void track_figures(const struct pool *p, struct track_figures *f)
{
    const struct track_tab *t = p->track;
    const char *x, *y;
    uint32_t xl, yl;

    for (uint32_t i = 0; i < p->front.nclients; i++)
        f->clients += p->front.clients[i]->tracking;
    if (t == NULL)
        return;
    f->keys += t->nkeys;
    f->items += t->nitems;
    /* Prefixes, each once however many clients name it. */
    for (uint32_t i = 0; i < t->nbcast; i++) {
        const struct track_client *ti;
        if (!bcast_still(t->bcast[i]) || (ti = state(t->bcast[i]->c)) == NULL)
            continue;
        for (size_t at = 0; (x = klist_next(&ti->prefixes, &at, &xl)) != NULL;) {
            bool seen = false;
            for (uint32_t j = 0; j < i && !seen; j++) {
                const struct track_client *tj;
                if (!bcast_still(t->bcast[j]) || (tj = state(t->bcast[j]->c)) == NULL)
                    continue;
                size_t at2 = 0;
                while (!seen && (y = klist_next(&tj->prefixes, &at2, &yl)) != NULL)
                    seen = xl == yl && !memcmp(x, y, xl);
            }
            f->prefixes += !seen;
        }
    }
}


/* scan.c -- SCAN over every backend with one cursor.
 *
 * The client's cursor says which server to ask, where that server is, and
 * what the walk has seen of keys moving:
 *
 *   bits  0..9   server     the pool's server slot being walked
 *   bit  10      live       a key may move during this pass with no further
 *                           ring change (below)
 *   bit  11      again      this pass walks only servers that gained keys
 *   bits 12..19  begun      pool.ring_changes (low 8 bits) when this pass began
 *   bits 20..27  since      the first ring change whose moves the walk covers
 *   bits 28..63  position   that server's own SCAN cursor
 *
 * Server slots keep their numbers across reconnects and reloads (a new
 * server is appended), so a cursor keeps its meaning when the pool grows;
 * a pool has at most POOL_SLOTS_MAX (1024) of them. Cursor 0 starts the
 * first server; when a server's own cursor comes back 0 the next one
 * starts, and after the last the client gets 0. MATCH, COUNT and TYPE go
 * to every server as they are; the elements of each reply are forwarded,
 * only the cursor is rewritten, and shardis's own keys (own.h: its
 * sequences, its records) are left out: nothing of shardis's shows
 * to a client walking the keyspace (redis-cli --bigkeys asked TYPE of a
 * sequence, was refused, and gave up). Slots of servers that hold no keys (they
 * left the ring) are skipped; a slot the pool does not have is an invalid
 * cursor.
 *
 * Keys and passes. Each server's SCAN keeps Redis's guarantee for its own
 * keys: a key in it from the start of its walk (cursor 0) to the end
 * (cursor 0 again) is returned. So a pass over every server returns every
 * key that did not move during it. Keys move only while a migration runs
 * (mig.c), after a ring change (pool_set_ring), always to the key's owner
 * on the ring of the day; so a key moves at most once between two ring
 * changes (an "epoch"), into a server that gained keys in a ring change
 * from `since` on (pool_server.gained; `since` is the ring change a
 * migration running when the walk began may still be moving keys for --
 * mig.c keeps two earlier rings: the last two changes -- else the next
 * one). A pass during which a key moved may miss it (it left a server not
 * yet walked for one walked already), so another pass follows over the
 * servers that gained keys from `since` on. That later pass returns every
 * key that moved before it began and not during it: the key is then in a
 * server it walks, for the whole pass.
 *
 * When the walk ends. A key present throughout is returned by a pass
 * during which it did not move (the first pass: every server holds it or
 * not; a later one: it never moved, and the first pass returned it, or it
 * last moved before, into a server walked). The walk ends after a pass P
 * when no key can have moved both during P and during the pass before it
 * (for the first pass: none can have moved during it at all):
 *
 *   - no ring change during P (begun is still pool.ring_changes), so keys
 *     moved during P in one epoch, at most once each; and
 *   - live is clear: no key moved in an earlier epoch during the pass
 *     before P. For the first pass, live says a migration was running
 *     when the walk began (or at a step before any ring change: one taken
 *     up from a record), so keys move in the epoch it began in; for a
 *     later pass, that the ring changed during the pass before, and keys
 *     moved in the epoch that ended then -- but for the first pass's
 *     first ring change, when no migration ran before it: nothing moved
 *     in that epoch.
 *
 * Whether the mover is paused or running, and however long the migration
 * takes, does not matter: a migration adds no pass by running on, only a
 * ring change does. A pass is finite (each server's SCAN ends), and one
 * after which the walk goes on had a ring change during it or the pass
 * before (or, the first, a migration running when it began), so a walk
 * ends at most two passes after the one of the last ring change during
 * it, and within two passes without one. (Walking round the gained
 * servers while any migration ran, as this did before, never ended a walk
 * while the mover was paused, nor before a long migration did.) Keys can
 * come back more than once, as Redis's SCAN allows. Counters are compared
 * mod 256: a walk spanning 256 ring changes is not covered, nor one
 * spanning a restart of the proxy. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/core/pool.h"
#include "proxy/core/route.h"
#include "proxy/modules/own.h"
#include "proxy/modules/scan.h"
#include "proxy/core/module.h"

#define SCAN_SERVER_BITS    10
#define SCAN_LIVE           (1ull << 10)
#define SCAN_AGAIN          (1ull << 11)
#define SCAN_BEGUN_SHIFT    12
#define SCAN_SINCE_SHIFT    20
#define SCAN_POS_SHIFT      28
#define SCAN_POS_MAX        (UINT64_MAX >> SCAN_POS_SHIFT)
#define SCAN_STATE_MASK     ((1ull << SCAN_POS_SHIFT) - 1)

_Static_assert(POOL_SLOTS_MAX <= (1u << SCAN_SERVER_BITS), "a server slot fits the cursor");

static uint32_t cur_server(uint64_t v) { return (uint32_t)(v & ((1u << SCAN_SERVER_BITS) - 1)); }
static uint8_t cur_begun(uint64_t v)   { return (uint8_t)(v >> SCAN_BEGUN_SHIFT); }
static uint8_t cur_since(uint64_t v)   { return (uint8_t)(v >> SCAN_SINCE_SHIFT); }

static uint64_t cur_make(uint64_t pos, uint64_t flags, uint8_t begun, uint8_t since,
                         uint32_t server)
{
    return pos << SCAN_POS_SHIFT | (uint64_t)since << SCAN_SINCE_SHIFT |
           (uint64_t)begun << SCAN_BEGUN_SHIFT | flags | server;
}

/* Whether this pass walks server s: one holding keys, and in a later pass
 * one that gained keys in a ring change from since on (mod 256). */
static bool walks(const struct pool *p, uint64_t v, uint64_t s)
{
    uint8_t now = (uint8_t)p->ring_changes;

    if (!p->servers[s].active)
        return false;
    return !(v & SCAN_AGAIN) ||
           (uint8_t)(now - (uint8_t)p->servers[s].gained) <= (uint8_t)(now - cur_since(v));
}

/* The first server from s on that this pass walks; nservers if none. */
static uint64_t next_walked(const struct pool *p, uint64_t v, uint64_t s)
{
    while (s < p->nservers && !walks(p, v, s))
        s++;
    return s;
}

/* Move the walk in v to the start of the first server from s on that its
 * pass walks; after the last, to the start of another pass over where keys
 * went, unless none can have been missed (the head comment: when the walk
 * ends). The one place a pass ends. false: the walk is over. */
static bool advance(const struct pool *p, uint64_t *v, uint64_t s)
{
    uint64_t w = *v & SCAN_STATE_MASK & ~(uint64_t)((1u << SCAN_SERVER_BITS) - 1);
    uint8_t now = (uint8_t)p->ring_changes;
    uint8_t changes = (uint8_t)(now - cur_begun(w));
    bool live;

    if ((s = next_walked(p, w, s)) == p->nservers) {
        if (!(w & SCAN_LIVE) && changes == 0)
            return false;
        /* The next pass is live if keys moved during this one in an epoch
         * that ended during it: every one that ended, but, in the first
         * pass, the one it began in when no migration ran then. */
        if (w & SCAN_AGAIN)
            live = changes > 0;
        else
            live = (w & SCAN_LIVE) ? changes > 0 : changes > 1;
        w = cur_make(0, SCAN_AGAIN | (live ? SCAN_LIVE : 0), now, cur_since(w), 0);
        if ((s = next_walked(p, w, 0)) == p->nservers)
            return false;   /* no server gained keys: none moved */
    }
    *v = w | s;
    return true;
}

/* One step's look at the pool: in the first pass, a migration running
 * with no ring change since the walk began moves keys in the epoch the
 * walk began in (mig.c's, running then). The cursor's state, updated. */
static uint64_t look(const struct pool *p, uint64_t v)
{
    if (!(v & SCAN_AGAIN) && p->mig != NULL && cur_begun(v) == (uint8_t)p->ring_changes)
        v |= SCAN_LIVE;
    return v;
}

/* A cursor as redis-server reads one (strtoul: a sign is allowed, "" is
 * 0, leading space or trailing bytes or overflow are not). */
/* A cursor as the pool's servers read theirs: Redis 7.0 with strtoul (no
 * leading space; "-1" wraps), 7.2 on (Valkey too) with string2ull (a
 * leading space taken, a '-' not). The oldest server known decides. */
static bool parse_cursor(const struct pool *p, const char *s, size_t len, uint64_t *v)
{
    char buf[32], *end;
    uint32_t oldest = 0;
    bool v72;

    for (uint32_t i = 0; i < p->nservers; i++)
        if (p->servers[i].redis_version != 0 &&
            (oldest == 0 || p->servers[i].redis_version < oldest))
            oldest = p->servers[i].redis_version;
    v72 = oldest >= cmd_version("7.2.0");
    if (len >= sizeof(buf) || (len > 0 && !v72 && isspace((unsigned char)s[0])))
        return false;
    if (v72 && memchr(s, '-', len) != NULL)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    *v = strtoull(buf, &end, 10);
    return errno != ERANGE && *end == '\0';
}

/* Whether the SCAN reply's key v is shardis's own. */
/* How many of the n keys at rd are shardis's own. */
static long long own_keys(struct resp_rd *rd, long long n)
{
    struct resp_val k;
    long long mine = 0;

    for (long long i = 0; i < n; i++) {
        if (resp_rd_skip(rd, &k) < 0)
            return 0;               /* (forwarded as it came: the client reads it) */
        mine += own_key(rd, &k);
    }
    return mine;
}

/* The server's reply "*2\r\n$L\r\n<cursor>\r\n*N...": rewrite the cursor. */
static int scan_reply(struct req *r)
{
    struct client *c = r->client;
    struct pool *p = c->pool;
    uint64_t server, cursor, next, v = r->u.scan;
    char head[32];
    size_t clen;
    int at = 0;
    struct msg rsp;
    struct resp_rd rd;
    struct resp_val top, cur, keys;
    const char *s;

    resp_rd_init(&rd, &r->rsp);
    if (resp_rd_peek(&rd) == '-' || r->backend == NULL)
        return 0;                   /* the server's error (or shardis's), as it is */
    server = r->backend->server;
    /* The elements are not read: they go to the client as they came. */
    if (resp_rd_next(&rd, &top) < 0 || top.type != RESP_ARRAY || top.n != 2 ||
        resp_rd_next(&rd, &cur) < 0 || cur.type != RESP_BULK || cur.nil ||
        (s = resp_rd_str(&rd, &cur, head, sizeof(head))) == NULL ||
        !parse_cursor(p, s, cur.len, &cursor) ||
        resp_rd_peek(&rd) != '*' || resp_rd_next(&rd, &keys) < 0 || keys.nil) {
        msg_release(&r->rsp);
        client_reply_error(c, r, "ERR backend %s sent a SCAN reply shardis cannot read",
                           p->servers[server].label);
        return 0;
    }
    at = (int)cur.off;
    clen = cur.len;
    if (cursor > SCAN_POS_MAX) {
        /* A server's cursor stays below its key table's size. */
        msg_release(&r->rsp);
        client_reply_error(c, r, "ERR backend %s sent a SCAN cursor too large for shardis",
                           p->servers[server].label);
        return 0;
    }
    v = look(p, v);
    if (cursor != 0)
        next = cursor << SCAN_POS_SHIFT | v;
    else
        next = advance(p, &v, server + 1) ? v : 0;
    rsp = r->rsp;
    memset(&r->rsp, 0, sizeof(r->rsp));
    struct resp_w w = client_w(c, &r->rsp);
    resp_w_array(&w, 2);
    resp_w_bulk_ull(&w, next);
    long long mine = own_keys(&rd, keys.n);
    if (mine == 0) {
        msg_sub(&rsp, (size_t)at + clen + 2, rsp.len - (size_t)at - clen - 2, &r->rsp);
    } else {
        /* Read again, each key not shardis's forwarded as it came. */
        resp_rd_init(&rd, &rsp);
        resp_rd_next(&rd, &top);
        resp_rd_next(&rd, &cur);
        resp_rd_next(&rd, &keys);
        resp_w_array(&w, keys.n - mine);
        for (long long i = 0; i < keys.n; i++) {
            struct resp_val k;
            if (resp_rd_skip(&rd, &k) == 0 && !own_key(&rd, &k))
                msg_sub(&rsp, k.start, k.end - k.start, &r->rsp);
        }
    }
    msg_release(&rsp);
    return 0;
}

/* SCAN: one cursor over every server in turn (the module's ROUTE_SCAN). */
static void scan_send(struct client *c, struct req *r, struct args *a)
{
    struct pool *p = c->pool;
    uint64_t v, server;
    size_t len;
    const char *arg = args_get(a, 1, &len);

    if (!parse_cursor(p, arg, len, &v) || cur_server(v) >= p->nservers) {
        client_reply_error(c, r, "ERR invalid cursor");
        req_done(r);
        return;
    }
    if (v == 0) {
        /* A walk begins: it covers the moves of a migration running now
         * (look() makes its first pass live). */
        uint8_t now = (uint8_t)p->ring_changes;
        v = cur_make(0, 0, now, (uint8_t)(p->mig != NULL ? now - 1 : now + 1), 0);
    }
    v = look(p, v);
    if (!walks(p, v, cur_server(v)) && !advance(p, &v, cur_server(v))) {
        /* Its server left the ring since the cursor was made, and no
         * server is left to walk. */
        struct resp_w w = client_w(c, &r->rsp);
        resp_w_array(&w, 2);
        resp_w_bulk_str(&w, "0");
        resp_w_array(&w, 0);
        req_done(r);
        return;
    }
    server = cur_server(v);
    r->u.scan = v & SCAN_STATE_MASK;
    /* "SCAN <server cursor>" and the client's options, re-encoded. */
    struct resp_w w = client_cmd_w(c, &r->out);
    resp_w_array(&w, a->argc);
    resp_w_bulk_str(&w, "SCAN");
    resp_w_bulk_ull(&w, v >> SCAN_POS_SHIFT);
    for (uint32_t i = 2; i < a->argc; i++) {
        arg = args_get(a, i, &len);
        resp_w_bulk(&w, arg, len);
    }
    r->hook = scan_reply;
    route_send(c, r, NULL, pool_backend(p, (uint32_t)server, c));
}

/* ---- the module ---------------------------------------------------------------------- */

static void scan_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    (void)cmd;
    scan_send(c, r, a);
}

const struct module scan_module = {
    .name = "scan",
    .routes = 1u << ROUTE_SCAN,
    .route = scan_route,
};

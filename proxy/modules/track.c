/* track.c -- client-side caching through the proxy: CLIENT TRACKING, and
 * each server's invalidations brought to the clients that read the key.
 * The reference (how to use it, what differs from one redis-server) is
 * doc/commands.md, "Client-side caching"; the design is here.
 *
 * Default mode (and OPTIN, OPTOUT):
 *
 *   - A tracking client's requests all go over each server's tracking
 *     connection of its protocol (pool_via_of), a shared one with CLIENT
 *     TRACKING ON in its handshake; a transaction's or blocking command's
 *     pin is a tracking connection of its own. Its writes go there too,
 *     so that its requests keep their order. Clients that do not track
 *     use the other connections: they cost nothing here.
 *   - RESP3's (POOL_CONN_TRACK3) hears its server's invalidations on the
 *     same connection, after the reply of any read that came before the
 *     change and before the reply of any read after it: redis-server's
 *     one-connection rule. RESP2's (POOL_CONN_TRACK2) cannot hear pushes:
 *     it redirects them to RESP3's (CLIENT TRACKING ON REDIRECT <its
 *     CLIENT ID>), and is held back (backend.held_back) until that is
 *     set, again each time RESP3's is lost (a null then, and another once
 *     redirected: what was read between lost its invalidations). The tick
 *     keeps RESP3's up meanwhile, and sends what only hears a PING when
 *     idle, so that a server's `timeout` leaves it be.
 *     Two connections have no order between them, so a RESP2 read whose
 *     reply comes after an invalidation of its key (the log: struct
 *     track_log) is taken as invalidated at once (mithril's "poisoned
 *     fill"): at worst one invalidation too many, never a value cached
 *     past its change.
 *   - The server tracks per connection; the proxy tracks per client: a
 *     pool's table (per loop) from each key to the clients that read it
 *     (struct track_tab). A read is entered as its reply is read off the
 *     connection (backend_hooks.tracked), in the connection's order with
 *     its pushes, so a push finds every client whose reply came before
 *     it; an entry made at send time could be emptied by a push that came
 *     before the reply, leaving the server tracking a key for nobody. The
 *     keys are read from the request's bytes, which a tracked request
 *     keeps till its reply (backend.c). A transaction's reads are entered
 *     at its EXEC's reply (the server runs them then).
 *   - A push for key K sends each client of K's entry one invalidation and
 *     drops the entry, as redis-server drops its own. It is queued behind
 *     the client's requests in flight, as a subscriber's messages are:
 *     never before a reply read before it, so a value a client caches is
 *     always followed by the invalidation that ends it.
 *   - OPTIN, OPTOUT and CLIENT CACHING are decided as the request is routed
 *     (r->track, the track role): the server tracks every read on the
 *     tracking connection, the table only those that count.
 *   - NOLOOP: the server knows which client changed a key, the proxy
 *     only which connection: a client is left out of an invalidation that
 *     comes where its own write's would. On RESP3's connection that is
 *     right after the write's reply (the server sends a connection's own
 *     invalidations with its reply: own_next); on another connection (a
 *     RESP2 client's are redirected, BCAST's have their own) it is what
 *     that connection had received, unread, when the reply was read
 *     (struct own_write; backend_unread). A write that failed or changed
 *     nothing leaves no invalidation, and the client stays told.
 *
 * BCAST: a server's BCAST connection (POOL_CONN_BCAST, CLIENT TRACKING ON
 * BCAST, made when a client of the loop first asks, closed when none is
 * left) hears every key its server changes; each BCAST client is told of
 * those under its prefixes, one message per prefix as redis-server sends
 * them. CLIENT TRACKING ON BCAST answers once every server's BCAST
 * connection is up (a PING over each), so nothing changed after the OK
 * goes unsaid. NOLOOP: the client's own writes are noted as they are
 * routed (over the tracking connections, so that their replies are seen),
 * as a RESP2 client's are (above).
 *
 * REDIRECT: the invalidations go to the target instead (a push to a RESP3
 * one, a message on __redis__:invalidate to a RESP2 subscriber, as
 * redis-server), by its sink on the same loop, by mail on another
 * (redir_mail); a target gone is "tracking-redir-broken".
 *
 * What the table cannot follow flushes: a null invalidation ("drop
 * everything") to every tracking client of the pool on the loop, and the
 * table emptied, when a server pushes one (FLUSHALL, FLUSHDB), a tracking
 * connection fails or closes, or the server a key is routed to may change
 * (a new ring, a live reshard, an ejection or a return). A client is sent a
 * null only if it may hold something (dirty: it sent a request since its
 * last one), so that one FLUSHALL through the proxy, which each server
 * answers with a null on each tracking connection, reaches it once.
 *
 * The table holds at most TRACK_MAX_KEYS keys; past that, keys are dropped
 * with their invalidations, as redis-server's tracking-table-max-keys.
 *
 * The tick also sweeps the table of clients gone (TRACK_SWEEP buckets a
 * tick).
 *
 * Lifetimes: a client's struct track_client is its client_rare's (made on
 * first use, freed when the client goes); a BCAST CLIENT TRACKING's wait
 * (track_cmd.c) is its PINGs' and reaches the client's request only
 * through the client's list. The table, the BCAST list and a
 * REDIRECT refer to a client through its counted struct track_sink, which
 * outlives the client (its c cleared as the client goes) while something
 * names it: nothing holds a client pointer that may dangle, and a
 * client's going costs no walk of the table.
 *
 * Each loop has its own copy of a pool, and so its own table and tracking
 * connections: only a REDIRECT to another loop's client crosses loops. */
#include <stdlib.h>
#include <string.h>

#include "proxy/base/cmd.h"
#include "proxy/base/log.h"
#include "proxy/base/resp.h"
#include "proxy/base/util.h"
#include "proxy/core/gate.h"
#include "proxy/core/keys.h"
#include "proxy/core/pool.h"
#include "proxy/modules/own.h"
#include "proxy/modules/pin.h"
#include "proxy/modules/track.h"
#include "proxy/modules/track_int.h"
#include "proxy/transport/args.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/transport/loop.h"
#include "ring/ring.h"

static void flush_all(struct pool *p);
static bool own_change(struct client *c, const struct backend *b, const char *key,
                       size_t len);

void track_client_gone(struct client *c)
{
    struct track_client *t = state(c);

    if (t == NULL)
        return;
    t->sink->c = NULL;
    sink_unref(t->sink);
    sink_unref(t->redir.sink);
    own_clear(t);
    free(t->own);
    free(t->stash.buf);
    free(t->prefixes.buf);
    free(t);                        /* (its waits go with their PINGs: track_cmd.c) */
    c->rare->track = NULL;
}

/* ---- invalidations, as a client gets them ---------------------------------------- */

/* Queue the reply of shardis's own that w is to write into, on c, behind
 * its requests in flight (a subscriber's messages go the same way). */
static struct req *queue(struct client *c, struct resp_w *w)
{
    struct req *r = req_get();

    client_queue(c, r);
    *w = client_w(c, &r->rsp);
    return r;
}

/* An invalidation of keys (NULL: "drop everything") for a tracking client
 * of orig_resp3's protocol, written to target as redis-server writes it
 * there: a push to a RESP3 target; a message on __redis__:invalidate to a
 * RESP2 one in subscriber mode (only a REDIRECT's); else nothing. The null
 * is in the tracking client's protocol, whatever the target's, as
 * redis-server writes it. */
static void write_to(struct client *target, bool orig_resp3, const struct klist *keys)
{
    static const char *const null_of[2] = {"$-1\r\n", "_\r\n"};
    struct resp_w w;
    struct req *r;
    const char *k;
    uint32_t len;

    if (target->closing || (!target->resp3 && !target->subscribed))
        return;
    r = queue(target, &w);
    if (target->resp3) {
        resp_w_push(&w, 2);
        resp_w_bulk_str(&w, "invalidate");
    } else {
        resp_w_array(&w, 3);
        resp_w_bulk_str(&w, "message");
        resp_w_bulk_str(&w, "__redis__:invalidate");
    }
    if (keys == NULL) {
        resp_w_raw(&w, null_of[orig_resp3], strlen(null_of[orig_resp3]));
    } else {
        resp_w_array(&w, keys->n);
        for (size_t at = 0; (k = klist_next(keys, &at, &len)) != NULL;)
            resp_w_bulk(&w, k, len);
    }
    req_done(r);
}

/* c's REDIRECT target is gone: said to c (RESP3) at each invalidation, as
 * redis-server says it. */
static void redir_broken(struct client *c, struct track_client *t)
{
    struct resp_w w;
    struct req *r;

    t->redir.broken = true;
    if (!c->resp3 || c->closing)
        return;
    r = queue(c, &w);
    resp_w_push(&w, 2);
    resp_w_bulk_str(&w, "tracking-redir-broken");
    resp_w_int(&w, (long long)t->redir.id);
    req_done(r);
}

/* An invalidation for a client whose REDIRECT target is on another loop:
 * written there, or, the target gone, said back on the client's loop. */
struct redir_mail {
    uint32_t pool;              /* the pool's index, on both loops */
    uint32_t from_loop;
    uint64_t target, from;      /* client ids */
    bool     from_resp3;
    bool     null;
    struct klist keys;          /* (owned) */
};

static void mail_free(struct redir_mail *m)
{
    free(m->keys.buf);
    free(m);
}

static void redir_broken_mail(void *arg)
{
    struct redir_mail *m = arg;
    struct client *c;
    struct track_client *t;

    if (!cur_loop->stopping && m->pool < cur_loop->npools &&
        (c = by_id(&cur_loop->pools[m->pool], m->from)) != NULL && (t = state(c)) != NULL &&
        c->tracking && t->redir.id == m->target)
        redir_broken(c, t);
    mail_free(m);
}

static void redir_mail(void *arg)
{
    struct redir_mail *m = arg;
    struct client *target;

    if (cur_loop->stopping || m->pool >= cur_loop->npools) {
        mail_free(m);
        return;
    }
    if ((target = by_id(&cur_loop->pools[m->pool], m->target)) != NULL) {
        write_to(target, m->from_resp3, m->null ? NULL : &m->keys);
        mail_free(m);
    } else if (!loop_post(loop_at(m->from_loop), redir_broken_mail, m)) {
        mail_free(m);
    }
}

/* One invalidation for c of keys (NULL: drop everything), where c has it
 * go: to c (RESP3), or to its REDIRECT target. Only while c tracks; a
 * null only if c may hold something. */
static void tell(struct client *c, const struct klist *keys)
{
    struct track_client *t;
    struct track_redir *rd;

    if (c == NULL || c->closing || !c->tracking || (t = state(c)) == NULL)
        return;
    if (keys == NULL) {
        if (!t->dirty)
            return;
        t->dirty = false;
    }
    rd = &t->redir;
    if (rd->id == 0) {
        if (c->resp3)           /* (in RESP2 with no REDIRECT: nowhere, as redis-server) */
            write_to(c, true, keys);
    } else if (rd->sink != NULL) {
        if (rd->sink->c != NULL)
            write_to(rd->sink->c, c->resp3, keys);
        else
            redir_broken(c, t);
    } else {
        struct redir_mail *m = xcalloc(1, sizeof(*m));
        *m = (struct redir_mail){.pool = (uint32_t)(c->pool - cur_loop->pools),
                                 .from_loop = cur_loop->id, .target = rd->id, .from = c->id,
                                 .from_resp3 = c->resp3, .null = keys == NULL};
        if (keys != NULL) {
            m->keys = *keys;
            m->keys.buf = xmalloc(keys->len + 1);
            memcpy(m->keys.buf, keys->buf, keys->len);
            m->keys.cap = keys->len + 1;
        }
        if (!loop_post(loop_at(rd->loop), redir_mail, m))
            mail_free(m);
    }
}

/* tell, of one key. */
static void tell_one(struct client *c, const char *key, size_t len)
{
    char one[sizeof(uint32_t) + 64];
    uint32_t n = (uint32_t)len;
    struct klist l = {.n = 1, .len = sizeof(n) + len, .cap = sizeof(n) + len};

    l.buf = l.len <= sizeof(one) ? one : xmalloc(l.len);
    memcpy(l.buf, &n, sizeof(n));
    memcpy(l.buf + sizeof(n), key, len);
    tell(c, &l);
    if (l.buf != one)
        free(l.buf);
}

/* tell, of one key the table names c for: not to a client in BCAST mode
 * now (what it read before is not its concern), as redis-server. */
static void tell_key(struct client *c, const char *key, size_t len)
{
    const struct track_client *t;

    if (c != NULL && (t = state(c)) != NULL && !(t->flags & TRACK_BCAST))
        tell_one(c, key, len);
}

/* ---- the table --------------------------------------------------------------------- */

/* A key's hash: Jedis's MurmurHash64A, the ring's (its 64 bits mixed:
 * the table takes the low ones). Never 0, the log's null. */
static uint64_t hash_key(const char *p, size_t len)
{
    uint64_t h = ring_hash_raw(RING_HASH_MURMUR64A, p, len);

    return h != 0 ? h : 1;
}

static struct track_tab *tab_of(struct pool *p)
{
    if (p->track == NULL) {
        p->track = xcalloc(1, sizeof(*p->track));
        p->track->nbuckets = 64;
        p->track->buckets = xcalloc(64, sizeof(*p->track->buckets));
    }
    return p->track;
}

static struct track_entry **find(struct track_tab *t, const char *key, size_t len, uint64_t h)
{
    struct track_entry **e = &t->buckets[h & (t->nbuckets - 1)];

    for (; *e != NULL; e = &(*e)->next)
        if ((*e)->hash == h && (*e)->klen == len && !memcmp((*e)->key, key, len))
            return e;
    return e;
}

/* Unlink *at and free it; tell its clients first when told is set (but
 * one whose own write it was, heard on `heard`: NOLOOP). */
static void entry_drop(struct track_tab *t, struct track_entry **at, bool told,
                       const struct backend *heard)
{
    struct track_entry *e = *at;

    *at = e->next;
    t->nkeys--;
    t->nitems -= e->nsinks;
    for (uint32_t i = 0; i < e->cap; i++) {
        struct client *c;
        if (e->sinks[i] == NULL)
            continue;
        c = e->sinks[i]->c;
        if (told && c != NULL && !(heard != NULL && own_change(c, heard, e->key, e->klen)))
            tell_key(c, e->key, e->klen);
        sink_unref(e->sinks[i]);
    }
    free(e->sinks);
    free(e);
}

static void grow(struct track_tab *t)
{
    uint32_t n = t->nbuckets * 2;
    struct track_entry **b = xcalloc(n, sizeof(*b));

    for (uint32_t i = 0; i < t->nbuckets; i++) {
        struct track_entry *e, *next;
        for (e = t->buckets[i]; e != NULL; e = next) {
            next = e->next;
            e->next = b[e->hash & (n - 1)];
            b[e->hash & (n - 1)] = e;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->nbuckets = n;
}

/* Past TRACK_MAX_KEYS: drop keys, each with its invalidations, walking
 * the buckets round (redis-server drops random ones). */
static void evict(struct track_tab *t)
{
    while (t->nkeys > TRACK_MAX_KEYS) {
        struct track_entry **at = &t->buckets[t->evict_at];
        if (*at == NULL)
            t->evict_at = (t->evict_at + 1) & (t->nbuckets - 1);
        else
            entry_drop(t, at, true, NULL);
    }
}

/* Where s is, or goes, in e's set (cap > 0). */
static uint32_t sink_slot(const struct track_entry *e, const struct track_sink *s)
{
    uint32_t i = (uint32_t)(((uintptr_t)s >> 4) * 0x9e3779b97f4a7c15ull >> 32) & (e->cap - 1);

    while (e->sinks[i] != NULL && e->sinks[i] != s)
        i = (i + 1) & (e->cap - 1);
    return i;
}

/* Add s to e's readers: false if it is one already. */
static bool sinks_add(struct track_entry *e, struct track_sink *s)
{
    if ((e->nsinks + 1) * 4 > e->cap * 3) {
        struct track_sink **old = e->sinks;
        uint32_t ocap = e->cap;
        e->cap = ocap == 0 ? 2 : 2 * ocap;
        e->sinks = xcalloc(e->cap, sizeof(*e->sinks));
        for (uint32_t i = 0; i < ocap; i++)
            if (old[i] != NULL)
                e->sinks[sink_slot(e, old[i])] = old[i];
        free(old);
    }
    uint32_t i = sink_slot(e, s);
    if (e->sinks[i] == s)
        return false;
    e->sinks[i] = s;
    e->nsinks++;
    return true;
}

/* Take s out of e's readers (the probe runs after it moved back: linear
 * probing's deletion): false if it was none. */
static bool sinks_del(struct track_entry *e, const struct track_sink *s)
{
    uint32_t i, j, mask = e->cap - 1;

    if (e->cap == 0 || e->sinks[i = sink_slot(e, s)] != s)
        return false;
    e->sinks[i] = NULL;
    e->nsinks--;
    for (j = (i + 1) & mask; e->sinks[j] != NULL; j = (j + 1) & mask) {
        struct track_sink *x = e->sinks[j];
        e->sinks[j] = NULL;
        e->sinks[sink_slot(e, x)] = x;
    }
    return true;
}

/* Enter s as a reader of key. */
static void remember(struct pool *p, struct track_sink *s, const char *key, size_t len)
{
    struct track_tab *t = tab_of(p);
    uint64_t h = hash_key(key, len);
    struct track_entry **at = find(t, key, len, h), *e = *at;

    if (e == NULL) {
        e = xmalloc(sizeof(*e) + len);
        e->next = NULL;
        e->hash = h;
        e->sinks = NULL;
        e->nsinks = e->cap = 0;
        e->klen = (uint32_t)len;
        memcpy(e->key, key, len);
        *at = e;
        if (++t->nkeys > t->nbuckets)
            grow(t);
    }
    if (!sinks_add(e, s))
        return;                     /* (read again: a reader already) */
    s->refs++;
    t->nitems++;
    if (t->nkeys > TRACK_MAX_KEYS)
        evict(t);
}

static void log_add(struct track_tab *t, uint64_t hash)
{
    struct track_log *l = &t->log;

    l->hash[l->n % TRACK_LOG] = hash;
    l->us[l->n % TRACK_LOG] = cur_loop->now_us;
    l->n++;
}

/* Whether key (hash h) may have been invalidated at or after since_us:
 * logged so, or the log no longer reaches back that far. */
static bool logged_since(const struct track_tab *t, uint64_t h, uint64_t since_us)
{
    const struct track_log *l = &t->log;

    for (uint64_t i = l->n; i > 0 && l->n - i < TRACK_LOG; i--) {
        uint32_t at = (uint32_t)((i - 1) % TRACK_LOG);
        if (l->us[at] < since_us)
            return false;
        if (l->hash[at] == h || l->hash[at] == 0)
            return true;
    }
    return l->n >= TRACK_LOG;
}

/* key changed, as b heard: tell its readers, once. */
static void changed(const struct backend *b, const char *key, size_t len)
{
    struct track_tab *t = tab_of(b->pool);
    uint64_t h = hash_key(key, len);
    struct track_entry **at = find(t, key, len, h);

    log_add(t, h);
    if (*at != NULL)
        entry_drop(t, at, true, b);
}

/* The tick's sweep: the readers gone (their sink's client closed) out of
 * the entries of n buckets, and the entries left with none. A client that
 * goes costs no walk of the table; what it read goes within a sweep of
 * the whole table, TRACK_SWEEP buckets a tick (a million keys' in 40 s). */
#define TRACK_SWEEP 256u

static void sweep(struct track_tab *t, uint32_t n)
{
    for (; n > 0; n--, t->sweep_at = (t->sweep_at + 1) & (t->nbuckets - 1)) {
        struct track_entry **at = &t->buckets[t->sweep_at];
        while (*at != NULL) {
            struct track_entry *e = *at;
            for (uint32_t i = 0; i < e->cap; i++) {
                struct track_sink *s = e->sinks[i];
                if (s != NULL && s->c == NULL && sinks_del(e, s)) {
                    sink_unref(s);
                    t->nitems--;
                    i--;            /* (another may have moved back here) */
                }
            }
            if (e->nsinks == 0)
                entry_drop(t, at, false, NULL);
            else
                at = &e->next;
        }
    }
}

static void tab_clear(struct track_tab *t)
{
    for (uint32_t i = 0; t != NULL && i < t->nbuckets; i++)
        while (t->buckets[i] != NULL)
            entry_drop(t, &t->buckets[i], false, NULL);
}

/* Every tracking client of p (on this loop) drops everything. */
static void flush_all(struct pool *p)
{
    if (p->track != NULL) {
        tab_clear(p->track);
        log_add(p->track, 0);
    }
    for (uint32_t i = 0; i < p->front.nclients; i++)
        if (p->front.clients[i]->tracking)
            tell(p->front.clients[i], NULL);
}

/* ---- a request's keys, from its bytes ------------------------------------------- */

/* A request's arguments, copied out of the bytes it was sent as. */
struct sent {
    struct args a;
    char  *buf;
};

static void sent_free(struct sent *s)
{
    free(s->a.av);
    free(s->a.avlen);
    free(s->buf);
}

/* g's arguments into *s: false if g is none (or not an array of bulks). */
static bool sent_read(const struct msg *g, struct sent *s)
{
    struct resp_rd rd;
    struct resp_val top, v;
    size_t used = 0;

    memset(s, 0, sizeof(*s));
    if (g->len == 0)
        return false;
    resp_rd_init(&rd, g);
    if (resp_rd_next(&rd, &top) < 0 || top.type != RESP_ARRAY || top.elems == 0 ||
        top.elems > g->len)
        return false;
    s->buf = xmalloc(g->len);
    s->a.av = xcalloc(top.elems, sizeof(*s->a.av));
    s->a.avlen = xcalloc(top.elems, sizeof(*s->a.avlen));
    for (size_t i = 0; i < top.elems; i++) {
        if (resp_rd_next(&rd, &v) < 0 || v.type != RESP_BULK || v.nil ||
            used + v.len > g->len)
            goto bad;
        s->a.av[i] = s->buf + used;
        s->a.avlen[i] = resp_rd_copy(&rd, &v, s->buf + used, v.len);
        used += v.len;
    }
    s->a.argc = (uint32_t)top.elems;
    return true;
bad:
    sent_free(s);
    return false;
}

/* A key of a request, and whether the request writes it (its key spec
 * is not read-only). */
typedef void key_fn(void *arg, const char *key, size_t len, bool written);

#define KEY_WRITTEN(flags) (((flags) & (CMD_KEY_RW | CMD_KEY_OW | CMD_KEY_RM)) != 0)

/* Each key a names for cmd, to fn. */
static void each_key(const struct cmd *cmd, struct args *a, key_fn *fn, void *arg)
{
    char err[KEYS_ERR_MAX];
    size_t len;

    if (keys_find(cmd, a, &a->keys, err) != KEYS_FOUND)
        return;
    for (uint32_t n = 0; n < a->keys.n; n++) {
        const struct keyspan *k = &a->keys.span[n];
        for (uint32_t i = k->first; i <= k->last && i < a->argc; i += k->step ? k->step : 1) {
            const char *key = args_get(a, i, &len);
            fn(arg, key, len, KEY_WRITTEN(k->flags));
        }
    }
}

/* Each key of r's command cmd, read from the bytes r was sent as (r->out),
 * to fn. Keys at fixed indexes (GET, MGET, HGET ...: keys_indexed) are
 * read in place, with no copy but of a key split over chunks; the others
 * (scripts, XREAD ...) through a copy of every argument and keys_find. */
static void out_keys(const struct req *r, const struct cmd *cmd, key_fn *fn, void *arg)
{
    struct resp_rd rd;
    struct resp_val top, v;
    struct keys k;
    struct sent s;
    char buf[256];

    resp_rd_init(&rd, &r->out);
    if (r->out.len == 0 || resp_rd_next(&rd, &top) < 0 || top.type != RESP_ARRAY)
        return;
    if (!keys_indexed(cmd, (uint32_t)top.elems, &k)) {
        if (sent_read(&r->out, &s)) {
            each_key(cmd, &s.a, fn, arg);
            sent_free(&s);
        }
        return;
    }
    for (uint32_t i = 0; i < top.elems && resp_rd_next(&rd, &v) == 0; i++) {
        const struct keyspan *key = NULL;
        for (uint32_t n = 0; n < k.n && key == NULL; n++)
            if (i >= k.span[n].first && i <= k.span[n].last &&
                (i - k.span[n].first) % (k.span[n].step ? k.span[n].step : 1) == 0)
                key = &k.span[n];
        if (key == NULL || v.type != RESP_BULK)
            continue;
        const char *p = resp_rd_str(&rd, &v, buf, sizeof(buf));
        if (p != NULL) {
            fn(arg, p, v.len, KEY_WRITTEN(key->flags));
        } else {
            char *heap = xmalloc(v.len + 1);
            resp_rd_copy(&rd, &v, heap, v.len);
            fn(arg, heap, v.len, KEY_WRITTEN(key->flags));
            free(heap);
        }
    }
}

/* A script or function: redis-server tracks its declared keys if it read
 * any; the proxy cannot tell, and tracks them: at worst one invalidation
 * of a key the script did not read. */
static bool script(const struct cmd *cmd)
{
    return (cmd->flags & CMD_MOVABLEKEYS) &&
           (!strncmp(cmd->name, "eval", 4) || !strncmp(cmd->name, "fcall", 5));
}

static bool reads(const struct cmd *cmd)
{
    return (cmd->flags & CMD_READONLY) || script(cmd);
}

/* A NOLOOP client's write, of which it is not told: a write command, or
 * a script (what it writes is the client's own, to redis-server). */
static bool loop_write(const struct track_client *t, const struct cmd *cmd)
{
    return (t->flags & TRACK_NOLOOP) &&
           ((cmd->flags & CMD_WRITE) || (script(cmd) && !(cmd->flags & CMD_READONLY)));
}

/* ---- BCAST ------------------------------------------------------------------------- */

/* Whether key starts with one of t's prefixes (BCAST without PREFIX has
 * the empty one: tracking_on). */
static bool under_prefix(const struct track_client *t, const char *key, size_t len)
{
    const char *pfx;
    uint32_t plen;

    for (size_t at = 0; (pfx = klist_next(&t->prefixes, &at, &plen)) != NULL;)
        if (plen <= len && !memcmp(key, pfx, plen))
            return true;
    return false;
}

/* Where the server says a note's key changed: its RESP3 tracking
 * connection, or its BCAST one. */
static const struct backend *note_conn(const struct pool *p, const struct own_write *o)
{
    return &p->servers[o->server].conns[o->bcast ? POOL_CONN_BCAST(p) : POOL_CONN_TRACK3(p)];
}

/* The oldest note of key still waiting for its reply, or NULL. */
static struct own_write *note_of(struct track_client *t, const char *key, size_t len)
{
    for (uint32_t i = 0; i < t->nown; i++)
        if (t->own[i].state != OWN_CHANGED && t->own[i].len == len &&
            !memcmp(t->own[i].key, key, len))
            return &t->own[i];
    return NULL;
}

/* Whether o (OWN_CHANGED) still takes an invalidation heard on its
 * connection, that one having read nreads times: in the read its reply
 * came with, or the next if bytes were waiting then. */
static bool note_live(const struct own_write *o, uint32_t nreads)
{
    return nreads == o->nreads || (o->pending && nreads == o->nreads + 1);
}

static void note_drop(struct track_client *t, struct own_write *o)
{
    free(o->key);
    memmove(o, o + 1, (size_t)(t->own + t->nown - o - 1) * sizeof(*o));
    t->nown--;
}

/* Whether c is not to be told of key's change heard on b: its own write,
 * NOLOOP (struct own_write): told later (HELD) or never. A note so used,
 * or lapsed, is gone (note_own sweeps the others). */
static bool own_change(struct client *c, const struct backend *b, const char *key,
                       size_t len)
{
    struct track_client *t = state(c);

    if (t == NULL || !(t->flags & TRACK_NOLOOP))
        return false;
    for (uint32_t i = 0; i < t->nown; i++) {
        struct own_write *o = &t->own[i];
        if (o->server != b->server || o->bcast != b->bcast || o->len != len ||
            memcmp(o->key, key, len) != 0)
            continue;
        if (o->state != OWN_CHANGED) {
            o->state = OWN_HELD;        /* its reply says whose it was */
            return true;
        }
        bool own = note_live(o, b->nreads);
        note_drop(t, o);
        return own;
    }
    return false;
}

/* keys (a BCAST connection's push) changed on their server: each BCAST
 * client is told of those under its prefixes, one message per prefix, as
 * redis-server sends them. */
static void bcast_changed(const struct backend *b, const struct klist *keys)
{
    struct track_tab *tab = b->pool->track;

    for (uint32_t i = 0; tab != NULL && i < tab->nbcast; i++) {
        struct client *c = tab->bcast[i]->c;
        struct track_client *t;
        if (c == NULL || !c->tracking || (t = state(c)) == NULL || !(t->flags & TRACK_BCAST))
            continue;
        const char *pfx, *k;
        uint32_t plen, klen;
        for (size_t at_p = 0; (pfx = klist_next(&t->prefixes, &at_p, &plen)) != NULL;) {
            struct klist mine = {0};
            for (size_t at = 0; (k = klist_next(keys, &at, &klen)) != NULL;)
                if (klen >= plen && !memcmp(k, pfx, plen) && !own_change(c, b, k, klen))
                    klist_add(&mine, k, klen);
            if (mine.n > 0)
                tell(c, &mine);
            free(mine.buf);
        }
    }
}

void track_bcast_join(struct pool *p, struct track_sink *s)
{
    struct track_tab *t = tab_of(p);

    for (uint32_t i = 0; i < t->nbcast; i++)
        if (t->bcast[i] == s)
            return;
    if (t->nbcast == t->bcast_cap) {
        t->bcast_cap = t->bcast_cap == 0 ? 4 : 2 * t->bcast_cap;
        t->bcast = xrealloc(t->bcast, t->bcast_cap * sizeof(*t->bcast));
    }
    t->bcast[t->nbcast++] = s;
    s->refs++;
}

/* ---- the transport's hooks ------------------------------------------------------ */

struct visit {
    struct pool         *pool;
    struct track_client *t;
    bool                 poisoned_check;
    uint64_t             since_us;
    struct client       *c;
    struct backend      *b;         /* where the reply was read */
    bool                 changed;   /* (visit_answered) */
    uint32_t             nwritten;  /* (visit_count) */
};

static void visit_remember(void *arg, const char *key, size_t len, bool written)
{
    struct visit *v = arg;

    (void)written;
    remember(v->pool, v->t->sink, key, len);
    v->b->tracked = 1;              /* (b's server tells of it: lost if b closes) */
    /* RESP2: its invalidation may have come first, on the other connection. */
    if (v->poisoned_check && logged_since(v->pool->track, hash_key(key, len), v->since_us))
        tell_key(v->c, key, len);
}

static void visit_stash(void *arg, const char *key, size_t len, bool written)
{
    struct visit *v = arg;

    (void)written;
    klist_add(&v->t->stash, key, len);
}

static void visit_count(void *arg, const char *key, size_t len, bool written)
{
    (void)key, (void)len;
    ((struct visit *)arg)->nwritten += written;
}

/* o's write is answered, on v->b (changed: it certainly changed the
 * key): the note says so, or goes. One that held an invalidation gives
 * it to the client now if the write changed nothing (it was another
 * client's). False if o went. */
static bool note_answered(struct visit *v, struct own_write *o, bool changed)
{
    if (changed && o->state == OWN_PENDING) {
        const struct backend *at = note_conn(v->pool, o);
        o->pending = backend_unread(at);
        if (at == v->b || o->pending) {
            o->state = OWN_CHANGED;     /* (its own comes with or after the reply) */
            o->nreads = at->nreads;
            return true;
        }                               /* (else it came already, or will not) */
    }
    if (o->state == OWN_HELD && !changed)
        tell_one(v->c, o->key, o->len); /* (another's, held for it) */
    note_drop(v->t, o);
    return false;
}

static void visit_answered(void *arg, const char *key, size_t len, bool written)
{
    struct visit *v = arg;
    struct own_write *o;

    if (written && (o = note_of(v->t, key, len)) != NULL)
        note_answered(v, o, v->changed && !o->reread);
}

/* Whether a write's reply says it changed the keys it writes, for sure:
 * +OK (SET, MSET, RENAME ...; a script's too: what redis.call('SET', ...)
 * returns, taken for its declared keys), or a count of at least one for
 * its one written key, or of them all. Anything else (a nil, an error, 0,
 * a bulk) leaves it unsaid, and the client is told of whatever change
 * comes: at worst of its own write. */
static bool certainly_changed(const struct cmd *cmd, const struct resp_val *v,
                              uint32_t nwritten)
{
    if (cmd == NULL || nwritten == 0 || !strcmp(cmd->name, "setrange") ||
        !strncmp(cmd->name, "rename", 6))       /* (SETRANGE k 0 "", RENAME k k) */
        return false;
    return v->type == RESP_SIMPLE ||
           (v->type == RESP_INTEGER && !script(cmd) && v->n >= 1 &&
            (nwritten == 1 || v->n == nwritten));
}

/* Whether cmd ends a transaction: EXEC, DISCARD, RESET. */
static bool ends_tx(const struct cmd *cmd)
{
    return cmd != NULL && (!strcmp(cmd->name, "exec") || !strcmp(cmd->name, "discard") ||
                           !strcmp(cmd->name, "reset"));
}

/* EXEC's reply (ran: an array, its transaction ran) is read on v->b:
 * each note of a write its transaction queued is answered by its element
 * of it, as a write outside one by its reply. (No key expires between a
 * transaction's commands: redis-server 7 runs them all at EXEC's time.)
 * Its transaction is told by what ends the client's later ones, all
 * still behind it in its queue: their notes are left for their EXECs.
 * (One that ended without an EXEC on a server took its notes with it:
 * track_tx_unrun.) */
static void tx_answered(struct visit *v, struct req *exec, bool ran)
{
    struct track_client *t = v->t;
    struct resp_rd rd;
    struct resp_val el = {0};
    long long n = 0, at = -1;
    uint32_t later = 0;

    if (t->nown == 0)
        return;                         /* (no NOLOOP write: no walk of the queue) */
    for (struct req *x = TAILQ_NEXT(exec, cq); x != NULL; x = TAILQ_NEXT(x, cq))
        later += ends_tx(cmd_numbered(x->cmd));
    uint32_t mine = t->tx_ends - 1 - later;
    resp_rd_init(&rd, &exec->rsp);
    if (ran && resp_rd_next(&rd, &el) == 0 && el.type == RESP_ARRAY)
        n = el.n;
    for (uint32_t i = 0; i < t->nown;) {
        struct own_write *o = &t->own[i];
        bool changed = false;
        if (o->state == OWN_CHANGED || o->tx != mine || o->place == OWN_NO_PLACE) {
            i++;                        /* (answered, or not this transaction's) */
            continue;
        }
        if (o->place < n) {
            while (at < (long long)o->place && resp_rd_skip(&rd, &el) == 0)
                at++;
            changed = at == (long long)o->place && !o->reread &&
                      certainly_changed(cmd_numbered(o->cmd), &el, o->nwritten);
        }
        if (note_answered(v, o, changed))
            i++;
    }
}

/* (module role tx_unrun) c's transaction, just ended by its DISCARD,
 * EXEC or RESET (track_route counted it), never runs on its server: the
 * notes of its writes, and of any before it, go (one that held an
 * invalidation tells it: another client's). */
static void track_tx_unrun(struct client *c)
{
    struct track_client *t = state(c);

    if (t == NULL)
        return;
    struct visit v = {.pool = c->pool, .t = t, .c = c};
    uint32_t ended = t->tx_ends - 1;
    for (uint32_t i = 0; i < t->nown;) {
        struct own_write *o = &t->own[i];
        if (o->state == OWN_CHANGED || o->place == OWN_NO_PLACE ||
            (int32_t)(o->tx - ended) > 0 || note_answered(&v, o, false))
            i++;
    }
}

/* (backend_hooks.tracked: every reply on a tracking connection b) */
void track_answered(struct backend *b, struct req *r)
{
    struct req *top = r->parent != NULL ? r->parent : r;
    struct client *c = top->client;
    const struct cmd *cmd;
    struct track_client *t;

    if (!backend_tracks(r) || c == NULL || c->closing || (t = state(c)) == NULL)
        return;
    char first = resp_rd_head(&r->rsp, NULL, 0);
    struct visit v = {.pool = c->pool, .t = t, .poisoned_check = !b->resp3,
                      .since_us = top->t0_us, .c = c, .b = b};
    if (r->is_exec) {
        /* Its transaction ran: what it read there is tracked from now;
         * what it wrote, its element of the reply says. */
        if (first == RESP_ARRAY) {
            const char *k;
            uint32_t len;
            for (size_t at = 0; (k = klist_next(&t->stash, &at, &len)) != NULL;)
                visit_remember(&v, k, len, false);
        }
        klist_clear(&t->stash);
        tx_answered(&v, top, first == RESP_ARRAY);
        return;
    }
    if ((cmd = cmd_numbered(top->cmd)) == NULL)
        return;
    if (loop_write(t, cmd)) {
        if (r->in_tx)
            return;                     /* (+QUEUED: EXEC's reply says) */
        struct resp_rd rd;
        struct resp_val head;
        out_keys(r, cmd, visit_count, &v);
        resp_rd_init(&rd, &r->rsp);
        v.changed = resp_rd_next(&rd, &head) == 0 &&
                    certainly_changed(cmd, &head, v.nwritten);
        out_keys(r, cmd, visit_answered, &v);
    } else if (first == RESP_ERROR || (t->flags & TRACK_BCAST)) {
        return;
    } else if (r->in_tx) {
        if (first == RESP_SIMPLE && reads(cmd))
            out_keys(r, cmd, visit_stash, &v);          /* +QUEUED */
    } else if (reads(cmd)) {
        out_keys(r, cmd, visit_remember, &v);
    }
}

void track_invalidate(struct backend *b, const struct msg *frame)
{
    struct pool *p = b->pool;
    struct resp_rd rd;
    struct resp_val v, k;
    struct klist keys = {0};
    char small[256];

    resp_rd_init(&rd, frame);
    if (resp_rd_next(&rd, &v) < 0 || v.type != RESP_PUSH || v.elems != 2 ||
        resp_rd_next(&rd, &v) < 0 || !resp_rd_is(&rd, &v, "invalidate", 10, false) ||
        resp_rd_next(&rd, &v) < 0 || (!v.nil && v.type != RESP_ARRAY)) {
        log_warn("backend %s: a push that is no invalidation on a tracking connection: "
                 "dropped", backend_label(b));
        return;
    }
    if (v.nil) {                    /* FLUSHALL, FLUSHDB: everything */
        flush_all(p);
        return;
    }
    for (size_t n = v.elems, i = 0; i < n; i++) {
        if (resp_rd_next(&rd, &k) < 0 || k.type != RESP_BULK)
            break;
        if (own_key(&rd, &k))
            continue;               /* shardis's own (a BCAST one hears them) */
        const char *key = resp_rd_str(&rd, &k, small, sizeof(small));
        char *heap = NULL;
        if (key == NULL) {
            heap = xmalloc(k.len);
            resp_rd_copy(&rd, &k, heap, k.len);
            key = heap;
        }
        if (b->bcast)
            klist_add(&keys, key, k.len);   /* (its clients are told by prefix) */
        else
            changed(b, key, k.len);
        free(heap);
    }
    if (b->bcast && keys.n > 0)
        bcast_changed(b, &keys);
    free(keys.buf);
}

/* RESP2 tracking connections to server (its shared one, and pins) that
 * redirect to RESP3's, connecting or up (one closed, or closing, is
 * given nothing: what it was given would stay queued there, and a pin
 * that closed is freed): fn on each. */
static bool alive(const struct backend *x)
{
    return !x->closing && (x->state == BACKEND_UP || x->state == BACKEND_CONNECTING);
}

static void each_resp2(struct pool *p, uint32_t server, void (*fn)(struct backend *x))
{
    struct backend *x = &p->servers[server].conns[POOL_CONN_TRACK2(p)];

    if (alive(x))
        fn(x);
    TAILQ_FOREACH(x, &p->dedicated, link)
        if (x->tracking && !x->resp3 && x->server == server && x->role != BACKEND_LEFT &&
            alive(x))
            fn(x);
}

/* x's redirect is gone with RESP3's connection: nothing more of a
 * client's is written on it until it redirects again (track3_id). */
static void hold_back(struct backend *x)
{
    x->held_back = 1;
}

void track_untracked(struct backend *b)
{
    if (cur_loop->stopping)
        return;
    flush_all(b->pool);
    if (b->resp3 && !b->bcast && !backend_dedicated(b))
        each_resp2(b->pool, b->server, hold_back);
}

/* The RESP3 tracking connection of b's server, on b's loop. */
static struct backend *track3_of(const struct backend *b)
{
    return &b->pool->servers[b->server].conns[POOL_CONN_TRACK3(b->pool)];
}

/* REDIRECT set on a RESP2 tracking connection b. Once more on one that
 * tracked reads (RESP3's connection came back): what it read meanwhile
 * may have been invalidated to nobody, so every tracking client drops
 * everything (its replies all came before this one). */
static int redirected(struct backend *b, struct req *r)
{
    if (backend_hello_reply(b, r) < 0)
        return -1;
    if (r->rsp.len == 0)
        return 0;                   /* (b failed) */
    /* Losing RESP3's connection now loses what b's server tracks. */
    track3_of(b)->tracked = 1;
    if (b->tracked)
        flush_all(b->pool);
    return 0;
}

/* b, RESP2 tracking, redirects its invalidations to id: before any
 * client's request not yet written on it. */
static void redirect(struct backend *b, uint64_t id)
{
    char sid[24];

    snprintf(sid, sizeof(sid), "%llu", (unsigned long long)id);
    backend_queue_own(b, redirected, true, 5,
                      (const char *const[]){"CLIENT", "TRACKING", "ON", "REDIRECT", sid});
    b->held_back = 0;
    loop_mark_backend(b);
}

/* x, RESP2 tracking, redirects to RESP3's connection as it is now, if it
 * waits for it or redirected to an earlier one. */
static void redirect_again(struct backend *x)
{
    if (x->held_back || x->state == BACKEND_UP)
        redirect(x, track3_of(x)->client_id);
}


/* RESP3's tracking connection to a server knows its CLIENT ID: each RESP2
 * tracking connection to that server redirects there. */
static int track3_id(struct backend *b, struct req *r)
{
    struct pool *p = b->pool;
    struct resp_rd rd;
    struct resp_val v;

    if (r->rsp.len == 0)
        return 0;
    resp_rd_init(&rd, &r->rsp);
    if (resp_rd_next(&rd, &v) < 0 || v.type != RESP_INTEGER || v.n <= 0)
        return backend_hello_reply(b, r);      /* (an error: it fails) */
    b->client_id = (uint64_t)v.n;
    each_resp2(p, b->server, redirect_again);
    return 0;
}

void track_hello(struct backend *b)
{
    if (b->bcast) {
        b->tracked = 1;             /* (what it hears is lost when it closes) */
        backend_queue_own(b, backend_hello_reply, true, 4,
                          (const char *const[]){"CLIENT", "TRACKING", "ON", "BCAST"});
    } else if (b->resp3) {
        if (!backend_dedicated(b))
            backend_queue_own(b, track3_id, true, 2, (const char *const[]){"CLIENT", "ID"});
        backend_queue_own(b, backend_hello_reply, true, 3,
                          (const char *const[]){"CLIENT", "TRACKING", "ON"});
    } else {
        /* Its invalidations go to RESP3's connection: once that is up and
         * its id known (track3_id), nothing of a client's before (the tick
         * keeps RESP3's coming up meanwhile). */
        struct backend *to = track3_of(b);
        tab_of(b->pool);
        b->held_back = 1;
        if (to->client_id != 0 && to->state == BACKEND_UP && !to->closing)
            redirect(b, to->client_id);
        else if (to->state == BACKEND_DOWN || to->state == BACKEND_FAILED)
            backend_preconnect(to);
    }
}

/* ---- routing: what counts ----------------------------------------------------------- */

/* A NOLOOP client's write being routed: in MULTI, its place in EXEC's
 * reply and how many keys it writes. */
struct noting {
    struct client *c;
    uint32_t place, nwritten;
    uint16_t cmd;
};

static void count_written(void *arg, const char *key, size_t len, bool written)
{
    (void)key, (void)len;
    ((struct noting *)arg)->nwritten += written;
}

/* A NOLOOP client's write of key, as it is routed (struct own_write): of
 * a key it writes (a BCAST client's, under its prefixes). */
static void note_own(void *arg, const char *key, size_t len, bool written)
{
    struct noting *n = arg;
    struct client *c = n->c;
    struct track_client *t = state(c);

    if (!written || ((t->flags & TRACK_BCAST) && !under_prefix(t, key, len)))
        return;
    for (uint32_t i = 0; i < t->nown;) {    /* (those lapsed go) */
        struct own_write *o = &t->own[i];
        if (o->state == OWN_CHANGED && !note_live(o, note_conn(c->pool, o)->nreads))
            note_drop(t, o);
        else
            i++;
    }
    if (t->nown == t->own_cap) {
        t->own_cap = t->own_cap == 0 ? 4 : 2 * t->own_cap;
        t->own = xrealloc(t->own, t->own_cap * sizeof(*t->own));
    }
    struct own_write *o = &t->own[t->nown++];
    *o = (struct own_write){.len = (uint32_t)len, .server = pool_owner(c->pool, key, len),
                            .bcast = (t->flags & TRACK_BCAST) != 0, .state = OWN_PENDING,
                            .tx = t->tx_ends, .place = n->place, .nwritten = n->nwritten,
                            .cmd = n->cmd};
    o->key = xmalloc(len + 1);
    memcpy(o->key, key, len);
}

/* A BCAST NOLOOP client reads keys it wrote before the write was
 * answered: the read may run in the same server instant as the write,
 * and the server says in one message every change of a key in one
 * instant (redis-server's BCAST), so one that came with its own write
 * (the key expiring: Redis's own "Tracking gets notification of lazy
 * expired keys", where a transaction writes it, sleeps and reads it;
 * another client's write) would go untold with it, and what it read be
 * stale. The write is not taken as certain (struct own_write reread):
 * the client is told, at worst of its own write. (A read after the
 * write's reply was read runs in a later instant.) */
static void mark_reread(void *arg, const char *key, size_t len, bool written)
{
    struct track_client *t = arg;

    (void)written;
    for (uint32_t i = 0; i < t->nown; i++)
        if (t->own[i].state != OWN_CHANGED && t->own[i].len == len &&
            !memcmp(t->own[i].key, key, len))
            t->own[i].reread = true;
}

/* The track role (route.c, for a client with c->tracking): whether r's
 * keys matter (r->track), as redis-server decides (trackingRememberKeys):
 * a read unless OPTIN without CACHING YES or OPTOUT with CACHING NO; a
 * NOLOOP client's write; an EXEC. CACHING lasts one command (not a
 * CLIENT one, nor those queued in MULTI). A NOLOOP client's writes are
 * noted now, before the server can say they changed (struct own_write). */
static void track_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    struct track_client *t = state(c);
    bool counts;

    if (t == NULL)
        return;
    t->dirty = true;
    if (t->nown > 0 && (t->flags & TRACK_BCAST) && reads(cmd) && !loop_write(t, cmd)) {
        struct args k = *a;
        k.ncopies = 0;
        each_key(cmd, &k, mark_reread, t);
        args_release(&k);
    }
    if (loop_write(t, cmd)) {
        /* Noted now: another client's change of its keys may be heard
         * before its reply, or its own after it. */
        struct args k = *a;
        struct noting n = {.c = c, .place = OWN_NO_PLACE, .cmd = cmd_number(cmd)};
        k.ncopies = 0;
        if (client_in_multi(c)) {
            n.place = pin_tx_place(c);
            each_key(cmd, &k, count_written, &n);
        }
        each_key(cmd, &k, note_own, &n);
        args_release(&k);
        counts = true;
    } else if (reads(cmd) && !(t->flags & TRACK_BCAST)) {
        counts = (t->flags & TRACK_OPTIN) ? t->caching
               : (t->flags & TRACK_OPTOUT) ? !t->caching : true;
    } else {
        counts = !strcmp(cmd->name, "exec");
    }
    r->track = counts;
    /* CACHING lasts to the command after it (redis-server keeps it through
     * MULTI to the transaction's end, and through CLIENT's) */
    bool ends = ends_tx(cmd);
    t->tx_ends += ends;
    if (ends || (!client_in_multi(c) && strcmp(cmd->name, "multi") != 0 &&
                 strncmp(cmd->name, "client", 6) != 0))
        t->caching = false;
}

/* ---- the module -------------------------------------------------------------------- */

/* A PING on b, up and with nothing in flight (its reply read by nobody). */
#define TRACK_KEEPALIVE_MS 500

static int pong(struct backend *b, struct req *r)
{
    (void)b, (void)r;
    return 0;
}

static void keepalive(struct backend *b)
{
    if (b->state == BACKEND_UP && !b->closing && backend_idle(b)) {
        backend_queue_own(b, pong, false, 1, (const char *const[]){"PING"});
        loop_mark_backend(b);
    }
}

/* BCAST connections: kept up while a BCAST client of the loop is there
 * (retried after a failure), closed once none is; the BCAST clients gone
 * leave the list. */
static void track_tick(struct pool *p, uint64_t now)
{
    struct track_tab *t = p->track;
    uint32_t n = 0;

    if (t == NULL)
        return;                     /* (no client of the loop ever tracked) */
    if (t->nkeys > 0)
        sweep(t, TRACK_SWEEP < t->nbuckets ? TRACK_SWEEP : t->nbuckets);
    /* A RESP2 tracking connection waits for RESP3's: which must come up
     * (again, after a failure). */
    for (uint32_t s = 0; s < p->nservers; s++)
        if (p->servers[s].conns[POOL_CONN_TRACK2(p)].held_back)
            backend_keep_up(track3_of(&p->servers[s].conns[POOL_CONN_TRACK2(p)]));
    struct backend *x;
    TAILQ_FOREACH(x, &p->dedicated, link)
        if (x->held_back && x->tracking && !x->resp3)
            backend_keep_up(track3_of(x));
    /* What only hears (RESP3's tracking connection, BCAST's) is never idle
     * to its server: a server's `timeout` closing it would cost every
     * tracking client a null. */
    if (now >= t->ping_ms + TRACK_KEEPALIVE_MS) {
        t->ping_ms = now;
        for (uint32_t s = 0; s < p->nservers; s++) {
            keepalive(&p->servers[s].conns[POOL_CONN_TRACK3(p)]);
            keepalive(&p->servers[s].conns[POOL_CONN_BCAST(p)]);
        }
    }
    if (t->nbcast == 0 && t->bcast_cap == 0)
        return;
    for (uint32_t i = 0; i < t->nbcast; i++)
        if (bcast_still(t->bcast[i]))
            t->bcast[n++] = t->bcast[i];
        else
            sink_unref(t->bcast[i]);
    t->nbcast = n;
    for (uint32_t s = 0; s < p->nservers; s++) {
        struct backend *b = &p->servers[s].conns[POOL_CONN_BCAST(p)];
        if (n > 0 && p->servers[s].active) {
            backend_keep_up(b);
        } else if (n == 0 && b->state != BACKEND_DOWN && backend_idle(b)) {
            b->tracked = 0;         /* (closed on purpose: nothing is lost) */
            backend_close(b);
        }
    }
    if (n == 0) {
        free(t->bcast);
        t->bcast = NULL;
        t->bcast_cap = 0;
    }
}

static void track_pool_free(struct pool *p)
{
    struct track_tab *t = p->track;

    if (t == NULL)
        return;
    tab_clear(t);
    for (uint32_t i = 0; i < t->nbcast; i++)
        sink_unref(t->bcast[i]);
    free(t->bcast);
    free(t->buckets);
    free(t);
    p->track = NULL;
}

const struct module track_module = {
    .name = "track",
    .pool_free = track_pool_free,
    .keys_rerouted = flush_all,
    .tick = track_tick,
    .roles = &(const struct module_roles){
        .track = track_route,
        .tx_unrun = track_tx_unrun,
    },
};

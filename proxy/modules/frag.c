/* frag.c -- commands sent to several backends, and their replies merged
 * back into one.
 *
 * Split (Redis's request_policy multi_shard: MGET, MSET, DEL, UNLINK,
 * EXISTS, TOUCH): the keys are grouped per server and each group becomes
 * one fragment (one request per backend, not per key): a new "*N" header
 * and "$len" headers around the client's own key and value bytes, which
 * are forwarded as slices of its read chunks. When every fragment has
 * answered, the replies are merged:
 *
 *   MGET     values in the order the keys were asked (slices of the
 *            fragments' replies: still not copied)
 *   MSET     +OK when every fragment said OK
 *   others   the sum of the fragments' integers
 *
 * MSETNX is multi_shard too, but setting all or none of its keys is only
 * atomic on one server, so route.c sends it whole or refuses it.
 *
 * Broadcast (request_policy all_shards/all_nodes: DBSIZE, KEYS, RANDOMKEY,
 * FLUSHDB, SCRIPT LOAD ...): the client's request goes to every server,
 * and the replies merge by the command's response_policy (cmd.h): summed,
 * the one reply if every server succeeded, success if any did, an
 * element-wise AND; without a policy, arrays are concatenated and any
 * other reply is one non-nil reply picked at random (RANDOMKEY).
 *
 * If a fragment failed (its backend is down, or it answered an error) and
 * the policy needs every server, the whole reply is the first such error,
 * naming the backend, rather than a partial answer that looks complete.
 * When all keys of a split command live on one server the request is
 * forwarded whole, untouched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/core/acl.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/modules/frag.h"
#include "proxy/modules/mig.h"
#include "proxy/modules/own.h"
#include "proxy/core/pool.h"
#include "proxy/core/route.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

enum frag_merge { MERGE_VALUES, MERGE_OK, MERGE_SUM, MERGE_BROADCAST };

struct frag_key {
    uint32_t frag;              /* fragment holding key i */
    uint32_t elem;              /* its position in that fragment's reply */
};

struct frag {
    enum frag_merge merge;
    enum cmd_reply  reply;      /* MERGE_BROADCAST: the response policy */
    uint32_t        nfrags;
    uint32_t        nown;       /* CMD_REPLY_DBSIZE: the last nown fragments count
                                   shardis's own keys (own_exists), one a server */
    uint32_t        left;       /* fragments not answered yet */
    uint32_t        nkeys;
    struct req    **reqs;       /* [nfrags] */
    struct frag_key *keys;      /* [nkeys] (MERGE_VALUES) */
};

/* How a split command's replies merge, from its response policy; -1 if
 * it is not split. */
static int merge_kind(const struct cmd *cmd)
{
    if (!(cmd->flags & CMD_MULTI_SHARD))
        return -1;
    switch (cmd->reply) {
    case CMD_REPLY_DEFAULT: return MERGE_VALUES;    /* MGET */
    case CMD_REPLY_ALL_OK:  return MERGE_OK;        /* MSET */
    case CMD_REPLY_SUM:     return MERGE_SUM;       /* DEL, EXISTS ... */
    default:                return -1;              /* MSETNX: see above */
    }
}

#define FRAG_COPY_MAX   512     /* arguments and values up to this long are copied */
#define FRAG_INLINE     64      /* keys, servers or elements handled on the stack */

/* Append argument i, as a bulk string, to w. A short one is copied with
 * its header into the client's local chunk (resp_w_bulk does), so that a
 * fragment of short keys and values is one contiguous run, one iovec when
 * written, rather than two slices per argument; a long one is forwarded as
 * slices of the client's own chunks, its CRLF included. */
static void append_arg(struct client *c, struct resp_w *w, struct args *a, uint32_t i)
{
    size_t len;
    const char *p;

    if (a->av == NULL && !c->scan.is_inline && c->scan.argv[i].len > FRAG_COPY_MAX) {
        const struct resp_arg *arg = &c->scan.argv[i];
        resp_w_bulk_header(w, arg->len);
        rstream_slice(&c->in, arg->off, arg->off + arg->len + 2, w->g);
        return;
    }
    p = args_get(a, i, &len);
    resp_w_bulk(w, p, len);     /* a long inline or kept argument is copied */
}

/* A frag with room for nfrags requests and, for MGET, nkeys positions:
 * one allocation, freed by frag_free. */
static struct frag *frag_new(enum frag_merge merge, uint32_t nfrags, uint32_t nkeys)
{
    size_t size = sizeof(struct frag) + nfrags * sizeof(struct req *) +
                  (merge == MERGE_VALUES ? nkeys * sizeof(struct frag_key) : 0);
    struct frag *f = xcalloc(1, size);

    f->merge = merge;
    f->nfrags = f->left = nfrags;
    f->nkeys = nkeys;
    f->reqs = (struct req **)(f + 1);
    if (merge == MERGE_VALUES)
        f->keys = (struct frag_key *)(f->reqs + nfrags);
    return f;
}

bool frag_splits(const struct cmd *cmd)
{
    return merge_kind(cmd) >= 0;
}

#define NONE UINT32_MAX

/* r's fragments, r->frag: one per server that owns keys, in server order,
 * its bytes written one after the other. Server s's keys (frag_route's
 * scratch): head[s] its first (NONE: it owns none), next[k] the key after
 * k of the same server, count[s] how many. */
static struct frag *frag_build(struct client *c, struct req *r, struct args *a,
                               enum frag_merge kind, uint32_t step, uint32_t nkeys,
                               uint32_t nfrags, const uint32_t *head, const uint32_t *next,
                               const uint32_t *count)
{
    uint32_t ns = c->pool->nservers;
    struct frag *f = frag_new(kind, nfrags, nkeys);
    r->frag = f;

    uint32_t i = 0;
    for (uint32_t s = 0; s < ns; s++) {
        if (head[s] == NONE)
            continue;
        struct req *fr = req_get();
        struct resp_w w = client_cmd_w(c, &fr->out);
        fr->parent = r;
        resp_w_array(&w, 1 + (long long)count[s] * step);
        append_arg(c, &w, a, 0);
        uint32_t elem = 0;
        for (uint32_t k = head[s]; k != NONE; k = next[k]) {
            for (uint32_t j = 0; j < step; j++)
                append_arg(c, &w, a, 1 + k * step + j);
            if (f->keys != NULL)
                f->keys[k] = (struct frag_key){i, elem++};
        }
        f->reqs[i++] = fr;
    }
    return f;
}

/* Each of f's fragments to its server, its moving keys migrated first. */
static void frag_send(struct client *c, struct frag *f, struct args *a, const struct cmd *cmd,
                      uint32_t step, const uint32_t *head, const uint32_t *next)
{
    struct pool *p = c->pool;
    uint32_t ns = p->nservers, i = 0;

    for (uint32_t s = 0; s < ns; s++) {
        if (head[s] == NONE)
            continue;
        if (p->mig != NULL)
            for (uint32_t k = head[s]; k != NONE; k = next[k]) {
                size_t len;
                const char *key = args_get(a, 1 + k * step, &len);
                mig_key(c, s, key, len);
            }
        struct backend *b = pool_backend_read(p, s, c, cmd, pool_via_of(c), c->db);
        struct req *fr = f->reqs[i++];
        if (b == NULL) {                    /* (its part of the reply is the error) */
            client_reply_error(c, fr, POOL_NO_REPLICA_ERR, p->servers[s].label);
            req_done(fr);
            continue;
        }
        route_send(c, fr, NULL, b);
    }
}

int frag_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    struct pool *p = c->pool;
    uint32_t step = (uint32_t)cmd->step, nkeys, nfrags = 0, ns = p->nservers;
    int kind = merge_kind(cmd), first = -1;
    bool split = false;

    if (kind < 0)
        return -2;
    if (step == 2 && (a->argc - 1) % 2 != 0) {
        client_reply_error(c, r, "ERR wrong number of arguments for '%s' command", cmd->name);
        req_done(r);
        return -1;
    }
    nkeys = (a->argc - 1) / step;

    /* owner[k]: key k's server; next[k]: the next key of that server;
     * head[s], count[s]: server s's first key and how many it has. */
    uint32_t scratch[4 * FRAG_INLINE], *owner, *next, *head, *count;
    size_t need = 2 * (size_t)nkeys + 2 * (size_t)ns;
    owner = need <= ARRAY_SIZE(scratch) ? scratch : xmalloc(need * sizeof(*owner));
    next = owner + nkeys;
    head = next + nkeys;
    count = head + ns;

    for (uint32_t k = 0; k < nkeys; k++) {
        size_t len;
        const char *key = args_get(a, 1 + k * step, &len);
        if (route_reserved(key, len)) {
            client_reply_error(c, r, SHARDIS_RESERVED_ERR);
            req_done(r);
            first = -1;
            goto out;
        }
        if (!c->user->all && !acl_key_ok(c->user, key, len)) {
            client_reply_error(c, r, ACL_NOPERM_KEYS);
            route_refused(c, r);
            first = -1;
            goto out;
        }
        owner[k] = pool_owner(p, key, len);
        if (first < 0)
            first = (int)owner[k];
        else if (owner[k] != (uint32_t)first)
            split = true;
    }
    if (!split)
        goto out;

    for (uint32_t s = 0; s < ns; s++) {
        head[s] = NONE;
        count[s] = 0;
    }
    for (uint32_t k = nkeys; k-- > 0;) {
        uint32_t s = owner[k];
        next[k] = head[s];
        head[s] = k;
        nfrags += count[s]++ == 0;
    }
    struct frag *f = frag_build(c, r, a, (enum frag_merge)kind, step, nkeys, nfrags, head,
                                next, count);
    frag_send(c, f, a, cmd, step, head, next);
    first = -1;
out:
    if (owner != scratch)
        free(owner);
    return first;
}

void frag_broadcast(struct client *c, struct req *r, struct args *a, enum cmd_reply reply,
                    struct backend **via, bool blocking)
{
    struct pool *p = c->pool;
    uint32_t n = 0, i = 0;
    /* shardis's own keys are in redis_db: only there are they counted */
    bool own = reply == CMD_REPLY_DBSIZE && c->db == p->conf->redis_db;

    /* Every server that holds keys: in the ring, or still a source of
     * keys moving after a reload. */
    for (uint32_t s = 0; s < p->nservers; s++)
        n += p->servers[s].active;
    struct frag *f = frag_new(MERGE_BROADCAST, own ? 2 * n : n, 0);
    f->reply = reply;
    f->nown = own ? n : 0;
    r->frag = f;
    for (i = 0; i < f->nfrags; i++) {
        f->reqs[i] = req_get();
        f->reqs[i]->parent = r;
        f->reqs[i]->blocking = blocking;
        if (reply == CMD_REPLY_RANDOMKEY) {
            struct resp_w w = client_cmd_w(c, &f->reqs[i]->out);
            own_randomkey(&w);
        } else if (i < n) {
            args_request(a, &f->reqs[i]->out);
        }
    }
    i = 0;
    for (uint32_t s = 0; s < p->nservers; s++) {
        struct backend *b;
        if (!p->servers[s].active)
            continue;
        b = via != NULL ? via[s] : pool_backend(p, s, c);
        if (own) {                  /* right behind the DBSIZE, on its connection */
            struct resp_w w = client_cmd_w(c, &f->reqs[n + i]->out);
            own_exists(p, s, &w);
        }
        route_send(c, f->reqs[i], NULL, b);
        if (own)
            route_send(c, f->reqs[n + i], NULL, b);
        i++;
    }
}

/* ---- merging ---------------------------------------------------------------- */

/* Start reading the array reply g: its count (-1: nil), and where its
 * elements start. */
static int array_header(struct resp_rd *rd, const struct msg *g, long long *n, size_t *body)
{
    struct resp_val v;

    resp_rd_init(rd, g);
    if (resp_rd_next(rd, &v) < 0 || v.type != RESP_ARRAY)
        return -1;
    *n = v.n;
    *body = v.end;
    return 0;
}

/* The next n elements, as offsets: element e is [offs[e], offs[e + 1]). */
static int array_elements(struct resp_rd *rd, size_t *offs, uint32_t n)
{
    struct resp_val v;

    offs[0] = rd->pos;
    for (uint32_t e = 0; e < n; e++) {
        if (resp_rd_skip(rd, &v) < 0)
            return -1;
        offs[e + 1] = v.end;
    }
    return 0;
}

/* The integer reply ":<n>\r\n" g, or false. */
static bool integer_reply(const struct msg *g, long long *n)
{
    struct resp_rd rd;
    struct resp_val v;

    resp_rd_init(&rd, g);
    if (resp_rd_next(&rd, &v) < 0 || v.type != RESP_INTEGER)
        return false;
    *n = v.n;
    return true;
}

/* Whether the reply g is nil ("$-1", or RESP3's null). */
static bool nil_reply(const struct msg *g)
{
    struct resp_rd rd;
    struct resp_val v;

    resp_rd_init(&rd, g);
    return resp_rd_next(&rd, &v) == 0 && v.nil;
}

static void reply_malformed(struct client *c, struct req *r, const struct req *fr)
{
    client_reply_error(c, r, "ERR backend %s sent a reply shardis cannot merge",
                       c->pool->servers[fr->backend->server].label);
}

/* Element-wise over integer arrays of equal length: the AND of 0/1 ones
 * (SCRIPT EXISTS), or the least (WAITAOF's pair of counts). */
static void merge_each(struct client *c, struct req *r, struct frag *f)
{
    long long n = -1, len, *all = NULL;
    size_t body;
    struct resp_w w = client_w(c, &r->rsp);
    struct resp_rd rd;
    struct resp_val v;

    for (uint32_t i = 0; i < f->nfrags; i++) {
        const struct msg *g = &f->reqs[i]->rsp;
        if (array_header(&rd, g, &len, &body) < 0 || len < 0 || (n >= 0 && len != n))
            goto bad;
        if (n < 0) {
            n = len;
            all = xmalloc(((size_t)n + 1) * sizeof(*all));
        }
        for (long long e = 0; e < n; e++) {
            if (resp_rd_next(&rd, &v) < 0 || v.type != RESP_INTEGER)
                goto bad;
            if (f->reply == CMD_REPLY_AND)
                all[e] = (i == 0 || all[e]) && v.n != 0;
            else
                all[e] = i == 0 || v.n < all[e] ? v.n : all[e];
        }
        continue;
bad:
        reply_malformed(c, r, f->reqs[i]);
        goto out;
    }
    resp_w_array(&w, n);
    for (long long e = 0; e < n; e++)
        resp_w_int(&w, all[e]);
out:
    free(all);
}

/* One array of every fragment's elements (KEYS: without shardis's own,
 * drop_own); for replies that are not arrays (RANDOMKEY), one non-nil
 * reply picked at random. The elements go as slices of the replies: each
 * reply's body whole, or its runs between shardis's own keys. */
static void merge_concat(struct client *c, struct req *r, struct frag *f, bool drop_own)
{
    long long n, total = 0;
    size_t body;
    struct resp_w w = client_w(c, &r->rsp);
    uint32_t have = 0, pick;
    struct resp_rd rd;
    struct resp_val k;

    if (msg_first(&f->reqs[0]->rsp) != '*') {
        for (uint32_t i = 0; i < f->nfrags; i++)
            have += !nil_reply(&f->reqs[i]->rsp);
        pick = have > 0 ? (uint32_t)rand() % have : 0;
        for (uint32_t i = 0; i < f->nfrags; i++) {
            const struct msg *g = &f->reqs[i]->rsp;
            if (have == 0 || (!nil_reply(g) && pick-- == 0)) {
                msg_sub(g, 0, g->len, &r->rsp);
                return;
            }
        }
        return;
    }
    for (uint32_t i = 0; i < f->nfrags; i++) {
        if (array_header(&rd, &f->reqs[i]->rsp, &n, &body) < 0 || n < 0) {
            reply_malformed(c, r, f->reqs[i]);
            return;
        }
        total += n;
        for (long long e = 0; drop_own && e < n; e++) {
            if (resp_rd_skip(&rd, &k) < 0) {
                reply_malformed(c, r, f->reqs[i]);
                return;
            }
            total -= own_key(&rd, &k);
        }
    }
    resp_w_array(&w, total);
    for (uint32_t i = 0; i < f->nfrags; i++) {
        const struct msg *g = &f->reqs[i]->rsp;
        size_t run;
        CHECK(array_header(&rd, g, &n, &body) == 0);    /* it parsed above */
        run = body;
        for (long long e = 0; drop_own && e < n; e++) {
            size_t from = rd.pos;
            CHECK(resp_rd_skip(&rd, &k) == 0);
            if (!own_key(&rd, &k))
                continue;
            if (from > run)
                msg_sub(g, run, from - run, &r->rsp);
            run = k.end;
        }
        if (g->len > run)
            msg_sub(g, run, g->len - run, &r->rsp);
    }
}

/* DEBUG DIGEST: redis-server's digest of its keys is D0 XOR one hash per
 * key, where D0 = SHA1(SHA1(DB 0's number as 4 zero bytes)) (its zeroed
 * start, mixDigest'ed with the DB number), or all zeros without any key
 * (redis's debug.c, computeDatasetDigest). So the digest a single server holding every
 * server's keys would give is the XOR of the non-zero ones, with D0 once
 * more when their count is even. */
static void merge_digest(struct client *c, struct req *r, struct frag *f)
{
    static const unsigned char d0[20] = {
        0xaa, 0x30, 0x98, 0xf3, 0xaa, 0xe9, 0x4b, 0xaa, 0xc1, 0x4e,
        0x3b, 0x8b, 0x8d, 0xca, 0xe9, 0x89, 0xaf, 0x93, 0xf6, 0xa2,
    };
    unsigned char acc[20] = {0}, one[20];
    char hex[41];
    uint32_t nonzero = 0;
    struct resp_w w = client_w(c, &r->rsp);

    for (uint32_t i = 0; i < f->nfrags; i++) {
        struct resp_rd rd;
        struct resp_val v;
        char text[41];
        unsigned char any = 0;

        resp_rd_init(&rd, &f->reqs[i]->rsp);
        if (resp_rd_next(&rd, &v) < 0 || v.type != RESP_SIMPLE || v.len != 40) {
            reply_malformed(c, r, f->reqs[i]);
            return;
        }
        text[resp_rd_copy(&rd, &v, text, 40)] = '\0';
        for (int b = 0; b < 20; b++) {
            unsigned hi, lo;
            if (sscanf(text + 2 * b, "%1x%1x", &hi, &lo) != 2) {
                reply_malformed(c, r, f->reqs[i]);
                return;
            }
            one[b] = (unsigned char)(hi << 4 | lo);
            any |= one[b];
        }
        if (!any)
            continue;
        nonzero++;
        for (int b = 0; b < 20; b++)
            acc[b] ^= one[b];
    }
    for (int b = 0; b < 20; b++)
        snprintf(hex + 2 * b, 3, "%02x", acc[b] ^ (nonzero > 0 && nonzero % 2 == 0 ? d0[b] : 0));
    resp_w_simple(&w, hex);
}

/* ---- PUBSUB introspection over the servers ---- */

struct name {
    char  *s;
    size_t len;
};

static int name_cmp(const void *a, const void *b)
{
    const struct name *x = a, *y = b;
    int d = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);

    return d != 0 ? d : (x->len > y->len) - (x->len < y->len);
}

/* PUBSUB CHANNELS / SHARDCHANNELS: every server's names, each once (a
 * subscriber of shardis is subscribed on every server), in order, and
 * never shardis's own (pubsub.c hides them). */
static void merge_names(struct client *c, struct req *r, struct frag *f)
{
    struct name *all = NULL;
    size_t n = 0, cap = 0, out = 0;
    struct resp_w w = client_w(c, &r->rsp);

    for (uint32_t i = 0; i < f->nfrags; i++) {
        struct resp_rd rd;
        struct resp_val v;
        long long count;
        size_t body;
        if (array_header(&rd, &f->reqs[i]->rsp, &count, &body) < 0 || count < 0)
            goto malformed;
        for (long long e = 0; e < count; e++) {
            if (resp_rd_next(&rd, &v) < 0 || v.type != RESP_BULK || v.nil)
                goto malformed;
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                all = xrealloc(all, cap * sizeof(*all));
            }
            all[n].s = xmalloc(v.len + 1);
            all[n].len = resp_rd_copy(&rd, &v, all[n].s, v.len);
            n++;
        }
    }
    if (n > 0)
        qsort(all, n, sizeof(*all), name_cmp);
#define KEPT(e) (((e) == 0 || name_cmp(&all[(e) - 1], &all[e]) != 0) && \
                 !route_internal(all[e].s, all[e].len))
    for (size_t e = 0; e < n; e++)
        out += KEPT(e);
    resp_w_array(&w, (long long)out);
    for (size_t e = 0; e < n; e++)
        if (KEPT(e))
            resp_w_bulk(&w, all[e].s, all[e].len);
#undef KEPT
    goto done;
malformed:
    reply_malformed(c, r, f->reqs[0]);
done:
    for (size_t e = 0; e < n; e++)
        free(all[e].s);
    free(all);
}

/* PUBSUB NUMSUB / SHARDNUMSUB name ...: name, count pairs in the order
 * asked, each count the largest a server gave (a subscriber of shardis is
 * on every server; a shard channel's only on its owner), 0 for shardis's
 * own channels. */
static void merge_numsub(struct client *c, struct req *r, struct frag *f)
{
    struct resp_rd rd[FRAG_INLINE], *rds = f->nfrags <= FRAG_INLINE ? rd :
                                          xcalloc(f->nfrags, sizeof(*rds));
    struct resp_w w = client_w(c, &r->rsp);
    long long n = -1, count;
    size_t body;

    for (uint32_t i = 0; i < f->nfrags; i++) {
        if (array_header(&rds[i], &f->reqs[i]->rsp, &count, &body) < 0 || count < 0 ||
            count % 2 != 0 || (i > 0 && count != n)) {
            reply_malformed(c, r, f->reqs[i]);
            goto out;
        }
        n = count;
    }
    resp_w_array(&w, n);
    for (long long e = 0; e < n / 2; e++) {
        struct resp_val name, v;
        long long most = 0;
        char buf[FRAG_COPY_MAX];
        const char *s = NULL;
        for (uint32_t i = 0; i < f->nfrags; i++) {
            struct resp_val nm;
            if (resp_rd_next(&rds[i], &nm) < 0 || nm.type != RESP_BULK || nm.nil ||
                resp_rd_next(&rds[i], &v) < 0 || v.type != RESP_INTEGER) {
                msg_release(&r->rsp);   /* what was written of the array */
                reply_malformed(c, r, f->reqs[i]);
                goto out;
            }
            if (i == 0) {
                name = nm;
                s = resp_rd_str(&rds[0], &name, buf, sizeof(buf));
            }
            most = v.n > most ? v.n : most;
        }
        if (s != NULL) {
            resp_w_bulk(&w, s, name.len);
            most = route_internal(s, name.len) ? 0 : most;
        } else {                        /* longer than buf: no channel of shardis's */
            char *copy = xmalloc(name.len);
            resp_w_bulk(&w, copy, resp_rd_copy(&rds[0], &name, copy, name.len));
            free(copy);
        }
        resp_w_int(&w, most);
    }
out:
    if (rds != rd)
        free(rds);
}

static void merge_broadcast(struct client *c, struct req *r, struct frag *f)
{
    struct req *err = NULL, *ok = NULL;
    long long acc = 0, v;
    struct resp_w w = client_w(c, &r->rsp);

    for (uint32_t i = 0; i < f->nfrags; i++) {
        if (msg_first(&f->reqs[i]->rsp) == '-')
            err = err != NULL ? err : f->reqs[i];
        else
            ok = ok != NULL ? ok : f->reqs[i];
    }
    if (f->reply == CMD_REPLY_ONE_OK && ok == NULL) {
        /* No server succeeded: say why, rather than that one had nothing
         * to do (a failed server's error over another's -NOTBUSY). */
        for (uint32_t i = 0; i < f->nfrags; i++) {
            if (!resp_rd_error_is(&f->reqs[i]->rsp, "NOTBUSY")) {
                err = f->reqs[i];
                break;
            }
        }
    }
    if (f->reply == CMD_REPLY_ONE_OK || err != NULL) {
        const struct msg *g = f->reply == CMD_REPLY_ONE_OK && ok != NULL ? &ok->rsp : &err->rsp;
        msg_sub(g, 0, g->len, &r->rsp);
        return;
    }
    switch (f->reply) {
    case CMD_REPLY_MIN:
        if (msg_first(&f->reqs[0]->rsp) == '*') {
            merge_each(c, r, f);        /* WAITAOF's pair */
            return;
        }
        /* fall through */
    case CMD_REPLY_SUM:
    case CMD_REPLY_DBSIZE:
    case CMD_REPLY_MAX:
        for (uint32_t i = 0; i < f->nfrags; i++) {
            if (!integer_reply(&f->reqs[i]->rsp, &v)) {
                reply_malformed(c, r, f->reqs[i]);
                return;
            }
            if (i >= f->nfrags - f->nown)
                v = -v;                 /* a server's own keys */
            acc = f->reply == CMD_REPLY_SUM || f->reply == CMD_REPLY_DBSIZE ? acc + v
                : f->reply == CMD_REPLY_MIN ? (i == 0 || v < acc ? v : acc)
                : (i == 0 || v > acc ? v : acc);
        }
        resp_w_int(&w, acc > 0 || f->reply != CMD_REPLY_DBSIZE ? acc : 0);
        return;
    case CMD_REPLY_KEYS:
        merge_concat(c, r, f, true);
        return;
    case CMD_REPLY_NAMES:
        merge_names(c, r, f);
        return;
    case CMD_REPLY_NUMSUB:
        merge_numsub(c, r, f);
        return;
    case CMD_REPLY_AND:
        merge_each(c, r, f);
        return;
    case CMD_REPLY_DIGEST:
        merge_digest(c, r, f);
        return;
    case CMD_REPLY_DEFAULT:
    case CMD_REPLY_RANDOMKEY:
        merge_concat(c, r, f, false);
        return;
    default:                    /* every server succeeded: the first's reply */
        msg_sub(&f->reqs[0]->rsp, 0, f->reqs[0]->rsp.len, &r->rsp);
        return;
    }
}

static void merge(struct req *r, struct client *c)
{
    struct frag *f = r->frag;
    struct resp_w w = client_w(c, &r->rsp);
    long long sum = 0, v;

    if (f->merge == MERGE_BROADCAST) {
        merge_broadcast(c, r, f);
        return;
    }
    /* The first fragment that did not answer as expected is the answer. */
    for (uint32_t i = 0; i < f->nfrags; i++) {
        struct req *fr = f->reqs[i];
        char want = f->merge == MERGE_VALUES ? '*' : f->merge == MERGE_OK ? '+' : ':';
        if (msg_first(&fr->rsp) != want) {
            msg_sub(&fr->rsp, 0, fr->rsp.len, &r->rsp);
            return;
        }
    }
    switch (f->merge) {
    case MERGE_OK:
        resp_w_simple(&w, "OK");
        return;
    case MERGE_SUM:
        for (uint32_t i = 0; i < f->nfrags; i++) {
            if (!integer_reply(&f->reqs[i]->rsp, &v)) {
                reply_malformed(c, r, f->reqs[i]);
                return;
            }
            sum += v;
        }
        resp_w_int(&w, sum);
        return;
    default:                    /* MERGE_VALUES */
        break;
    }

    /* The element offsets of every fragment's reply, one run after the
     * other (n elements: n + 1 offsets); fragment i's run starts at at[i]. */
    size_t inl[FRAG_INLINE + 1], *offs = inl, used = 0, cap = ARRAY_SIZE(inl);
    struct resp_rd rd;
    size_t at_inl[FRAG_INLINE], *at = at_inl;
    if (f->nfrags > FRAG_INLINE)
        at = xmalloc(f->nfrags * sizeof(*at));
    for (uint32_t i = 0; i < f->nfrags; i++) {
        struct req *fr = f->reqs[i];
        long long n;
        size_t body;
        if (array_header(&rd, &fr->rsp, &n, &body) < 0 || n < 0 || n > (long long)f->nkeys) {
            reply_malformed(c, r, fr);
            goto out;
        }
        if (used + (size_t)n + 1 > cap) {
            cap = (used + (size_t)n + 1) * 2;
            offs = offs == inl ? memcpy(xmalloc(cap * sizeof(*offs)), inl, used * sizeof(*offs))
                               : xrealloc(offs, cap * sizeof(*offs));
        }
        at[i] = used;
        if (array_elements(&rd, offs + used, (uint32_t)n) < 0) {
            reply_malformed(c, r, fr);
            goto out;
        }
        used += (size_t)n + 1;
    }
    for (uint32_t k = 0; k < f->nkeys; k++) {
        const struct frag_key *fk = &f->keys[k];
        size_t end = fk->frag + 1 < f->nfrags ? at[fk->frag + 1] : used;
        if (at[fk->frag] + fk->elem + 1 >= end) {       /* fewer elements than keys */
            reply_malformed(c, r, f->reqs[fk->frag]);
            goto out;
        }
    }
    resp_w_array(&w, f->nkeys);
    /* Short values are copied next to each other: one iovec for the whole
     * reply rather than one per value. */
    for (uint32_t k = 0; k < f->nkeys; k++) {
        const struct frag_key *fk = &f->keys[k];
        const struct msg *g = &f->reqs[fk->frag]->rsp;
        size_t *o = offs + at[fk->frag] + fk->elem, len = o[1] - o[0];
        if (len <= FRAG_COPY_MAX)
            msg_copy(g, o[0], len, msg_reserve(&r->rsp, &c->lbuf, len));
        else
            msg_sub(g, o[0], len, &r->rsp);
    }
out:
    if (offs != inl)
        free(offs);
    if (at != at_inl)
        free(at);
}

void frag_free(struct req *r)
{
    struct frag *f = r->frag;

    for (uint32_t i = 0; i < f->nfrags; i++) {
        f->reqs[i]->parent = NULL;
        req_maybe_free(f->reqs[i]);
    }
    free(f);
    r->frag = NULL;
}

void frag_done(struct req *fr)
{
    struct req *r = fr->parent;
    struct frag *f = r->frag;

    if (--f->left > 0)
        return;
    if (r->client != NULL && !r->client->closing) {
        merge(r, r->client);
        frag_free(r);
        req_done(r);
    } else {
        frag_free(r);
        req_maybe_free(r);
    }
}

/* ---- the module ---------------------------------------------------------------------- */

const struct module frag_module = {
    .name = "frag",
    .roles = &(const struct module_roles){
        .splits = frag_splits,
        .split = frag_route,
        .broadcast = frag_broadcast,
    },
};

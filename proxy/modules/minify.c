/* minify.c -- idgen.minify: short hash field names on the servers, long
 * ones for the application (shardjs's minify and maxify, done by the proxy
 * for every client).
 *
 * Owns the dictionary's index (struct minify, one per pool), the choice of
 * which requests are mapped, the mapped request's bytes, and the mapping
 * of their replies back. Where it applies:
 *
 *   keys      generated and fixed keys (idgen.h's SHARDIS and FIXED
 *             layouts) whose type is in idgen.minify. Nothing else: a key
 *             shardis did not mint, or of another type, takes the plain
 *             path, its bytes forwarded untouched. shardjs's older layout
 *             is not mapped: it cannot be told from an ordinary name.
 *   commands  the hash commands that name fields (table below) on the way
 *             in; HGETALL, HKEYS, HRANDFIELD and HSCAN on the way out (a
 *             hook on the request, or on its EXEC in a transaction).
 *   fields    a long name is stored as its short one and read back long;
 *             a name the dictionary does not have passes both ways as it
 *             is. A short name sent as a field is refused: it is where a
 *             long one is stored, and writing it would alias that field.
 *
 * HSCAN's MATCH is applied here, to the long names, after the server's
 * page (as Redis applies it after its own), so any pattern matches
 * exactly; the server gets the request without it. What cannot be mapped
 * (scripts, SORT ... GET key->field, DUMP/RESTORE, RENAME to a key of
 * another type) sees the short names: doc/generated-keys.md lists it.
 *
 * A request is re-encoded, and its reply rebuilt from slices of the
 * server's bytes with only the field names written anew: replies are not
 * copied. The dictionary is read within one call and never kept, so a
 * reload (which may only add names, reload.c) can swap it at any time. */
#include <string.h>

#include "conf/conf.h"
#include "idgen/idgen.h"
#include "proxy/core/acl.h"
#include "proxy/base/text.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/modules/minify.h"
#include "proxy/core/pool.h"
#include "proxy/base/resp.h"
#include "proxy/core/route.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

/* ---- the dictionary ---------------------------------------------------------- */

struct minify_name {
    char       *s;              /* owned: a pool's conf may be swapped and freed
                                   without a call here (the dictionary is the same) */
    uint32_t    len;
};

struct minify {
    struct minify_name *lng, *shrt;  /* [n]: entry i of the dictionary, both ways */
    uint32_t *by_long, *by_short;    /* open addressing: 1 + entry, 0 empty */
    uint32_t  n, mask;
    uint32_t  max_short;             /* the longest short name */
    uint32_t  ntypes;                /* types minified */
    uint8_t   types[(IDGEN_TYPES + 7) / 8];
    int64_t   epoch_ms;
};

static uint32_t name_hash(const char *s, size_t len)
{
    uint32_t h = 2166136261u;   /* FNV-1a */

    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static void index_add(uint32_t *table, uint32_t mask, const struct minify_name *nm, uint32_t i)
{
    uint32_t h = name_hash(nm->s, nm->len) & mask;

    while (table[h] != 0)
        h = (h + 1) & mask;
    table[h] = i + 1;
}

/* The dictionary of pc, or NULL if it has no subkeys. */
static struct minify *minify_new(const struct conf_pool *pc)
{
    const struct conf_idgen *ig = &pc->idgen;
    struct minify *m;
    uint32_t size = 4;

    if (ig->nsubkeys == 0)
        return NULL;
    while (size < 2 * ig->nsubkeys)
        size *= 2;
    m = xcalloc(1, sizeof(*m));
    m->n = (uint32_t)ig->nsubkeys;
    m->mask = size - 1;
    m->lng = xmalloc(m->n * sizeof(*m->lng));
    m->shrt = xmalloc(m->n * sizeof(*m->shrt));
    m->by_long = xcalloc(size, sizeof(*m->by_long));
    m->by_short = xcalloc(size, sizeof(*m->by_short));
    for (uint32_t i = 0; i < m->n; i++) {
        m->lng[i] = (struct minify_name){xstrdup(ig->subkeys[i].name),
                                         (uint32_t)strlen(ig->subkeys[i].name)};
        m->shrt[i] = (struct minify_name){xstrdup(ig->subkeys[i].abbr),
                                          (uint32_t)strlen(ig->subkeys[i].abbr)};
        if (m->shrt[i].len > m->max_short)
            m->max_short = m->shrt[i].len;
        index_add(m->by_long, m->mask, &m->lng[i], i);
        index_add(m->by_short, m->mask, &m->shrt[i], i);
    }
    for (size_t i = 0; i < ig->nminify; i++) {
        uint32_t t = ig->minify_types[i];
        m->types[t / 8] |= (uint8_t)(1u << (t % 8));
    }
    m->ntypes = (uint32_t)ig->nminify;
    m->epoch_ms = ig->epoch_ms;
    return m;
}

static void minify_free(struct minify *m)
{
    if (m == NULL)
        return;
    for (uint32_t i = 0; i < m->n; i++) {
        free(m->lng[i].s);
        free(m->shrt[i].s);
    }
    free(m->lng);
    free(m->shrt);
    free(m->by_long);
    free(m->by_short);
    free(m);
}

const char *minify_name(const struct minify *m, const char *s, size_t len, bool maxify,
                        size_t *outlen)
{
    const uint32_t *table;
    const struct minify_name *from, *to;
    uint32_t h, e;

    if (m == NULL || (maxify && len > m->max_short))
        return NULL;
    table = maxify ? m->by_short : m->by_long;
    from = maxify ? m->shrt : m->lng;
    to = maxify ? m->lng : m->shrt;
    for (h = name_hash(s, len) & m->mask; (e = table[h]) != 0; h = (h + 1) & m->mask) {
        if (from[e - 1].len == len && memcmp(from[e - 1].s, s, len) == 0) {
            *outlen = to[e - 1].len;
            return to[e - 1].s;
        }
    }
    return NULL;
}

/* Whether key is one whose hash fields m maps: generated or fixed, of a
 * minified type. */
static bool key_minified(const struct minify *m, const char *key, size_t len)
{
    struct idgen_info info;
    enum idgen_format f;

    /* Both layouts have their hash tag at bytes 7..10: a byte or two
     * rules out almost every other key. */
    if (len < IDGEN_KEY_LEN || key[7] != '{' || key[10] != '}')
        return false;
    f = idgen_decode(key, len, m->epoch_ms, 0, &info);
    return (f == IDGEN_FORMAT_SHARDIS || f == IDGEN_FORMAT_FIXED) &&
           (m->types[info.type / 8] & (1u << (info.type % 8)));
}

static int minify_reply(struct req *r);

/* ---- requests ------------------------------------------------------------------ */

/* Which arguments are field names. */
enum minify_args {
    ARGS_NONE = 1,      /* HGETALL, HKEYS, HRANDFIELD: only the reply maps */
    ARGS_ONE,           /* argument 2 (HGET key field ...) */
    ARGS_ALL,           /* 2 .. (HMGET, HDEL) */
    ARGS_PAIRS,         /* 2, 4 ... (HSET key field value ...) */
    ARGS_SCAN,          /* HSCAN: MATCH is taken out and applied here */
};

struct spec {
    const char *name;
    uint8_t     args;   /* enum minify_args */
    uint8_t     reply;  /* enum minify_reply, 0: none; HRANDFIELD's by its arguments */
};

static const struct spec specs[] = {
    {"hdel", ARGS_ALL, 0},
    {"hexists", ARGS_ONE, 0},
    {"hget", ARGS_ONE, 0},
    {"hgetall", ARGS_NONE, MINIFY_REPLY_PAIRS},
    {"hincrby", ARGS_ONE, 0},
    {"hincrbyfloat", ARGS_ONE, 0},
    {"hkeys", ARGS_NONE, MINIFY_REPLY_FIELDS},
    {"hmget", ARGS_ALL, 0},
    {"hmset", ARGS_PAIRS, 0},
    {"hrandfield", ARGS_NONE, MINIFY_REPLY_FIELD},
    {"hscan", ARGS_SCAN, MINIFY_REPLY_SCAN},
    {"hset", ARGS_PAIRS, 0},
    {"hsetnx", ARGS_ONE, 0},
    {"hstrlen", ARGS_ONE, 0},
};

static const struct spec *spec_of(const struct cmd *cmd)
{
    /* Every one is an h-command; the others are ruled out by a byte. */
    if (cmd->name[0] != 'h')
        return NULL;
    for (size_t i = 0; i < ARRAY_SIZE(specs); i++)
        if (strcmp(specs[i].name, cmd->name) == 0)
            return &specs[i];
    return NULL;
}

static bool is_field(enum minify_args k, uint32_t i)
{
    switch (k) {
    case ARGS_ONE:   return i == 2;
    case ARGS_ALL:   return i >= 2;
    case ARGS_PAIRS: return i >= 2 && i % 2 == 0;
    default:         return false;
    }
}

/* HSCAN key cursor [MATCH p] [COUNT n] [NOVALUES], read as redis-server
 * does (a later MATCH wins): *match the last pattern's position (0: none),
 * *nmatch how many MATCH options. False if the server will refuse the
 * options: then it gets them as they are, to say so. */
static bool scan_options(struct args *a, uint32_t *match, uint32_t *nmatch, bool *novalues)
{
    *match = *nmatch = 0;
    *novalues = false;
    for (uint32_t i = 3; i < a->argc;) {
        if (args_is(a, i, "count") && i + 1 < a->argc) {
            i += 2;
        } else if (args_is(a, i, "match") && i + 1 < a->argc) {
            *match = i + 1;
            (*nmatch)++;
            i += 2;
        } else if (args_is(a, i, "novalues")) {
            *novalues = true;
            i++;
        } else {
            return false;
        }
    }
    return true;
}

bool minify_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    const struct minify *m = c->pool->minify;
    const struct spec *sp;
    struct minify_map map = {0};
    const char *key;
    size_t len;

    if (m->ntypes == 0 || a->argc < 2)
        return true;
    /* A hash command this table does not map that names more than its key
     * (Redis 7.4's HEXPIRE, HGETDEL, HSETEX ...: fields after FIELDS n)
     * would see the short names stored: refused on these keys rather
     * than acting on no field. */
    if ((sp = spec_of(cmd)) == NULL && (!(cmd->acl & CMD_CAT_HASH) || a->argc < 3))
        return true;
    key = args_get(a, 1, &len);
    if (!key_minified(m, key, len))
        return true;
    if (sp == NULL) {
        client_reply_error(c, r, "ERR command '%s' is not mapped by idgen.minify: on this key "
                           "it would not see the stored field names", cmd->name);
        route_refused(c, r);
        return false;
    }
    for (uint32_t i = 2; i < a->argc; i++) {
        size_t flen, n;
        const char *f, *lng;
        if (!is_field(sp->args, i))
            continue;
        f = args_get(a, i, &flen);
        if ((lng = minify_name(m, f, flen, true, &n)) != NULL) {
            client_reply_error(c, r, "ERR field '%.*s' is a short name of idgen.subkeys: "
                               "on this key it stores field '%.*s'", (int)flen, f, (int)n, lng);
            route_refused(c, r);
            return false;
        }
    }
    a->minify = sp->args;
    map.kind = sp->reply;
    if (map.kind == MINIFY_REPLY_FIELD && a->argc >= 3)     /* HRANDFIELD key count ... */
        map.kind = a->argc >= 4 && args_is(a, 3, "withvalues") ? MINIFY_REPLY_PAIRS
                                                               : MINIFY_REPLY_FIELDS;
    if (map.kind == MINIFY_REPLY_SCAN) {
        uint32_t at, nmatch;
        const char *p;
        /* ("*" is no pattern to Redis's SCAN: every field.) */
        if (scan_options(a, &at, &nmatch, &map.novalues) && at != 0 &&
            ((p = args_get(a, at, &len)), !(len == 1 && p[0] == '*'))) {
            map.match = xmalloc(len + 1);
            memcpy(map.match, p, len);
            map.match[len] = '\0';
            map.matchlen = (uint32_t)len;
        }
    }
    if (map.kind != 0) {
        r->u.minify = map;
        r->minified = 1;
        r->hook = minify_reply;
    }
    return true;
}

void minify_request(struct args *a, struct msg *g)
{
    struct client *c = a->c;
    const struct minify *m = c->pool->minify;
    struct resp_w w = client_cmd_w(c, g);
    uint32_t match = 0, nmatch = 0;
    bool novalues;

    if (a->minify == ARGS_SCAN) {
        /* Without its MATCH options (an option the server refuses goes as
         * it is, MATCH too, for the server's error). */
        if (!scan_options(a, &match, &nmatch, &novalues))
            nmatch = 0;
        resp_w_array(&w, a->argc - 2 * nmatch);
        for (uint32_t i = 0; i < a->argc; i++) {
            size_t len;
            const char *p = args_get(a, i, &len);
            if (nmatch > 0 && i >= 3 && args_is(a, i, "count")) {
                resp_w_bulk(&w, p, len);
                p = args_get(a, ++i, &len);     /* (a count named "match") */
            } else if (nmatch > 0 && i >= 3 && args_is(a, i, "match")) {
                i++;
                continue;
            }
            resp_w_bulk(&w, p, len);
        }
        return;
    }
    resp_w_array(&w, a->argc);
    for (uint32_t i = 0; i < a->argc; i++) {
        size_t len, n;
        const char *p = args_get(a, i, &len), *to;
        if (i == 0 && a->name != NULL)
            resp_w_bulk_str(&w, a->name);
        else if (is_field(a->minify, i) && (to = minify_name(m, p, len, false, &n)) != NULL)
            resp_w_bulk(&w, to, n);
        else
            resp_w_bulk(&w, p, len);
    }
}

/* ---- replies ---------------------------------------------------------------------
 *
 * The client's reply is the server's, as slices of its bytes, with each
 * short field name written long in its place: `copied` is how far the
 * server's bytes are in the new reply, emit() brings them up to a point,
 * and skip() passes over bytes that are replaced (or, HSCAN's MATCH, left
 * out). Values are never copied. */

struct mapper {
    const struct minify *m;
    struct resp_rd  rd;
    const struct msg *in;       /* the server's reply */
    struct resp_w   w;          /* the client's */
    size_t          copied;
    const struct minify_map *map;
};

static void emit(struct mapper *mp, size_t to)
{
    if (to > mp->copied)
        msg_sub(mp->in, mp->copied, to - mp->copied, mp->w.g);
    mp->copied = to;
}

static void skip(struct mapper *mp, size_t to)
{
    mp->copied = to;
}

static bool is_aggregate(char t)
{
    return t == RESP_ARRAY || t == RESP_MAP || t == RESP_SET || t == RESP_PUSH;
}

/* The field name v (read), long: its long name if it is a short one, else
 * itself, in *len; buf holds a copy where it is not in one piece (or
 * NULL if it does not fit: then it is not a short name either, and only a
 * MATCH needs it, see match_field). */
static const char *field_long(struct mapper *mp, const struct resp_val *v, char *buf,
                              size_t buflen, size_t *len, bool *mapped)
{
    const char *s = resp_rd_str(&mp->rd, v, buf, buflen), *to;

    *mapped = false;
    *len = v->len;
    if (s != NULL && (to = minify_name(mp->m, s, v->len, true, len)) != NULL) {
        *mapped = true;
        return to;
    }
    return s;
}

/* Whether the field v (read) passes the request's MATCH. */
static bool match_field(struct mapper *mp, const struct resp_val *v)
{
    char buf[256];
    size_t len;
    bool mapped, ok;
    const char *s = field_long(mp, v, buf, sizeof(buf), &len, &mapped);

    if (mp->map->match == NULL)
        return true;
    if (s != NULL)
        return text_glob(mp->map->match, mp->map->matchlen, s, len);
    char *copy = xmalloc(v->len);           /* a long field over several chunks */
    msg_copy(mp->in, v->off, v->len, copy);
    ok = text_glob(mp->map->match, mp->map->matchlen, copy, v->len);
    free(copy);
    return ok;
}

/* The next value, a field name: written long if it is a short one. */
static int map_field(struct mapper *mp)
{
    struct resp_val v;
    char buf[256];
    size_t len;
    bool mapped;
    const char *s;

    if (resp_rd_peek(&mp->rd) != RESP_BULK)
        return resp_rd_skip(&mp->rd, &v);
    if (resp_rd_next(&mp->rd, &v) < 0)
        return -1;
    s = field_long(mp, &v, buf, sizeof(buf), &len, &mapped);
    if (mapped) {
        emit(mp, v.start);
        resp_w_bulk(&mp->w, s, len);
        skip(mp, v.end);
    }
    return 0;
}

/* The next value, an aggregate of field names (fields) or of field, value
 * pairs: flat, a map, or [field, value] arrays (HRANDFIELD WITHVALUES in
 * RESP3). Anything else (nil, an error) passes as it is. */
static int map_list(struct mapper *mp, bool pairs)
{
    struct resp_val v, e;

    if (!is_aggregate(resp_rd_peek(&mp->rd)))
        return resp_rd_skip(&mp->rd, &v);
    if (resp_rd_next(&mp->rd, &v) < 0)
        return -1;
    for (size_t i = 0; i < v.elems; i++) {
        if (pairs && resp_rd_peek(&mp->rd) == RESP_ARRAY) {
            if (resp_rd_next(&mp->rd, &e) < 0 || (e.elems > 0 && map_field(mp) < 0))
                return -1;
            for (size_t j = 1; j < e.elems; j++)
                if (resp_rd_skip(&mp->rd, &e) < 0)
                    return -1;
        } else if (!pairs || i % 2 == 0) {
            if (map_field(mp) < 0)
                return -1;
        } else if (resp_rd_skip(&mp->rd, &e) < 0) {
            return -1;
        }
    }
    return 0;
}

/* HSCAN's [cursor, [field, value ...]], its MATCH applied. */
static int map_scan(struct mapper *mp)
{
    struct resp_val top, v, f, val;
    size_t per = mp->map->novalues ? 1 : 2, kept = 0;

    if (resp_rd_peek(&mp->rd) != RESP_ARRAY)
        return resp_rd_skip(&mp->rd, &top);
    if (resp_rd_next(&mp->rd, &top) < 0)
        return -1;
    if (top.elems != 2 || resp_rd_skip(&mp->rd, &v) < 0)
        goto rest;                          /* (no HSCAN reply: as it is) */
    if (resp_rd_peek(&mp->rd) != RESP_ARRAY || mp->map->match == NULL) {
        if (map_list(mp, per == 2) < 0)
            return -1;
        return 0;
    }
    if (resp_rd_next(&mp->rd, &v) < 0 || v.elems % per != 0)
        return -1;
    /* First what MATCH keeps, for the array's new length (each field
     * matched once: a pattern can cost the loop dearly). */
    struct resp_rd saved = mp->rd;
    bool keeps[64], *keep = v.elems / per <= 64 ? keeps : xmalloc(v.elems / per);
    for (size_t i = 0; i < v.elems; i += per) {
        if (resp_rd_next(&mp->rd, &f) < 0 || (per == 2 && resp_rd_skip(&mp->rd, &val) < 0)) {
            if (keep != keeps)
                free(keep);
            return -1;
        }
        keep[i / per] = f.type == RESP_BULK && match_field(mp, &f);
        kept += keep[i / per];
    }
    mp->rd = saved;
    emit(mp, v.start);
    resp_w_array(&mp->w, (long long)(kept * per));
    skip(mp, v.end);
    for (size_t i = 0; i < v.elems; i += per) {
        struct resp_rd at = mp->rd;
        if (!keep[i / per]) {
            if (resp_rd_next(&mp->rd, &f) < 0 || (per == 2 && resp_rd_skip(&mp->rd, &val) < 0))
                break;
            emit(mp, f.start);
            skip(mp, per == 2 ? val.end : f.end);
            continue;
        }
        mp->rd = at;
        if (map_field(mp) < 0 || (per == 2 && resp_rd_skip(&mp->rd, &val) < 0))
            break;
    }
    if (keep != keeps)
        free(keep);
    return mp->rd.err == NULL ? 0 : -1;
rest:
    for (size_t i = 1; i < top.elems; i++)
        if (resp_rd_skip(&mp->rd, &v) < 0)
            return -1;
    return 0;
}

/* The next value, as map says. */
static int map_value(struct mapper *mp, const struct minify_map *map)
{
    mp->map = map;
    switch ((enum minify_reply)map->kind) {
    case MINIFY_REPLY_FIELD:  return map_field(mp);
    case MINIFY_REPLY_FIELDS: return map_list(mp, false);
    case MINIFY_REPLY_PAIRS:  return map_list(mp, true);
    case MINIFY_REPLY_SCAN:   return map_scan(mp);
    }
    return -1;
}

/* EXEC's array: each mapped command's element as its map says. */
static int map_exec(struct mapper *mp, const struct minify_tx *tx)
{
    struct resp_val top, v;
    uint32_t next = 0;

    if (resp_rd_peek(&mp->rd) != RESP_ARRAY)
        return resp_rd_skip(&mp->rd, &top);     /* nil (WATCH), -EXECABORT */
    if (resp_rd_next(&mp->rd, &top) < 0)
        return -1;
    for (size_t i = 0; i < top.elems; i++) {
        if (next < tx->n && tx->at[next].index == i) {
            if (map_value(mp, &tx->at[next++].map) < 0)
                return -1;
        } else if (resp_rd_skip(&mp->rd, &v) < 0) {
            return -1;
        }
    }
    return 0;
}

/* The hook of a mapped request (and of its transaction's EXEC). */
static int minify_reply(struct req *r)
{
    struct client *c = r->client;
    struct mapper mp = {.m = c->pool->minify, .in = NULL};
    struct msg in = r->rsp;
    char t = msg_first(&in);
    int rc;

    if (mp.m == NULL || t == RESP_ERROR || t == RESP_BLOBERR || in.len == 0)
        return 0;
    memset(&r->rsp, 0, sizeof(r->rsp));
    mp.in = &in;
    mp.w = client_w(c, &r->rsp);
    resp_rd_init(&mp.rd, &in);
    rc = r->is_exec ? map_exec(&mp, r->u.minify_tx) : map_value(&mp, &r->u.minify);
    if (rc < 0 || !resp_rd_end(&mp.rd)) {
        /* Not the reply the command has (no server sends one): as it came. */
        msg_release(&r->rsp);
        r->rsp = in;
        return 0;
    }
    emit(&mp, in.len);
    msg_release(&in);
    return 0;
}

/* ---- transactions ------------------------------------------------------------ */

void minify_tx_queued(struct minify_tx **tx, struct req *r, uint32_t index)
{
    struct minify_tx *t = *tx;

    if (t == NULL)
        t = *tx = xcalloc(1, sizeof(*t));
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 4;
        t->at = xrealloc(t->at, t->cap * sizeof(*t->at));
    }
    t->at[t->n].index = index;
    t->at[t->n++].map = r->u.minify;        /* (its MATCH goes with it) */
    memset(&r->u.minify, 0, sizeof(r->u.minify));
    r->minified = 0;
    r->hook = NULL;                         /* its reply is +QUEUED */
}

void minify_tx_exec(struct minify_tx **tx, struct req *r)
{
    if (*tx == NULL || (*tx)->n == 0)
        return;
    r->u.minify_tx = *tx;
    *tx = NULL;
    r->minified = 1;
    r->hook = minify_reply;
}

void minify_tx_free(struct minify_tx *tx)
{
    if (tx == NULL)
        return;
    for (uint32_t i = 0; i < tx->n; i++)
        free(tx->at[i].map.match);
    free(tx->at);
    free(tx);
}

void minify_req_free(struct req *r)
{
    if (!r->minified)
        return;
    if (r->is_exec)
        minify_tx_free(r->u.minify_tx);
    else
        free(r->u.minify.match);
    r->minified = 0;
}

/* ---- the module ---------------------------------------------------------------------- */

static void minify_pool_free(struct pool *p)
{
    minify_free(p->minify);
    p->minify = NULL;
}

/* (a reload may only add names: reload.c) */
static void minify_conf_set(struct pool *p)
{
    minify_free(p->minify);
    p->minify = minify_new(p->conf);
}

const struct module minify_module = {
    .name = "minify",
    .pool_free = minify_pool_free,
    .conf_set = minify_conf_set,
    .roles = &(const struct module_roles){
        .map_fields = minify_route,
        .map_request = minify_request,
    },
};

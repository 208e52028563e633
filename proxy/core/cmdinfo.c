/* cmdinfo.c -- the command table as the servers describe it (cmd.h).
 *
 * Every server's INFO comes every second (info.c's poll). When one shows
 * a run_id its COMMAND has not been read under -- at start, after the
 * server restarted, was upgraded, or Sentinel put another in its place --
 * it is asked COMMAND on shardis's own connection (pool_own). The answer,
 * every command with its subcommands, becomes rows (struct cmd: arity,
 * flags, first/last/step, ACL categories, tips, key specs) that cmd_merge
 * takes into the table as of the server's kind, "<name> <version>" as
 * its INFO says them ("redis 8.0.2", "valkey 8.0.1"). The server
 * remembers its kind (pool_server.kind): route_owner sends a command
 * only to a server whose kind has it, once any kind has said it does
 * (servers of a pool in the middle of an upgrade).
 *
 * Each kind is read once: a second server of the same kind adds nothing
 * new, so its COMMAND is not asked (only its kind noted). A new kind's
 * rows may add commands or change ones known (ZRANK's arity in Redis
 * 7.2); users are then built again from their rules and swapped whole
 * (acl_relearn, pool_set_acl), as redis-server re-reads its rules when a
 * module adds commands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/core/acl.h"
#include "proxy/transport/backend.h"
#include "proxy/base/cmd.h"
#include "proxy/core/cmdinfo.h"
#include "proxy/base/text.h"
#include "proxy/base/log.h"
#include "proxy/base/mbuf.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/transport/req.h"
#include "proxy/base/resp.h"
#include "proxy/base/util.h"

#define RUN_ID_MAX 48

struct cmdinfo_server {
    char    run_id[RUN_ID_MAX];     /* the INFO run_id its kind was taken under */
    uint8_t kind;                   /* what it was then */
    bool    asking;                 /* COMMAND sent, answer to come */
};

struct cmdinfo {
    struct cmdinfo_server *servers; /* [nservers] */
    uint32_t nservers;
    struct mbuf *buf;               /* the questions' bytes */
};

/* Kinds whose COMMAND has been asked, from one server (bit k; cleared
 * again if the answer is an error, for the next of its kind to be
 * asked), answered (merged, or unreadable: not asked again), and merged.
 * A server is given its kind (pool_server.kind, which route_owner checks)
 * only once its kind is merged: until then it is of no kind, and may be
 * sent anything. */
static uint32_t kinds_asked, kinds_done, kinds_merged;

/* Several loops. Each loop reads its servers' INFO and keeps its own
 * cmdinfo per pool, but the table and the kinds above are the process's:
 * every step that changes them (a server's new run, a COMMAND's rows, a
 * kind asked again) runs in a world stop (transport/loop.h), and what
 * follows from it (servers' kinds, users relearnt) is done on every
 * loop. The request path reads the table with no lock: it changes only
 * while every other loop is parked. A server's INFO that says nothing
 * new (its run_id known) costs no stop. */

static void assign_kind_here(void *arg)
{
    uint8_t k = *(const uint8_t *)arg;

    for (size_t i = 0; i < cur_loop->npools; i++) {
        struct pool *p = &cur_loop->pools[i];
        struct cmdinfo *ci = p->cmdinfo;
        for (uint32_t s = 0; ci != NULL && s < p->nservers && s < ci->nservers; s++)
            if (ci->servers[s].kind == k && ci->servers[s].run_id[0] != '\0')
                p->servers[s].kind = (kinds_merged >> k) & 1u ? k : 0;
    }
}

/* Every server whose INFO said it is of kind k takes k (or 0: its rows are
 * not merged), on every loop; and whether any kind is still to answer
 * (cmd_settle). In a world stop. */
static void assign_kind(uint8_t k)
{
    loop_each(assign_kind_here, &k);
    cmd_settle((kinds_asked & ~kinds_done) == 0);
}

static struct cmdinfo *cmdinfo_of(struct pool *p)
{
    struct cmdinfo *ci = p->cmdinfo;

    if (ci == NULL)
        ci = p->cmdinfo = xcalloc(1, sizeof(*ci));
    if (ci->nservers < p->nservers) {
        ci->servers = xrealloc(ci->servers, p->nservers * sizeof(*ci->servers));
        memset(ci->servers + ci->nservers, 0,
               (p->nservers - ci->nservers) * sizeof(*ci->servers));
        ci->nservers = p->nservers;
    }
    return ci;
}

/* ---- reading COMMAND's rows -------------------------------------------------- */

struct rows {
    struct cmd *v;
    size_t n, cap;
};

static const char *const flag_names[] = {
    "write", "readonly", "denyoom", "admin", "pubsub", "noscript", "blocking", "loading",
    "stale", "fast", "no_auth", "movablekeys", "no_multi", "no_mandatory_keys", "allow_busy",
};
static const char *const key_flag_names[] = {
    "RO", "RW", "OW", "RM", "access", "update", "insert", "delete", "not_key", "incomplete",
    "variable_flags",
};
static const struct { const char *name; enum cmd_reply reply; } replies[] = {
    {"agg_sum", CMD_REPLY_SUM}, {"all_succeeded", CMD_REPLY_ALL_OK},
    {"one_succeeded", CMD_REPLY_ONE_OK}, {"agg_logical_and", CMD_REPLY_AND},
    {"agg_min", CMD_REPLY_MIN}, {"special", CMD_REPLY_SPECIAL},
};

/* The next value, a string, into buf (NUL-terminated, cut to size - 1);
 * false if it is not one. */
static bool next_str(struct resp_rd *rd, char *buf, size_t size)
{
    struct resp_val v;
    size_t n;

    if (resp_rd_next(rd, &v) < 0 || (v.type != RESP_BULK && v.type != RESP_SIMPLE) || v.nil)
        return false;
    n = resp_rd_copy(rd, &v, buf, size - 1);
    buf[n] = '\0';
    return true;
}

static bool next_int(struct resp_rd *rd, long long *n)
{
    struct resp_val v;

    if (resp_rd_next(rd, &v) < 0 || v.type != RESP_INTEGER)
        return false;
    *n = v.n;
    return true;
}

/* An array's header: its element count, or -1. */
static long long next_array(struct resp_rd *rd)
{
    struct resp_val v;

    if (resp_rd_next(rd, &v) < 0 || (v.type != RESP_ARRAY && v.type != RESP_SET) || v.nil)
        return -1;
    return (long long)v.elems;
}

/* The next value, an array of words, as bits: word names[k] sets bit k,
 * others are left out (a newer server's). False if it does not read. */
static bool next_bits(struct resp_rd *rd, const char *const *names, size_t n, uint32_t *bits)
{
    char word[64];
    long long m = next_array(rd);

    if (m < 0)
        return false;
    for (long long j = 0; j < m; j++) {
        if (!next_str(rd, word, sizeof(word)))
            return false;
        for (size_t k = 0; k < n; k++)
            if (!strcmp(word, names[k]))
                *bits |= 1u << k;
    }
    return true;
}

/* begin_search's or find_keys's [type T spec [name value ...]] into s. */
static bool spec_part(struct resp_rd *rd, struct cmd_keyspec *s, bool begin)
{
    char name[32], type[32], kw[128];
    long long n = next_array(rd), m, x;
    struct resp_val v;

    if (n != 4 || !next_str(rd, name, sizeof(name)) || strcmp(name, "type") != 0 ||
        !next_str(rd, type, sizeof(type)) || !next_str(rd, name, sizeof(name)) ||
        (m = next_array(rd)) < 0 || m % 2 != 0)
        return false;
    if (begin)
        s->bs = !strcmp(type, "index") ? CMD_BS_INDEX
              : !strcmp(type, "keyword") ? CMD_BS_KEYWORD : CMD_BS_UNKNOWN;
    else
        s->fk = !strcmp(type, "range") ? CMD_FK_RANGE
              : !strcmp(type, "keynum") ? CMD_FK_KEYNUM : CMD_FK_UNKNOWN;
    for (long long i = 0; i < m; i += 2) {
        if (!next_str(rd, name, sizeof(name)))
            return false;
        if (begin && !strcmp(name, "keyword")) {
            if (!next_str(rd, kw, sizeof(kw)) || strlen(kw) + 1 >= sizeof(kw))
                return false;
            free((char *)s->keyword);
            s->keyword = xstrdup(kw);
            continue;
        }
        if (resp_rd_peek(rd) != RESP_INTEGER) {
            if (resp_rd_skip(rd, &v) < 0)
                return false;
            continue;
        }
        if (!next_int(rd, &x) || x < INT16_MIN || x > INT16_MAX)
            return false;
        /* what keys.c may index by: a key is never argument 0 */
        if ((begin && s->bs == CMD_BS_INDEX && !strcmp(name, "index") && x < 1) ||
            (!strcmp(name, "keynumidx") && x < 0) || (!strcmp(name, "firstkey") && x < 1) ||
            (!strcmp(name, "keystep") && x < 1))
            return false;
        if (begin && (!strcmp(name, "index") || !strcmp(name, "startfrom")))
            s->pos = (int16_t)x;
        else if (!strcmp(name, "lastkey") || !strcmp(name, "keynumidx"))
            s->fk_args[0] = (int16_t)x;
        else if (!strcmp(name, "keystep"))
            s->fk_args[s->fk == CMD_FK_KEYNUM ? 2 : 1] = (int16_t)x;
        else if (!strcmp(name, "limit") || !strcmp(name, "firstkey"))
            s->fk_args[s->fk == CMD_FK_KEYNUM ? 1 : 2] = (int16_t)x;
    }
    if (s->bs == CMD_BS_KEYWORD && s->keyword == NULL)
        s->bs = CMD_BS_UNKNOWN;
    return true;
}

/* One key spec: [flags [..] begin_search [..] find_keys [..] ...]. */
static bool keyspec(struct resp_rd *rd, struct cmd_keyspec *s)
{
    char name[32];
    long long n = next_array(rd);
    struct resp_val v;

    if (n < 0 || n % 2 != 0)
        return false;
    for (long long i = 0; i < n; i += 2) {
        if (!next_str(rd, name, sizeof(name)))
            return false;
        if (!strcmp(name, "flags")) {
            uint32_t bits = 0;
            if (!next_bits(rd, key_flag_names, ARRAY_SIZE(key_flag_names), &bits))
                return false;
            s->flags = (uint16_t)bits;
        } else if (!strcmp(name, "begin_search") || !strcmp(name, "find_keys")) {
            if (!spec_part(rd, s, name[0] == 'b'))
                return false;
        } else if (resp_rd_skip(rd, &v) < 0) {
            return false;
        }
    }
    return true;
}

static void row_free(struct cmd *c)
{
    free((char *)c->name);
    for (uint32_t j = 0; j < c->nspecs; j++)
        free((char *)c->specs[j].keyword);
    free((struct cmd_keyspec *)c->specs);
}

static struct cmd *row_add(struct rows *out)
{
    if (out->n == out->cap) {
        out->cap = out->cap ? 2 * out->cap : 256;
        out->v = xrealloc(out->v, out->cap * sizeof(*out->v));
    }
    memset(&out->v[out->n], 0, sizeof(out->v[0]));
    return &out->v[out->n++];
}

/* One command of COMMAND's reply, and its subcommands, into out. Only
 * Redis 7's form (ten fields) is read. */
static bool row(struct resp_rd *rd, struct rows *out)
{
    char name[130], word[64];
    long long n = next_array(rd), m, x;
    struct cmd *c = row_add(out);

    c->owned = CMD_OWN_NAME | CMD_OWN_SPECS;
    if (n < 10 || !next_str(rd, name, sizeof(name)) || strlen(name) > 2 * 64)
        return false;
    for (char *q = name; *q; q++)
        *q = (char)(*q >= 'A' && *q <= 'Z' ? *q + 32 : *q);
    c->name = xstrdup(name);
    if (!next_int(rd, &x) || x < -1000 || x > 1000)
        return false;
    c->arity = (int)x;
    if (!next_bits(rd, flag_names, ARRAY_SIZE(flag_names), &c->flags))
        return false;
    long long pos[3];
    for (int k = 0; k < 3; k++)
        if (!next_int(rd, &pos[k]) || pos[k] < -1000 || pos[k] > 1000)
            return false;
    /* (the legacy step splits MSET's pairs, frag.c: never 0 for keys) */
    c->first = (int)pos[0], c->last = (int)pos[1];
    c->step = pos[0] > 0 && pos[2] < 1 ? 1 : (int)pos[2];
    if ((m = next_array(rd)) < 0)
        return false;
    for (long long j = 0; j < m; j++) {
        if (!next_str(rd, word, sizeof(word)))
            return false;
        if (!strcmp(word, "@dangerous"))
            c->flags |= CMD_DANGEROUS;
        for (size_t k = 0; k < cmd_acl_count; k++)
            if (word[0] == '@' && !strcmp(word + 1, cmd_acl_names[k]))
                c->acl |= 1u << k;
    }
    if ((m = next_array(rd)) < 0)
        return false;
    for (long long j = 0; j < m; j++) {
        if (!next_str(rd, word, sizeof(word)))
            return false;
        if (!strcmp(word, "request_policy:all_shards") ||
            !strcmp(word, "request_policy:all_nodes"))
            c->flags |= CMD_ALL_SHARDS;
        else if (!strcmp(word, "request_policy:multi_shard"))
            c->flags |= CMD_MULTI_SHARD;
        for (size_t k = 0; k < ARRAY_SIZE(replies); k++)
            if (!strncmp(word, "response_policy:", 16) && !strcmp(word + 16, replies[k].name))
                c->reply = replies[k].reply;
    }
    if ((m = next_array(rd)) < 0 || m > 255)
        return false;
    if (m > 0) {
        struct cmd_keyspec *specs = xcalloc((size_t)m, sizeof(*specs));
        c->specs = specs;
        c->nspecs = (uint8_t)m;
        for (long long j = 0; j < m; j++)
            if (!keyspec(rd, &specs[j]))
                return false;
    }
    if ((m = next_array(rd)) < 0)           /* subcommands: rows of their own */
        return false;
    for (long long j = 0; j < m; j++)
        if (!row(rd, out))                  /* (c may move: not used below) */
            return false;
    for (long long j = 10; j < n; j++) {    /* (fields of later versions) */
        struct resp_val v;
        if (resp_rd_skip(rd, &v) < 0)
            return false;
    }
    return true;
}

/* ---- asking ------------------------------------------------------------------ */

/* The kind a server's INFO says it is, "<name> <version>". */
static void kind_name(const char *text, char *out, size_t size)
{
    char name[32], field[48], version[32];

    if (text_field(text, "server_name", name, sizeof(name)) == NULL)
        snprintf(name, sizeof(name), "redis");
    snprintf(field, sizeof(field), "%s_version", name);
    if (text_field(text, field, version, sizeof(version)) == NULL &&
        text_field(text, "redis_version", version, sizeof(version)) == NULL)
        snprintf(version, sizeof(version), "0");
    snprintf(out, size, "%s %s", name, version);
}

/* Kind k's COMMAND was refused, or did not come: the next INFO of each
 * of its servers asks again. */
static void forget_kind_here(void *arg)
{
    uint8_t k = *(const uint8_t *)arg;

    for (size_t i = 0; i < cur_loop->npools; i++) {
        struct cmdinfo *ci = cur_loop->pools[i].cmdinfo;
        for (uint32_t s = 0; ci != NULL && s < ci->nservers; s++)
            if (ci->servers[s].kind == k)
                ci->servers[s].run_id[0] = '\0';
    }
}

static void ask_again(uint8_t k)
{
    loop_world_stop();
    kinds_asked &= ~(1u << k);
    loop_each(forget_kind_here, &k);
    assign_kind(k);
    loop_world_go();
}

/* Users' command bits follow the table: p's users built again and
 * swapped whole (they are shared, so never changed in place): each
 * loop's copy of each pool. */
static void relearn(struct pool *p);

static void relearn_here(void *arg)
{
    (void)arg;
    for (size_t i = 0; i < cur_loop->npools; i++)
        relearn(&cur_loop->pools[i]);
}

static void relearn(struct pool *p)
{
    char err[256];
    struct acl *acl = acl_relearn(p->acl, err, sizeof(err));

    if (acl != NULL)
        pool_set_acl(p, acl);
    else
        log_warn("pool '%s': its users keep the commands they had: %s", p->conf->name, err);
}

static int command_reply(struct backend *b, struct req *r)
{
    struct cmdinfo *ci = b->pool->cmdinfo;
    struct cmdinfo_server *cs;
    struct rows rows = {0};
    struct resp_rd rd;
    long long n;
    bool ok = true;

    if (ci == NULL || b->server >= ci->nservers)
        return 0;
    cs = &ci->servers[b->server];
    cs->asking = false;
    resp_rd_init(&rd, &r->rsp);
    if ((n = next_array(&rd)) < 0) {
        /* an error (COMMAND refused to the backend user), or the server
         * went: asked again at its next INFO */
        ask_again(cs->kind);
        return 0;
    }
    for (long long i = 0; ok && i < n; i++)
        ok = row(&rd, &rows);
    if (!ok) {              /* (not asked again: its kind counts as none; another version
                               is another kind) */
        log_warn("pool '%s': server %s's COMMAND could not be read (%s): its commands are "
                 "taken to be those shardis was built with", b->pool->conf->name,
                 b->pool->servers[b->server].label, rd.err != NULL ? rd.err : "not a row");
        for (size_t i = 0; i < rows.n; i++)
            row_free(&rows.v[i]);
        free(rows.v);
        loop_world_stop();
        kinds_done |= 1u << cs->kind;
        assign_kind(cs->kind);
        loop_world_go();
        return 0;
    }
    loop_world_stop();
    size_t added = cmd_merge(cs->kind, cmd_version(strchr(cmd_kind_name(cs->kind), ' ') + 1),
                             rows.v, rows.n);
    log_notice("pool '%s': server %s is %s, %zu commands and subcommands (%zu new to "
               "shardis)", b->pool->conf->name, b->pool->servers[b->server].label,
               cmd_kind_name(cs->kind), rows.n, added);
    loop_each(relearn_here, NULL);
    free(rows.v);
    kinds_done |= 1u << cs->kind;
    kinds_merged |= 1u << cs->kind;
    assign_kind(cs->kind);
    loop_world_go();
    return 0;
}

void cmdinfo_seen(struct pool *p, uint32_t server, const char *text)
{
    struct cmdinfo *ci = cmdinfo_of(p);
    struct cmdinfo_server *cs = &ci->servers[server];
    char run_id[RUN_ID_MAX], kind[80];

    if (text_field(text, "redis_version", kind, sizeof(kind)) != NULL)
        p->servers[server].redis_version = cmd_version(kind);
    if (cs->asking || text_field(text, "run_id", run_id, sizeof(run_id)) == NULL ||
        !strcmp(run_id, cs->run_id))
        return;
    snprintf(cs->run_id, sizeof(cs->run_id), "%s", run_id);
    p->servers[server].kind = 0;            /* (a new run: maybe another version) */
    kind_name(text, kind, sizeof(kind));
    loop_world_stop();
    if ((cs->kind = cmd_kind(kind)) == 0) {
        loop_world_go();
        log_warn("pool '%s': server %s is %s, one kind of server too many (%d) to learn "
                 "its commands", p->conf->name, p->servers[server].label, kind, CMD_KINDS - 1);
        return;
    }
    if (kinds_asked & (1u << cs->kind)) {   /* asked of another server of its kind */
        assign_kind(cs->kind);
        loop_world_go();
        return;
    }
    kinds_asked |= 1u << cs->kind;
    cmd_settle(false);
    loop_world_go();
    struct req *r = req_get();
    struct resp_w w = resp_w_on(&r->out, &ci->buf, RESP2);
    resp_w_command(&w, 1, (const char *const[]){"COMMAND"}, NULL);
    r->on_reply = command_reply;
    cs->asking = true;
    backend_send(pool_own(p, server, false), r);
}

void cmdinfo_free(struct pool *p)
{
    struct cmdinfo *ci = p->cmdinfo;

    if (ci == NULL)
        return;
    if (ci->buf != NULL)
        mbuf_unref(ci->buf);
    free(ci->servers);
    free(ci);
    p->cmdinfo = NULL;
}

/* reload.c -- apply an edited config file without a restart (SIGHUP,
 * SHARD.RELOAD).
 *
 * The file is parsed and checked whole before anything changes: a file
 * that does not parse, or asks for what a running proxy cannot change
 * (pools added or removed, a listen address, server_connections, redis_db
 * and databases, how keys hash), is refused with the reason and the proxy goes on as it was.
 *
 * A good file replaces the config. A pool whose server list changed
 * routes by its new ring at once; client connections stay open and
 * connections to servers that remain are kept (pool servers keep their
 * numbers), new servers are connected on first use, and the keys whose
 * owner changed move (mig.c) while the servers they leave stay connected.
 * Timeouts, limits and auth apply to the next request and the next
 * connection; so do TLS certificates and keys, read again from their
 * files (open connections go on as they were). Users change at once: a signed-in client goes on as its
 * user's new self, and one whose user is gone or off, or may no longer use
 * a channel or pattern it is subscribed to, is closed (pool_set_acl). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/core/acl.h"
#include "proxy/transport/client.h"
#include "proxy/modules/group.h"
#include "proxy/ops/info.h"
#include "proxy/base/log.h"
#include "proxy/modules/mig.h"
#include "proxy/core/pool.h"
#include "proxy/process/proxy.h"
#include "proxy/process/reload.h"
#include "proxy/core/route.h"
#include "proxy/base/tls.h"
#include "proxy/base/util.h"
#include "proxy/transport/loop.h"

/* What a reload cannot change in pool a -> b; NULL if nothing. */
static const char *fixed_change(const struct conf_pool *a, const struct conf_pool *b)
{
    if (strcmp(a->name, b->name) != 0)
        return "pools cannot be added, removed or renamed";
    if (strcmp(a->listen.text, b->listen.text) != 0)
        return "its listen address changed";
    if (!conf_str_eq(a->tls.listen.text, b->tls.listen.text))
        return "its tls_listen address changed";
    if (!conf_str_eq(a->stats_listen.text, b->stats_listen.text))
        return "its stats_listen address changed";
    if (a->tls.backend != b->tls.backend)
        return "backend_tls changed (the open connections to the servers would stay as "
               "they are)";
    if (a->server_connections != b->server_connections)
        return "server_connections changed";
    if (a->redis_db != b->redis_db || a->databases != b->databases)
        return "redis_db or databases changed (open connections stay in the database "
               "they selected)";
    if (a->distribution != b->distribution || a->hash != b->hash ||
        a->has_hash_tag != b->has_hash_tag || a->jedis_version != b->jedis_version ||
        (a->has_hash_tag && memcmp(a->hash_tag, b->hash_tag, 2) != 0))
        return "distribution, hash, hash_tag or jedis_version changed (that would move "
               "nearly every key)";
    if (a->idgen.epoch_ms != b->idgen.epoch_ms)
        return "idgen epoch_ms changed (ids already given out would decode wrongly)";
    if (conf_subkeys_kept(a, b) != NULL)
        return "idgen.subkeys dropped a name or changed its short name (fields stored "
               "under it would read wrongly; names may only be added)";
    if (a->nsentinels != b->nsentinels || !conf_str_eq(a->sentinel_auth, b->sentinel_auth))
        return "sentinels or sentinel_auth changed (restart shardis to follow others)";
    for (size_t i = 0; i < a->nsentinels; i++) {
        bool kept = false;
        for (size_t j = 0; j < b->nsentinels && !kept; j++)
            kept = strcmp(a->sentinels[i].text, b->sentinels[j].text) == 0;
        if (!kept)
            return "sentinels changed (restart shardis to follow others)";
    }
    if (!conf_minify_eq(a, b))
        return "idgen.minify changed (the hashes of a type stored one way would be read "
               "the other)";
    if (!conf_str_eq(a->backend_user, b->backend_user) ||
        !conf_str_eq(a->backend_password, b->backend_password) ||
        !conf_str_eq(a->internal_user, b->internal_user) ||
        !conf_str_eq(a->internal_password, b->internal_password))
        return "backend_user, internal_user or a password of theirs changed (the open "
               "connections are signed in as they were: restart shardis to change them)";
    return NULL;
}

static bool same_servers(const struct conf_pool *a, const struct conf_pool *b)
{
    if (a->nservers != b->nservers)
        return false;
    for (size_t i = 0; i < a->nservers; i++) {
        const struct conf_server *x = &a->servers[i], *y = &b->servers[i];
        /* (With sentinels an address is only a first guess: names count.) */
        if ((a->nsentinels == 0 && strcmp(x->addr.text, y->addr.text) != 0) ||
            x->weight != y->weight ||
            (x->name == NULL) != (y->name == NULL) ||
            (x->name != NULL && strcmp(x->name, y->name) != 0))
            return false;
    }
    return true;
}

static const struct conf_server *server_at(const struct conf_pool *pc, const char *addr)
{
    for (size_t i = 0; i < pc->nservers; i++)
        if (!strcmp(pc->servers[i].addr.text, addr))
            return &pc->servers[i];
    return NULL;
}

/* The server slots p has once it routes by pc (pool_server_at appends a
 * slot for each address it has none for). */
static size_t slots_after(const struct pool *p, const struct conf_pool *pc)
{
    size_t n = p->nservers;

    for (size_t i = 0; i < pc->nservers; i++) {
        uint32_t s = 0;
        while (s < p->nservers && strcmp(p->servers[s].addr, pc->servers[i].addr.text) != 0)
            s++;
        n += s == p->nservers;
    }
    return n;
}

/* The summary lines of a pool whose servers changed: what was added,
 * removed and reweighted, and the share of keys that moves. Lines of
 * SHARD.RELOAD's text, ended by CRLF as INFO's are: a payload, not RESP. */
static int summarize(FILE *f, const struct conf_pool *old, const struct conf_pool *new,
                     const struct ring *ro, const struct ring *rn, char *err, size_t errlen)
{
    unsigned added = 0, removed = 0, reweighted = 0;
    double moving = 0;
    struct ring_diff *d = NULL;
    int rc;

    for (size_t i = 0; i < new->nservers; i++) {
        const struct conf_server *o = server_at(old, new->servers[i].addr.text);
        if (o == NULL)
            added++;
        else if (o->weight != new->servers[i].weight)
            reweighted++;
    }
    for (size_t i = 0; i < old->nservers; i++)
        removed += server_at(new, old->servers[i].addr.text) == NULL;
    if (new->distribution != RING_DIST_RANDOM) {
        if ((rc = ring_diff_create(&d, ro, rn, err, errlen)) < 0)
            return rc;
        moving = d->moving;
        /* MIGRATE reaches a server by host and port only. */
        for (size_t i = 0; i < ring_nservers(rn) && moving > 0; i++)
            for (size_t k = 0; k < ring_nservers(ro); k++)
                if (new->servers[i].addr.unix_socket && ring_diff_share(d, (uint32_t)k,
                                                                         (uint32_t)i) > 0) {
                    snprintf(err, errlen, "keys would move to %s, a unix socket: MIGRATE "
                             "needs host:port", new->servers[i].addr.text);
                    ring_diff_free(d);
                    return -EINVAL;
                }
        ring_diff_free(d);
    }
    fprintf(f, "pool:%s\r\nservers:%zu\r\nservers_added:%u\r\nservers_removed:%u\r\n"
            "servers_reweighted:%u\r\nkeys_moving_pct:%.2f\r\n", new->name, new->nservers,
            added, removed, reweighted, moving * 100);
    return 0;
}

/* Whether p's servers may take a ring change (why says why not): no keys
 * are in other databases than redis_db. The walk and the on-touch
 * MIGRATEs are of redis_db: keys of other databases would stay behind on
 * servers the ring no longer names. Judged here, before the ring changes,
 * once: from the reload on, while the proxies switch and while keys move,
 * a request that could put a key in another database is told to retry
 * (route.c db_ok), so none is there when the switch comes (mig_start,
 * which cannot refuse by then). (Whether the migration has room for one
 * more earlier ring is reload_ready's.) */
static bool can_reshard(const struct pool *p, char *why, size_t size)
{
    char dbs[200];

    if (info_other_databases(p, p->slot, (uint32_t)ring_nservers(p->ring), dbs,
                             sizeof(dbs))) {
        snprintf(why, size, "cannot reshard: %s", dbs);
        return false;
    }
    return true;
}

/* What a reload builds before it changes anything: the new config and,
 * for each pool, its users, its TLS contexts and, where its servers
 * change, its ring. reload_run owns them until reload_apply hands them to
 * the pools; reload_free frees what a refused reload built. */
struct reload {
    struct conf   *cf;
    struct ring  **rings;           /* [npools]: NULL where the servers stay */
    struct acl   **acls;            /* [npools] */
    SSL_CTX      **tls;             /* [2 * npools]: each pool's server and client contexts */
};

static void reload_free(struct reload *rl)
{
    struct conf *cf = rl->cf;

    if (rl->rings != NULL)
        for (size_t i = 0; i < cf->npools; i++)
            ring_unref(rl->rings[i]);
    free(rl->rings);
    if (rl->acls != NULL)
        for (size_t i = 0; i < cf->npools; i++)
            acl_unref(rl->acls[i]);
    free(rl->acls);
    if (rl->tls != NULL)
        for (size_t i = 0; i < 2 * cf->npools; i++)
            tls_ctx_free(rl->tls[i]);
    free(rl->tls);
    conf_unref(cf);
}

/* Every pool's users and TLS contexts, as rl->cf says (err says why not).
 * Certificates and keys are read again: a rotated one is taken up. */
static int reload_build(struct reload *rl, char *err, size_t errlen)
{
    struct conf *cf = rl->cf;
    char why[CONF_ERRLEN];
    int rc;

    rl->rings = xcalloc(cf->npools, sizeof(*rl->rings));
    rl->acls = xcalloc(cf->npools, sizeof(*rl->acls));
    for (size_t i = 0; i < cf->npools; i++)
        if ((rc = acl_build(&cf->pools[i], cf->path, &rl->acls[i], err, errlen)) < 0)
            return rc;
    rl->tls = xcalloc(2 * cf->npools, sizeof(*rl->tls));
    for (size_t i = 0; i < cf->npools; i++)
        if ((rc = tls_ctx_build(&cf->pools[i], &rl->tls[2 * i], &rl->tls[2 * i + 1], why,
                                sizeof(why))) < 0) {
            snprintf(err, errlen, "%s:%d:%d: pool '%s': %s", cf->path, cf->pools[i].line,
                     cf->pools[i].col, cf->pools[i].name, why);
            return rc;
        }
    return 0;
}

/* Whether pool i can take rl->cf's pool i (err says why not: -EINVAL, or
 * -EBUSY for what a moment later may allow); its new ring where its
 * servers change, and its lines of the summary into f. */
static int reload_check(struct reload *rl, size_t i, FILE *f, char *err, size_t errlen)
{
    struct conf *cf = rl->cf;
    struct pool *p = &cur_loop->pools[i];
    const struct conf_pool *a = p->conf, *b = &cf->pools[i];   /* a: routed by now */
    const char *no = fixed_change(a, b);
    char why[CONF_ERRLEN];
    int rc = 0;

    if (no != NULL) {
        snprintf(err, errlen, "%s:%d:%d: pool '%s': %s: restart shardis for that",
                 cf->path, b->line, b->col, b->name, no);
        return -EINVAL;
    }
    if (same_servers(a, b)) {
        fprintf(f, "pool:%s\r\nservers:%zu\r\nservers_added:0\r\nservers_removed:0\r\n"
                "servers_reweighted:0\r\nkeys_moving_pct:0.00\r\n", b->name, b->nservers);
        return 0;
    }
    if (slots_after(p, b) > POOL_SLOTS_MAX) {
        snprintf(err, errlen, "%s:%d:%d: pool '%s': it would have more than %d server "
                 "slots (every address it ever routed to keeps one): restart shardis "
                 "for that", cf->path, b->line, b->col, b->name, POOL_SLOTS_MAX);
        return -EINVAL;
    }
    if ((rc = conf_pool_ring(b, &rl->rings[i], why, sizeof(why))) < 0 ||
        (rc = summarize(f, a, b, p->ring, rl->rings[i], why, sizeof(why))) < 0) {
        snprintf(err, errlen, "%s:%d:%d: pool '%s': %s", cf->path, b->line, b->col,
                 b->name, why);
        return rc < 0 ? rc : -EBUSY;
    }
    return 0;
}

/* Whether pool i, whose servers change (rl->rings[i]), can take the
 * reload now: as loop 0's copy says (its group and its migration lead
 * every loop's), and no loop's clients used another database since the
 * servers last said (can_reshard); in the world stop that applies it, so
 * that nothing changes in between. -EBUSY and err say why not. */
static int reload_ready(const struct reload *rl, size_t i, char *err, size_t errlen)
{
    const struct pool *p = &loop_at(0)->pools[i];
    char why[CONF_ERRLEN];

    if (rl->rings[i] == NULL)
        return 0;
    if (group_switching(p)) {
        snprintf(err, errlen, "pool '%s': the proxies are switching to the last reload's "
                 "servers; reload again in a moment", p->conf->name);
        return -EBUSY;
    }
    bool ok = mig_can_start(p, why, sizeof(why));
    for (uint32_t l = 0; l < loop_count() && ok; l++)
        ok = can_reshard(&loop_at(l)->pools[i], why, sizeof(why));
    if (!ok) {
        snprintf(err, errlen, "%s:%d:%d: pool '%s': %s", rl->cf->path, rl->cf->pools[i].line,
                 rl->cf->pools[i].col, rl->cf->pools[i].name, why);
        return -EBUSY;
    }
    return 0;
}

/* Hand what rl built to the current loop's pools: nothing can fail here.
 * Users and TLS change now, whatever the servers wait for; a pool whose
 * servers change switches at once where no key has an owner, else once
 * every proxy has the new ones (group.c, on loop 0: it switches every loop).
 * Each loop takes references of its own to what rl holds. */
static void reload_apply_one(void *arg)
{
    const struct reload *rl = arg;
    struct conf *cf = rl->cf, *old = cur_loop->conf;

    for (size_t i = 0; i < cf->npools; i++) {
        pool_set_acl(&cur_loop->pools[i], acl_ref(rl->acls[i]));
        pool_set_tls(&cur_loop->pools[i], tls_ctx_ref(rl->tls[2 * i]),
                     tls_ctx_ref(rl->tls[2 * i + 1]));
    }
    for (size_t i = 0; i < cf->npools; i++) {
        struct pool *p = &cur_loop->pools[i];
        uint32_t *old_slot;
        if (rl->rings[i] == NULL) {
            group_cancel(p);            /* back to the servers it routes by, if it waited */
            pool_set_conf(p, &cf->pools[i]);
            continue;
        }
        if (ring_distribution(rl->rings[i]) == RING_DIST_RANDOM) {
            /* No key has an owner: nothing moves, nobody need agree. Servers
             * that left are retired by the pool. */
            ring_unref(pool_set_ring(p, &cf->pools[i], ring_ref(rl->rings[i]), &old_slot));
            free(old_slot);
            continue;
        }
        /* It routes by its servers until every proxy has the new ones
         * (group.c, on loop 0, which switches every loop). */
        if (cur_loop->id != 0)
            continue;
        group_prepare(p, &cf->pools[i], ring_ref(rl->rings[i]), old->text, cf->text);
        log_notice("pool '%s': reloaded: %zu servers, switching once every proxy has them",
                   p->conf->name, cf->pools[i].nservers);
    }
    cur_loop->conf = conf_ref(cf);
    conf_unref(old);                /* the loop's: a pool may still route by it */
}

/* On every loop, in one world stop: no loop routes by the old config
 * once another routes by the new. Then what rl held is let go. */
static void reload_apply(struct reload *rl)
{
    loop_each(reload_apply_one, rl);
    reload_free(rl);
}

int reload_run(char *out, size_t outlen, char *err, size_t errlen)
{
    struct conf *old = cur_loop->conf;
    struct reload rl = {0};
    char *sum = NULL;
    size_t sumlen = 0;
    FILE *f;
    int rc;

    if ((rc = conf_load(&rl.cf, old->path, err, errlen)) < 0)
        return rc;
    if (rl.cf->threads != old->threads) {
        snprintf(err, errlen, "%s: threads changed: the loops are made at the start "
                 "(restart needed)", rl.cf->path);
        reload_free(&rl);
        return -EINVAL;
    }
    if (rl.cf->npools != old->npools) {
        snprintf(err, errlen, "%s: pools cannot be added or removed by a reload "
                 "(restart needed)", rl.cf->path);
        reload_free(&rl);
        return -EINVAL;
    }
    if ((rc = reload_build(&rl, err, errlen)) < 0) {
        reload_free(&rl);
        return rc;
    }
    f = xopen_memstream(&sum, &sumlen);
    for (size_t i = 0; i < rl.cf->npools && rc == 0; i++)
        rc = reload_check(&rl, i, f, err, errlen);
    fclose(f);
    if (rc < 0) {
        free(sum);
        reload_free(&rl);
        return rc;
    }
    loop_world_stop();
    for (size_t i = 0; i < rl.cf->npools && rc == 0; i++)
        rc = reload_ready(&rl, i, err, errlen);
    if (rc == 0)
        reload_apply(&rl);
    loop_world_go();
    if (rc < 0) {
        free(sum);
        reload_free(&rl);
        return rc;
    }
    snprintf(out, outlen, "%.*s", (int)sumlen, sum);
    free(sum);
    return 0;
}

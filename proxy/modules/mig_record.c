/* mig_record.c -- the migration's record on the servers, so that a proxy
 * restarted while keys move (even after kill -9) routes as the one before
 * it did and its mover goes on where that one was. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/core/gate.h"
#include "proxy/base/log.h"
#include "proxy/modules/mig_int.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/core/pool_conn.h"
#include "proxy/core/route.h"
#include "proxy/base/util.h"

static req_reply_cb record_reply;

/* ---- the record on the backends ------------------------------------------------------
 *
 * While keys move, "__shardis:ctl:<pool>" on every server involved holds
 * what a restarted proxy needs to route as this one does:
 *
 *   shardis-migration 1\n
 *   epoch <n>\n
 *   conf <len>\n<the config text keys move to>\n
 *   prior <len>\n<an earlier config text>\n        (newest first)
 *   cursor <addr> <cursor>\n                        (the mover's, per source)
 *
 * It is written before anything moves (the drain waits for it), again
 * every MIG_RECORD_MS with the cursors, and deleted when keys are done
 * moving. Clients cannot touch "__shardis:" keys; the mover never moves
 * them. */

#define MIG_RECORD_PREFIX SHARDIS_RESERVED "ctl:"

static void record_key(const struct pool *p, char *out, size_t len)
{
    snprintf(out, len, "%s%s", MIG_RECORD_PREFIX, p->conf->name);
}

/* The record's text; the caller frees it. */
static char *record_text(const struct pool *p, const struct mig *m, size_t *len)
{
    char *buf = NULL;
    FILE *f = xopen_memstream(&buf, len);

    /* The config routed by: cur_loop->conf may be a reload's, waiting for the
     * other proxies. */
    fprintf(f, "shardis-migration 1\nepoch %u\nconf %zu\n", p->epoch, strlen(m->text));
    fputs(m->text, f);
    for (uint32_t i = 0; i < m->nprior; i++)
        fprintf(f, "\nprior %zu\n%s", strlen(m->prior[i].text), m->prior[i].text);
    fputc('\n', f);
    /* A walk to redo (a batch failed) or big keys still to move: from 0. */
    for (uint32_t i = 0; i < m->nsrc; i++) {
        const struct mig_source *src = &m->src[i];
        fprintf(f, "cursor %s %" PRIu64 "\n", p->servers[src->server].addr,
                src->walk == WALK_DONE || src->again || src->nbig > 0 ? 0 : src->resume);
    }
    fclose(f);
    return buf;
}

/* SET the record (or DEL it: set false) on every server that holds keys. */
void mig_record_send(struct pool *p, struct mig *m, bool set)
{
    char key[300], *text = NULL;
    size_t klen, tlen = 0;

    record_key(p, key, sizeof(key));
    klen = strlen(key);
    if (set)
        text = record_text(p, m, &tlen);
    for (uint32_t s = 0; s < p->nservers; s++) {
        if (!p->servers[s].active)
            continue;
        struct req *r = req_get();
        struct resp_w w = resp_w_on(&r->out, &m->buf, RESP2);
        resp_w_command(&w, set ? 3 : 2, (const char *const[]){set ? "SET" : "DEL", key, text},
                       (const size_t[]){3, klen, tlen});
        r->on_reply = record_reply;
        m->writes += set;
        backend_send(pool_own(p, s, false), r);
    }
    free(text);
    m->record_due = false;
    m->record_ms = uv_now(cur_loop->uv);
}

/* (every loop's copy of the pool says it in INFO) */
static void record_replaced(struct pool *q, void *arg)
{
    uint32_t server = *(const uint32_t *)arg;

    free(q->servers[server].record_ignored);
    q->servers[server].record_ignored = NULL;
}

/* SET or DEL of the migration's record. */
static int record_reply(struct backend *b, struct req *r)
{
    struct pool *p = b->pool;
    struct mig *m = p->mig;
    char head[64];
    char type = resp_rd_head(&r->rsp, head, sizeof(head));
    bool ok = (type == RESP_SIMPLE && !strcmp(head, "OK")) || type == RESP_INTEGER;

    if (ok && p->servers[b->server].record_ignored != NULL)
        /* A record found there at start and ignored is replaced (or gone). */
        pool_each(p, record_replaced, &b->server);
    if (m == NULL)
        return 0;
    if (!ok)
        log_warn("pool '%s': cannot write the migration record on %s: %s", p->conf->name,
                 p->servers[b->server].label, r->rsp.len == 0 ? b->reason : head);
    if (m->writes > 0)
        m->writes--;
    return 0;
}

/* ---- taking a recorded migration up again ------------------------------------------
 *
 * At start the loop is not running yet: the record is read with
 * pool_conn_call_raw, a blocking request with a second's timeout.
 *
 * A record is anyone's who could write the key (a client's script, anyone
 * with access to a server), so it is followed only when it checks out
 * (record_check), and one that does not is ignored, never a reason not to
 * start: else whoever can write the key could keep the proxy down. It is
 * said in the log and in INFO (pool_server.record_ignored), and left where
 * it is: another proxy of the group may be writing it, and the next
 * migration's own record replaces it. */

/* The record's parts: pointers into text. */
struct record {
    unsigned    epoch;
    const char *conf;
    size_t      conflen;
    const char *prior[MIG_MAX_PRIOR];
    size_t      priorlen[MIG_MAX_PRIOR];
    uint32_t    nprior;
    const char *cursors;            /* "cursor <addr> <n>" lines */
};

static int record_parse(char *text, size_t len, struct record *rec)
{
    char *p = text, *end = text + len, *nl;
    size_t n;

    memset(rec, 0, sizeof(*rec));
    if (sscanf(p, "shardis-migration 1\nepoch %u\nconf %zu\n", &rec->epoch, &n) != 2 ||
        (p = strstr(p, "\nconf ")) == NULL || (p = strchr(p + 1, '\n')) == NULL ||
        (size_t)(end - ++p) < n)
        return -1;
    rec->conf = p;
    rec->conflen = n;
    p += n;
    while (p < end && *p == '\n' && p + 7 < end && !strncmp(p + 1, "prior ", 6)) {
        if (rec->nprior == MIG_MAX_PRIOR || sscanf(p + 7, "%zu", &n) != 1 ||
            (nl = memchr(p + 7, '\n', (size_t)(end - p - 7))) == NULL ||
            (size_t)(end - nl - 1) < n)
            return -1;
        rec->prior[rec->nprior] = nl + 1;
        rec->priorlen[rec->nprior++] = n;
        p = nl + 1 + n;
    }
    rec->cursors = p < end ? p + 1 : end;
    /* Each earlier ring was an epoch of its own (mig_start counts them). */
    return rec->nprior > 0 && rec->epoch >= rec->nprior ? 0 : -1;
}

/* A record that checks out, ready to be followed: every config in it
 * parsed and its ring built, so that following it cannot fail half way. */
struct recovery {
    char                   *text;                   /* the record (owned) */
    struct record           rec;                    /* ... its parts */
    struct conf            *cf;                     /* the config keys move to */
    const struct conf_pool *pc;                     /* ... the pool's in it */
    struct ring            *ring;                   /* ... its ring */
    struct conf            *prior_cf[MIG_MAX_PRIOR];    /* the earlier ones, */
    const struct conf_pool *prior_pc[MIG_MAX_PRIOR];    /* [0] the most recent */
    struct ring            *prior_ring[MIG_MAX_PRIOR];
};

static void recovery_free(struct recovery *rv)
{
    for (uint32_t i = 0; i < MIG_MAX_PRIOR; i++) {
        ring_unref(rv->prior_ring[i]);
        conf_free(rv->prior_cf[i]);
    }
    ring_unref(rv->ring);
    conf_free(rv->cf);
    free(rv->text);
    memset(rv, 0, sizeof(*rv));
}

/* Parse a recorded config text (what: which one, for err) and find pool
 * name in it, and build its ring. */
static int record_conf(const char *name, const char *what, const char *text, size_t len,
                       struct conf **cf, const struct conf_pool **pc, struct ring **ring,
                       char *err, size_t errlen)
{
    size_t n;

    /* (The parser and the ring say why after what, in err itself.) */
    n = (size_t)snprintf(err, errlen, "%s does not parse: ", what);
    if (conf_parse(cf, "(the migration record)", text, len, err + n, errlen - n) < 0)
        return -1;
    if ((*pc = conf_pool(*cf, name)) == NULL) {
        snprintf(err, errlen, "%s has no pool '%s'", what, name);
        return -1;
    }
    n = (size_t)snprintf(err, errlen, "%s's servers: ", what);
    return conf_pool_ring(*pc, ring, err + n, errlen - n) < 0 ? -1 : 0;
}

/* Whether addr is a server of pc. */
static bool names_server(const struct conf_pool *pc, const char *addr)
{
    for (size_t i = 0; i < pc->nservers; i++)
        if (!strcmp(pc->servers[i].addr.text, addr))
            return true;
    return false;
}

/* Whether rv->text is a record to follow; why says why not. It may say
 * where keys are and are going, not who may do what or how keys are
 * placed (conf_pool_differs), for this pool or any other of the file: every
 * pool follows the record's config once it is taken up. The servers keys
 * go to must be ones the file names, or ones the record's own earlier
 * configs name (a server being emptied): else following it could send
 * keys, or clients' requests, to a host nobody configured. */
static int record_check(const struct pool *p, struct recovery *rv, size_t len, char *why,
                        size_t whylen)
{
    const struct conf_pool *file = p->conf;
    const char *what;

    if (record_parse(rv->text, len, &rv->rec) < 0) {
        snprintf(why, whylen, "it is not a migration record as shardis writes one");
        return -1;
    }
    if (record_conf(file->name, "its config", rv->rec.conf, rv->rec.conflen, &rv->cf,
                    &rv->pc, &rv->ring, why, whylen) < 0)
        return -1;
    for (uint32_t i = 0; i < rv->rec.nprior; i++)
        if (record_conf(file->name, "an earlier config of it", rv->rec.prior[i],
                        rv->rec.priorlen[i], &rv->prior_cf[i], &rv->prior_pc[i],
                        &rv->prior_ring[i], why, whylen) < 0)
            return -1;
    if ((what = conf_pool_differs(file, rv->pc)) != NULL) {
        snprintf(why, whylen, "it sets %s otherwise than the config file does", what);
        return -1;
    }
    for (size_t i = 0; i < cur_loop->npools; i++) {
        const char *name = cur_loop->pools[i].conf->name;
        const struct conf_pool *np = conf_pool(rv->cf, name);
        const struct conf_pool *fp = conf_pool(cur_loop->conf, name);
        if (np != NULL && fp != NULL && (what = conf_pool_differs(fp, np)) != NULL) {
            snprintf(why, whylen, "it sets %s of pool '%s' otherwise than the config file "
                     "does", what, name);
            return -1;
        }
    }
    for (size_t i = 0; i < rv->pc->nservers; i++) {
        const char *addr = rv->pc->servers[i].addr.text;
        bool known = names_server(file, addr);
        for (uint32_t k = 0; !known && k < rv->rec.nprior; k++)
            known = names_server(rv->prior_pc[k], addr);
        if (!known) {
            snprintf(why, whylen, "it moves keys to %s that neither the config file nor "
                     "the record's earlier configs name", addr);
            return -1;
        }
    }
    return 0;
}

/* Server s's record is not followed: why, in the log and in INFO. */
static void record_ignored(struct pool *p, uint32_t s, const char *key, char *why)
{
    struct pool_server *ps = &p->servers[s];

    /* (why may quote the record: one line of plain text in the log and in
     * INFO, whatever was written.) */
    for (char *c = why; *c != '\0'; c++)
        if (*c < 0x20 || *c > 0x7e)
            *c = '?';
    /* (why last: a long one is what the log line cuts.) */
    log_warn("pool '%s': the migration record on %s (%s) does not check out and is not "
             "followed, nor does it stop the start (if a shardis wrote it while keys moved, "
             "start it on the config the record holds until keys are done moving; if not, "
             "delete the key): %s", p->conf->name, ps->label, key, why);
    free(ps->record_ignored);
    ps->record_ignored = xstrdup(why);
    /* (INFO's clients split a value holding ',' and '=' into fields.) */
    for (char *c = ps->record_ignored; *c != '\0'; c++)
        if (*c == ',' || *c == '=')
            *c = ';';
}

/* The record on server s: 0 and *text (NUL-terminated; the caller frees
 * it) with *len, or *text NULL where there is none or no answer; -1 if
 * the server says why it cannot be read (why). */
static int record_read(struct pool *p, uint32_t s, const char *key, char **text, size_t *len,
                       char *why, size_t whylen)
{
    size_t rlen;
    char *raw = pool_conn_call_raw(p, s, 2, (const char *[]){"GET", key}, &rlen);
    struct resp_rd rd;
    struct resp_val v;
    int rc = 0;

    *text = NULL;
    if (raw == NULL)
        return 0;                   /* (as a server down: nothing is known of it) */
    resp_rd_init_flat(&rd, raw, rlen);
    if (resp_rd_next(&rd, &v) < 0 || v.type != RESP_BULK || (!v.nil && v.p == NULL)) {
        char said[200] = "no string";
        if (rd.err != NULL)
            snprintf(said, sizeof(said), "%s", rd.err);
        else if (v.type == RESP_ERROR || v.type == RESP_BLOBERR)
            said[resp_rd_copy(&rd, &v, said, sizeof(said) - 1)] = '\0';
        snprintf(why, whylen, "it cannot be read: GET answered %s", said);
        rc = -1;
    } else if (!v.nil) {
        *text = xmalloc(v.len + 1);
        memcpy(*text, v.p, v.len);
        (*text)[v.len] = '\0';
        *len = v.len;
    }
    free(raw);
    return rc;
}

/* Follow the record rv: p routes by its ring, keys move from its earlier
 * ones, and its config is the running one (every pool points into it).
 * rv's configs and rings are p's or proxy's after this. */
static void recovery_follow(struct pool *p, struct recovery *rv)
{
    struct record *rec = &rv->rec;
    char why[CONF_ERRLEN];

    log_notice("pool '%s': a migration was under way (epoch %u, %u earlier ring%s): taking "
               "it up again", p->conf->name, rec->epoch, rec->nprior,
               rec->nprior > 1 ? "s" : "");
    /* The target ring: the record's, whatever the file says now. */
    ring_unref(pool_set_ring(p, rv->pc, rv->ring, NULL));
    rv->ring = NULL;
    p->epoch = rec->epoch - rec->nprior;
    for (uint32_t i = rec->nprior; i-- > 0; ) {     /* oldest first */
        const struct conf_pool *ppc = rv->prior_pc[i];
        uint32_t *slot = xmalloc(ppc->nservers * sizeof(*slot));
        for (size_t k = 0; k < ppc->nservers; k++)
            slot[k] = pool_server_at(p, &ppc->servers[k]);
        char *ptext = xmalloc(rec->priorlen[i] + 1);
        memcpy(ptext, rec->prior[i], rec->priorlen[i]);
        ptext[rec->priorlen[i]] = '\0';
        /* (No more than MIG_MAX_PRIOR rings on a pool that had none:
         * mig_start takes each.) */
        mig_start(p, rv->prior_ring[i], slot, ptext, rv->cf->text, why, sizeof(why));
        rv->prior_ring[i] = NULL;
        free(ptext);
    }
    /* The mover goes on from the recorded cursors; but not where Sentinels
     * may have failed a master over since: a cursor means nothing on
     * another server, and the walk starts again (mig_server_moved). */
    for (const char *c = p->sentinel == NULL ? rec->cursors : NULL;
         c != NULL && !strncmp(c, "cursor ", 7); ) {
        char addr[256];
        unsigned long long cur;
        if (sscanf(c, "cursor %255s %llu", addr, &cur) == 2)
            for (uint32_t i = 0; i < p->mig->nsrc; i++)
                if (!strcmp(p->servers[p->mig->src[i].server].addr, addr))
                    p->mig->src[i].cursor = cur;
        c = strchr(c, '\n');
        c = c != NULL ? c + 1 : NULL;
    }
    /* Every pool follows the record's config from here (record_check:
     * none gets from it what the file does not say), and each listens
     * where the file says; the file is read again as a reload. */
    struct conf *was = cur_loop->conf, *cf = rv->cf;
    rv->cf = NULL;
    for (size_t i = 0; i < cur_loop->npools; i++) {
        const char *name = cur_loop->pools[i].conf->name;
        struct conf_pool *np = (struct conf_pool *)conf_pool(cf, name);
        struct conf_pool *fp = (struct conf_pool *)conf_pool(was, name);
        if (np != NULL && fp != NULL)
            conf_pool_swap_own(np, fp);
    }
    free(cf->path);
    cf->path = xstrdup(was->path);
    for (size_t i = 0; i < cur_loop->npools; i++) {
        const struct conf_pool *np = conf_pool(cf, cur_loop->pools[i].conf->name);
        if (np != NULL)
            pool_set_conf(&cur_loop->pools[i], np);
    }
    cur_loop->conf = cf;
    conf_unref(was);                /* the loop's (its pools let theirs go: pool_set_conf) */
}

bool mig_recover(struct pool *p)
{
    char key[300], why[CONF_ERRLEN];
    struct recovery best = {0};

    record_key(p, key, sizeof(key));
    for (uint32_t s = 0; s < p->nservers; s++) {
        struct recovery rv = {0};
        size_t len = 0;
        if (!p->servers[s].active)
            continue;
        if (record_read(p, s, key, &rv.text, &len, why, sizeof(why)) < 0 ||
            (rv.text != NULL && record_check(p, &rv, len, why, sizeof(why)) < 0)) {
            record_ignored(p, s, key, why);
        } else if (rv.text != NULL && (best.text == NULL || rv.rec.epoch > best.rec.epoch)) {
            recovery_free(&best);       /* (an older one: a write this server missed) */
            best = rv;
            continue;
        }
        recovery_free(&rv);
    }
    if (best.text == NULL)
        return false;
    recovery_follow(p, &best);
    recovery_free(&best);
    return true;
}

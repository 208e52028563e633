/* mig_record.c -- the migration's record on the servers, so that a proxy
 * restarted while keys move (even after kill -9) routes as the one before
 * it did and its mover goes on where that one was. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/backend.h"
#include "proxy/client.h"
#include "proxy/gate.h"
#include "proxy/log.h"
#include "proxy/mig_int.h"
#include "proxy/pool.h"
#include "proxy/proxy.h"
#include "proxy/route.h"
#include "proxy/util.h"

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

    /* The config routed by: proxy.conf may be a reload's, waiting for the
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
    m->record_ms = uv_now(proxy.loop);
}

/* SET or DEL of the migration's record. */
static int record_reply(struct backend *b, struct req *r)
{
    struct pool *p = b->pool;
    struct mig *m = p->mig;
    char head[64];
    char type = resp_rd_head(&r->rsp, head, sizeof(head));

    if (m == NULL)
        return 0;
    if (!(type == RESP_SIMPLE && !strcmp(head, "OK")) && type != RESP_INTEGER)
        log_warn("pool '%s': cannot write the migration record on %s: %s", p->conf->name,
                 p->servers[b->server].label, r->rsp.len == 0 ? b->reason : head);
    if (m->writes > 0)
        m->writes--;
    return 0;
}

/* ---- taking a recorded migration up again ------------------------------------------
 *
 * At start the loop is not running yet: the record is read with
 * backend_sync_call, a blocking request with a second's timeout. */

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
    return rec->nprior > 0 ? 0 : -1;
}

/* Parse a recorded config text and find pool name in it. */
static int record_conf_quiet(const char *name, const char *text, size_t len,
                             struct conf **cf, const struct conf_pool **pc, char *err,
                             size_t errlen)
{
    if (conf_parse(cf, "(the migration record)", text, len, err, errlen) < 0)
        return -EINVAL;
    if ((*pc = conf_pool(*cf, name)) == NULL) {
        conf_free(*cf);
        *cf = NULL;
        return -EINVAL;
    }
    return 0;
}

/* Parse a recorded config text and find p's pool in it. */
static int record_conf(const struct pool *p, const char *text, size_t len, struct conf **cf,
                       const struct conf_pool **pc, char *err, size_t errlen)
{
    char why[CONF_ERRLEN];

    if (conf_parse(cf, "(the migration record)", text, len, why, sizeof(why)) < 0) {
        snprintf(err, errlen, "the migration record on the backends holds a config that "
                 "does not parse: %s", why);
        return -EINVAL;
    }
    if ((*pc = conf_pool(*cf, p->conf->name)) == NULL) {
        snprintf(err, errlen, "the migration record on the backends has no pool '%s'",
                 p->conf->name);
        conf_free(*cf);
        *cf = NULL;
        return -EINVAL;
    }
    return 0;
}

/* Whether addr is a server of pc. */
static bool names_server(const struct conf_pool *pc, const char *addr)
{
    for (size_t i = 0; i < pc->nservers; i++)
        if (!strcmp(pc->servers[i].addr.text, addr))
            return true;
    return false;
}

/* A record is anyone's who could write the key, so it is followed only as
 * far as the config file agrees: it may say where keys are and are going,
 * not who may do what or how keys are placed (conf_pool_differs), and the
 * servers keys go to must be ones the file names, or ones the record's own
 * earlier configs name (a server being emptied). Else shardis does not
 * start: following it could send keys, or clients' requests, to a host
 * nobody configured. */
static int record_trusted(const struct conf_pool *file, const struct conf_pool *pc,
                          const struct record *rec, const char *key, char *err, size_t errlen)
{
    const char *what = conf_pool_differs(file, pc);

    if (what != NULL) {
        snprintf(err, errlen, "the migration record on the servers (%s) sets %s otherwise "
                 "than the config file does: refused, not followed. If shardis wrote it, "
                 "set %s back as it was until keys are done moving; if not, delete the key",
                 key, what, what);
        return -EINVAL;
    }
    for (size_t i = 0; i < pc->nservers; i++) {
        const char *addr = pc->servers[i].addr.text;
        bool known = names_server(file, addr);
        for (uint32_t k = 0; !known && k < rec->nprior; k++) {
            struct conf *pcf;
            const struct conf_pool *ppc;
            char why[CONF_ERRLEN];
            if (record_conf_quiet(file->name, rec->prior[k], rec->priorlen[k], &pcf, &ppc,
                                  why, sizeof(why)) < 0)
                continue;
            known = names_server(ppc, addr);
            conf_free(pcf);
        }
        if (!known) {
            snprintf(err, errlen, "the migration record on the servers (%s) moves keys to "
                     "%s, which neither the config file nor the record's earlier configs "
                     "name: refused, not followed; delete the key if shardis did not write it",
                     key, addr);
            return -EINVAL;
        }
    }
    return 0;
}

int mig_recover(struct pool *p, bool *taken, char *err, size_t errlen)
{
    char key[300], *best = NULL;
    struct record rec = {0}, r;
    struct conf *cf = NULL;
    const struct conf_pool *pc;
    int rc;

    *taken = false;
    record_key(p, key, sizeof(key));
    for (uint32_t s = 0; s < p->nservers; s++) {
        size_t len;
        char *v = p->servers[s].active
                  ? backend_sync_call(p, &p->servers[s], 2, (const char *[]){"GET", key},
                                      &len)
                  : NULL;
        if (v == NULL)
            continue;
        if (record_parse(v, len, &r) == 0 && (best == NULL || r.epoch > rec.epoch)) {
            free(best);
            best = v;
            rec = r;
        } else {
            free(v);
        }
    }
    if (best == NULL)
        return 0;
    log_notice("pool '%s': a migration was under way (epoch %u, %u earlier ring%s): taking "
               "it up again", p->conf->name, rec.epoch, rec.nprior, rec.nprior > 1 ? "s" : "");
    if ((rc = record_conf(p, rec.conf, rec.conflen, &cf, &pc, err, errlen)) < 0 ||
        (rc = record_trusted(p->conf, pc, &rec, key, err, errlen)) < 0)
        goto out;
    /* The target ring: the record's, whatever the file says now. */
    struct ring *ring;
    char why[CONF_ERRLEN];
    if ((rc = conf_pool_ring(pc, &ring, why, sizeof(why))) < 0) {
        snprintf(err, errlen, "the migration record's servers: %s", why);
        goto out;
    }
    ring_free(pool_set_ring(p, pc, ring, NULL));
    p->epoch = rec.epoch - rec.nprior;
    for (uint32_t i = rec.nprior; i-- > 0; ) {      /* oldest first */
        struct conf *pcf;
        const struct conf_pool *ppc;
        struct ring *pr;
        if ((rc = record_conf(p, rec.prior[i], rec.priorlen[i], &pcf, &ppc, err, errlen)) < 0)
            goto out;
        if ((rc = conf_pool_ring(ppc, &pr, why, sizeof(why))) < 0) {
            snprintf(err, errlen, "the migration record's earlier servers: %s", why);
            conf_free(pcf);
            goto out;
        }
        uint32_t *slot = xmalloc(ppc->nservers * sizeof(*slot));
        for (size_t k = 0; k < ppc->nservers; k++)
            slot[k] = pool_server_at(p, &ppc->servers[k]);
        char *ptext = xmalloc(rec.priorlen[i] + 1);
        memcpy(ptext, rec.prior[i], rec.priorlen[i]);
        ptext[rec.priorlen[i]] = '\0';
        mig_start(p, pr, slot, ptext, cf->text, why, sizeof(why));
        free(ptext);
        conf_free(pcf);
    }
    /* The mover goes on from the recorded cursors; but not where Sentinels
     * may have failed a master over since: a cursor means nothing on
     * another server, and the walk starts again (mig_server_moved). */
    for (const char *c = p->sentinel == NULL ? rec.cursors : NULL;
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
    *taken = true;
    rc = 0;
out:
    free(best);
    for (size_t i = 0; rc == 0 && i < proxy.npools; i++) {
        /* Every pool follows the record's config from here: none may get
         * from it what the file does not say (the recovering one was
         * checked above), and each listens where the file says. */
        const char *name = proxy.pools[i].conf->name;
        struct conf_pool *np = (struct conf_pool *)conf_pool(cf, name);
        struct conf_pool *fp = (struct conf_pool *)conf_pool(proxy.conf, name);
        const char *what = np != NULL && fp != NULL ? conf_pool_differs(fp, np) : NULL;
        if (what != NULL) {
            snprintf(err, errlen, "the migration record on the servers (%s) sets %s of pool "
                     "'%s' otherwise than the config file does: refused, not followed", key,
                     what, np->name);
            rc = -EINVAL;
        } else if (np != NULL && fp != NULL) {
            conf_pool_swap_own(np, fp);
        }
    }
    if (rc == 0) {
        /* The record's config is the running one now: every pool points
         * into it (the file is read again as a reload). */
        struct conf *was = proxy.conf;
        free(cf->path);
        cf->path = xstrdup(was->path);
        for (size_t i = 0; i < proxy.npools; i++) {
            const struct conf_pool *np = conf_pool(cf, proxy.pools[i].conf->name);
            if (np != NULL)
                pool_set_conf(&proxy.pools[i], np);
        }
        proxy.conf = cf;
        proxy_conf_done(was);
        return 0;
    }
    proxy_conf_done(cf);                /* p->conf may point into it already */
    return rc;
}


/* frag.c -- multi-key commands split across backends, and their replies
 * merged back into one.
 *
 * MGET, MSET, DEL, UNLINK, EXISTS and TOUCH may name keys on several
 * servers. Their keys are grouped per server and each group becomes one
 * fragment (one request per backend, not per key): a new "*N" header and
 * "$len" headers around the client's own key and value bytes, which are
 * forwarded as slices of its read chunks. When every fragment has
 * answered, the replies are merged:
 *
 *   MGET     values in the order the keys were asked (slices of the
 *            fragments' replies: still not copied)
 *   MSET     +OK when every fragment said OK
 *   others   the sum of the fragments' integers
 *
 * If any fragment failed (its backend is down, or it answered an error)
 * the whole reply is the first such error, naming the backend, rather
 * than a partial answer that looks complete. When all keys live on one
 * server the request is forwarded whole, untouched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/cmd.h"
#include "proxy/core.h"
#include "proxy/util.h"

enum frag_merge { MERGE_VALUES, MERGE_OK, MERGE_SUM };

struct frag_key {
    uint32_t frag;              /* fragment holding key i */
    uint32_t elem;              /* its position in that fragment's reply */
};

struct frag {
    enum frag_merge merge;
    uint32_t        nfrags;
    uint32_t        left;       /* fragments not answered yet */
    uint32_t        nkeys;
    struct req    **reqs;       /* [nfrags] */
    struct frag_key *keys;      /* [nkeys] (MERGE_VALUES) */
};

static int merge_kind(const struct cmd *cmd, uint32_t *step)
{
    *step = 1;
    if (!strcmp(cmd->name, "mget"))
        return MERGE_VALUES;
    if (!strcmp(cmd->name, "mset")) {
        *step = 2;
        return MERGE_OK;
    }
    if (!strcmp(cmd->name, "del") || !strcmp(cmd->name, "unlink") ||
        !strcmp(cmd->name, "exists") || !strcmp(cmd->name, "touch"))
        return MERGE_SUM;
    return -1;
}

/* Append argument i, with a fresh "$len" header, to g. */
static void append_arg(struct client *c, struct msg *g, struct args *a, uint32_t i)
{
    const struct resp_arg *arg = &c->scan.argv[i];
    char hdr[24];
    int n = snprintf(hdr, sizeof(hdr), "$%u\r\n", arg->len);

    client_append(c, g, hdr, (size_t)n);
    if (c->scan.is_inline) {
        size_t len;
        const char *p = args_get(a, i, &len);
        client_append(c, g, p, len);
        client_append(c, g, "\r\n", 2);
    } else {
        rstream_slice(&c->in, arg->off, arg->off + arg->len + 2, g);
    }
}

int frag_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    struct pool *p = c->pool;
    uint32_t step, nkeys, *owner, *count, nfrags = 0;
    int kind = merge_kind(cmd, &step), first = -1;
    bool split = false;

    if (kind < 0)
        return -2;
    if (step == 2 && (a->argc - 1) % 2 != 0) {
        client_reply_error(c, r, "ERR wrong number of arguments for '%s' command", cmd->name);
        req_done(r);
        return -1;
    }
    nkeys = (a->argc - 1) / step;
    owner = xmalloc(nkeys * sizeof(*owner));
    for (uint32_t k = 0; k < nkeys; k++) {
        size_t len;
        const char *key = args_get(a, 1 + k * step, &len);
        owner[k] = pool_owner(p, key, len);
        if (first < 0)
            first = (int)owner[k];
        else if (owner[k] != (uint32_t)first)
            split = true;
    }
    if (!split) {
        free(owner);
        return first;
    }

    /* One fragment per server that owns keys, in server order. */
    count = xcalloc(p->nservers, sizeof(*count));
    for (uint32_t k = 0; k < nkeys; k++)
        if (count[owner[k]]++ == 0)
            nfrags++;
    struct frag *f = xcalloc(1, sizeof(*f));
    f->merge = (enum frag_merge)kind;
    f->nfrags = f->left = nfrags;
    f->nkeys = nkeys;
    f->reqs = xcalloc(nfrags, sizeof(*f->reqs));
    if (kind == MERGE_VALUES)
        f->keys = xmalloc(nkeys * sizeof(*f->keys));
    r->frag = f;

    uint32_t *slot = xmalloc(p->nservers * sizeof(*slot)), next = 0;
    for (uint32_t s = 0; s < p->nservers; s++) {
        if (count[s] == 0)
            continue;
        struct req *fr = req_get();
        char hdr[24];
        int n = snprintf(hdr, sizeof(hdr), "*%u\r\n", 1 + count[s] * step);
        fr->parent = r;
        client_append(c, &fr->out, hdr, (size_t)n);
        append_arg(c, &fr->out, a, 0);
        slot[s] = next;
        f->reqs[next++] = fr;
        count[s] = 0;               /* now: elements placed so far */
    }
    for (uint32_t k = 0; k < nkeys; k++) {
        uint32_t s = owner[k];
        struct req *fr = f->reqs[slot[s]];
        for (uint32_t j = 0; j < step; j++)
            append_arg(c, &fr->out, a, 1 + k * step + j);
        if (f->keys != NULL)
            f->keys[k] = (struct frag_key){slot[s], count[s]};
        count[s]++;
    }
    for (uint32_t s = 0; s < p->nservers; s++)
        if (count[s] > 0)
            backend_send(pool_backend(p, s, c), f->reqs[slot[s]]);
    free(slot);
    free(count);
    free(owner);
    return -1;
}

/* ---- merging ---------------------------------------------------------------- */

static char first_byte(const struct msg *g)
{
    char b = 0;
    if (g->len > 0)
        msg_copy(g, 0, 1, &b);
    return b;
}

/* Append slices of g's bytes [off, off+len) to out. */
static void msg_sub(const struct msg *g, size_t off, size_t len, struct msg *out)
{
    for (uint32_t i = 0; i < g->n && len > 0; i++) {
        const struct slice *s = i < 2 ? &g->inl[i] : &g->more[i - 2];
        if (off >= s->len) {
            off -= s->len;
            continue;
        }
        uint32_t n = (uint32_t)(s->len - off < len ? s->len - off : len);
        msg_append(out, s->m, s->off + (uint32_t)off, n);
        len -= n;
        off = 0;
    }
}

/* The reply's header "*N\r\n": N, and where the elements start. */
static int array_header(const struct msg *g, long long *n, size_t *body)
{
    char buf[32];
    size_t len = g->len < sizeof(buf) - 1 ? g->len : sizeof(buf) - 1;
    char *end;

    msg_copy(g, 0, len, buf);
    buf[len] = '\0';
    if (buf[0] != '*')
        return -1;
    *n = strtoll(buf + 1, &end, 10);
    if (end[0] != '\r' || end[1] != '\n')
        return -1;
    *body = (size_t)(end + 2 - buf);
    return 0;
}

/* Element e of the array reply g, as [*off, *off + *len). Elements are
 * framed with the reply framer, one value at a time. */
static int array_elements(const struct msg *g, size_t body, size_t *offs, uint32_t n)
{
    struct resp_rsp s;
    size_t pos = 0, count = 0;

    resp_rsp_reset(&s);
    offs[0] = body;
    for (uint32_t i = 0; i < g->n && count < n; i++) {
        const struct slice *sl = i < 2 ? &g->inl[i] : &g->more[i - 2];
        size_t at = pos < body ? (body - pos < sl->len ? body - pos : sl->len) : 0;
        pos += sl->len;
        while (at < sl->len && count < n) {
            size_t used;
            int rc = resp_rsp_feed(&s, sl->m->data + sl->off + at, sl->len - at, &used);
            if (rc < 0)
                return -1;
            at += used;
            if (rc == 1) {
                offs[++count] = pos - sl->len + at;
                resp_rsp_reset(&s);
            }
        }
    }
    return count == n ? 0 : -1;
}

static void merge(struct req *r, struct client *c)
{
    struct frag *f = r->frag;
    char buf[32];
    long long sum = 0;

    /* The first fragment that did not answer as expected is the answer. */
    for (uint32_t i = 0; i < f->nfrags; i++) {
        struct req *fr = f->reqs[i];
        char want = f->merge == MERGE_VALUES ? '*' : f->merge == MERGE_OK ? '+' : ':';
        if (first_byte(&fr->rsp) != want) {
            msg_sub(&fr->rsp, 0, fr->rsp.len, &r->rsp);
            return;
        }
    }
    switch (f->merge) {
    case MERGE_OK:
        client_reply(c, r, "+OK\r\n", 5);
        return;
    case MERGE_SUM:
        for (uint32_t i = 0; i < f->nfrags; i++) {
            msg_copy(&f->reqs[i]->rsp, 1, f->reqs[i]->rsp.len - 1 < 30
                     ? f->reqs[i]->rsp.len - 1 : 30, buf);
            sum += strtoll(buf, NULL, 10);
        }
        client_reply(c, r, buf, (size_t)snprintf(buf, sizeof(buf), ":%lld\r\n", sum));
        return;
    case MERGE_VALUES:
        break;
    }

    size_t **offs = xcalloc(f->nfrags, sizeof(*offs));
    for (uint32_t i = 0; i < f->nfrags; i++) {
        struct req *fr = f->reqs[i];
        long long n;
        size_t body;
        if (array_header(&fr->rsp, &n, &body) < 0 || n < 0 ||
            (offs[i] = xmalloc(((size_t)n + 1) * sizeof(**offs)),
             array_elements(&fr->rsp, body, offs[i], (uint32_t)n) < 0)) {
            client_reply_error(c, r, "ERR backend %s sent a malformed MGET reply",
                               ring_server_label(c->pool->ring, fr->backend->server));
            goto out;
        }
    }
    client_reply(c, r, buf, (size_t)snprintf(buf, sizeof(buf), "*%u\r\n", f->nkeys));
    for (uint32_t k = 0; k < f->nkeys; k++) {
        const struct frag_key *fk = &f->keys[k];
        size_t *o = offs[fk->frag];
        msg_sub(&f->reqs[fk->frag]->rsp, o[fk->elem], o[fk->elem + 1] - o[fk->elem], &r->rsp);
    }
out:
    for (uint32_t i = 0; i < f->nfrags; i++)
        free(offs[i]);
    free(offs);
}

void frag_free(struct req *r)
{
    struct frag *f = r->frag;

    for (uint32_t i = 0; i < f->nfrags; i++) {
        f->reqs[i]->parent = NULL;
        req_maybe_free(f->reqs[i]);
    }
    free(f->reqs);
    free(f->keys);
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

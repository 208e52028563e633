/* clientlist.c -- CLIENT LIST and CLIENT INFO's line for a client, in
 * redis-server 7.0's fields and order, and which clients CLIENT KILL's
 * filter matches: what the ops layer says of a client, read from the
 * transport's struct client and what the layers between keep on it. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "proxy/core/acl.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/ops/clientlist.h"
#include "proxy/transport/loop.h"
#include "proxy/modules/pubsub.h"

/* Blocked: its oldest request on its own connection is a blocking one. */
static bool client_blocked(const struct client *c)
{
    const struct req *r = c->pin != NULL ? TAILQ_FIRST(&c->pin->pendq) : NULL;

    return r != NULL && r->blocking;
}

/* The buffer fields of CLIENT LIST, in redis-server's meaning where the
 * proxy has the like: qbuf the bytes of a request read but not complete,
 * qbuf-free the room left in the chunk being read into, argv-mem what that
 * request's framing holds on the heap, rbs (and rbp: no peak is kept) the
 * chunks the client's input still holds, oll the requests whose replies
 * are not written yet, omem the reply bytes held. obl and multi-mem are
 * 0: replies have no fixed buffer, and a transaction is queued on its
 * server. */
struct client_mem {
    size_t qbuf, qbuf_free, argv_mem, rbs, oll;
};

static void client_mem(const struct client *c, struct client_mem *m)
{
    const struct resp_req *s = &c->scan;
    const struct req *r;

    memset(m, 0, sizeof(*m));
    if (!resp_req_idle(s))
        m->qbuf = (size_t)(c->in.rx - s->start);
    if (c->in.tail != NULL)
        m->qbuf_free = MBUF_SIZE - c->in.tail->len;
    if (s->argv != NULL && s->argv != s->argv_inl)
        m->argv_mem = s->argcap * sizeof(*s->argv);
    if (s->inl != NULL)
        m->argv_mem += s->inlcap;
    for (const struct mbuf *b = c->in.head; b != NULL; b = b->next)
        m->rbs += MBUF_CHUNK;
    TAILQ_FOREACH(r, &c->reqs, cq)
        m->oll++;
}

void client_describe(const struct client *c, FILE *f)
{
    char addr[80], laddr[80], flags[8];
    uint32_t subs[3], now = loop_seconds(), n = 0;
    uv_os_fd_t fd = -1;
    struct client_mem m;

    client_peer(c, addr, sizeof(addr));
    client_local(c, laddr, sizeof(laddr));
    uv_fileno(&c->h.handle, &fd);
    pubsub_counts(c, subs);
    client_mem(c, &m);
    if (c->subscribed)
        flags[n++] = 'P';
    if (client_in_multi(c))
        flags[n++] = 'x';
    if (client_blocked(c))
        flags[n++] = 'b';
    if (c->quitting)
        flags[n++] = 'c';
    if (c->notouch)
        flags[n++] = 'T';
    if (n == 0)
        flags[n++] = 'N';
    flags[n] = '\0';
    fprintf(f, "id=%llu addr=%s laddr=%s fd=%d name=%s age=%u idle=%u flags=%s db=%u sub=%u "
            "psub=%u ssub=%u multi=%d qbuf=%zu qbuf-free=%zu argv-mem=%zu multi-mem=0 "
            "rbs=%zu rbp=%zu obl=0 oll=%zu omem=%zu tot-mem=%zu events=%s cmd=%s user=%s "
            "redir=-1 resp=%d",
            (unsigned long long)c->id, addr, laddr, (int)fd,
            client_name(c) != NULL ? client_name(c) : "", now - c->born_s, now - c->last_s,
            flags, (unsigned)c->db, subs[0], subs[1], subs[2],
            client_in_multi(c) ? (int)(c->rare != NULL ? c->rare->tx_sent : 0) : -1,
            m.qbuf, m.qbuf_free, m.argv_mem, m.rbs, m.rbs, m.oll, c->rsp_bytes,
            sizeof(*c) + (c->rare != NULL ? sizeof(*c->rare) : 0) + m.argv_mem + m.rbs +
                c->rsp_bytes,
            c->writing ? "rw" : "r",
            cmd_numbered(c->last_cmd) != NULL ? cmd_numbered(c->last_cmd)->name : "NULL",
            c->user != NULL ? c->user->name : "", c->resp3 ? 3 : 2);
}

bool client_matches(const struct client *c, const struct client_filter *f)
{
    char buf[80];
    bool listed = f->nids == 0;

    for (uint32_t i = 0; i < f->nids && !listed; i++)
        listed = c->id == f->ids[i];
    if (!listed)
        return false;
    if (f->type >= 0 && (f->type == 1) != (bool)c->subscribed)
        return false;
    if (f->user != NULL && (c->user == NULL || strcmp(c->user->name, f->user) != 0))
        return false;
    if (f->addr != NULL && (client_peer(c, buf, sizeof(buf)), strcmp(buf, f->addr) != 0))
        return false;
    if (f->laddr != NULL && (client_local(c, buf, sizeof(buf)), strcmp(buf, f->laddr) != 0))
        return false;
    if (f->maxage > 0 && (long long)(loop_seconds() - c->born_s) <= f->maxage)
        return false;
    return true;
}

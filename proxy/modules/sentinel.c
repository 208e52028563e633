/* sentinel.c -- high availability: following Redis Sentinel's view of
 * where each master is, without moving a key.
 *
 * A pool with `sentinels` has named servers, each name the master name
 * the Sentinels know; the address in the file is a first guess. The ring
 * is built from the names, so a failover changes no key's server, only
 * that server's address (pool_server_move). Owns the links to the
 * Sentinels, the rounds of questions, and the decision to move.
 *
 * A round, for one master: SENTINEL MASTER <name> to every Sentinel
 * linked; once all have answered or SENTINEL_ROUND_MS passed, an address
 * that a majority of the configured Sentinels give (so a minority with a
 * stale or false answer is outvoted), at a config epoch not below the one
 * followed so far, is the master's. The server there must then say it is
 * a master: every connection to it asks first (HELLO's role, which any
 * ACL user may read, where ROLE is an admin command; backend_hello.c), and one
 * that says otherwise fails before any request is written on it, and
 * asks for another round. Rounds are started by:
 *
 *   the start      a blocking round per master, before anything is read
 *                  from the servers (the migration record is on them)
 *   +switch-master each Sentinel's event, subscribed on its one link
 *                  (RESP3: pushes and replies share it); only a hint
 *   a timer        every SENTINEL_CHECK_MS, each master
 *   hints          a -READONLY reply, a failed connection (sentinel_hint)
 *
 * A move closes the server's connections: requests written to the old
 * master get an error (their outcome is unknown), those not yet written
 * wait for the new one (within their deadline: backend_move), dedicated
 * connections (transactions, blocking commands, subscribers) fail so
 * their clients retry. Each link is a connection of the transport's to
 * its Sentinel (struct link), whose states are backend.h's:
 *
 *   DOWN --tick--> CONNECTING --connected: HELLO 3, SUBSCRIBE--> UP
 *                    ^     |                                       |
 *                    |     | refused          error, EOF, HELLO    |
 *   tick, its backoff|     v                  refused, a question  |
 *   over             +-- FAILED <----------- past its deadline ----+
 *
 * (the tick: sentinel_tick's backend_keep_up).
 *
 * The backoff is the connection's (backend_fail: 100 ms doubling to 2 s
 * over consecutive failures, counted afresh from a HELLO answered). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "proxy/transport/backend.h"
#include "proxy/base/log.h"
#include "proxy/core/pool.h"
#include "proxy/core/pool_conn.h"
#include "proxy/transport/loop.h"
#include "proxy/transport/req.h"
#include "proxy/base/resp.h"
#include "proxy/modules/sentinel.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

#define SENTINEL_CHECK_MS   1000    /* each master asked about this often */
#define SENTINEL_ROUND_MS   500     /* a round waits this long for answers */
#define SENTINEL_ANSWER_MS  3000    /* a question (or HELLO) unanswered this long fails
                                       its link */
#define SENTINEL_REPLY_MAX  (1 << 20)   /* a reply longer fails its link */
#define SENTINEL_ADDR_MAX   256

/* A replica a Sentinel lists, up and linked to the master it names. */
struct replica {
    uint16_t port, master_port;
    char     ip[SENTINEL_ADDR_MAX];
    char     master_ip[SENTINEL_ADDR_MAX];
};

#define SENTINEL_REPLICAS_MAX (2 * POOL_REPLICAS_MAX)   /* read from each answer */

/* What a Sentinel said of a master in the current round. */
struct answer {
    bool     valid;
    uint16_t port;
    uint64_t epoch;
    char     ip[SENTINEL_ADDR_MAX];
    uint32_t nreplicas;     /* (asked only where the pool reads from replicas) */
    struct replica *replicas;   /* [SENTINEL_REPLICAS_MAX] (owned), made on the first
                                   SENTINEL REPLICAS reply: a pool reading only from
                                   masters keeps none */
};

/* A round's answers, one per Sentinel: made, emptied, freed. */
static struct answer *answers_new(uint32_t n)
{
    return xcalloc(n, sizeof(struct answer));
}

static void answers_clear(struct answer *answers, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        struct replica *keep = answers[i].replicas;
        memset(&answers[i], 0, sizeof(answers[i]));
        answers[i].replicas = keep;
    }
}

static void answers_free(struct answer *answers, uint32_t n)
{
    for (uint32_t i = 0; answers != NULL && i < n; i++)
        free(answers[i].replicas);
    free(answers);
}

/* A link to one Sentinel: a connection of the transport's, made for it
 * (backend_init_owned), so that connecting, the handshake, framing,
 * the deadline of each question and the backoff after a failure are
 * every server connection's code; this file hears of it through
 * link_ops. Its states are the connection's (backend.h, enum
 * backend_state; backend.c draws them): DOWN until the tick connects
 * it (backend_keep_up), UP once connected (HELLO 3 and SUBSCRIBE queued, then its rounds'
 * questions), FAILED on an error, EOF, a refused HELLO or a question
 * unanswered by its deadline (SENTINEL_ANSWER_MS), until its backoff is
 * over and the tick connects it again. Kept in set->links (not moved:
 * its handle is libuv's), for the pool's life; closed by the stop's walk
 * (sentinel_close_handle) before sentinel_free. */
struct link {
    struct sentinel *set;
    uint32_t    idx;        /* its Sentinel in the pool's config */
    struct backend b;
};

static const struct backend_owner link_ops;     /* (the links' section) */
static void link_server(const struct backend *b, struct backend_server *sv);

/* What is followed of a master, the same on every loop (loop 0's rounds
 * decide it; every other loop's mirror takes a copy: follow). */
struct followed {
    uint64_t epoch;         /* the config epoch of the address followed */
    uint64_t switched_ms;   /* loop ms of the last move; 0 none */
    uint32_t switches;
    char     last[2 * SENTINEL_ADDR_MAX + 160];  /* the last move, for SHARD.NODES */
};

struct master {
    uint32_t round;         /* the round in flight, 0: none */
    uint32_t waiting;       /* its answers still to come */
    uint64_t deadline;
    uint64_t next_check;
    char     why[96];       /* what started it */
    struct answer *answers; /* [nlinks] */
    struct followed f;
    bool     told;          /* "no majority" was logged: not again until resolved */
    uint64_t hinted_ms;     /* a mirror's: when it last mailed loop 0 a hint */
};

/* Loop 0's copy of a pool holds the links and runs the rounds; every
 * other loop's copy holds a mirror (sentinel_start_copy): no links, the
 * masters' figures as loop 0's rounds write them (follow, in the world
 * stop that moves a master on every loop), and hints that go to loop 0
 * by mail, at most one per master per SENTINEL_ROUND_MS. */
struct sentinel {
    struct pool   *p;
    bool           mirror;  /* another loop's: nlinks 0, no rounds */
    struct link   *links;   /* [nlinks], one per configured Sentinel */
    uint32_t       nlinks;
    struct mbuf   *buf;     /* where the links' questions are written */
    struct master *masters; /* [nmasters], by server index */
    uint32_t       nmasters;
    uint32_t       round_seq;
};

/* ---- answers --------------------------------------------------------------------- */

/* A Sentinel's reply about one server: a map (RESP3) or name/value pairs
 * (RESP2), each value a bulk string. fn gets each field whose value is
 * shorter than SENTINEL_ADDR_MAX, as a C string. false: rd holds none. */
typedef void field_fn(void *arg, const char *name, const char *value);

static bool read_fields(struct resp_rd *rd, field_fn *fn, void *arg)
{
    struct resp_val top, k, v;
    char name[32], value[SENTINEL_ADDR_MAX];

    if (resp_rd_next(rd, &top) < 0 || (top.type != RESP_MAP && top.type != RESP_ARRAY) ||
        top.elems % 2 != 0)
        return false;
    for (size_t i = 0; i < top.elems; i += 2) {
        if (resp_rd_next(rd, &k) < 0 || resp_rd_skip(rd, &v) < 0)
            return false;
        if (k.type != RESP_BULK || k.nil || k.len >= sizeof(name) || v.type != RESP_BULK ||
            v.nil || v.len >= sizeof(value))
            continue;
        resp_rd_copy(rd, &k, name, sizeof(name) - 1);
        name[k.len] = '\0';
        resp_rd_copy(rd, &v, value, sizeof(value) - 1);
        value[v.len] = '\0';
        fn(arg, name, value);
    }
    return true;
}

/* A decimal that fits below max, else 0. */
static uint64_t number(const char *s, uint64_t max)
{
    char *end;
    unsigned long long n;

    if (*s < '0' || *s > '9')
        return 0;
    n = strtoull(s, &end, 10);
    return *end == '\0' && n <= max ? n : 0;
}

static void master_field(void *arg, const char *name, const char *value)
{
    struct answer *a = arg;

    if (strcmp(name, "ip") == 0)
        snprintf(a->ip, sizeof(a->ip), "%s", value);
    else if (strcmp(name, "port") == 0)
        a->port = (uint16_t)number(value, 65535);
    else if (strcmp(name, "config-epoch") == 0)
        a->epoch = number(value, UINT64_MAX);
}

/* SENTINEL MASTER's reply read from rd into *a. false if it is an error
 * or holds no address. */
static bool read_master(struct resp_rd *rd, struct answer *a)
{
    a->ip[0] = '\0';
    a->port = 0;
    a->epoch = 0;
    a->valid = read_fields(rd, master_field, a) && a->ip[0] != '\0' && a->port != 0;
    return a->valid;
}

/* A replica of SENTINEL REPLICAS's reply, as read. */
struct replica_read {
    struct replica *x;
    bool up, link_ok;
};

static void replica_field(void *arg, const char *name, const char *value)
{
    struct replica_read *rr = arg;
    struct replica *x = rr->x;

    if (strcmp(name, "ip") == 0)
        snprintf(x->ip, sizeof(x->ip), "%s", value);
    else if (strcmp(name, "master-host") == 0)
        snprintf(x->master_ip, sizeof(x->master_ip), "%s", value);
    else if (strcmp(name, "port") == 0)
        x->port = (uint16_t)number(value, 65535);
    else if (strcmp(name, "master-port") == 0)
        x->master_port = (uint16_t)number(value, 65535);
    else if (strcmp(name, "flags") == 0)
        rr->up = strstr(value, "s_down") == NULL && strstr(value, "o_down") == NULL &&
                 strstr(value, "disconnected") == NULL;
    else if (strcmp(name, "master-link-status") == 0)
        rr->link_ok = strcmp(value, "ok") == 0;
}

/* One replica into *x: true if it is up (no s_down, o_down or
 * disconnected flag) and its link to its master is ok; *map: whether it
 * was a map of fields at all. */
static bool read_replica(struct resp_rd *rd, struct replica *x, bool *map)
{
    struct replica_read rr = {x, false, false};

    memset(x, 0, sizeof(*x));
    *map = read_fields(rd, replica_field, &rr);
    return *map && rr.up && rr.link_ok && x->ip[0] != '\0' && x->port != 0 &&
           x->master_port != 0;
}

/* SENTINEL REPLICAS's reply (an array of maps, or of pairs in RESP2)
 * into a's replica list: those up, the first SENTINEL_REPLICAS_MAX. */
static void read_replicas(struct resp_rd *rd, struct answer *a)
{
    struct resp_val top;

    a->nreplicas = 0;
    if (resp_rd_next(rd, &top) < 0 || top.type != RESP_ARRAY)
        return;
    if (a->replicas == NULL)
        a->replicas = xcalloc(SENTINEL_REPLICAS_MAX, sizeof(*a->replicas));
    /* (One that is no map ends the list: what follows it cannot be told.) */
    for (size_t i = 0; i < top.elems && a->nreplicas < SENTINEL_REPLICAS_MAX; i++) {
        bool map;
        if (read_replica(rd, &a->replicas[a->nreplicas], &map))
            a->nreplicas++;
        else if (!map)
            return;
    }
}

static void role_field(void *arg, const char *name, const char *value)
{
    if (strcmp(name, "role") == 0)
        *(bool *)arg = strcmp(value, "master") == 0;
}

/* HELLO's reply: whether its "role" is "master" (RESP2 pairs or a RESP3
 * map). A reply without a role (an error) is no master either. */
bool sentinel_says_master(const char *p, size_t len)
{
    struct resp_rd rd;
    bool master = false;

    resp_rd_init_flat(&rd, p, len);
    return read_fields(&rd, role_field, &master) && master;
}

/* ---- deciding ------------------------------------------------------------------ */

static struct master *master_of(struct sentinel *set, uint32_t server)
{
    if (server >= set->nmasters) {
        uint32_t n = set->p->nservers;
        set->masters = xrealloc(set->masters, n * sizeof(*set->masters));
        for (uint32_t i = set->nmasters; i < n; i++) {
            memset(&set->masters[i], 0, sizeof(set->masters[i]));
            set->masters[i].answers = answers_new(set->nlinks);
        }
        set->nmasters = n;
    }
    return &set->masters[server];
}

/* The address a majority of the configured Sentinels gave in answers, and
 * in *epoch the lowest config epoch any of them gave with it (so that no
 * one Sentinel can make it look newer); NULL if none has a majority. */
static const struct answer *tally(const struct sentinel *set, const struct answer *answers,
                                  uint64_t *epoch)
{
    uint32_t need = set->nlinks / 2 + 1;

    for (uint32_t i = 0; i < set->nlinks; i++) {
        const struct answer *a = &answers[i];
        uint32_t votes = 0;
        if (!a->valid)
            continue;
        *epoch = UINT64_MAX;
        for (uint32_t j = 0; j < set->nlinks; j++) {
            const struct answer *b = &answers[j];
            if (b->valid && b->port == a->port && strcmp(b->ip, a->ip) == 0) {
                votes++;
                if (b->epoch < *epoch)
                    *epoch = b->epoch;
            }
        }
        if (votes >= need)
            return a;
    }
    return NULL;
}

/* The replicas of master a that a majority of the configured Sentinels
 * list as up and replicating it, into list (POOL_REPLICAS_MAX): where
 * server's reads may go (none unless the pool reads from replicas). */
static uint32_t majority_replicas(const struct sentinel *set, const struct answer *answers,
                                  const struct answer *a, struct pool_addr *list)
{
    uint32_t need = set->nlinks / 2 + 1, n = 0;

    for (uint32_t i = 0; i < set->nlinks && set->p->conf->read_from != CONF_READ_MASTER; i++)
        for (uint32_t r = 0; r < answers[i].nreplicas && n < POOL_REPLICAS_MAX; r++) {
            const struct replica *x = &answers[i].replicas[r];
            uint32_t votes = 0;
            bool dup = false;
            if (x->master_port != a->port || strcmp(x->master_ip, a->ip) != 0)
                continue;                       /* another master's, or stale */
            for (uint32_t k = 0; k < n && !dup; k++)
                dup = list[k].port == x->port && strcmp(list[k].host, x->ip) == 0;
            for (uint32_t j = 0; j < set->nlinks && !dup; j++)
                for (uint32_t q = 0; q < answers[j].nreplicas; q++) {
                    const struct replica *y = &answers[j].replicas[q];
                    if (y->port == x->port && strcmp(y->ip, x->ip) == 0 &&
                        y->master_port == x->master_port && strcmp(y->master_ip, x->master_ip) == 0) {
                        votes++;
                        break;
                    }
                }
            if (!dup && votes >= need)
                list[n++] = (struct pool_addr){x->ip, x->port};
        }
    return n;
}

/* Whether server's reads go to exactly the n replicas of list already. */
static bool replicas_same(const struct pool_server *ps, const struct pool_addr *list, uint32_t n)
{
    uint32_t listed = 0;

    for (uint32_t i = 0; ps->replicas != NULL && i < POOL_REPLICAS_MAX; i++)
        listed += ps->replicas[i].listed;
    if (listed != n)
        return false;
    for (uint32_t j = 0; j < n; j++) {
        bool found = false;
        for (uint32_t i = 0; i < POOL_REPLICAS_MAX && !found; i++)
            found = ps->replicas[i].listed && ps->replicas[i].port == list[j].port &&
                    strcmp(ps->replicas[i].host, list[j].host) == 0;
        if (!found)
            return false;
    }
    return true;
}

/* What a round decided for a server, as every loop's copy of the pool
 * takes it (follow). All of it by value: while the deciding loop waits
 * for its world stop another loop's stop may visit it, where a hint can
 * start the next round (its answers cleared) or a new server grow the
 * masters. */
struct decision {
    uint32_t server;
    bool     move;              /* to ip:port */
    char     ip[SENTINEL_ADDR_MAX];
    uint16_t port;
    struct followed f;          /* loop 0's, copied to the others */
    struct pool_addr replicas[POOL_REPLICAS_MAX];   /* (hosts in rhost) */
    char     rhost[POOL_REPLICAS_MAX][SENTINEL_ADDR_MAX];
    uint32_t nreplicas;
};

static void follow(struct pool *q, void *arg)
{
    const struct decision *d = arg;
    struct master *m = master_of(q->sentinel, d->server);

    m->f = d->f;
    if (d->move)
        pool_server_move(q, d->server, d->ip, d->port);
    pool_server_replicas(q, d->server, d->replicas, d->nreplicas);
}

/* Follow d on every loop at once. */
static void follow_everywhere(struct pool *p, struct decision *d, const struct master *m,
                              const struct answer *a, const struct pool_addr *list)
{
    snprintf(d->ip, sizeof(d->ip), "%s", a->ip);
    d->port = a->port;
    d->f = m->f;
    for (uint32_t i = 0; i < d->nreplicas; i++) {
        snprintf(d->rhost[i], sizeof(d->rhost[i]), "%s", list[i].host);
        d->replicas[i] = (struct pool_addr){d->rhost[i], list[i].port};
    }
    pool_each(p, follow, d);
}

/* Follow the answers of a finished round for server: on every loop at
 * once (pool_each: a world stop), so that no loop writes to the old
 * master once another writes to the new one; only when something
 * changed (a periodic check that finds all as it was stops nothing). */
static void conclude(struct sentinel *set, uint32_t server, const struct answer *answers,
                     const char *why)
{
    struct pool *p = set->p;
    struct pool_server *ps = &p->servers[server];
    struct master *m = master_of(set, server);
    const struct answer *a;
    uint64_t epoch = 0;
    char from[SENTINEL_ADDR_MAX + 8];
    struct pool_addr list[POOL_REPLICAS_MAX];

    if ((a = tally(set, answers, &epoch)) == NULL) {
        if (!ps->resolved && !m->told) {
            m->told = true;
            log_warn("pool '%s': master '%s': no majority of the %u Sentinels agrees on "
                     "its address (%s); its keys get an error until they do", p->conf->name,
                     ps->label, set->nlinks, why);
        }
        return;
    }
    struct decision d = {.server = server,
                         .nreplicas = majority_replicas(set, answers, a, list)};
    /* The majority decides. (An epoch floor would let one Sentinel that
     * claims a huge epoch, or a SENTINEL RESET's return to 0, pin the old
     * address for good; a majority is what Sentinel's own failover needs.) */
    d.move = !ps->resolved || ps->unix_socket || ps->port != a->port ||
             strcmp(ps->host, a->ip) != 0;
    if (!d.move) {
        if (m->f.epoch != epoch || !replicas_same(ps, list, d.nreplicas)) {
            m->f.epoch = epoch;
            follow_everywhere(p, &d, m, a, list);
        }
        return;
    }
    snprintf(from, sizeof(from), "%s:%u", ps->host, ps->port);
    if (ps->resolved)
        log_notice("pool '%s': master '%s' moves %s -> %s:%u (config epoch %llu; %s)",
                   p->conf->name, ps->label, from, a->ip, a->port,
                   (unsigned long long)epoch, why);
    else
        log_notice("pool '%s': master '%s' is at %s:%u (config epoch %llu; %s)",
                   p->conf->name, ps->label, a->ip, a->port, (unsigned long long)epoch, why);
    if (ps->resolved) {
        m->f.switches++;
        m->f.switched_ms = uv_now(cur_loop->uv);
        snprintf(m->f.last, sizeof(m->f.last), "%s -> %s:%u, epoch %llu, %s", from, a->ip,
                 a->port, (unsigned long long)epoch, why);
    }
    m->f.epoch = epoch;
    m->told = false;
    follow_everywhere(p, &d, m, a, list);
}

/* ---- the start ----------------------------------------------------------------- */

void sentinel_start(struct pool *p)
{
    const struct conf_pool *pc = p->conf;
    struct sentinel *set = xcalloc(1, sizeof(*set));

    set->p = p;
    set->nlinks = (uint32_t)pc->nsentinels;
    set->links = xcalloc(set->nlinks, sizeof(*set->links));
    for (uint32_t i = 0; i < set->nlinks; i++) {
        set->links[i].set = set;
        set->links[i].idx = i;
        backend_init_owned(&set->links[i].b, p, &p->conf, &link_ops);
    }
    p->sentinel = set;
    for (uint32_t s = 0; s < p->nservers; s++) {
        struct pool_server *ps = &p->servers[s];
        struct answer *answers;
        if (!ps->active)
            continue;
        answers = answers_new(set->nlinks);
        for (uint32_t i = 0; i < set->nlinks; i++) {
            const struct conf_addr *at = &pc->sentinels[i];
            struct backend_server sv;
            size_t len;
            link_server(&set->links[i].b, &sv);
            char *raw = backend_sync_sentinel(
                &sv, 3, (const char *const[]){"SENTINEL", "MASTER", ps->label}, &len);
            struct resp_rd rd;
            if (raw == NULL) {
                log_warn("pool '%s': Sentinel %s does not answer", pc->name, at->text);
                continue;
            }
            resp_rd_init_flat(&rd, raw, len);
            if (!read_master(&rd, &answers[i]))
                log_warn("pool '%s': Sentinel %s has no master '%s': %.*s", pc->name,
                         at->text, ps->label, (int)(len > 80 ? 80 : len), raw);
            free(raw);
            if (pc->read_from == CONF_READ_MASTER || !answers[i].valid)
                continue;
            raw = backend_sync_sentinel(
                &sv, 3, (const char *const[]){"SENTINEL", "REPLICAS", ps->label}, &len);
            if (raw == NULL)
                continue;
            resp_rd_init_flat(&rd, raw, len);
            read_replicas(&rd, &answers[i]);
            free(raw);
        }
        conclude(set, s, answers, "at start");
        answers_free(answers, set->nlinks);
        /* Before anything is read from it: the server there must say it
         * is a master (the migration record is read next). */
        if (ps->resolved) {
            size_t len;
            char *raw = pool_conn_call_raw(p, (uint32_t)(ps - p->servers), 2,
                                           (const char *const[]){"HELLO", "2"}, &len);
            if (raw == NULL || !sentinel_says_master(raw, len)) {
                log_warn("pool '%s': master '%s': %s:%u does not say it is a master; its "
                         "keys get an error until the Sentinels name one that does",
                         pc->name, ps->label, ps->host, ps->port);
                ps->resolved = false;
            }
            free(raw);
        }
        master_of(set, s)->next_check = 0;
    }
}

void sentinel_start_copy(struct pool *p, const struct pool *src)
{
    struct sentinel *set = xcalloc(1, sizeof(*set));

    set->p = p;
    set->mirror = true;
    p->sentinel = set;
    for (uint32_t s = 0; s < p->nservers && s < src->nservers; s++) {
        const struct pool_server *from = &src->servers[s];
        struct pool_addr list[POOL_REPLICAS_MAX];
        uint32_t n = 0;
        if (!from->active)
            continue;
        if (from->resolved)
            pool_server_move(p, s, from->host, from->port);   /* (no connection yet) */
        for (uint32_t i = 0; from->replicas != NULL && i < POOL_REPLICAS_MAX; i++)
            if (from->replicas[i].listed)
                list[n++] = (struct pool_addr){from->replicas[i].host, from->replicas[i].port};
        pool_server_replicas(p, s, list, n);
        if (s < src->sentinel->nmasters) {
            struct master *m = master_of(set, s);
            const struct master *m0 = &src->sentinel->masters[s];
            m->f = m0->f;
        }
    }
}

/* ---- links ---------------------------------------------------------------------- */

static void round_start(struct sentinel *set, uint32_t server, const char *why);

static struct link *link_of(const struct backend *b)
{
    return container_of((struct backend *)b, struct link, b);
}

/* Where l's connection goes: the Sentinel at its index in the pool's
 * config (as a reload keeps them: the same ones, maybe reordered, since
 * any other change needs a restart). */
static void link_server(const struct backend *b, struct backend_server *sv)
{
    const struct link *l = link_of(b);
    const struct conf_pool *pc = l->set->p->conf;
    const struct conf_addr *at = &pc->sentinels[l->idx];

    *sv = (struct backend_server){
        .conf = pc,
        .label = at->text,
        .host = at->host,
        .port = at->port,
        .resolved = true,
    };
}

/* The proxy's own command argv[0..argc) on l, its reply to on_reply; for
 * a round, which master's and which question (SENTINEL MASTER, or
 * REPLICAS). Its deadline is SENTINEL_ANSWER_MS, whatever the pool's. */
static void link_send(struct link *l, req_reply_cb *on_reply, uint32_t server, uint32_t round,
                      bool replicas, int argc, const char *const *argv)
{
    struct req *r = req_get();
    struct resp_w w = resp_w_on(&r->out, &l->set->buf, RESP2);

    resp_w_command(&w, argc, argv, NULL);
    r->on_reply = on_reply;
    r->u.sentinel.server = server;
    r->u.sentinel.round = round;
    r->u.sentinel.replicas = replicas;
    backend_send(&l->b, r);              /* (within link_ops.answer_ms) */
}

/* SUBSCRIBE's reply (RESP3: a push, link_push says so): nothing to read;
 * none: the link failed, and it subscribes again as it reconnects. */
static int link_subscribed(struct backend *b, struct req *r)
{
    (void)b, (void)r;
    return 0;
}

/* l is connected, its HELLO queued: the event's pushes and the rounds'
 * replies share the link (RESP3), so it subscribes on each connection. */
static void link_up(struct backend *b)
{
    struct link *l = link_of(b);
    const struct conf_pool *pc = l->set->p->conf;

    link_send(l, link_subscribed, 0, 0, false, 2,
              (const char *const[]){"SUBSCRIBE", "+switch-master"});
    log_info("pool '%s': Sentinel %s linked", pc->name, pc->sentinels[l->idx].text);
}

/* The link fails (the connection's own failure: an error, EOF, a refused
 * HELLO, a request unanswered by its deadline): said once, if it was up.
 * Each answer it owed then comes with no reply (link_answer): counted as
 * given, without an address; the connection backs off and the tick
 * reconnects it (sentinel_tick). */
static void link_failed(struct backend *b, const char *why)
{
    struct link *l = link_of(b);
    struct sentinel *set = l->set;

    if (b->state == BACKEND_UP && !cur_loop->stopping)
        log_warn("pool '%s': Sentinel %s: %s", set->p->conf->name,
                 set->p->conf->sentinels[l->idx].text, why);
}

/* A push: "+switch-master <name> <old ip> <old port> <new ip> <new port>"
 * on the channel: a round for that master. SUBSCRIBE's confirmation is
 * that command's reply (true). */
static bool link_push(struct backend *b, const struct msg *frame)
{
    struct link *l = link_of(b);
    struct sentinel *set = l->set;
    struct resp_rd rd;
    struct resp_val top, kind, chan, msg;
    char text[512], why[96];
    const char *s;

    resp_rd_init(&rd, frame);
    if (resp_rd_next(&rd, &top) < 0 || top.elems != 3 || resp_rd_next(&rd, &kind) < 0)
        return false;
    if (resp_rd_is(&rd, &kind, "subscribe", 9, false))
        return true;
    if (!resp_rd_is(&rd, &kind, "message", 7, false) || resp_rd_next(&rd, &chan) < 0 ||
        resp_rd_next(&rd, &msg) < 0 || msg.type != RESP_BULK || msg.len >= sizeof(text) ||
        (s = resp_rd_str(&rd, &msg, text, sizeof(text))) == NULL)
        return false;
    size_t nlen = strcspn(s, " ");
    if (nlen > msg.len)
        nlen = msg.len;
    for (uint32_t server = 0; server < set->p->nservers; server++) {
        const struct pool_server *ps = &set->p->servers[server];
        if (ps->active && strlen(ps->label) == nlen && memcmp(ps->label, s, nlen) == 0) {
            snprintf(why, sizeof(why), "+switch-master from Sentinel %s",
                     set->p->conf->sentinels[l->idx].text);
            round_start(set, server, why);
        }
    }
    return false;
}

/* A round's answer from l, SENTINEL MASTER's or REPLICAS's; none (an
 * empty reply): l failed, and the answer counts as given, without an
 * address (the round ends at its deadline, or with the others'). */
static int link_answer(struct backend *b, struct req *r)
{
    struct link *l = link_of(b);
    struct sentinel *set = l->set;
    uint32_t server = r->u.sentinel.server;
    struct master *m = master_of(set, server);
    struct resp_rd rd;

    if (m->round != r->u.sentinel.round)
        return 0;                           /* (a round that timed out) */
    if (r->rsp.len == 0) {
        if (m->waiting > 0)
            m->waiting--;
        return 0;
    }
    resp_rd_init(&rd, &r->rsp);
    if (r->u.sentinel.replicas)
        read_replicas(&rd, &m->answers[l->idx]);
    else
        read_master(&rd, &m->answers[l->idx]);
    if (m->waiting > 0 && --m->waiting == 0) {
        m->round = 0;
        conclude(set, server, m->answers, m->why);
    }
    return 0;
}

static const struct backend_owner link_ops = {
    .greeting = BACKEND_GREET_SENTINEL,
    .resp3 = true,          /* its pushes and its replies share it */
    .server = link_server,
    .up = link_up,
    .push = link_push,
    .failed = link_failed,
    .answer_ms = SENTINEL_ANSWER_MS,
    .reply_max = SENTINEL_REPLY_MAX,
};

/* ---- rounds --------------------------------------------------------------------- */

static void round_start(struct sentinel *set, uint32_t server, const char *why)
{
    struct master *m = master_of(set, server);
    const char *name = set->p->servers[server].label;

    if (m->round != 0)
        return;                     /* one at a time */
    m->round = ++set->round_seq ? set->round_seq : ++set->round_seq;
    m->waiting = 0;
    m->deadline = uv_now(cur_loop->uv) + SENTINEL_ROUND_MS;
    m->next_check = uv_now(cur_loop->uv) + SENTINEL_CHECK_MS;
    snprintf(m->why, sizeof(m->why), "%s", why);
    answers_clear(m->answers, set->nlinks);
    for (uint32_t i = 0; i < set->nlinks; i++) {
        struct link *l = &set->links[i];
        if (l->b.state != BACKEND_UP)
            continue;               /* (its answer counts as given, without an address) */
        link_send(l, link_answer, server, m->round, false, 3,
                  (const char *const[]){"SENTINEL", "MASTER", name});
        m->waiting++;
        if (set->p->conf->read_from == CONF_READ_MASTER)
            continue;
        link_send(l, link_answer, server, m->round, true, 3,
                  (const char *const[]){"SENTINEL", "REPLICAS", name});
        m->waiting++;
    }
    if (m->waiting == 0)
        m->round = 0;               /* no Sentinel linked: the next tick tries */
}

/* A mirror's hint, on its way to loop 0. */
struct hint {
    size_t   pool;              /* its index in every loop's pools */
    uint32_t server;
    char     why[96];
};

static void hint_arrived(void *arg)
{
    struct hint *h = arg;

    if (h->pool < cur_loop->npools)
        sentinel_hint(&cur_loop->pools[h->pool], h->server, h->why);
    free(h);
}

void sentinel_hint(struct pool *p, uint32_t server, const char *why)
{
    struct sentinel *set = p->sentinel;

    if (set == NULL || cur_loop->stopping || !p->servers[server].active)
        return;
    if (set->mirror) {
        struct master *m = master_of(set, server);
        uint64_t now = uv_now(cur_loop->uv);
        if (m->hinted_ms != 0 && now - m->hinted_ms < SENTINEL_ROUND_MS)
            return;             /* (a round is asked for already) */
        m->hinted_ms = now;
        struct hint *h = xmalloc(sizeof(*h));
        h->pool = (size_t)(p - cur_loop->pools);
        h->server = server;
        snprintf(h->why, sizeof(h->why), "loop %u: %s", cur_loop->id, why);
        if (!loop_post(loop_at(0), hint_arrived, h))
            free(h);            /* (loop 0 is stopping) */
        return;
    }
    round_start(set, server, why);
}

void sentinel_tick(struct pool *p, uint64_t now)
{
    struct sentinel *set = p->sentinel;

    if (set == NULL || set->mirror || cur_loop->stopping)
        return;
    for (uint32_t i = 0; i < set->nlinks; i++) {
        backend_check_timeout(&set->links[i].b, now);   /* a Sentinel that does not answer */
        backend_keep_up(&set->links[i].b);              /* its backoff over */
    }
    for (uint32_t s = 0; s < p->nservers; s++) {
        struct master *m;
        if (!p->servers[s].active)
            continue;
        m = master_of(set, s);
        if (m->round != 0 && now >= m->deadline) {
            m->round = 0;           /* what came in time is what counts */
            conclude(set, s, m->answers, m->why);
        }
        if (m->round == 0 && now >= m->next_check)
            round_start(set, s, p->servers[s].resolved ? "a periodic check" : "unresolved");
    }
}

bool sentinel_close_handle(struct pool *p, void *h)
{
    struct sentinel *set = p->sentinel;

    for (uint32_t i = 0; set != NULL && i < set->nlinks; i++) {
        struct link *l = &set->links[i];
        if (h == (void *)&l->b.h.handle) {
            backend_close(&l->b);
            return true;
        }
    }
    return false;
}

void sentinel_free(struct pool *p)
{
    struct sentinel *set = p->sentinel;

    if (set == NULL)
        return;
    if (set->buf != NULL)
        mbuf_unref(set->buf);
    for (uint32_t s = 0; s < set->nmasters; s++)
        answers_free(set->masters[s].answers, set->nlinks);
    free(set->masters);
    free(set->links);
    free(set);
    p->sentinel = NULL;
}

void sentinel_info(const struct pool *p, uint32_t server, FILE *f)
{
    const struct pool_server *ps = &p->servers[server];
    const struct master *m = server < p->sentinel->nmasters ? &p->sentinel->masters[server]
                                                             : NULL;

    if (ps->resolved)
        fprintf(f, ",master=%s:%u", ps->host, ps->port);
    else
        fprintf(f, ",master=unknown");
    uint32_t nrep = 0;
    for (uint32_t i = 0; ps->replicas != NULL && i < POOL_REPLICAS_MAX; i++)
        nrep += ps->replicas[i].listed;
    fprintf(f, ",config_epoch=%llu,switches=%u,read_replicas=%u",
            m != NULL ? (unsigned long long)m->f.epoch : 0, m != NULL ? m->f.switches : 0, nrep);
}

void sentinel_describe(const struct pool *p, uint32_t server, struct resp_w *w)
{
    const struct pool_server *ps = &p->servers[server];
    const struct master *m = server < p->sentinel->nmasters ? &p->sentinel->masters[server]
                                                             : NULL;
    char addr[SENTINEL_ADDR_MAX + 8];
    char replicas[POOL_REPLICAS_MAX * (SENTINEL_ADDR_MAX + 8)];

    snprintf(addr, sizeof(addr), "%s:%u", ps->host, ps->port);
    resp_w_bulk_str(w, "master");
    resp_w_bulk_str(w, ps->resolved ? addr : "unknown");
    resp_w_bulk_str(w, "config-epoch");
    resp_w_int(w, m != NULL ? (long long)m->f.epoch : 0);
    resp_w_bulk_str(w, "switches");
    resp_w_int(w, m != NULL ? m->f.switches : 0);
    resp_w_bulk_str(w, "last-switch");
    resp_w_bulk_str(w, m != NULL && m->f.switches > 0 ? m->f.last : "");
    pool_replicas_text(p, server, replicas, sizeof(replicas));
    resp_w_bulk_str(w, "read-replicas");
    resp_w_bulk_str(w, replicas);
}

uint32_t sentinel_switches(const struct pool *p, uint32_t server)
{
    return server < p->sentinel->nmasters ? p->sentinel->masters[server].f.switches : 0;
}

/* ---- the module ---------------------------------------------------------------------- */

const struct module sentinel_module = {
    .name = "sentinel",
    .pool_free = sentinel_free,
    .server_unresolved = sentinel_hint,
    .tick = sentinel_tick,
};

/* track_int.h -- what track.c (the table, the invalidations, the
 * connections' hooks) and track_cmd.c (CLIENT TRACKING and the others,
 * INFO's figures) share of client-side caching: the state of a client and
 * of a pool's table, and the small helpers both use. The design is
 * track.c's first comment. */
#ifndef SHARDIS_TRACK_INT_H
#define SHARDIS_TRACK_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/base/util.h"
#include "proxy/core/pool.h"
#include "proxy/transport/client.h"

/* redis-server's tracking-table-max-keys default. */
#define TRACK_MAX_KEYS 1000000u
/* Invalidations a pool's log keeps (struct track_log). */
#define TRACK_LOG 4096u
enum {
    TRACK_OPTIN  = 1 << 0,
    TRACK_OPTOUT = 1 << 1,
    TRACK_NOLOOP = 1 << 2,
    TRACK_BCAST  = 1 << 3,
};

/* A client as the table names it: counted by the client (while it is
 * there) and by each entry, BCAST list or REDIRECT that names it. */
struct track_sink {
    uint32_t       refs;
    struct client *c;           /* NULL once the client is gone */
};

/* Keys, each [u32 length][bytes], one after another. */
struct klist {
    char    *buf;
    size_t   len, cap;
    uint32_t n;
};

/* REDIRECT: where a client's invalidations go instead. */
struct track_redir {
    uint64_t           id;      /* 0: none */
    struct track_sink *sink;    /* the target's on this loop (counted), or NULL ... */
    uint32_t           loop;    /* ... and then its loop and its pool there */
    uint32_t           pool;
    bool               broken;  /* it went away (TRACKINGINFO's broken_redirect) */
};

/* A BCAST NOLOOP client's own write of a key (key: len bytes after it). */
/* A NOLOOP client's write of a key (struct track_client's own), noted as
 * it is routed, so that the invalidation its write causes is not told to
 * it (track.c own_change). The server knows which client changed a key;
 * the proxy sees one connection, and another client's change of the key
 * may come as soon: so a note takes an invalidation as the write's only
 * once the write's reply says it certainly changed the key
 * (certainly_changed), and only one that comes where the server sends
 * it, after or with the reply: in what its connection (note_conn) had
 * received when the reply was read. One that comes before the reply is
 * held (HELD) until the reply says. */
enum own_state {
    OWN_PENDING,                /* routed, its reply not read yet */
    OWN_HELD,                   /* ... and an invalidation of the key came meanwhile */
    OWN_CHANGED,                /* its reply said it changed the key: the next
                                   invalidation there (nreads, pending) is its own */
};

#define OWN_NO_PLACE UINT32_MAX

struct own_write {
    char    *key;               /* (owned) */
    uint32_t len;
    uint32_t server;            /* where the key is (at the write) */
    bool     bcast;             /* said on the BCAST connection, else RESP3's */
    uint8_t  state;             /* enum own_state */
    bool     pending;           /* OWN_CHANGED: that connection had bytes unread then */
    uint32_t nreads;            /* OWN_CHANGED: that connection's nreads then */
    /* Queued in MULTI: its reply is EXEC's element place (OWN_NO_PLACE:
     * not in a transaction), of the write's command (cmd_number) that
     * writes nwritten keys; tx: the client's tx_ends when it was routed
     * (its transaction is the one the next EXEC, DISCARD or RESET ends). */
    uint32_t tx;
    uint32_t place;
    uint32_t nwritten;
    uint16_t cmd;
    /* BCAST: the client read the key before the write was answered
     * (track.c mark_reread): the write is not taken as certain. */
    bool     reread;
};

struct track_client {
    struct track_sink *sink;
    struct track_redir redir;
    uint8_t   flags;            /* TRACK_* */
    bool      caching;          /* CLIENT CACHING YES (OPTIN) or NO (OPTOUT) given for
                                   the next command */
    bool      dirty;            /* may hold a value: sent a request (or turned on)
                                   since the last null invalidation it was sent */
    struct klist stash;         /* keys its open transaction reads, till EXEC's reply */
    struct klist prefixes;      /* BCAST's */
    struct own_write *own;      /* NOLOOP: its writes [nown], oldest first */
    uint32_t  tx_ends;          /* EXECs, DISCARDs and RESETs it sent (struct own_write tx) */
    uint32_t  nown, own_cap;
    struct track_wait *waiting; /* its CLIENT TRACKING ON BCASTs unanswered (linked by
                                   next), or NULL */
};

/* A key and who read it: its readers a set of sinks, open-addressed
 * (linear probing, at most 3/4 full: a reader read again is found in one
 * probe or two, however many there are). */
struct track_entry {
    struct track_entry *next;   /* in its bucket */
    uint64_t            hash;
    struct track_sink **sinks;  /* [cap], NULL where empty */
    uint32_t            nsinks, cap;    /* cap: 0 or a power of two */
    uint32_t            klen;
    char                key[];
};

/* The last TRACK_LOG invalidations the pool's loop heard (a key's hash, 0
 * for a null), and when: what a RESP2 read answered after one of its key
 * may have missed. */
struct track_log {
    uint64_t hash[TRACK_LOG];
    uint64_t us[TRACK_LOG];
    uint64_t n;                 /* appended in all */
};

struct track_wait;

struct track_tab {
    struct track_entry **buckets;
    uint32_t             nbuckets;  /* a power of two */
    uint32_t             nkeys;
    uint64_t             nitems;    /* key-client pairs (INFO's tracking_total_items) */
    uint32_t             evict_at;  /* the bucket eviction looks at next */
    uint32_t             sweep_at;  /* ... and the tick's sweep */
    uint64_t             ping_ms;   /* the tick's last keepalive (loop ms) */
    struct track_sink  **bcast;     /* [nbcast]: BCAST clients (counted) */
    uint32_t             nbcast, bcast_cap;
    struct track_log     log;
};

/* ---- key lists ---- */

static inline void klist_add(struct klist *l, const char *key, size_t len)
{
    uint32_t n = (uint32_t)len;

    if (l->len + sizeof(n) + len > l->cap) {
        l->cap = (l->len + sizeof(n) + len) * 2;
        l->buf = xrealloc(l->buf, l->cap);
    }
    memcpy(l->buf + l->len, &n, sizeof(n));
    memcpy(l->buf + l->len + sizeof(n), key, len);
    l->len += sizeof(n) + len;
    l->n++;
}

/* The key at *at (advanced past it), or NULL after the last. */
static inline const char *klist_next(const struct klist *l, size_t *at, uint32_t *len)
{
    if (*at + sizeof(*len) > l->len)
        return NULL;
    memcpy(len, l->buf + *at, sizeof(*len));
    *at += sizeof(*len) + *len;
    return l->buf + *at - *len;
}

static inline void klist_clear(struct klist *l)
{
    l->len = 0;
    l->n = 0;
}

/* ---- a client's state ---- */

static inline void sink_unref(struct track_sink *s)
{
    if (s != NULL && --s->refs == 0)
        free(s);
}

static inline struct track_client *state(const struct client *c)
{
    return c->rare != NULL ? c->rare->track : NULL;
}

static inline struct track_client *state_make(struct client *c)
{
    struct client_rare *rare = client_rare(c);

    if (rare->track == NULL) {
        rare->track = xcalloc(1, sizeof(*rare->track));
        rare->track->sink = xcalloc(1, sizeof(*rare->track->sink));
        rare->track->sink->refs = 1;
        rare->track->sink->c = c;
    }
    return rare->track;
}

static inline void own_clear(struct track_client *t)
{
    for (uint32_t i = 0; i < t->nown; i++)
        free(t->own[i].key);
    t->nown = 0;
}

static inline struct client *by_id(struct pool *p, uint64_t id)
{
    for (uint32_t i = 0; i < p->front.nclients; i++)
        if (p->front.clients[i]->id == id)
            return p->front.clients[i];
    return NULL;
}


static inline bool bcast_still(const struct track_sink *s)
{
    const struct track_client *t;

    return s->c != NULL && s->c->tracking && (t = state(s->c)) != NULL &&
           (t->flags & TRACK_BCAST);
}


/* p's BCAST clients: s joins (counted); those gone leave at the tick. */
void track_bcast_join(struct pool *p, struct track_sink *s);

#endif

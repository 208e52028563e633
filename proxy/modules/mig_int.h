/* mig_int.h -- what the files of the migration share (mig.c, mig_op.c,
 * mig_mover.c, mig_record.c); nothing else includes it.
 *
 * One struct mig per pool while keys move (pool->mig), made by mig_start
 * and freed by mig_free, nowhere else. It owns everything below: the
 * earlier rings, the MIGRATEs (struct mig_op: on one of its lists, a
 * source's queue, or in flight as the req's u.mig.op, never two of these),
 * the mover's sources and their keys. A request of mig's own that is in
 * flight holds no pointer into it but the op (whose lists it left when
 * sent) and a source index checked against the epoch: a reply that
 * arrives after mig_free or a new epoch finds pool->mig NULL or the epoch
 * changed and drops the reply. */
#ifndef SHARDIS_MIG_INT_H
#define SHARDIS_MIG_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "proxy/modules/mig.h"
#include "proxy/base/mbuf.h"

struct backend;
struct pool;
struct req;

#define MIG_MAX_PRIOR       2
#define MIG_LOG_MS          5000        /* progress in the log this often */
#define MIG_SCAN_FACTOR     10          /* SCAN COUNT = batch * this */
#define MIG_BATCH_BYTES     (4 << 20)   /* a batch's keys' MEMORY USAGE, at most */
#define MIG_BIG_TIMEOUT     10          /* a big key's MIGRATE: migrate_timeout * this */
#define MIG_SLOW_MS         10          /* a mover command slower than this: the source
                                           rests as long before the next */
#define MIG_RETRY_MAX_MS    1000        /* a MIGRATE's retry backoff, at most */
#define MIG_RECORD_MS       1000        /* the record written again this often */
#define MIG_FINISH_MS       100         /* the other loops asked whether they are done */

enum mig_state { MIG_DRAINING, MIG_MOVING };

struct mig_ring {
    struct ring *ring;
    uint32_t    *slot;                  /* ring index -> server */
    char        *text;                  /* the config it came from (for the record) */
};

/* One MIGRATE: for requests (on touch) or a batch of the mover. */
struct mig_op {
    TAILQ_ENTRY(mig_op) link;           /* open, gated or retry list */
    struct pool       *pool;
    struct msg         keys;            /* the "$len key" run, kept for retries: each
                                           MIGRATE's head is written when it is sent,
                                           to where op->to is then (a failover moves it) */
    struct req       **wait;            /* on touch: the requests waiting */
    uint32_t           nwait, capwait;
    int32_t            src;             /* mover: its source's index; -1 on touch */
    uint32_t           from;            /* the server it runs on */
    uint32_t           to;              /* where the keys go */
    uint32_t           nkeys;
    uint32_t           tries;
    uint32_t           epoch;
    uint64_t           retry_at;
    uint64_t           gated_at;        /* when it began to wait for the drain */
    uint64_t           timeout;         /* MIGRATE's own, ms */
};

TAILQ_HEAD(mig_ops, mig_op);

/* A misplaced key found by SCAN, waiting to be sized or (big) moved. */
struct mig_key {
    char    *key;
    size_t   len;
    uint32_t owner;
};

/* A server the mover walks. One command of the mover at a time runs on
 * it: redis-server runs a connection's pipelined commands back to back,
 * so a client's request waits behind at most one SCAN or one batch. */
/* Where the mover is in walking one earlier owner (a source). mig_advance()
 * moves it on; the replies to its SCAN and MEMORY USAGE move it out of
 * PAGE (page_over):
 *
 *   WALKING --scan_page--> PAGE --reply, cursor != 0--> WALKING
 *                            |
 *                            +--reply, cursor 0--> WALKED --batches answered,
 *                                                     big keys moved-->
 *                                 again (a batch failed): WALKING | DONE
 *
 * A failed page goes back to WALKING at the same cursor, after a pause
 * (wait_until). mig_mover_reset starts every source WALKING at cursor 0. */
enum mig_walk {
    WALK_WALKING,                       /* between pages: the next SCAN when allowed */
    WALK_PAGE,                          /* a SCAN, or its keys' sizing, in flight */
    WALK_WALKED,                        /* back at cursor 0: its batches finish */
    WALK_DONE,                          /* walked with nothing failed: no key left */
};

struct mig_source {
    uint32_t server;
    uint64_t cursor;
    uint64_t resume;                    /* where a restarted proxy may go on: the cursor
                                           of the page in hand (pages before it moved) */
    uint32_t ops;                       /* its MIGRATEs queued or unanswered */
    struct mig_ops queue;               /* batches of the last SCAN not yet sent */
    enum mig_walk walk;
    bool     again;                     /* a batch failed: walk once more */
    uint64_t wait_until;                /* loop ms: rest until then (failed, or slow) */
    uint64_t sent_ms;                   /* when its command in flight was sent */
    struct mig_key *page;               /* the last SCAN's misplaced keys, being sized */
    uint32_t npage;
    struct mig_key *big;                /* keys over bigkey_bytes: moved last */
    uint32_t nbig, capbig;
    uint64_t bigs;                      /* big keys moved */
    uint64_t scanned, moved, errors, passes;
};

struct mig {
    struct mig_ring    prior[MIG_MAX_PRIOR];    /* [0] the most recent */
    uint32_t           nprior;
    enum mig_state     state;
    /* With several loops each loop's copy of the pool has its own mig
     * (made in the world stop that switches every loop's ring: group.c),
     * for its own requests' MIGRATEs on touch and its own drain. Loop 0's
     * leads: the mover, the record, when the drain is over for all (the
     * others mail it theirs: loops_drained) and when the keys have all
     * moved (mig.c finish, in one world stop). */
    bool               lead;            /* loop 0's */
    uint32_t           loops_drained;   /* lead: the other loops drained this epoch */
    bool               told_drained;    /* not lead: this epoch's drain mailed to loop 0 */
    uint64_t           finish_ms;       /* lead: when the other loops were last asked
                                           whether they are done (finish_all) */
    bool               paused;
    uint32_t           markers;         /* drain markers unanswered */
    uint32_t           writes;          /* record writes unanswered */
    bool               record_due;      /* write the record (before anything moves) */
    bool               hold;            /* group.c: keep the drain closed */
    char              *text;            /* the config routed by (the record's "conf") */
    uint64_t           record_ms;       /* when it was last written */
    uint32_t           inflight;        /* MIGRATEs sent, unanswered */
    struct mig_ops     open;            /* on touch: taking keys until the loop turn ends */
    struct mig_op    **joined;          /* the ops the request being routed joined, */
    uint32_t           njoined, capjoined;  /* until mig_send takes them */
    struct mig_ops     gated;           /* waiting for the drain */
    struct mig_ops     retry;           /* waiting for their retry time */
    struct mig_source *src;
    uint32_t           nsrc;
    struct mbuf       *buf;             /* where the proxy's own bytes are written */
    double             tokens;          /* keys the mover may move now */
    uint64_t           tick_ms;
    uint64_t           started_ms, moving_ms, log_ms;
    uint64_t           touched;         /* keys moved on touch (+OK) */
    uint64_t           tryagain;        /* requests answered -TRYAGAIN */
};

/* ---- mig_op.c: MIGRATE commands ---- */

/* Append one key, as a bulk, to g. */
void mig_put_key(struct mig *m, struct msg *g, const char *key, size_t len);
/* Send op's MIGRATE (op is in flight until migrate_reply). */
void mig_op_send(struct mig *m, struct mig_op *op);
/* An on-touch MIGRATE is over, ok or failed for good: its requests go on
 * (or get -TRYAGAIN); op is freed. */
void mig_op_done(struct mig *m, struct mig_op *op, bool ok);
void mig_op_free(struct mig_op *op);

/* ---- mig_mover.c: the background walk ---- */

/* The mover's connection to server, made on first use. */
struct backend *mig_mover_conn(struct pool *p, uint32_t server);
/* Move src's walk on, as far as the budget and its state allow. */
void mig_advance(struct pool *p, struct mig *m, struct mig_source *src);
/* A batch of the mover is over (ok; nokey: none of its keys was there). */
void mig_mover_op_done(struct pool *p, struct mig *m, struct mig_op *op, bool ok, bool nokey);
/* Walk every server of every earlier ring from the start. */
void mig_mover_reset(struct pool *p, struct mig *m);
void mig_mover_free(struct mig *m);
/* The part of src's server walked so far, 0 to 1. */
double mig_walked(const struct mig_source *src);

/* ---- mig_record.c: the record on the servers ---- */

/* SET the record (or DEL it: set false) on every server that holds keys. */
void mig_record_send(struct pool *p, struct mig *m, bool set);

#endif

/* holdoff.h -- keeping away from a server for a while: the one record of
 * it (struct holdoff) and its rules, for each of its three uses:
 *
 *   use                what is kept away from, for how long    made, read
 *   HOLDOFF_BACKOFF    a shared connection that failed: new     backend_fail;
 *                      requests on it fail fast, then it        backend_held_off
 *                      reconnects; 100 ms after its first       (backend.h)
 *                      failure in a row, doubling to 2 s
 *   HOLDOFF_EJECTED    a server's master, out of the ring keys  pool_backend_failed,
 *                      are hashed by (auto_eject_hosts with     pool_tick;
 *                      eject_mode: rehash) for                  pool_held_off
 *                      server_retry_timeout                     (core/pool.h)
 *   HOLDOFF_SHUNNED    a replica that answered -LOADING or      pool_shun;
 *                      -MASTERDOWN: no read for                 pool_held_off
 *                      POOL_REPLICA_SHUN_MS
 *
 * A hold lapses by itself at its `until` (BACKOFF, SHUNNED), or lasts
 * until its owner lifts it (EJECTED: routing's ring must be rebuilt with
 * the server again, which pool_tick does from `until` on, so that the
 * ring and whatever says "ejected" agree until then). Whether a hold is
 * on is asked of nothing else than each use's one function
 * (backend_held_off, pool_held_off), which asks holdoff_on; only the
 * count of failures is read as it is (the server_failed hook's).
 *
 *   NONE --holdoff_fail--> BACKOFF --(until passes: lapsed)
 *     ^  --holdoff_for --> EJECTED --holdoff_lift (pool_tick, a new ring)--> NONE
 *     |  --holdoff_for --> SHUNNED --(until passes: lapsed)
 *     +----- holdoff_lift (a connection moved, a replica slot given anew) ----+
 *
 * A record lives in what it is about (struct backend, struct pool_server,
 * struct pool_replica), all of which one loop owns, and the rules are
 * given the loop's clock (uv_now of cur_loop->uv) rather than read any:
 * nothing is global, so loops on threads of their own would each keep
 * their own holds. The trade-off that would come with it: each loop would
 * back off, eject and shun on what it alone saw, as each twemproxy
 * process does. */
#ifndef SHARDIS_HOLDOFF_H
#define SHARDIS_HOLDOFF_H

#include <stdbool.h>
#include <stdint.h>

enum holdoff_why {
    HOLDOFF_NONE,               /* never held, or lifted */
    HOLDOFF_BACKOFF,            /* a connection's reconnect backoff */
    HOLDOFF_EJECTED,            /* a server out of the ring (until lifted) */
    HOLDOFF_SHUNNED,            /* a replica passed over for reads */
};

/* The backoff's bounds (ms): HOLDOFF_BACKOFF_MIN after a first failure,
 * doubled with each in a row, up to HOLDOFF_BACKOFF_MAX: a server that
 * restarts is back within 2 s, and one that stays down costs a connect
 * every 2 s rather than one per request. */
#define HOLDOFF_BACKOFF_MIN 100
#define HOLDOFF_BACKOFF_MAX 2000

/* Embedded in what it is about, zeroed with it (HOLDOFF_NONE). */
struct holdoff {
    uint64_t until;             /* loop ms it lapses at (EJECTED: from which it is
                                   lifted); 0 with NONE */
    uint32_t failures;          /* BACKOFF: the connection's failures in a row,
                                   ended by a reply (holdoff_ok) */
    uint8_t  why;               /* enum holdoff_why */
};

/* Whether h keeps its server away at now. */
static inline bool holdoff_on(const struct holdoff *h, uint64_t now)
{
    return h->why == HOLDOFF_EJECTED || (h->why != HOLDOFF_NONE && now < h->until);
}

/* Whether h's time is up: a hold that lasts until lifted is due to be. */
static inline bool holdoff_due(const struct holdoff *h, uint64_t now)
{
    return h->why != HOLDOFF_NONE && now >= h->until;
}

/* One more failure in a row at now: back off for longer (the rule above). */
static inline void holdoff_fail(struct holdoff *h, uint64_t now)
{
    uint64_t backoff;

    h->failures++;
    backoff = (uint64_t)HOLDOFF_BACKOFF_MIN << (h->failures < 6 ? h->failures - 1 : 5);
    h->why = HOLDOFF_BACKOFF;
    h->until = now + (backoff < HOLDOFF_BACKOFF_MAX ? backoff : HOLDOFF_BACKOFF_MAX);
}

/* Keep away for why (HOLDOFF_EJECTED or HOLDOFF_SHUNNED) until `until`. */
static inline void holdoff_for(struct holdoff *h, enum holdoff_why why, uint64_t until)
{
    h->why = (uint8_t)why;
    h->until = until;
}

/* The failures in a row are over (a reply; a server re-admitted): the
 * next failure backs off from the start. What is held stays held. */
static inline void holdoff_ok(struct holdoff *h)
{
    h->failures = 0;
}

/* Not held from now on, and no failure counted. */
static inline void holdoff_lift(struct holdoff *h)
{
    *h = (struct holdoff){0};
}

#endif

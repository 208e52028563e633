/* proxy.h -- the process (proxy.c): its one event loop and everything that
 * loop owns, and running it for a loaded config until a signal stops it. */
#ifndef SHARDIS_PROXY_H
#define SHARDIS_PROXY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <uv.h>

#include "conf/conf.h"

struct backend;
struct client;
struct pool;

/* Everything the event loop owns, and the process's state. */
struct proxy {
    uv_loop_t        *loop;
    struct conf      *conf;
    struct pool      *pools;
    size_t            npools;
    uv_check_t        flusher;      /* one writev per connection per loop turn */
    uv_timer_t        ticker;       /* request deadlines */
    uv_signal_t       sigterm, sigint, sighup;
    struct client   **dirty;        /* clients with replies to write this turn, in
                                       order; a closed one's entry is NULL */
    size_t            ndirty, dirty_cap;
    TAILQ_HEAD(, client_rare) stalled;  /* clients not read for their unread replies */
    TAILQ_HEAD(, backend) dirty_backends;
    uint64_t          next_client_id;
    uint64_t          started_ms;
    uint32_t          nclients;
    uint64_t          total_connections, total_commands;
    uint32_t          seconds;      /* whole seconds since the start, set each tick
                                       (proxy_seconds) */
    uint64_t          now_us;       /* uv_hrtime() in us, read once per read callback
                                       (client.c, backend.c): stats.c's clock */
    bool              stopping;
    uint64_t          stop_ms;      /* when the stop signal came */
    int               port;         /* first TCP listen port, for INFO */
    char              idgen_sha[41];/* SHA1 of idgen_script (from SCRIPT LOAD); "" unknown */
    double            start_unix;   /* the start, in unix seconds (/metrics) */
    char              run_id[41];   /* INFO's: 40 random hex digits, new each start */
    char              executable[256];  /* INFO's: /proc/self/exe, or "" */
    uint64_t          rng;          /* proxy_random's xorshift64* state (never 0) */
    struct req       *req_free;     /* req.c: request objects kept for reuse */
    size_t            req_nfree;
    uint64_t          other_db_reqs;/* requests alive that were routed in a database
                                       other than redis_db (req.other_db; info.c), */
    uint64_t          other_db_routed;  /* ... and how many were, ever */
    uv_timer_t        drainer;      /* the stop: waits for requests in flight */
    uint64_t          idle_seen;    /* total_commands at the last tick ... */
    uint64_t          idle_since;   /* ... and when it last changed */
    bool              idle_trimmed; /* pools trimmed since (idle_check) */
    struct conf     **old_confs;    /* replaced by reloads while a pool still routed by
                                       them (group.c); freed once none does */
    size_t            nold_confs;
};

extern struct proxy proxy;

/* Whole seconds since the proxy started, by the loop's clock as of the
 * last tick (a request reads it: no division on its path). */
static inline uint32_t proxy_seconds(void)
{
    return proxy.seconds;
}

/* xorshift64* over proxy.rng: an even spread (new ids' shards, HOTKEYS'
 * sampling), not a secret. */
static inline uint64_t proxy_random(void)
{
    uint64_t x = proxy.rng != 0 ? proxy.rng : 0x9e3779b97f4a7c15ULL;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    proxy.rng = x;
    return x * 0x2545f4914f6cdd1dULL;
}

/* Start the loop's flush and tick handles (proxy.flusher, proxy.ticker):
 * proxy_run does, and so does a unit test that runs pools of its own on
 * proxy.loop. */
void proxy_loop_start(void);

/* A config the proxy no longer runs: freed, or kept while a pool still
 * routes by one of its pools (a reload waiting for the other proxies), and
 * freed when the last such pool switches (pool_set_ring). */
void proxy_conf_done(struct conf *cf);
/* Free the old configs no pool routes by now (pool_set_ring). */
void proxy_conf_sweep(void);

void proxy_mark_client(struct client *c);
void proxy_mark_backend(struct backend *b);

/* Block SIGHUP (hold) until proxy_run has its handler in place, which
 * unblocks it: main calls it before it writes the pid file. */
void proxy_hold_sighup(bool hold);
/* Start every pool of cf and run the event loop. The proxy takes cf (a
 * reload replaces it) and frees it before returning; a reload reads
 * cf->path again. Returns the process exit code. */
int proxy_run(struct conf *cf);

/* Called once the proxy has been idle (no requests) for PROXY_IDLE_MS,
 * after its own pools are trimmed: main.c hands the allocator's caches
 * back to the kernel there. NULL: nothing more to do. */
extern void (*proxy_idle_hook)(void);

#endif

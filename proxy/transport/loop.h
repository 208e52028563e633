/* loop.h -- what an event loop owns (struct loop), and the one pointer that
 * reaches it.
 *
 * Everything a request touches on its way (the loop's clients waiting to
 * be written, its server connections, its request objects, its clock and
 * counters) hangs off a struct loop. The process makes one per thread
 * (process/proxy.c, --threads) and points each thread's cur_loop at its
 * own; code below the process layer reads cur_loop and never a global of
 * its own, so the loop's state has one owner and one way in.
 *
 * What a loop owns and what it shares. Everything a request writes is the
 * loop's: clients, server connections, request objects, buffers, timers,
 * counters, and the pools that hold them. What the process parsed or
 * built once is shared and never changed after it is built, so any
 * number of loops may read it without a lock: the config (conf_ref), a
 * pool's ring (ring_ref) and its users (acl_ref), each reference-counted
 * with an atomic count and replaced whole (a reload or a ring change
 * builds new ones; each holder swaps its pointer and gives the old one
 * back; the last frees it). What the process keeps once and writes after
 * the start: the command table (base/cmd.h), which the servers' COMMAND
 * replies extend (core/cmdinfo.c, which also keeps the kinds of server it
 * has learnt), changed only in a world stop (below), while every other
 * loop is parked; what keys.c and route_kind.c derive from it is each
 * thread's own copy, rebuilt when the table's generation changes. TLS's
 * handshakes under way and its buffers are the loop's (tls).
 *
 * Lifetime: the struct lives as long as the process's run (proxy_run);
 * its handles (flusher, ticker) are closed with every other handle at the
 * stop, and loop_free gives back what it allocated. Pools, their server
 * connections and clients hang off it but are owned by the pools
 * (core/pool.h).
 *
 * A blocking call (transport/backend_sync.c) runs on a loop of its own,
 * for as long as the call: loop_enter makes it current on a fresh
 * uv_loop_t (where no loop runs yet, at start, or at all: shardis acl
 * --check), loop_leave closes it and makes current again the loop that
 * was. It has no pools, no clients, no flusher and no ticker: its one
 * connection is written by the call itself (loop_flush_backends). */
#ifndef SHARDIS_LOOP_H
#define SHARDIS_LOOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <uv.h>

#include "proxy/base/tls.h"

struct backend;
struct client;
struct client_rare;
struct conf;
struct pool;
struct req;

/* The most loops a process runs (--threads). */
#define LOOP_MAX 64

/* Work for a loop, run there (loop_post). */
typedef void loop_fn(void *arg);
struct loop_msg {
    loop_fn         *fn;
    void            *arg;
    struct loop_msg *next;
};

/* A loop's life among the process's loops (loop.c moves it on):
 * MADE: registered, its thread not running it yet (its state is written
 *   by whoever made it); mail waits for it; a world stop visits it without
 *   waiting for it, since its thread parks at its first step (loop_run).
 * RUNNING: its thread runs it; a world stop waits for it to park.
 * RETIRED: stopping for good (loop_retire): no mail, no visits. */
enum loop_state { LOOP_MADE, LOOP_RUNNING, LOOP_RETIRED };

struct loop {
    uv_loop_t        *uv;
    struct conf      *conf;         /* the config the loop serves (a reload swaps it) */
    struct pool      *pools;        /* conf's pools, in its order */
    size_t            npools;
    uv_check_t        flusher;      /* one writev per connection per loop turn */
    uv_timer_t        ticker;       /* request deadlines and every module's tick */
    struct client   **dirty;        /* clients with replies to write this turn, in
                                       order; a closed one's entry is NULL */
    size_t            ndirty, dirty_cap;
    TAILQ_HEAD(, client_rare) stalled;  /* clients not read for their unread replies */
    TAILQ_HEAD(, backend) dirty_backends;
    uint64_t          started_ms;
    uint32_t          nclients;
    uint64_t          total_connections, total_commands;
    uint32_t          seconds;      /* whole seconds since the start, set each tick
                                       (loop_seconds) */
    uint64_t          now_us;       /* uv_hrtime() in us, read once per read callback
                                       (client.c, backend.c): stats.c's clock */
    bool              stopping;
    uint64_t          rng;          /* loop_random's xorshift64* state (never 0) */
    struct req       *req_free;     /* req.c: request objects kept for reuse */
    size_t            req_nfree;
    uint64_t          other_db_reqs;/* requests alive that were routed in a database
                                       other than redis_db (req.other_db; info.c), */
    uint64_t          other_db_routed;  /* ... and how many were, ever, */
    uint64_t          other_db_quiet_ns;    /* ... and since when none has been alive
                                               (uv_hrtime: info.c holds loop 0's INFO
                                               answers against it) */
    uint64_t          idle_seen;    /* commands, connections and clients at the
                                       last tick (proxy.c idle_check) ... */
    uint64_t          idle_since;   /* ... and when it last changed */
    bool              idle_trimmed; /* pools trimmed since (idle_check) */
    /* The process's facts, set once before the loop runs (INFO, /metrics,
     * SHARD.GENKEY read them). */
    int               port;         /* first TCP listen port, for INFO */
    char              idgen_sha[41];/* SHA1 of idgen_script (from SCRIPT LOAD); "" unknown */
    double            start_unix;   /* the start, in unix seconds (/metrics) */
    char              run_id[41];   /* INFO's: 40 random hex digits, new each start */
    char              executable[256];  /* INFO's: /proc/self/exe, or "" */
    struct tls_loop   tls;          /* its TLS handshakes under way, its TLS buffers */
    /* Among the process's loops (loop_register; see "Several loops"
     * below). */
    uint32_t          id;           /* its index: 0 is the one that accepts */
    _Atomic uint32_t  load;         /* its clients, as loop 0 reads them to hand
                                       out the next (written by the loop itself) */
    uv_async_t        mail_wake;    /* wakes it for its mail and for a park */
    pthread_mutex_t   mail_mu;      /* guards mail: the one lock between loops */
    struct loop_msg  *mail, **mail_tail;
    uint64_t          parked_epoch; /* the last world stop it parked for */
    enum loop_state state;          /* where it is in its life (below) */
    const size_t     *chunks_alloc; /* its thread's mbuf counts (mbuf_counts_at), */
    const size_t     *chunks_free;  /* set by loop_run: INFO reads them in a world stop */
};

/* The loop the calling code runs in: one per thread, each thread running
 * at most one loop, so code reaches its own loop's state with no lock and
 * no argument. (initial-exec: the variable is the executable's own, so an
 * access is a load at a fixed offset from the thread pointer, as cheap as
 * a global's, even in the position-independent static library.) */
extern _Thread_local struct loop *cur_loop __attribute__((tls_model("initial-exec")));

/* Make l empty on uv, and the current loop. */
void loop_init(struct loop *l, uv_loop_t *uv);
/* Give back what l, the current loop, allocated (its request objects kept
 * for reuse too; not its pools: their owner frees them). */
void loop_free(struct loop *l);
/* A loop of one's own (see the top): l, on uv (uv_loop_init here), made
 * current. 0, and the loop that was current (NULL: none) into *prev; or
 * uv_loop_init's error, and nothing changed. */
int loop_enter(struct loop *l, uv_loop_t *uv, struct loop **prev);
/* Close l, entered by loop_enter, every handle on it closed or closing:
 * run until each is closed, give back what l allocated, close its
 * uv_loop_t, and make prev current again. */
void loop_leave(struct loop *l, struct loop *prev);

/* Whole seconds since the loop started, by its clock as of the last tick
 * (a request reads it: no division on its path). */
static inline uint32_t loop_seconds(void)
{
    return cur_loop->seconds;
}

/* xorshift64* over the loop's rng: an even spread (new ids' shards,
 * HOTKEYS' sampling), not a secret. */
static inline uint64_t loop_random(void)
{
    uint64_t x = cur_loop->rng != 0 ? cur_loop->rng : 0x9e3779b97f4a7c15ULL;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    cur_loop->rng = x;
    return x * 0x2545f4914f6cdd1dULL;
}

/* Queue a connection's writes for the loop's flush, once per turn. */
void loop_mark_client(struct client *c);
void loop_mark_backend(struct backend *b);
/* Write what each server connection marked has queued (backend_flush),
 * in the order they were marked: the flush's, once per turn (the
 * process's flusher, a blocking call's turns). */
void loop_flush_backends(void);

/* ---- Several loops --------------------------------------------------------
 *
 * With --threads N the process runs N loops, one per thread, and a client
 * lives on one loop for its whole life. The request path crosses no loop:
 * each loop has its own copy of every pool (its own server connections,
 * clients, buffers, counters), so it takes no lock and touches no atomic
 * per request. Two ways cross loops, both rare by design:
 *
 * - Mail (loop_post): a message run on the receiving loop, between its
 *   callbacks. A queue under a mutex and a uv_async_t to wake the loop;
 *   one lock and one wake-up per message, never per request. Loop 0
 *   hands each accepted connection to the loop with the fewest clients
 *   this way; MONITOR's lines go to the loops of the monitors this way, and
 *   a tracking client's invalidations to its REDIRECT target's loop.
 *
 * - A world stop (loop_each, loop_world_stop): the calling loop parks
 *   every other loop between its callbacks (each waits on a condition
 *   variable in its wake-up's callback) and then runs code on each loop's
 *   state in turn, by pointing its own cur_loop at it. Parked, a loop
 *   touches nothing of its own, so the visitor's code is the same code
 *   that runs on one loop (CLIENT LIST walks its pools' clients, CLIENT
 *   KILL closes one, INFO adds its counters up, a reload swaps its config)
 *   with no second version written for threads, and the mutex orders every
 *   write made during the stop before the parked loop goes on. The price:
 *   every loop stops for the length of the question (a CLIENT LIST of
 *   10,000 clients: milliseconds, what redis-server's own CLIENT LIST
 *   costs it), and a loop in a long callback (a large reply being
 *   written) holds the asker until it is back in its loop. Questions
 *   that span clients are rare (admin commands, a reload, the servers'
 *   command table growing); the request path never stops the world.
 *
 * Two loops asking at once: the lock goes to one; the other parks for
 * it while it waits (loop_world_stop), so neither waits for the other.
 * That one is then visited in the middle of its own callback, so what a
 * visit may do to a loop is bounded: close one of its clients (the client
 * stays allocated until its own loop's close callback), swap a pool's
 * config, users, TLS contexts or ring (a server may be added: a pool's
 * servers array may move, not its connections), move a server's
 * connections to a new address, queue requests on its connections (sent
 * by its own flush), pause or unpause, change its monitors, read or reset
 * its counters; never reallocate its pools. Code that stops the world
 * keeps no pointer into a pool's servers across the stop (a connection,
 * a pool, a client are kept where they are). A stop within a stop
 * is the one already made; code run during a stop must not block on
 * another loop's mail. A loop that has left its run (the stop) is retired
 * (loop_retire) and no longer waited for.
 *
 * With one loop all of this costs nothing: loop_each runs its function
 * on the one loop, and no lock is taken. */

/* Add l to the process's loops (its id: how many came before), with
 * its mailbox on l->uv: before l's thread runs it. */
void loop_register(struct loop *l);
/* Run l on the calling thread (its own from here) until its handles are
 * all closed: it joins the world (a stop under way parks it at once). */
void loop_run(struct loop *l);
/* l is stopping for good (on its own thread, as its handles are closed):
 * no stop waits for it or visits it any more, mail to it is refused, and
 * the mail it has is run now; its wake-up handle is closed. */
void loop_retire(struct loop *l);
/* How many loops other than the caller's are not retired yet. */
uint32_t loop_others_live(void);
/* How many loops the process runs, and the i-th. */
uint32_t loop_count(void);
struct loop *loop_at(uint32_t i);
/* Run fn(arg) on `to`, between its callbacks, in the order posted from
 * one loop (one xmalloc'd message each). false, and nothing posted, if
 * `to` is retired: the caller keeps arg. */
bool loop_post(struct loop *to, loop_fn *fn, void *arg);
/* Park every other loop; returns once all are parked. */
void loop_world_stop(void);
/* Let them go on. */
void loop_world_go(void);
/* fn(arg) with cur_loop pointing at each loop in turn, in id order, the
 * world stopped (see above); back on the caller's loop after. */
void loop_each(loop_fn *fn, void *arg);

#endif

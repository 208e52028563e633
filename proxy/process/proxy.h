/* proxy.h -- the process (proxy.c): its one event loop and everything that
 * loop owns, and running it for a loaded config until a signal stops it. */
#ifndef SHARDIS_PROXY_H
#define SHARDIS_PROXY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <uv.h>

#include "conf/conf.h"
#include "proxy/transport/loop.h"

struct backend;
struct client;
struct pool;

/* A loop (transport/loop.h) and what the process keeps with it. Loop 0
 * runs on the main thread, on libuv's default loop; each other on a
 * thread of its own, on its own uv_loop_t. Made by proxy_run, freed after
 * every thread is joined. */
struct worker {
    struct loop       loop;
    uv_loop_t         uv;           /* a thread's own (not loop 0's) */
    uv_thread_t       thread;       /* (not loop 0's) */
    uint64_t          stop_ms;      /* when its stop began */
    uv_timer_t        drainer;      /* its stop: waits for requests in flight */
};

/* The process: its loops, and what only the process does with them:
 * signals (on loop 0), the stop. */
struct proxy {
    uv_signal_t       sigterm, sigint, sighup;
    struct worker    *workers;      /* [nworkers]: loop i is workers[i].loop */
    uint32_t          nworkers;
};

extern struct proxy proxy;

/* Start the loop's flush and tick handles (cur_loop->flusher, cur_loop->ticker):
 * proxy_run does, and so does a unit test that runs pools of its own on
 * cur_loop->uv (the hooks registered first: hooks_register). */
void proxy_loop_start(void);

void loop_mark_client(struct client *c);
void loop_mark_backend(struct backend *b);

/* Block SIGHUP until proxy_run has its handler in place, which unblocks
 * it: main calls it before it writes the pid file. */
void proxy_hold_sighup(void);
/* Start every pool of cf on each of `threads` loops (0: one per core the
 * process may run on) and run them. The proxy takes cf (a reload replaces
 * it) and frees it before returning; a reload reads cf->path again.
 * Returns the process exit code. */
int proxy_run(struct conf *cf, int threads);

/* Called once the proxy has been idle (no requests) for PROXY_IDLE_MS,
 * after its own pools are trimmed: main.c hands the allocator's caches
 * back to the kernel there. NULL: nothing more to do. */
extern void (*proxy_idle_hook)(void);

#endif

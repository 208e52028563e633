/* totals.h -- the process's figures, each pool's added up over every
 * loop (totals.c): what INFO and /metrics answer. With --threads each
 * loop counts its own copy of a pool (transport/loop.h, "Several loops"),
 * so a figure is the sum (or the most) of the copies'. */
#ifndef SHARDIS_TOTALS_H
#define SHARDIS_TOTALS_H

#include <stddef.h>
#include <stdint.h>

#include "proxy/core/pool.h"
#include "proxy/modules/track.h"
#include "proxy/ops/stats.h"

/* Pool i's, over its copies on every loop. */
struct pool_totals {
    uint32_t nclients;
    uint64_t accepted, rejected, requests, evicted_clients, obl_disconnections, clients_mem;
    uint64_t peak_in, peak_out;     /* the most of any loop's (client_peaks) */
    double   ops_per_sec;
    uint64_t errors, slowlog_skipped;
    struct track_figures track;     /* client-side caching's (track.h) */
    struct stats stats;             /* merged (owned) */
    uint32_t nservers;              /* the caller's copy's; the arrays' length */
    struct pool_server_totals *servers; /* up: the best of the loops' */
    struct stats_hist **latency;    /* each server's, merged (owned; NULL: none) */
    uint64_t *ejections;
    uint8_t  *ejected;              /* held off on any loop */
};

struct totals {
    uint32_t nclients, blocked;     /* the process's clients, and those in a blocking call */
    size_t   chunks_alloc, chunks_free; /* every loop's thread's (mbuf.h) */
    uint32_t nloops;                /* loops[]'s: each loop's own, by id (INFO's
                                       loop_N lines: how the clients are spread) */
    struct {
        uint32_t clients;
        uint64_t commands;
    } loops[LOOP_MAX];
    size_t   npools;                /* cur_loop->npools: the same index on every loop */
    struct pool_totals *pools;
};

/* Every loop's figures, added up by one world stop (loop_each). */
void totals_get(struct totals *t);
void totals_free(struct totals *t);
/* p's commandstats over every loop's copy (LATENCY HISTOGRAM), into
 * *into (zeroed first; stats_free it). */
void totals_stats(const struct pool *p, struct stats *into);

#endif

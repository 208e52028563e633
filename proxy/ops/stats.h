/* stats.h -- what INFO's commandstats, errorstats and latencystats
 * sections, LATENCY HISTOGRAM and /metrics say of a pool's requests
 * (stats.c): every request of a client counted once, when its reply is
 * complete, by the command it was, the reply it got and the time it took. */
#ifndef SHARDIS_STATS_H
#define SHARDIS_STATS_H

#include <stdint.h>
#include <stdio.h>

struct req;
struct resp_w;

/* A latency histogram: counts of requests by time taken, in buckets whose
 * upper bounds are stats_bounds (microseconds: 1, 1.2, 1.5, 2, 2.5, 3, 4,
 * 5, 6 and 8 times each power of ten from 10 us to 80 s, then 100 s), the
 * last bucket for all above. Fine enough for a p99 within a fifth of the
 * truth, and every bound is a round number of seconds for Prometheus. */
#define STATS_BUCKETS 72
extern const uint64_t stats_bounds[STATS_BUCKETS - 1];
struct stats_hist {
    uint64_t count, sum_us;
    uint64_t min_us, max_us;    /* (quantiles are clamped to them) */
    uint64_t bucket[STATS_BUCKETS];
};

/* One command's figures, as redis-server's cmdstat_<name> line: calls
 * (run: forwarded, or answered by shardis), the microseconds from its
 * request being read to its reply being complete, summed over those
 * calls; rejected (refused before it ran: arity, NOAUTH, CROSSSLOT, not
 * supported ...) and failed (run, and the reply was an error). */
struct stats_cmd {
    uint64_t calls, usec, rejected, failed;
    struct stats_hist *hist;    /* the calls' times (owned), made on the first */
};

/* Distinct error codes kept: a script chooses its own (redis.error_reply),
 * so a client could otherwise grow the table without end. Codes past it
 * count in total_error_replies only. */
#define STATS_ERRORS_MAX 128
#define STATS_CODE_MAX   32     /* redis-server looks this far ('-' included) for the space */

struct stats_err {
    char     code[STATS_CODE_MAX];
    uint64_t count;
};

/* A pool's (what its clients see as one server's INFO); zeroed with it. */
struct stats {
    struct stats_cmd *cmds;     /* [CMD_MAX], by cmd_number - 1: allocated on first use */
    struct stats_err *errs;     /* [STATS_ERRORS_MAX]: allocated on first use */
    uint32_t          nerrs;
    uint64_t          error_replies;
};

/* r, a client's request, has its whole reply in r->rsp (before CLIENT
 * REPLY OFF drops it), us after it was read: count it, and its time in
 * *server too (the histogram of the one server that answered it, made on
 * first use; NULL: none did). A blocking command's time, mostly waiting,
 * counts in usec but in no histogram. */
void stats_reply(struct stats *st, const struct req *r, uint64_t us, struct stats_hist **server);
/* into += from: another loop's copy of the pool's figures (INFO, /metrics
 * and LATENCY answer for the whole process). */
void stats_merge(struct stats *into, const struct stats *from);
/* *into (made if NULL and from is not) += from. */
void stats_hist_merge(struct stats_hist **into, const struct stats_hist *from);
/* CONFIG RESETSTAT. */
void stats_reset(struct stats *st);
void stats_free(struct stats *st);
/* INFO's lines, without the section's header. */
void stats_info_commandstats(const struct stats *st, FILE *f);
void stats_info_errorstats(const struct stats *st, FILE *f);
/* latencystats: "latency_percentiles_usec_<cmd>:p50=..,p99=..,p99.9=.."
 * for each command called. */
void stats_info_latencystats(const struct stats *st, FILE *f);
/* LATENCY HISTOGRAM [cmd ...]'s reply, as Redis 7 writes it: a map of
 * command to {calls, histogram_usec: {bucket bound: calls up to it}}, of
 * the commands named[0..nnamed) (cmd_number's; 0 an unknown name), all
 * called ones for none; those not called are left out. */
void stats_latency_histogram(const struct stats *st, struct resp_w *w, const uint16_t *named,
                             uint32_t nnamed);

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module stats_module;

#endif

/* stats.h -- what INFO's commandstats and errorstats sections say, and its
 * error count (stats.c): every request of a client counted once, when its
 * reply is complete, by the command it was and the reply it got. */
#ifndef SHARDIS_STATS_H
#define SHARDIS_STATS_H

#include <stdint.h>
#include <stdio.h>

struct req;

/* One command's figures, as redis-server's cmdstat_<name> line: calls
 * (run: forwarded, or answered by shardis), the microseconds from its
 * request being read to its reply being complete, summed over those
 * calls; rejected (refused before it ran: arity, NOAUTH, CROSSSLOT, not
 * supported ...) and failed (run, and the reply was an error). */
struct stats_cmd {
    uint64_t calls, usec, rejected, failed;
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
    struct stats_cmd *cmds;     /* [cmd_table's size]: allocated on first use */
    struct stats_err *errs;     /* [STATS_ERRORS_MAX]: allocated on first use */
    uint32_t          nerrs;
    uint64_t          error_replies;
};

/* r, a client's request, has its whole reply in r->rsp (before CLIENT
 * REPLY OFF drops it): count it. now_us: proxy.now_us. */
void stats_reply(struct stats *st, const struct req *r, uint64_t now_us);
/* CONFIG RESETSTAT. */
void stats_reset(struct stats *st);
void stats_free(struct stats *st);
/* INFO's lines, without the section's header. */
void stats_info_commandstats(const struct stats *st, FILE *f);
void stats_info_errorstats(const struct stats *st, FILE *f);

#endif

/* stats.c -- INFO's commandstats and errorstats, counted where each reply
 * of a client's request is complete (req_done), the one place every
 * request passes, whoever answered it: a server, a merge of several, or
 * shardis itself.
 *
 * Measured at the proxy, as an application sees it: a command's usec runs
 * from its request being read to its reply being complete (waiting at the
 * gate and on the server included), not the server's own time. The clock
 * is read once per read callback (proxy.now_us), not per request: every
 * request framed from one read shares its start, every reply completed by
 * one read shares its end.
 *
 * What redis-server counts and this does not: errors inside an array
 * (EXEC's, a script's pcall) are not top-level replies here; commands a
 * script runs are the server's, not seen. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/cmd.h"
#include "proxy/mbuf.h"
#include "proxy/req.h"
#include "proxy/stats.h"
#include "proxy/util.h"

/* The error code of an error reply ("-CODE message"): the word before the
 * first space within STATS_CODE_MAX bytes, or ERR if there is none, as
 * redis-server's afterErrorReply takes it. */
static void count_error(struct stats *st, const struct msg *rsp)
{
    char line[STATS_CODE_MAX];
    size_t n = rsp->len < sizeof(line) ? rsp->len : sizeof(line);
    const char *sp;
    size_t len;
    uint32_t i;

    st->error_replies++;
    msg_copy(rsp, 0, n, line);
    sp = memchr(line, ' ', n);
    if (sp == NULL || sp == line + 1) {
        memcpy(line, "-ERR", 4);
        len = 3;
    } else {
        len = (size_t)(sp - line) - 1;
    }
    for (i = 0; i < st->nerrs; i++)
        if (strlen(st->errs[i].code) == len && !memcmp(st->errs[i].code, line + 1, len))
            break;
    if (i == st->nerrs) {
        if (st->nerrs == STATS_ERRORS_MAX)
            return;
        if (st->errs == NULL)
            st->errs = xcalloc(STATS_ERRORS_MAX, sizeof(*st->errs));
        memcpy(st->errs[i].code, line + 1, len);
        st->errs[i].code[len] = '\0';
        st->nerrs++;
    }
    st->errs[i].count++;
}

void stats_reply(struct stats *st, const struct req *r, uint64_t now_us)
{
    bool error = msg_first(&r->rsp) == '-';
    struct stats_cmd *sc;

    if (error)
        count_error(st, &r->rsp);
    if (r->cmd == 0)
        return;                     /* unknown, or not a command (a message) */
    if (st->cmds == NULL) {
        size_t n;
        cmd_table(&n);
        st->cmds = xcalloc(n, sizeof(*st->cmds));
    }
    sc = &st->cmds[r->cmd - 1];
    if (r->rejected) {
        sc->rejected++;
        return;
    }
    sc->calls++;
    sc->usec += now_us > r->t0_us ? now_us - r->t0_us : 0;
    sc->failed += error;
}

void stats_reset(struct stats *st)
{
    stats_free(st);
    memset(st, 0, sizeof(*st));
}

void stats_free(struct stats *st)
{
    free(st->cmds);
    free(st->errs);
}

void stats_info_commandstats(const struct stats *st, FILE *f)
{
    size_t n;
    const struct cmd *table = cmd_table(&n);

    for (size_t i = 0; st->cmds != NULL && i < n; i++) {
        const struct stats_cmd *sc = &st->cmds[i];
        if (sc->calls == 0 && sc->rejected == 0)
            continue;
        fprintf(f, "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,"
                "failed_calls=%llu\r\n", table[i].name, (unsigned long long)sc->calls,
                (unsigned long long)sc->usec,
                sc->calls ? (double)sc->usec / (double)sc->calls : 0.0,
                (unsigned long long)sc->rejected, (unsigned long long)sc->failed);
    }
}

static int by_code(const void *a, const void *b)
{
    return strcmp(((const struct stats_err *)a)->code, ((const struct stats_err *)b)->code);
}

/* In code order, as redis-server lists them (its rax is sorted). */
void stats_info_errorstats(const struct stats *st, FILE *f)
{
    struct stats_err *sorted;

    if (st->nerrs == 0)
        return;
    sorted = xmalloc(st->nerrs * sizeof(*sorted));
    memcpy(sorted, st->errs, st->nerrs * sizeof(*sorted));
    qsort(sorted, st->nerrs, sizeof(*sorted), by_code);
    for (uint32_t i = 0; i < st->nerrs; i++)
        fprintf(f, "errorstat_%s:count=%llu\r\n", sorted[i].code,
                (unsigned long long)sorted[i].count);
    free(sorted);
}

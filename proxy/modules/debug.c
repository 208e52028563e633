/* debug.c -- DEBUG, spread over the servers by its subcommand.
 *
 * DEBUG looks into, or pokes at, one redis-server. Behind shardis "the
 * server" is several, so each subcommand goes where it means the same:
 *
 *   a key      OBJECT, SDSLEN, LISTPACK, QUICKLIST, ZIPLIST, HTSTATS-KEY,
 *              DIGEST-VALUE: the server of the key (of every key, which
 *              must share one, as for any multi-key command);
 *   every      what changes or reloads a server's state (RELOAD, LOADAOF,
 *              SLEEP, SET-ACTIVE-EXPIRE, QUICKLIST-PACKED-THRESHOLD ...):
 *              every server, one reply when all succeeded, else the first
 *              error, as for FLUSHDB;
 *   DIGEST     every server, and the digests merged into the one a single
 *              server holding all the keys gives (frag.c, CMD_REPLY_DIGEST);
 *   the first  what reports on the server itself or on nothing (HELP,
 *              PROTOCOL, STRINGMATCH-LEN, HTSTATS, MALLCTL, ERROR ...) and
 *              any subcommand not listed here: the first server, whose
 *              answer (or unknown-subcommand error) is redis-server's own.
 *
 * Refused: POPULATE, as every server would create the same keys, most of
 * them on a server that does not own them; REPLICATE, which feeds any
 * write to a server's replicas; LOADAOF, which empties a server first and
 * makes it exit when its AOF is missing or still being written: every
 * server at once. Inside MULTI nothing is (a DEBUG would run outside the
 * transaction). HyperLogLog's PFDEBUG goes to
 * its key's server, PFSELFTEST to the first. All are admin commands: only
 * with admin_commands: true. */
#include <string.h>
#include <strings.h>

#include "proxy/transport/backend.h"
#include "proxy/modules/pin.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/modules/debug.h"
#include "proxy/modules/frag.h"
#include "proxy/core/pool.h"
#include "proxy/core/route.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

enum debug_where { DEBUG_FIRST, DEBUG_KEY, DEBUG_KEYS, DEBUG_EVERY, DEBUG_DIGEST, DEBUG_REFUSE };

static const struct {
    const char      *name;
    enum debug_where where;
} debug_subs[] = {
    {"object", DEBUG_KEY},          {"sdslen", DEBUG_KEY},
    {"listpack", DEBUG_KEY},        {"quicklist", DEBUG_KEY},
    {"ziplist", DEBUG_KEY},         {"htstats-key", DEBUG_KEY},
    {"digest-value", DEBUG_KEYS},   {"digest", DEBUG_DIGEST},
    {"reload", DEBUG_EVERY},
    {"sleep", DEBUG_EVERY},         {"set-active-expire", DEBUG_EVERY},
    {"quicklist-packed-threshold", DEBUG_EVERY},
    {"set-skip-checksum-validation", DEBUG_EVERY},
    {"set-disable-deny-scripts", DEBUG_EVERY},
    {"aof-flush-sleep", DEBUG_EVERY},  {"change-repl-id", DEBUG_EVERY},
    {"pause-cron", DEBUG_EVERY},    {"replybuffer", DEBUG_EVERY},
    {"client-eviction", DEBUG_EVERY},
    {"log", DEBUG_EVERY},           {"leak", DEBUG_EVERY},
    {"populate", DEBUG_REFUSE},     {"loadaof", DEBUG_REFUSE},
    {"replicate", DEBUG_REFUSE},
};

/* Key positions for route_owner: DEBUG <sub> key, or DEBUG <sub> key .... */
static const struct cmd debug_key = {
    "debug", -3, 0, 2, 2, 1, CMD_REPLY_DEFAULT, 0, 1,
    (const struct cmd_keyspec[]){{CMD_KEY_RO, CMD_BS_INDEX, 2, NULL, CMD_FK_RANGE, {0, 1, 0}}},
    0, 0, 0, 0, 0, 0, 1,
};
static const struct cmd debug_keys = {
    "debug", -2, 0, 2, -1, 1, CMD_REPLY_DEFAULT, 0, 1,
    (const struct cmd_keyspec[]){{CMD_KEY_RO, CMD_BS_INDEX, 2, NULL, CMD_FK_RANGE, {-1, 1, 0}}},
    0, 0, 0, 0, 0, 0, 1,
};

/* Route cmd, DEBUG <subcommand> ..., PFDEBUG or PFSELFTEST (its arity
 * checked): to its key's server, every server, or the first; or refuse
 * it. Replies or sends r. (The module's ROUTE_DEBUG.) */
static void debug_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    enum debug_where where = DEBUG_FIRST;
    const struct conf_pool *pc = c->pool->conf;
    struct pool *p = c->pool;
    int owner;

    if (!route_admin_ok(c, r, cmd->name))
        return;
    if (client_in_multi(c)) {
        client_reply_error(c, r, "ERR command '%s' inside MULTI is not supported by shardis",
                           cmd->name);
        route_refused(c, r);            /* (and the transaction aborts) */
        return;
    }
    if (!strcmp(cmd->name, "pfdebug"))
        where = DEBUG_KEY;
    else if (!strcmp(cmd->name, "debug"))
        for (size_t i = 0; i < ARRAY_SIZE(debug_subs); i++)
            if (args_is(a, 1, debug_subs[i].name))
                where = debug_subs[i].where;
    if ((where == DEBUG_KEY && a->argc < 3) || (where == DEBUG_KEYS && a->argc < 3) ||
        (where == DEBUG_DIGEST && a->argc != 2))
        where = DEBUG_FIRST;            /* the server's own error for its arguments */
    switch (where) {
    case DEBUG_REFUSE: {
        size_t len;
        const char *sub = args_get(a, 1, &len);
        client_reply_error(c, r, "ERR DEBUG %.*s is not supported by shardis: run on every "
                           "server at once it would misplace keys or lose them (pool '%s')",
                           (int)(len < 32 ? len : 32), sub, pc->name);
        route_refused(c, r);
        return;
    }
    case DEBUG_KEY:
    case DEBUG_KEYS:
        if ((owner = route_owner(c, r, a, where == DEBUG_KEY ? &debug_key : &debug_keys)) < 0)
            return;
        /* Its servers' side runs as shardis: clients' connections sign
         * in as a user that may not (srvuser.c; pin_internal). */
        pin_internal(c, r, a, CMD_REPLY_DEFAULT, (uint32_t)owner, true, false);
        return;
    case DEBUG_DIGEST:
        if (pc->redis_db != 0) {        /* the merge knows DB 0's digest start only */
            client_reply_error(c, r, "ERR DEBUG DIGEST is merged over servers for DB 0 only "
                               "(pool '%s' uses DB %d)", pc->name, pc->redis_db);
            route_refused(c, r);
            return;
        }
        /* fall through */
    case DEBUG_EVERY:
        /* No deadline: RELOAD and SLEEP take as long as they take. */
        pin_internal(c, r, a, where == DEBUG_DIGEST ? CMD_REPLY_DIGEST : CMD_REPLY_ALL_OK,
                     UINT32_MAX, false, true);
        return;
    case DEBUG_FIRST:
        pin_internal(c, r, a, CMD_REPLY_DEFAULT, pool_first_up(p), false, false);
        return;
    }
}

/* ---- the module ---------------------------------------------------------------------- */

const struct module debug_module = {
    .name = "debug",
    .routes = 1u << ROUTE_DEBUG,
    .route = debug_route,
};

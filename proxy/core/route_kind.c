/* route_kind.c -- what shardis does with each command (enum route_kind):
 * decided once per command from its name, flags and key specs, and again
 * when the command table changes; route.c routes by it, and `shardis
 * commands` prints it for README.md, so the two cannot differ. Which
 * commands modules answer whole (local.c's, frag.c's splits) they say
 * (module.h roles). */
#include <stdio.h>
#include <string.h>

#include "proxy/base/cmd.h"
#include "proxy/base/util.h"
#include "proxy/core/keys.h"
#include "proxy/core/module.h"
#include "proxy/core/route.h"
#include "proxy/core/route_int.h"

/* ---- commands for every server, or the first ----------------------------------------- */

/* What redis-server knows of its commands (COMMAND INFO's key specs,
 * tips and subcommands, COMMAND DOCS, GETKEYSANDFLAGS, its HELP) is the
 * servers' own table: the first server answers, in the client's protocol,
 * exactly as redis-server, COUNT and LIST too (module commands in the
 * case they were registered in). shardis's table is the same COMMAND
 * output (cmdinfo.c); GETKEYS is answered by keys.c, which routes by the
 * same keys: local.c. */
static bool server_table(const struct cmd *cmd)
{
    return !strcmp(cmd->name, "command|info") || !strcmp(cmd->name, "command|docs") ||
           !strcmp(cmd->name, "command|help") || !strcmp(cmd->name, "command|getkeysandflags") ||
           !strcmp(cmd->name, "command|list") || !strcmp(cmd->name, "command|count");
}

/* Keyless informational commands a client library's own tests call, which
 * shardis refused for want of a key, decided one by one:
 *   LOLWUT        the first server's: its art and "Redis ver." are any
 *                 server's, and so the pool's;
 *   MODULE LIST   the first server's modules as shardis read them at start
 *                 (info_modules: HELLO's "modules" too; Redis 8's vectorset,
 *                 whose commands are routed by their key specs); LOAD,
 *                 LOADEX, UNLOAD stay refused;
 *   MEMORY DOCTOR, STATS, MALLOC-STATS
 *                 refused: one server's memory is not the pool's (INFO's
 *                 memory fields are the servers' summed), and their replies
 *                 have no rule to merge by (response_policy special);
 *   LATENCY DOCTOR shardis's own already (local.c);
 *   ROLE, CLUSTER INFO/NODES/SLOTS ..., READONLY, READWRITE, ASKING
 *                 refused: they describe one server's place in replication
 *                 or a cluster, which the pool is not. */
static bool first_server_informs(const struct cmd *cmd)
{
    /* SCRIPT SHOW (Valkey 8): SCRIPT LOAD put the script on every server */
    return !strcmp(cmd->name, "lolwut") || !strcmp(cmd->name, "script|show");
}

static bool first_server_answers(const struct cmd *cmd)
{
    return !strcmp(cmd->name, "config|get") || !strcmp(cmd->name, "function|list") ||
           !strcmp(cmd->name, "function|dump") || !strcmp(cmd->name, "function|stats");
}

/* Commands Redis gives no request_policy tip that act on each server's
 * own state, as CONFIG SET does: CONFIG RESETSTAT resets its counters;
 * SAVE, BGSAVE and BGREWRITEAOF persist its keys; LASTSAVE says when they
 * last were: the oldest of the servers' times, since when every key was
 * saved; SWAPDB swaps two databases, each server its share of them. */
static bool on_each_server(const struct cmd *cmd)
{
    static const char *const names[] = {"config|resetstat", "save", "bgsave", "bgrewriteaof",
                                        "lastsave", "swapdb"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (!strcmp(cmd->name, names[i]))
            return true;
    return false;
}

static bool is_admin(const struct cmd *cmd)
{
    if (!strcmp(cmd->name, "script|load") || !strcmp(cmd->name, "script|exists"))
        return false;
    return !(cmd->flags & CMD_READONLY) || (cmd->flags & (CMD_ADMIN | CMD_DANGEROUS));
}

/* How the replies of cmd run on every server merge: by its response
 * policy, but for those on_each_server adds, which Redis gives none, and
 * the views of the keyspace, which leave shardis's own keys out (own.h). */
enum cmd_reply route_broadcast_reply(const struct cmd *cmd)
{
    if (!strcmp(cmd->name, "lastsave"))
        return CMD_REPLY_MIN;
    if (!strcmp(cmd->name, "swapdb"))
        return CMD_REPLY_ALL_OK;
    if (!strcmp(cmd->name, "dbsize"))
        return CMD_REPLY_DBSIZE;
    if (!strcmp(cmd->name, "randomkey"))
        return CMD_REPLY_RANDOMKEY;
    if (!strcmp(cmd->name, "keys"))
        return CMD_REPLY_KEYS;
    return cmd->reply;
}

static bool unsupported_name(const struct cmd *cmd)
{
    static const char *const names[] = {
        "migrate", "monitor", "sync", "psync", "replconf", "failover",
    };
    if (cmd->flags & (CMD_PUBSUB | CMD_ADMIN))
        return true;
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (!strcmp(cmd->name, names[i]))
            return true;
    return false;
}

/* ---- what each command is ------------------------------------------------------------ */

static enum route_kind classify(const struct cmd *cmd)
{
    static const char *const tx[] = {"multi", "exec", "discard", "watch", "unwatch"};
    static const char *const pubsub[] = {"publish", "spublish", "subscribe", "psubscribe",
        "ssubscribe", "unsubscribe", "punsubscribe", "sunsubscribe", "pubsub|channels",
        "pubsub|numsub", "pubsub|numpat", "pubsub|shardchannels", "pubsub|shardnumsub"};
    char parent[64];

    snprintf(parent, sizeof(parent), "%.*s", (int)strcspn(cmd->name, "|"), cmd->name);
    if (server_table(cmd) || first_server_informs(cmd))
        return ROUTE_FIRST;
    if (!strcmp(cmd->name, "module|list"))
        return ROUTE_LOCAL;     /* (first_server_informs says why) */
    if (module_role.answers_itself(parent))
        return ROUTE_LOCAL;
    if (strlen(cmd->name) > 5 && !strcmp(cmd->name + strlen(cmd->name) - 5, "|help"))
        return ROUTE_FIRST;     /* OBJECT HELP, PUBSUB HELP ...: the server's own text */
    for (size_t i = 0; i < ARRAY_SIZE(tx); i++)
        if (!strcmp(cmd->name, tx[i]))
            return ROUTE_TX;
    for (size_t i = 0; i < ARRAY_SIZE(pubsub); i++)
        if (!strcmp(cmd->name, pubsub[i]))
            return ROUTE_PUBSUB;
    if (!keys_any(cmd)) {
        if (first_server_answers(cmd))
            return ROUTE_FIRST_ADMIN;
        bool wait = !strcmp(cmd->name, "wait") || !strcmp(cmd->name, "waitaof");
        /* (RANDOMKEY's response_policy is "special" from 7.2 on: shardis
         * merges it by a rule of its own, route_broadcast_reply) */
        if (((cmd->flags & CMD_ALL_SHARDS) || on_each_server(cmd)) &&
            route_broadcast_reply(cmd) != CMD_REPLY_SPECIAL &&
            !(cmd->flags & CMD_BLOCKING) && !wait)
            return is_admin(cmd) ? ROUTE_EVERY_ADMIN : ROUTE_EVERY;
        if (!strcmp(cmd->name, "scan"))
            return ROUTE_SCAN;
        if (wait)                       /* WAIT, and Redis 7.2's WAITAOF */
            return ROUTE_WAIT;
    }
    if (!strcmp(cmd->name, "debug") || !strcmp(cmd->name, "pfdebug") ||
        !strcmp(cmd->name, "pfselftest"))
        return ROUTE_DEBUG;
    if (unsupported_name(cmd))
        return ROUTE_UNSUPPORTED;
    if (!keys_any(cmd))
        return ROUTE_KEYLESS;
    if (module_role.splits(cmd))
        return ROUTE_SPLIT;
    if (cmd->flags & CMD_BLOCKING)
        return ROUTE_BLOCKING;
    if (!(cmd->flags & CMD_MOVABLEKEYS) && cmd->first == cmd->last)
        return ROUTE_KEY;
    return ROUTE_SAME_SERVER;
}

/* Decided once per command, and again when the table changes (cmd.h): the
 * strcmp calls behind it were the largest item in the proxy's profile
 * when made on every request. Each thread's own copy (a fixed array:
 * nothing to free), so a thread that finds the table changed rebuilds
 * its own while another reads its. */
static _Thread_local unsigned char kinds[CMD_MAX] __attribute__((tls_model("initial-exec")));
static _Thread_local uint32_t kinds_gen __attribute__((tls_model("initial-exec"))) = UINT32_MAX;

void route_kinds_init(void)
{
    size_t n;
    const struct cmd *table = cmd_table(&n);

    for (size_t i = 0; i < n; i++)
        kinds[i] = (unsigned char)classify(&table[i]);
    kinds_gen = cmd_generation();
}

enum route_kind route_kind(const struct cmd *cmd)
{
    if (cmd->num == 0)                  /* (a row of no table) */
        return classify(cmd);
    if (kinds_gen != cmd_generation())
        route_kinds_init();
    return (enum route_kind)kinds[cmd->num - 1];
}

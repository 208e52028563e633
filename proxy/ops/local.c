/* local.c -- commands the proxy answers itself.
 *
 * Connection commands (PING, ECHO, QUIT, SELECT, HELLO, AUTH, RESET),
 * introspection (COMMAND, INFO, TIME, LATENCY), shardis's own SHARD.*
 * commands, and the table that dispatches every local command; ACL is
 * local_acl.c's, CLIENT local_client.c's. Replies and error texts follow
 * redis-server 7.0, so client libraries' connect-time handshakes work
 * unchanged. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include "proxy/core/acl.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/core/gate.h"
#include "proxy/modules/genkey.h"
#include "proxy/ops/hotkeys.h"
#include "proxy/ops/info.h"
#include "proxy/core/keys.h"
#include "proxy/base/log.h"
#include "proxy/ops/local.h"
#include "proxy/ops/local_int.h"
#include "proxy/modules/mig.h"
#include "proxy/modules/minify.h"
#include "proxy/ops/monitor.h"
#include "proxy/modules/sentinel.h"
#include "proxy/modules/pin.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/modules/pubsub.h"
#include "proxy/core/route.h"
#include "proxy/ops/slowlog.h"
#include "proxy/ops/stats.h"
#include "proxy/ops/totals.h"
#include "proxy/modules/track.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

/* ---- connection commands --------------------------------------------------------- */

/* PING is the first server's answer (the first up), as a client of one
 * redis-server gets it: -BUSY while a script runs there (which is how
 * clients and Redis's own suite see a script time out and decide to
 * SCRIPT KILL), an error when no server answers. A subscriber in RESP2
 * gets its own form from pubsub.c; inside MULTI pin.c holds it. */
static void cmd_ping(struct client *c, struct req *r, struct args *a)
{
    if (a->argc > 2) {
        local_reply_arity(c, r, "ping");
        req_done(r);
        return;
    }
    args_request(a, &r->out);
    route_send(c, r, NULL, pool_backend(c->pool, pool_first_up(c->pool), c));
}

static void cmd_echo(struct client *c, struct req *r, struct args *a)
{
    size_t len;
    const char *s;
    if (a->argc != 2) {
        local_reply_arity(c, r, "echo");
        return;
    }
    s = args_get(a, 1, &len);
    local_reply_bulk(c, r, s, len);
}

static void cmd_quit(struct client *c, struct req *r, struct args *a)
{
    (void)a;
    local_reply_ok(c, r);
    r->quit = 1;
    c->quitting = 1;
}

/* SELECT db: database db on every server, as on one redis-server with
 * `databases` of them; a key's server is the same in each. A client's
 * requests then go over connections in db (pool.h: each database's
 * shared connections, made on first use); none of them runs before its
 * requests in the database it leaves are answered (a MOVE to db, then a
 * GET there, keep their order as on one connection). Not in MULTI
 * (pin.c refuses every keyless command there) nor after WATCH: the
 * watching connection stays in its database, and where the next
 * commands should go is no longer one server's connection. */
static void cmd_select(struct client *c, struct req *r, struct args *a)
{
    long long db;
    if (a->argc != 2) {
        local_reply_arity(c, r, "select");
        return;
    }
    if (!args_ll(a, 1, &db))
        client_reply_error(c, r, "ERR value is not an integer or out of range");
    else if (db < -2147483648LL || db > 2147483647LL)      /* redis-server's words */
        client_reply_error(c, r, "ERR value is out of range, value must between "
                           "-2147483648 and 2147483647");
    else if (db < 0 || db >= c->pool->conf->databases)
        client_reply_error(c, r, "ERR DB index is out of range");
    else if (c->tx != TX_NONE && db != c->db)
        client_reply_error(c, r, "ERR SELECT after WATCH is not supported by shardis: "
                           "UNWATCH first");
    else if (db != c->pool->conf->redis_db && !track_may_select(c, r))
        ;                           /* (refused) */
    else {
        if (db != c->db)
            gate_hold(c, r);
        c->db = (uint16_t)db;       /* (CONF_DATABASES_MAX fits: gate.c) */
        local_reply_ok(c, r);
    }
}

/* Sign c in as the user at user_at (0: "default") with the password at
 * pass_at (acl.c compares it in constant time). False (c as it was) if
 * the pair is wrong or the user is off. */
static bool sign_in(struct client *c, struct args *a, uint32_t user_at, uint32_t pass_at)
{
    size_t ulen = 7, plen;
    const char *user = user_at != 0 ? args_get(a, user_at, &ulen) : "default";
    const char *pw = args_get(a, pass_at, &plen);
    const struct acl_user *u = acl_login(c->pool->acl, user, ulen, pw, plen);

    if (u == NULL)
        return false;
    c->user = u;
    return true;
}

static void cmd_auth(struct client *c, struct req *r, struct args *a)
{
    if (a->argc < 2) {
        local_reply_arity(c, r, "auth");
        return;
    }
    if (a->argc > 3) {
        client_reply_error(c, r, "ERR syntax error");
        return;
    }
    if (a->argc == 2 && c->pool->acl->users[0].nopass) {
        client_reply_error(c, r, "ERR AUTH <password> called without any password "
                           "configured for the default user. Are you sure your "
                           "configuration is correct?");
        return;
    }
    if (sign_in(c, a, a->argc == 3 ? 1 : 0, a->argc - 1))
        local_reply_ok(c, r);
    else
        client_reply_error(c, r, ACL_WRONGPASS);
}

static void cmd_hello(struct client *c, struct req *r, struct args *a)
{
    /* HELLO with no version keeps the client's, as redis-server's does. */
    long long ver = c->resp3 ? 3 : 2;

    if (a->argc >= 2 && !args_ll(a, 1, &ver)) {
        client_reply_error(c, r, "ERR Protocol version is not an integer or out of range");
        return;
    }
    if (ver < 2 || ver > 3) {
        client_reply_error(c, r, "NOPROTO unsupported protocol version");
        return;
    }
    /* A connection of the client's own speaks the protocol the client spoke
     * when it was given; what is queued on it was sent in that protocol.
     * Refused before AUTH or SETNAME take effect. */
    bool change = (ver == 3) != c->resp3;
    if (change && (c->tx != TX_NONE || !pin_let_go(c, r))) {
        client_reply_error(c, r, "ERR shardis cannot change the protocol inside a transaction, "
                           "WATCH or blocking command: send HELLO before them");
        return;
    }
    for (uint32_t i = 2; i < a->argc; i++) {
        if (args_is(a, i, "auth") && i + 2 < a->argc) {
            if (!sign_in(c, a, i + 1, i + 2)) {
                client_reply_error(c, r, ACL_WRONGPASS);
                return;
            }
            i += 2;
        } else if (args_is(a, i, "setname") && i + 1 < a->argc) {
            /* As redis-server 7.0: each name is checked and set as it comes,
             * even before AUTH (it is the client's own connection's). */
            size_t len;
            const char *n = args_get(a, ++i, &len);
            if (!local_set_name(c, r, n, len))
                return;
        } else {
            size_t len;
            const char *opt = args_get(a, i, &len);
            client_reply_error(c, r, "ERR Syntax error in HELLO option '%.*s'",
                               (int)(len < 128 ? len : 128), opt);
            return;
        }
    }
    if (c->user == NULL) {
        client_reply_error(c, r, "NOAUTH HELLO must be called with the client already "
                           "authenticated, otherwise the HELLO <proto> AUTH <user> <pass> "
                           "option can be used to authenticate the client and select the "
                           "RESP protocol version at the same time");
        return;
    }
    /* As redis-server: the reply is in the protocol asked for. The client's
     * requests after this go over other connections (pool_backend): none
     * may run before those it sent earlier are answered. */
    if (change)
        gate_hold(c, r);
    c->resp3 = ver == 3;
    struct resp_w w = local_w(c, r);
    struct info_version v;
    info_servers_version(c->pool, &v);      /* (as INFO says them) */
    resp_w_map(&w, 7);
    resp_w_bulk_str(&w, "server");
    resp_w_bulk_str(&w, v.name);
    resp_w_bulk_str(&w, "version");
    resp_w_bulk_str(&w, v.version);
    resp_w_bulk_str(&w, "proto");
    resp_w_int(&w, w.proto);
    resp_w_bulk_str(&w, "id");
    resp_w_int(&w, (long long)c->id);
    resp_w_bulk_str(&w, "mode");
    resp_w_bulk_str(&w, "standalone");
    resp_w_bulk_str(&w, "role");
    resp_w_bulk_str(&w, "master");
    resp_w_bulk_str(&w, "modules");
    info_modules(c->pool, &w);
}

/* RESET: the connection as a new one, whatever state it is in (as
 * redis-server 7.0's): its transaction and WATCH discarded, every
 * subscription dropped, RESP2, no name, CLIENT REPLY ON, and signed in as
 * the default user (authenticated if the pool has no password). */
static void cmd_reset(struct client *c, struct req *r, struct args *a)
{
    bool tracked = c->track_via;    /* (its requests went over tracking connections) */

    (void)a;
    pubsub_reset(c);
    monitor_gone(c);
    track_reset(c);
    if (c->reply == CLIENT_REPLY_OFF)
        r->silent = 0;              /* (after SKIP it is the request skipped) */
    c->reply = CLIENT_REPLY_ON;
    c->user = acl_new_session(c->pool->acl);
    if (c->rare != NULL) {
        free(c->rare->name);
        c->rare->name = NULL;
    }
    /* Its later requests go over RESP2 connections of redis_db: as after
     * HELLO 2, SELECT or CLIENT TRACKING OFF, none runs before its earlier
     * ones are answered. */
    if (c->resp3 || tracked || c->db != c->pool->conf->redis_db)
        gate_hold(c, r);
    c->resp3 = 0;
    c->notouch = 0;
    c->db = (uint16_t)c->pool->conf->redis_db;
    if (pin_reset(c, r))
        return;                     /* answered by its pin */
    struct resp_w w = local_w(c, r);
    resp_w_simple(&w, "RESET");
    req_done(r);
}

void local_module_list(struct client *c, struct req *r)
{
    struct resp_w w = local_w(c, r);

    info_modules(c->pool, &w);      /* (as HELLO says them) */
    req_done(r);
}

static void cmd_time(struct client *c, struct req *r, struct args *a)
{
    struct resp_w w = local_w(c, r);
    struct timeval tv;

    (void)a;
    gettimeofday(&tv, NULL);
    resp_w_array(&w, 2);
    resp_w_bulk_ull(&w, (unsigned long long)tv.tv_sec);
    resp_w_bulk_ull(&w, (unsigned long long)tv.tv_usec);
}

/* ---- COMMAND --------------------------------------------------------------------- */

/* COMMAND GETKEYS cmd arg ...: the keys shardis routes the command by,
 * found by keys_find, so that a client, or a test, can compare them with
 * what a redis-server's own COMMAND GETKEYS finds; redis-server's errors
 * for what it cannot read. */
static void command_getkeys(struct client *c, struct req *r, struct args *a)
{
    struct resp_w w = local_w(c, r);
    uint32_t argc = a->argc - 2;
    char **av = xmalloc(argc * sizeof(*av)), err[KEYS_ERR_MAX];
    size_t *avlen = xmalloc(argc * sizeof(*avlen)), len;
    const char *name = args_get(a, 2, &len);
    const struct cmd *cmd = cmd_lookup(name, len);
    struct args sub = {.c = c, .argc = argc, .av = av, .avlen = avlen};

    for (uint32_t i = 0; i < argc; i++) {   /* (copied: args_get keeps 8 copies at most) */
        const char *p = args_get(a, 2 + i, &avlen[i]);
        av[i] = xmalloc(avlen[i] + 1);
        memcpy(av[i], p, avlen[i]);
        av[i][avlen[i]] = '\0';
    }
    if (cmd != NULL && cmd_has_subcommands(cmd) && argc >= 2)
        cmd = cmd_lookup_sub(cmd, av[1], avlen[1]);
    if (cmd == NULL) {
        client_reply_error(c, r, "ERR Invalid command specified");
    } else if (!keys_any(cmd) || (cmd->flags & CMD_PUBSUB)) {
        client_reply_error(c, r, "ERR The command has no key arguments");
    } else if (!cmd_arity_ok(cmd, argc)) {
        client_reply_error(c, r, "ERR Invalid number of arguments specified for command");
    } else if (keys_find(cmd, &sub, &sub.keys, err) != KEYS_FOUND && sub.keys.n == 0) {
        if (cmd->flags & CMD_NO_MANDATORY_KEYS)
            resp_w_array(&w, 0);        /* a script: none, or a numkeys it refuses */
        else
            client_reply_error(c, r, "ERR Invalid arguments specified for command");
    } else {
        /* Keys found with arguments the command itself refuses (an odd
         * XREAD list) are listed, as redis-server lists them. */
        resp_w_array(&w, keys_count(&sub.keys));
        for (const struct keyspan *s = sub.keys.span; s < sub.keys.span + sub.keys.n; s++)
            for (uint32_t i = s->first; i <= s->last; i += s->step)
                resp_w_bulk(&w, av[i], avlen[i]);
    }
    args_release(&sub);
    for (uint32_t i = 0; i < argc; i++)
        free(av[i]);
    free(av);
    free(avlen);
}

static void cmd_command(struct client *c, struct req *r, struct args *a)
{
    /* (the rest of COMMAND is the first server's: route.c server_table) */
    if (a->argc > 2 && args_is(a, 1, "getkeys")) {
        command_getkeys(c, r, a);
    } else {
        size_t len;
        const char *sub = args_get(a, 1, &len);
        client_reply_error(c, r, "ERR unknown subcommand '%.*s'. Try COMMAND HELP.",
                           (int)(len < 128 ? len : 128), sub);
    }
}

/* ---- LATENCY ---------------------------------------------------------------------- */

/* LATENCY: HISTOGRAM from shardis's own per-command histograms (stats.c);
 * the latency monitor's events (LATEST, HISTORY, RESET) are redis-server's
 * and shardis raises none, as a server with latency-monitor-threshold 0. */
static void cmd_latency(struct client *c, struct req *r, struct args *a)
{
    struct resp_w w = local_w(c, r);

    if (args_is(a, 1, "histogram")) {
        uint32_t n = a->argc - 2;
        uint16_t *named = xcalloc(n + 1, sizeof(*named));
        for (uint32_t i = 0; i < n; i++) {
            size_t len;
            const char *name = args_get(a, 2 + i, &len);
            const struct cmd *cmd = cmd_lookup(name, len);
            named[i] = cmd != NULL ? cmd_number(cmd) : 0;
        }
        struct stats all;
        totals_stats(c->pool, &all);    /* (every loop's clients') */
        stats_latency_histogram(&all, &w, named, n);
        stats_free(&all);
        free(named);
    } else if ((args_is(a, 1, "latest") && a->argc == 2) ||
               (args_is(a, 1, "history") && a->argc == 3)) {
        resp_w_array(&w, 0);
    } else if (args_is(a, 1, "reset")) {
        resp_w_int(&w, 0);
    } else if (args_is(a, 1, "doctor") && a->argc == 2) {
        static const char text[] = "Dave, no latency spike was observed during the lifetime "
            "of this shardis instance, not in the slightest bit: it raises no latency "
            "monitor events. Its own latency per command is in LATENCY HISTOGRAM, INFO "
            "latencystats and SLOWLOG.\n";
        resp_w_verbatim(&w, "txt", text, sizeof(text) - 1);
    } else if (args_is(a, 1, "help") && a->argc == 2) {
        static const char *const help[] = {
            "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram",
            "    for the specified command names (all called commands without one): as the",
            "    clients of this shardis pool saw them, from request read to reply.",
            "LATEST", "    No events: shardis raises no latency-monitor events.",
            "HISTORY <event-name>", "    Likewise empty.",
            "RESET [<event-name> ...]", "    Nothing to reset: 0.",
            "DOCTOR", "    A note on where shardis's latency is.",
            "HELP", "    Print this help.",
        };
        client_reply_help(c, r, help, ARRAY_SIZE(help));
    } else {
        client_reply_bad_sub(c, r, a, "LATENCY");
    }
}

/* ---- SHARD.* ---------------------------------------------------------------------- */

static void cmd_whereis(struct client *c, struct req *r, struct args *a)
{
    size_t len;
    const char *key;

    if (a->argc != 2) {
        local_reply_arity(c, r, "shard.whereis");
        return;
    }
    key = args_get(a, 1, &len);
    if (ring_distribution(c->pool->ring) == RING_DIST_RANDOM) {
        client_reply_error(c, r, "ERR distribution random gives keys no fixed server");
        return;
    }
    local_reply_str(c, r, ring_server_label(c->pool->ring, ring_lookup(c->pool->ring, key, len)));
}

static void cmd_nodes(struct client *c, struct req *r, struct args *a)
{
    struct resp_w w = local_w(c, r);
    struct pool *p = c->pool;
    uint64_t now = uv_now(cur_loop->uv);

    if (a->argc != 1) {
        local_reply_arity(c, r, "shard.nodes");
        return;
    }
    /* The servers of the ring keys are routed by, in the config's order. */
    uint32_t n = (uint32_t)ring_nservers(p->ring);
    resp_w_array(&w, n);
    for (uint32_t i = 0; i < n; i++) {
        const struct pool_server *ps = &p->servers[p->slot[i]];
        const char *state = "up";
        char share[32];
        for (uint32_t k = 0; k < 2 * p->nconns; k++)   /* clients' (not pool_own's) */
            if (ps->conns[k].state == BACKEND_FAILED)
                state = "down";
        if (pool_held_off(p, p->slot[i], 0, now))
            state = "ejected";      /* eject_mode rehash: out of the routing ring */
        snprintf(share, sizeof(share), "%.4f", ring_server_share(p->ring, i) * 100);
        if (!ps->resolved)
            state = "unresolved";   /* the Sentinels have not agreed where it is */
        /* A map in RESP3, its pairs in an array in RESP2 (as HGETALL). */
        resp_w_map(&w, 6 + (p->sentinel != NULL ? SENTINEL_FIELDS : 0));
        resp_w_bulk_str(&w, "name");
        resp_w_bulk_str(&w, ring_server_label(p->ring, i));
        resp_w_bulk_str(&w, "addr");
        resp_w_bulk_str(&w, ring_server_addr(p->ring, i));
        resp_w_bulk_str(&w, "weight");
        resp_w_int(&w, ring_server_weight(p->ring, i));
        resp_w_bulk_str(&w, "points");
        resp_w_int(&w, ring_server_points(p->ring, i));
        resp_w_bulk_str(&w, "share");
        resp_w_bulk_str(&w, share);
        resp_w_bulk_str(&w, "state");
        resp_w_bulk_str(&w, state);
        if (p->sentinel != NULL)
            sentinel_describe(p, p->slot[i], &w);
    }
}

/* SHARD.MINIFY field ... / SHARD.MAXIFY field ...: each field's short
 * (long) name from idgen.subkeys, shardjs's minify and maxify; a field the
 * dictionary does not name comes back as it is. */
static void map_fields(struct client *c, struct req *r, struct args *a, bool maxify)
{
    struct resp_w w = local_w(c, r);

    if (a->argc < 2) {
        local_reply_arity(c, r, maxify ? "shard.maxify" : "shard.minify");
        return;
    }
    resp_w_array(&w, a->argc - 1);
    for (uint32_t i = 1; i < a->argc; i++) {
        size_t len, n;
        const char *f = args_get(a, i, &len);
        const char *to = minify_name(c->pool->minify, f, len, maxify, &n);
        if (to != NULL)
            resp_w_bulk(&w, to, n);
        else
            resp_w_bulk(&w, f, len);
    }
}

static void cmd_minify(struct client *c, struct req *r, struct args *a)
{
    map_fields(c, r, a, false);
}

static void cmd_maxify(struct client *c, struct req *r, struct args *a)
{
    map_fields(c, r, a, true);
}

int (*local_reload)(char *out, size_t outlen, char *err, size_t errlen);   /* (set at start) */

/* SHARD.RELOAD: the file read again and applied, by the process
 * (local_reload); refused, with why, if it cannot apply. */
static void cmd_reload(struct client *c, struct req *r, struct args *a)
{
    char out[4096], err[CONF_ERRLEN + 128];

    if (a->argc != 1) {
        client_reply_error(c, r, "ERR wrong number of arguments for 'shard.reload' command");
        return;
    }
    if (!c->pool->conf->admin_commands) {
        client_reply_error(c, r, "ERR 'shard.reload' is an admin command: it runs only with "
                           "admin_commands: true in pool '%s'", c->pool->conf->name);
        return;
    }
    snprintf(err, sizeof(err), "no process to reload here");   /* (local_reload NULL) */
    if (local_reload == NULL || local_reload(out, sizeof(out), err, sizeof(err)) < 0) {
        log_warn("SHARD.RELOAD refused: %s", err);
        client_reply_error(c, r, "ERR reload refused: %s", err);
        return;
    }
    log_notice("SHARD.RELOAD from client %llu applied", (unsigned long long)c->id);
    struct resp_w w = client_w(c, &r->rsp);
    resp_w_verbatim(&w, "txt", out, strlen(out));
}

/* ---- dispatch -------------------------------------------------------------------- */

struct local_cmd {
    const char *name;
    void (*fn)(struct client *c, struct req *r, struct args *a);
    bool before_auth;       /* allowed before AUTH */
    bool sends;             /* fn may send r to a backend: it finishes r itself */
    uint32_t acl;           /* from FIRST_SHARD: its ACL categories (Redis's
                               commands have Redis's, from the command table) */
    bool others;            /* its @admin subcommands show or steer the pool's
                               other clients: local_exec's rule */
};

static const struct local_cmd local_cmds[] = {
    {"ping", cmd_ping, false, true, 0, false},
    {"echo", cmd_echo, false, false, 0, false},
    {"quit", cmd_quit, true, false, 0, false},
    {"select", cmd_select, false, false, 0, false},
    {"auth", cmd_auth, true, false, 0, false},
    {"hello", cmd_hello, true, false, 0, false},
    {"reset", cmd_reset, true, true, 0, false},
    {"client", local_client_command, false, true, 0, true},
    {"command", cmd_command, false, false, 0, false},
    {"time", cmd_time, false, false, 0, false},
    {"info", info_command, false, true, 0, false},
    {"slowlog", slowlog_command, false, false, 0, true},
    {"latency", cmd_latency, false, false, 0, true},
    {"monitor", monitor_command, false, false, 0, true},
    {"acl", local_acl_command, false, false, 0, false},
    /* From here on: commands not in Redis 7.0's table (SHARD.*, and
     * HOTKEYS, Redis 8.6's), the rows acl.c numbers (FIRST_SHARD), with
     * their ACL categories. */
    {"shard.whereis", cmd_whereis, false, false, CMD_CAT_FAST | CMD_CAT_CONNECTION, false},
    {"shard.nodes", cmd_nodes, false, false, CMD_CAT_FAST | CMD_CAT_CONNECTION, false},
    {"shard.genkey", genkey_genkey, false, true, CMD_CAT_WRITE | CMD_CAT_FAST, false},
    {"shard.changetype", genkey_changetype, false, false, CMD_CAT_FAST, false},
    {"shard.keyinfo", genkey_keyinfo, false, false, CMD_CAT_FAST, false},
    {"shard.fixedkey", genkey_fixedkey, false, false, CMD_CAT_FAST, false},
    {"shard.reload", cmd_reload, false, false,
     CMD_CAT_ADMIN | CMD_CAT_DANGEROUS | CMD_CAT_SLOW, false},
    {"shard.migration", mig_command, false, false,
     CMD_CAT_ADMIN | CMD_CAT_DANGEROUS | CMD_CAT_SLOW, false},
    {"shard.minify", cmd_minify, false, false, CMD_CAT_FAST, false},
    {"shard.maxify", cmd_maxify, false, false, CMD_CAT_FAST, false},
    {"hotkeys", hotkeys_command, false, false,
     CMD_CAT_ADMIN | CMD_CAT_DANGEROUS | CMD_CAT_SLOW, true},
};

#define FIRST_SHARD 15

const char *local_shard_command(size_t i, uint32_t *acl)
{
    ASSERT(!strncmp(local_cmds[FIRST_SHARD].name, "shard.", 6) &&
           strncmp(local_cmds[FIRST_SHARD - 1].name, "shard.", 6) != 0);
    if (FIRST_SHARD + i >= ARRAY_SIZE(local_cmds))
        return NULL;
    *acl = local_cmds[FIRST_SHARD + i].acl;
    return local_cmds[FIRST_SHARD + i].name;
}

bool local_has(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(local_cmds); i++)
        if (!strcmp(local_cmds[i].name, name))
            return true;
    return false;
}

/* Whether row i's command, as cmd (NULL: not in the table) says it,
 * shows or steers the pool's other clients: what Redis marks @admin in
 * the rows marked others (CLIENT LIST, KILL, PAUSE, UNPAUSE, NO-EVICT,
 * UNBLOCK; SLOWLOG's and LATENCY's but HELP; MONITOR; HOTKEYS). What a
 * client asks or sets of itself (CLIENT INFO, ID, SETNAME, REPLY ...) is
 * not @admin, and stays every client's. The words name it in the error:
 * "client list". */
static bool about_others(size_t i, const struct cmd *cmd, char *words, size_t size)
{
    if (!local_cmds[i].others ||
        !((cmd != NULL && (cmd->flags & CMD_ADMIN)) || (local_cmds[i].acl & CMD_CAT_ADMIN)))
        return false;
    snprintf(words, size, "%s", cmd != NULL ? cmd->name : local_cmds[i].name);
    for (char *p = words; *p != '\0'; p++)
        if (*p == '|')
            *p = ' ';
    return true;
}

int local_exec(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    char words[64];

    for (size_t i = 0; i < ARRAY_SIZE(local_cmds); i++) {
        if (!args_is(a, 0, local_cmds[i].name))
            continue;
        if (c->user == NULL && !local_cmds[i].before_auth) {
            client_reply_error(c, r, "NOAUTH Authentication required.");
        } else if (i >= FIRST_SHARD && c->user != NULL && !c->user->all &&
                   !acl_shard_ok(c->user, i - FIRST_SHARD)) {
            client_reply_error(c, r, "NOPERM this user has no permissions to run the '%s' "
                               "command", local_cmds[i].name);
        } else if (about_others(i, cmd, words, sizeof(words)) &&
                   !route_admin_view_ok(c, r, words)) {
            return 1;                       /* (refused: r is ended) */
        } else {
            local_cmds[i].fn(c, r, a);
            if (local_cmds[i].sends)
                return 1;
        }
        req_done(r);
        return 1;
    }
    return 0;
}

/* ---- the module ---------------------------------------------------------------------- */

/* ROUTE_LOCAL (but COMMAND alone: route.c sends it to the first server). */
static void local_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd)
{
    if (!strcmp(cmd->name, "module|list"))
        local_module_list(c, r);
    else
        local_exec(c, r, a, cmd);
}

const struct module local_module = {
    .name = "local",
    .routes = 1u << ROUTE_LOCAL,
    .route = local_route,
    .roles = &(const struct module_roles){
        .answers_itself = local_has,
        .answer = local_exec,
        .shard_command = local_shard_command,
    },
};

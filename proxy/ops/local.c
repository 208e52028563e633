/* local.c -- commands the proxy answers itself.
 *
 * Connection commands (PING, ECHO, QUIT, SELECT, HELLO, AUTH, RESET, CLIENT ...),
 * introspection (COMMAND, INFO, TIME) and shardis's own SHARD.WHEREIS and
 * SHARD.NODES. Replies and error texts follow redis-server 7.0, so client
 * libraries' connect-time handshakes work unchanged. */
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
#include "proxy/ops/clientlist.h"
#include "proxy/core/gate.h"
#include "proxy/modules/genkey.h"
#include "proxy/ops/hotkeys.h"
#include "proxy/ops/info.h"
#include "proxy/core/keys.h"
#include "proxy/base/log.h"
#include "proxy/ops/local.h"
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
#include "proxy/base/util.h"

/* ---- reply builders ------------------------------------------------------------- */

/* Every value goes through the encoder, in the client's protocol. */
static struct resp_w out(struct client *c, struct req *r)
{
    return client_w(c, &r->rsp);
}

static void reply_bulk(struct client *c, struct req *r, const char *s, size_t len)
{
    struct resp_w w = out(c, r);
    resp_w_bulk(&w, s, len);
}

static void reply_str(struct client *c, struct req *r, const char *s)
{
    reply_bulk(c, r, s, strlen(s));
}

static void reply_ok(struct client *c, struct req *r)
{
    struct resp_w w = out(c, r);
    resp_w_simple(&w, "OK");
}

static void reply_arity(struct client *c, struct req *r, const char *name)
{
    client_reply_error(c, r, "ERR wrong number of arguments for '%s' command", name);
}

/* ---- connection commands --------------------------------------------------------- */

/* PING is the first server's answer (the first up), as a client of one
 * redis-server gets it: -BUSY while a script runs there (which is how
 * clients and Redis's own suite see a script time out and decide to
 * SCRIPT KILL), an error when no server answers. A subscriber in RESP2
 * gets its own form from pubsub.c; inside MULTI pin.c holds it. */
static void cmd_ping(struct client *c, struct req *r, struct args *a)
{
    if (a->argc > 2) {
        reply_arity(c, r, "ping");
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
        reply_arity(c, r, "echo");
        return;
    }
    s = args_get(a, 1, &len);
    reply_bulk(c, r, s, len);
}

static void cmd_quit(struct client *c, struct req *r, struct args *a)
{
    (void)a;
    reply_ok(c, r);
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
        reply_arity(c, r, "select");
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
    else {
        if (db != c->db)
            gate_hold(c, r);
        c->db = (uint16_t)db;       /* (CONF_DATABASES_MAX fits: gate.c) */
        reply_ok(c, r);
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
        reply_arity(c, r, "auth");
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
        reply_ok(c, r);
    else
        client_reply_error(c, r, ACL_WRONGPASS);
}

/* ACL LIST, GETUSER and DRYRUN show every user's password hashes and
 * rules: they run only with admin_commands: true, besides the user's own
 * permission (they are @admin @dangerous, route.c), where the pool has
 * users too (the views of other clients need only the permission there:
 * local_exec). */
static bool acl_shown(struct client *c, struct req *r, const char *sub)
{
    if (c->pool->conf->admin_commands)
        return true;
    client_reply_error(c, r, "ERR ACL %s shows every user's rules: it runs only with "
                       "admin_commands: true in pool '%s'", sub, c->pool->conf->name);
    return false;
}

/* A user's key and channel patterns as redis-server 7.0 writes them:
 * "~*" for allkeys, else each "~pattern"; "&*", else each "&pattern" (ACL
 * LIST puts "resetchannels" first: list_form). Each item starts with a
 * space. */
static void user_patterns(const struct acl_user *u, bool channels, bool list_form, FILE *fp)
{
    bool all = channels ? u->allchannels : u->allkeys;
    char **v = channels ? u->chans : u->keys;
    size_t n = channels ? u->nchans : u->nkeys;
    char mark = channels ? '&' : '~';

    if (all) {
        fprintf(fp, " %c*", mark);
        return;
    }
    if (channels && list_form)
        fputs(" resetchannels", fp);
    for (size_t i = 0; i < n; i++)
        fprintf(fp, " %c%s", mark, v[i]);
}

/* ACL LIST's line for u (what the config's users: line means, as
 * redis-server prints it: a password only as its SHA-256). */
static void user_line(const struct acl_user *u, FILE *fp)
{
    char hex[65];
    char *cmds = acl_describe_commands(u);

    fprintf(fp, "user %s %s%s", u->name, u->on ? "on" : "off", u->nopass ? " nopass" : "");
    for (size_t i = 0; i < u->npass; i++) {
        acl_hex(u->pass[i], hex);
        fprintf(fp, " #%s", hex);
    }
    user_patterns(u, false, true, fp);
    user_patterns(u, true, true, fp);
    fprintf(fp, " %s", cmds);
    free(cmds);
}

/* ACL GETUSER's value for patterns: user_patterns less its first space. */
static void reply_patterns(struct resp_w *w, const struct acl_user *u, bool channels)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = xopen_memstream(&buf, &len);

    user_patterns(u, channels, false, fp);
    fclose(fp);
    resp_w_bulk(w, len > 0 ? buf + 1 : buf, len > 0 ? len - 1 : 0);
    free(buf);
}

/* ACL GETUSER name: redis-server 7.0's map; nil for a user not configured. */
static void acl_getuser(struct client *c, struct req *r, struct args *a)
{
    size_t len;
    const char *name = args_get(a, 2, &len);
    const struct acl_user *u = acl_find(c->pool->acl, name, len);
    struct resp_w w = out(c, r);
    char hex[65];

    if (u == NULL) {
        resp_w_null(&w);
        return;
    }
    char *cmds = acl_describe_commands(u);
    resp_w_map(&w, 6);
    resp_w_bulk_str(&w, "flags");
    resp_w_set(&w, u->nopass ? 2 : 1);
    resp_w_bulk_str(&w, u->on ? "on" : "off");
    if (u->nopass)
        resp_w_bulk_str(&w, "nopass");
    resp_w_bulk_str(&w, "passwords");
    resp_w_array(&w, (long long)u->npass);
    for (size_t i = 0; i < u->npass; i++) {
        acl_hex(u->pass[i], hex);
        resp_w_bulk_str(&w, hex);
    }
    resp_w_bulk_str(&w, "commands");
    resp_w_bulk_str(&w, cmds);
    resp_w_bulk_str(&w, "keys");
    reply_patterns(&w, u, false);
    resp_w_bulk_str(&w, "channels");
    reply_patterns(&w, u, true);
    resp_w_bulk_str(&w, "selectors");       /* (shardis's users have none) */
    resp_w_array(&w, 0);
    free(cmds);
}

/* ACL DRYRUN user command [arg ...]: what that user's request would meet
 * through shardis (route_dryrun: the checks a real one meets), in
 * redis-server's words: +OK, or why not as a bulk string. */
static void acl_dryrun(struct client *c, struct req *r, struct args *a)
{
    size_t len, nlen;
    const char *name = args_get(a, 2, &len);
    const struct acl_user *u = acl_find(c->pool->acl, name, len);
    const struct cmd *cmd;
    uint32_t argc = a->argc - 3, at = 0, shard_acl;
    char msg[300];
    int k;

    if (u == NULL) {
        client_reply_error(c, r, "ERR User '%.*s' not found", (int)(len < 128 ? len : 128), name);
        return;
    }
    name = args_get(a, 3, &nlen);
    cmd = cmd_lookup(name, nlen);
    if (cmd != NULL && cmd_has_subcommands(cmd) && argc >= 2) {
        size_t sublen;
        const char *sub = args_get(a, 4, &sublen);
        cmd = cmd_lookup_sub(cmd, sub, sublen);
    }
    if (cmd == NULL) {
        const char *s;
        for (size_t i = 0; (s = local_shard_command(i, &shard_acl)) != NULL; i++)
            if (strlen(s) == nlen && !strncasecmp(s, name, nlen)) {
                if (u->all || acl_shard_ok(u, i)) {
                    reply_ok(c, r);
                } else {
                    snprintf(msg, sizeof(msg), "This user has no permissions to run the "
                             "'%s' command", s);
                    reply_str(c, r, msg);
                }
                return;
            }
        client_reply_error(c, r, "ERR Command '%.*s' not found", (int)(nlen < 128 ? nlen : 128),
                           name);
        return;
    }
    if (!cmd_arity_ok(cmd, argc)) {
        reply_arity(c, r, cmd->name);
        return;
    }
    /* The request as its own arguments: copies, as args_get's may not all
     * outlive the next call. */
    char **av = xcalloc(argc, sizeof(*av));
    size_t *avlen = xcalloc(argc, sizeof(*avlen));
    for (uint32_t i = 0; i < argc; i++) {
        const char *p = args_get(a, 3 + i, &avlen[i]);
        av[i] = xmalloc(avlen[i] + 1);
        memcpy(av[i], p, avlen[i]);
        av[i][avlen[i]] = '\0';
    }
    struct args req = {.c = c, .argc = argc, .av = av, .avlen = avlen};
    k = route_dryrun(u, &req, cmd, &at);
    if (k == 0) {
        reply_ok(c, r);
    } else {
        if (k == 1)
            snprintf(msg, sizeof(msg), "This user has no permissions to run the '%s' command",
                     cmd->name);
        else
            snprintf(msg, sizeof(msg), "This user has no permissions to access the '%.*s' %s",
                     (int)(avlen[at] < 128 ? avlen[at] : 128), av[at], k == 2 ? "key" : "channel");
        reply_str(c, r, msg);
    }
    args_release(&req);
    for (uint32_t i = 0; i < argc; i++)
        free(av[i]);
    free(av);
    free(avlen);
}

/* ACL GENPASS [bits]: redis-server's checks and its length, bits rounded
 * up to whole hex digits. */
static void acl_genpass_cmd(struct client *c, struct req *r, struct args *a)
{
    long long bits = 256;
    char pass[4096 / 4 + 1];

    if (a->argc > 3) {
        client_reply_bad_sub(c, r, a, "ACL");
    } else if (a->argc == 3 && !args_ll(a, 2, &bits)) {
        client_reply_error(c, r, "ERR value is not an integer or out of range");
    } else if (bits <= 0 || bits > 4096) {
        client_reply_error(c, r, "ERR ACL GENPASS argument must be the number of bits for "
                           "the output password, a positive number up to 4096");
    } else {
        acl_genpass(pass, (size_t)(bits + 3) / 4);
        reply_str(c, r, pass);
    }
}

/* ACL: about the pool's users (acl.c), which the config file defines:
 * WHOAMI, USERS, CAT, GENPASS, HELP, LIST, GETUSER and DRYRUN as
 * redis-server answers them; what would change users or read the ACL log
 * is refused (edit users: and reload). */
static void cmd_acl(struct client *c, struct req *r, struct args *a)
{
    const struct acl *acl = c->pool->acl;
    struct resp_w w;
    size_t len;
    const char *sub = args_get(a, 1, &len);

    if (args_is(a, 1, "whoami")) {
        w = out(c, r);
        resp_w_bulk_str(&w, c->user->name);
    } else if (args_is(a, 1, "users")) {
        w = out(c, r);
        resp_w_array(&w, (uint32_t)acl->n);
        for (size_t i = 0; i < acl->n; i++)
            resp_w_bulk_str(&w, acl->users[i].name);
    } else if (args_is(a, 1, "cat") && a->argc == 2) {
        w = out(c, r);
        resp_w_array(&w, (uint32_t)cmd_acl_count);
        for (size_t i = 0; i < cmd_acl_count; i++)
            resp_w_bulk_str(&w, cmd_acl_names[i]);
    } else if (args_is(a, 1, "cat")) {
        size_t n, ci, count = 0;
        const struct cmd *t = cmd_table(&n);
        for (ci = 0; ci < cmd_acl_count && !args_is(a, 2, cmd_acl_names[ci]); ci++)
            ;
        if (ci == cmd_acl_count) {
            size_t clen;
            const char *cat = args_get(a, 2, &clen);
            client_reply_error(c, r, "ERR Unknown category '%.*s'",
                               (int)(clen < 128 ? clen : 128), cat);
            return;
        }
        for (size_t i = 0; i < n; i++)
            count += (t[i].acl >> ci) & 1;
        w = out(c, r);
        resp_w_array(&w, (uint32_t)count);
        for (size_t i = 0; i < n; i++)
            if ((t[i].acl >> ci) & 1)
                resp_w_bulk_str(&w, t[i].name);
    } else if (args_is(a, 1, "genpass")) {
        acl_genpass_cmd(c, r, a);
    } else if (args_is(a, 1, "list")) {
        if (!acl_shown(c, r, "LIST"))
            return;
        w = out(c, r);
        resp_w_array(&w, (uint32_t)acl->n);
        /* In name order, as redis-server's (its users are a radix tree). */
        const struct acl_user **order = xcalloc(acl->n, sizeof(*order));
        for (size_t i = 0; i < acl->n; i++) {
            size_t at = 0;
            for (size_t k = 0; k < acl->n; k++)
                at += strcmp(acl->users[k].name, acl->users[i].name) < 0;
            order[at] = &acl->users[i];
        }
        for (size_t i = 0; i < acl->n; i++) {
            char *buf = NULL;
            size_t blen = 0;
            FILE *fp = xopen_memstream(&buf, &blen);
            user_line(order[i], fp);
            fclose(fp);
            resp_w_bulk(&w, buf, blen);
            free(buf);
        }
        free(order);
    } else if (args_is(a, 1, "getuser")) {
        if (acl_shown(c, r, "GETUSER"))
            acl_getuser(c, r, a);
    } else if (args_is(a, 1, "dryrun")) {
        if (acl_shown(c, r, "DRYRUN"))
            acl_dryrun(c, r, a);
    } else if (args_is(a, 1, "help")) {
        static const char *const help[] = {
            "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Refused by shardis: its users are its config file's (users:).",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Refused by shardis: a reload reads its users again.",
            "LOG [<count> | RESET]",
            "    Refused by shardis: it keeps no ACL log.",
            "SAVE",
            "    Refused by shardis: its users are its config file's (users:).",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Refused by shardis: its users are its config file's (users:).",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
            "HELP",
            "    Prints this help.",
        };
        client_reply_help(c, r, help, ARRAY_SIZE(help));
    } else {
        client_reply_error(c, r, "ERR ACL %.*s is not supported by shardis: its users are "
                           "the config file's (users:), changed by a reload",
                           (int)(len < 64 ? len : 64), sub);
    }
}

/* Set c's name as CLIENT SETNAME and HELLO SETNAME do, or answer r with
 * redis-server's error for a name it refuses: false then. An empty name
 * removes it. */
static bool set_name(struct client *c, struct req *r, const char *n, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (n[i] < '!' || n[i] > '~') {
            client_reply_error(c, r, "ERR Client names cannot contain spaces, newlines "
                               "or special characters.");
            return false;
        }
    free(client_rare(c)->name);
    c->rare->name = len > 0 ? xstrndup(n, len) : NULL;
    return true;
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
            if (!set_name(c, r, n, len))
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
    struct resp_w w = out(c, r);
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
    (void)a;
    pubsub_reset(c);
    monitor_gone(c);
    if (c->reply == CLIENT_REPLY_OFF)
        r->silent = 0;              /* (after SKIP it is the request skipped) */
    c->reply = CLIENT_REPLY_ON;
    c->user = acl_new_session(c->pool->acl);
    if (c->rare != NULL) {
        free(c->rare->name);
        c->rare->name = NULL;
    }
    /* Its later requests go over RESP2 connections of redis_db: as after
     * HELLO 2 or SELECT, none runs before its earlier ones are answered. */
    if (c->resp3 || c->db != c->pool->conf->redis_db)
        gate_hold(c, r);
    c->resp3 = 0;
    c->notouch = 0;
    c->db = (uint16_t)c->pool->conf->redis_db;
    if (pin_reset(c, r))
        return;                     /* answered by its pin */
    struct resp_w w = out(c, r);
    resp_w_simple(&w, "RESET");
    req_done(r);
}

/* CLIENT INFO's line (f NULL: c's) and CLIENT LIST's: those of the
 * pool's clients (a pool is the server its clients see) f matches. */
static void client_lines(struct client *c, struct req *r, const struct client_filter *f)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = xopen_memstream(&buf, &len);
    struct pool *p = c->pool;
    struct resp_w w = out(c, r);

    for (uint32_t i = 0; i < p->nclients && f != NULL; i++) {
        if (!client_matches(p->clients[i], f))
            continue;
        client_describe(p->clients[i], fp);
        fputc('\n', fp);
    }
    if (f == NULL) {
        client_describe(c, fp);
        fputc('\n', fp);
    }
    fclose(fp);
    resp_w_verbatim(&w, "txt", buf, len);
    free(buf);
}

static int client_type(struct args *a, uint32_t i)
{
    return args_is(a, i, "normal") ? 0 : args_is(a, i, "pubsub") ? 1
         : args_is(a, i, "master") || args_is(a, i, "replica") || args_is(a, i, "slave") ? 2
         : -1;
}

/* CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id ...] */
static void client_list(struct client *c, struct req *r, struct args *a)
{
    uint64_t *ids = NULL;
    uint32_t nids = 0;
    int type = -1;

    for (uint32_t i = 2; i < a->argc; i++) {
        long long v;
        if (args_is(a, i, "type") && i + 1 < a->argc && nids == 0) {
            if ((type = client_type(a, ++i)) < 0) {
                size_t len;
                const char *t = args_get(a, i, &len);
                client_reply_error(c, r, "ERR Unknown client type '%.*s'",
                                   (int)(len < 64 ? len : 64), t);
                free(ids);
                return;
            }
        } else if (args_is(a, i, "id") && i + 1 < a->argc) {
            for (i++; i < a->argc; i++) {
                if (!args_ll(a, i, &v) || v <= 0) {
                    client_reply_error(c, r, "ERR Invalid client ID");
                    free(ids);
                    return;
                }
                ids = xrealloc(ids, (nids + 1) * sizeof(*ids));
                ids[nids++] = (uint64_t)v;
            }
        } else {
            client_reply_error(c, r, "ERR syntax error");
            free(ids);
            return;
        }
    }
    if (type == 2) {                /* (shardis has no replicas of its own) */
        struct resp_w w = out(c, r);
        resp_w_verbatim(&w, "txt", "", 0);
    } else {
        client_lines(c, r, &(struct client_filter){.ids = ids, .nids = nids, .type = type});
    }
    free(ids);
}

/* CLIENT KILL ip:port (the old form: +OK, or an error if none) or
 * CLIENT KILL <filter value> ... (the number killed). A client killed
 * closes at once; c itself, after this reply (SKIPME no). */
static void client_kill(struct client *c, struct req *r, struct args *a)
{
    struct client_filter flt = {.type = -1};
    bool skipme = true, old = a->argc == 3;
    long long n = 0, v;
    uint64_t id;
    size_t len;
    char addr[256], laddr[256], user[256];
    bool none = false;              /* an address or user longer: no client has it */

    if (old) {
        const char *s = args_get(a, 2, &len);
        snprintf(addr, sizeof(addr), "%.*s", (int)(len < 255 ? len : 255), s);
        flt.addr = addr;
        skipme = false;
    } else {
        if (a->argc % 2 != 0) {
            client_reply_error(c, r, "ERR syntax error");
            return;
        }
        for (uint32_t i = 2; i + 1 < a->argc; i += 2) {
            const char *val = args_get(a, i + 1, &len);
            if (args_is(a, i, "id")) {
                if (!args_ll(a, i + 1, &v) || v <= 0) {
                    client_reply_error(c, r, "ERR client-id should be greater than 0");
                    return;
                }
                id = (uint64_t)v;
                flt.ids = &id;
                flt.nids = 1;
            } else if (args_is(a, i, "type")) {
                if ((flt.type = client_type(a, i + 1)) < 0) {
                    client_reply_error(c, r, "ERR Unknown client type '%.*s'",
                                       (int)(len < 64 ? len : 64), val);
                    return;
                }
            } else if (args_is(a, i, "skipme")) {
                if (!args_is(a, i + 1, "yes") && !args_is(a, i + 1, "no")) {
                    client_reply_error(c, r, "ERR syntax error");
                    return;
                }
                skipme = args_is(a, i + 1, "yes");
            } else if (args_is(a, i, "maxage")) {
                if (!args_ll(a, i + 1, &v) || v <= 0) {
                    client_reply_error(c, r, "ERR syntax error");
                    return;
                }
                flt.maxage = v;
            } else if (args_is(a, i, "addr") || args_is(a, i, "laddr") ||
                       args_is(a, i, "user")) {
                char *to = args_is(a, i, "addr") ? addr : args_is(a, i, "laddr") ? laddr : user;
                snprintf(to, sizeof(addr), "%.*s", (int)(len < 255 ? len : 255), val);
                *(to == addr ? &flt.addr : to == laddr ? &flt.laddr : &flt.user) = to;
                none |= len > 255;
            } else {
                client_reply_error(c, r, "ERR syntax error");
                return;
            }
        }
    }
    /* From the end: closing one moves the last (seen already) into its slot. */
    if (flt.type != 2 && !none)
        for (uint32_t i = c->pool->nclients; i-- > 0; ) {
            struct client *x = c->pool->clients[i];
            if (!client_matches(x, &flt) || (x == c && skipme))
                continue;
            n++;
            if (x == c) {
                c->quitting = 1;            /* closed once this reply is written */
                r->quit = 1;
            } else {
                log_info("client %llu killed by client %llu (CLIENT KILL)",
                         (unsigned long long)x->id, (unsigned long long)c->id);
                client_close(x);
            }
        }
    if (old && n == 0) {
        client_reply_error(c, r, "ERR No such client");
    } else {
        struct resp_w w = out(c, r);
        if (old)
            resp_w_simple(&w, "OK");
        else
            resp_w_int(&w, n);
    }
}

/* The CLIENT UNBLOCK sent for a client (client_unblock) has landed on
 * shardis's own connection, or failed: the pin it aimed at takes commands
 * again (mig.c's, which waits the same way for its own). */
static int unblock_landed(struct backend *b, struct req *u)
{
    mig_unblock_landed(b->pool, b->server, u->u.mig.unblock_id);
    return 0;
}

/* CLIENT UNBLOCK id [TIMEOUT|ERROR]: id is a shardis client's (CLIENT ID),
 * of this pool (the server its clients see). A client's blocking command
 * waits on a connection of its own (its pin, pin.c), whose id on its
 * server is known (backend.client_id): the server is asked to unblock
 * that, over shardis's own connection to it as mig.c does, and its :1 or
 * :0 is the answer. A client not blocked (nor known) gets :0 here, as from
 * redis-server; so does one a reload's drain is unblocking already. Like
 * CLIENT KILL it acts on another client: who may is local_exec's rule.
 *
 * Until the server has read it, nothing new goes to that pin (unblocking,
 * as gate.c holds for mig.c), and the pin is not handed to another client
 * once idle (backend_release closes it): a command sent there meanwhile,
 * the client's own or another's, would be the one unblocked. A PING
 * behind it on the same connection says when it has been read, whatever
 * became of the client that asked. True if r was sent (it is answered
 * from there); false if it was answered here. */
static bool client_unblock(struct client *c, struct req *r, struct args *a)
{
    struct backend *b = NULL, *own;
    long long id;
    char sid[24];

    if (a->argc > 4) {
        client_reply_bad_sub(c, r, a, "CLIENT");
        return false;
    }
    if (a->argc == 4 && !args_is(a, 3, "timeout") && !args_is(a, 3, "error")) {
        client_reply_error(c, r, "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR");
        return false;
    }
    if (!args_ll(a, 2, &id)) {
        client_reply_error(c, r, "ERR value is not an integer or out of range");
        return false;
    }
    for (uint32_t i = 0; i < c->pool->nclients && b == NULL; i++)
        if (c->pool->clients[i]->id == (uint64_t)id)
            b = c->pool->clients[i]->pin;
    if (b == NULL || b->client_id == 0 || b->unblocking || !backend_has_blocking(b)) {
        struct resp_w w = out(c, r);
        resp_w_int(&w, 0);
        return false;
    }
    snprintf(sid, sizeof(sid), "%" PRIu64, b->client_id);
    struct resp_w w = client_cmd_w(c, &r->out);
    resp_w_command(&w, a->argc == 4 ? 4 : 3, (const char *const[]){"CLIENT", "UNBLOCK", sid,
                   args_is(a, 3, "error") ? "ERROR" : "TIMEOUT"}, NULL);
    own = pool_own(c->pool, b->server, false);  /* (:1 and :0 read the same in RESP3) */
    /* Sent now, not behind c's own earlier requests at its gate: it acts
     * on another client, whose command is waiting now (and its reply still
     * comes in c's order). Held there, the pin would go unguarded
     * meanwhile. */
    backend_send(own, r);
    struct req *u = req_get();
    struct mbuf *m = NULL;
    struct resp_w pw = resp_w_on(&u->out, &m, RESP2);
    resp_w_command(&pw, 1, (const char *const[]){"PING"}, NULL);
    mbuf_unref(m);
    u->on_reply = unblock_landed;
    u->u.mig.unblock_id = b->client_id;
    b->unblocking = 1;
    backend_send(own, u);
    return true;
}

/* CLIENT's subcommands; route.c checked each one's arity by the table.
 * True if r was sent on (UNBLOCK): answered from there. */
static bool client_sub(struct client *c, struct req *r, struct args *a)
{
    struct resp_w w = out(c, r);
    size_t len;

    if (args_is(a, 1, "unblock")) {
        return client_unblock(c, r, a);
    } else if (args_is(a, 1, "setname")) {
        const char *n = args_get(a, 2, &len);
        if (set_name(c, r, n, len))
            reply_ok(c, r);
    } else if (args_is(a, 1, "getname")) {
        if (client_name(c) == NULL)
            resp_w_null(&w);
        else
            reply_str(c, r, client_name(c));
    } else if (args_is(a, 1, "id")) {
        resp_w_int(&w, (long long)c->id);
    } else if (args_is(a, 1, "reply")) {
        /* (route.c made r silent if the mode was OFF or SKIP) */
        if (args_is(a, 2, "on")) {
            c->reply = CLIENT_REPLY_ON;
            r->silent = 0;
            reply_ok(c, r);
        } else if (args_is(a, 2, "off") || args_is(a, 2, "skip")) {
            if (args_is(a, 2, "off"))
                c->reply = CLIENT_REPLY_OFF;
            else if (c->reply != CLIENT_REPLY_OFF)
                c->reply = CLIENT_REPLY_SKIP;
            r->silent = 1;
            reply_ok(c, r);                 /* dropped */
        } else {
            client_reply_error(c, r, "ERR syntax error");
        }
    } else if (args_is(a, 1, "no-evict")) {
        /* Redis 7.0's: shardis evicts no client for memory, so either
         * setting is what it does already. */
        if (args_is(a, 2, "on") || args_is(a, 2, "off"))
            reply_ok(c, r);
        else
            client_reply_error(c, r, "ERR syntax error");
    } else if (args_is(a, 1, "no-touch")) {
        /* Redis 7.2's: kept here, and put on the server connection around
         * each of its requests (gate.c go), the connections being shared. */
        if (args_is(a, 2, "on") || args_is(a, 2, "off")) {
            c->notouch = args_is(a, 2, "on");
            reply_ok(c, r);
        } else {
            client_reply_error(c, r, "ERR syntax error");
        }
    } else if (args_is(a, 1, "capa")) {
        /* Valkey 8's: a client says what it can take (redirect: -REDIRECT
         * replies, which a server sends to replica readers). shardis sends
         * none, so any is taken as Valkey takes them, and changes nothing. */
        reply_ok(c, r);
    } else if (args_is(a, 1, "setinfo")) {
        if (args_is(a, 2, "lib-name") || args_is(a, 2, "lib-ver"))
            reply_ok(c, r);
        else {
            const char *o = args_get(a, 2, &len);
            client_reply_error(c, r, "ERR Unrecognized option '%.*s'", (int)(len < 64 ? len : 64), o);
        }
    } else if (args_is(a, 1, "info") && a->argc == 2) {
        client_lines(c, r, NULL);
    } else if (args_is(a, 1, "list")) {
        client_list(c, r, a);
    } else if (args_is(a, 1, "kill")) {
        client_kill(c, r, a);
    } else if (args_is(a, 1, "pause")) {
        long long ms;
        bool all = a->argc == 3 || args_is(a, 3, "all");
        if (!args_ll(a, 2, &ms) || ms < 0) {
            client_reply_error(c, r, "ERR timeout is not an integer or out of range");
        } else if (a->argc > 4 || (a->argc == 4 && !all && !args_is(a, 3, "write"))) {
            client_reply_error(c, r, "ERR syntax error");
        } else {
            pool_pause(c->pool, ms > 0 ? (uint64_t)ms : 1, all);
            reply_ok(c, r);
        }
    } else if (args_is(a, 1, "unpause") && a->argc == 2) {
        pool_pause(c->pool, 0, false);
        reply_ok(c, r);
    } else {
        const char *sub = args_get(a, 1, &len);
        client_reply_error(c, r, "ERR CLIENT %.*s is not supported by shardis",
                           (int)(len < 64 ? len : 64), sub);
    }
    return false;
}

static void cmd_client(struct client *c, struct req *r, struct args *a)
{
    if (!client_sub(c, r, a))
        req_done(r);
}

void local_module_list(struct client *c, struct req *r)
{
    struct resp_w w = out(c, r);

    info_modules(c->pool, &w);      /* (as HELLO says them) */
    req_done(r);
}

static void cmd_time(struct client *c, struct req *r, struct args *a)
{
    struct resp_w w = out(c, r);
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
    struct resp_w w = out(c, r);
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
    struct resp_w w = out(c, r);

    if (args_is(a, 1, "histogram")) {
        uint32_t n = a->argc - 2;
        uint16_t *named = xcalloc(n + 1, sizeof(*named));
        for (uint32_t i = 0; i < n; i++) {
            size_t len;
            const char *name = args_get(a, 2 + i, &len);
            const struct cmd *cmd = cmd_lookup(name, len);
            named[i] = cmd != NULL ? cmd_number(cmd) : 0;
        }
        stats_latency_histogram(&c->pool->stats, &w, named, n);
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
        reply_arity(c, r, "shard.whereis");
        return;
    }
    key = args_get(a, 1, &len);
    if (ring_distribution(c->pool->ring) == RING_DIST_RANDOM) {
        client_reply_error(c, r, "ERR distribution random gives keys no fixed server");
        return;
    }
    reply_str(c, r, ring_server_label(c->pool->ring, ring_lookup(c->pool->ring, key, len)));
}

static void cmd_nodes(struct client *c, struct req *r, struct args *a)
{
    struct resp_w w = out(c, r);
    struct pool *p = c->pool;

    if (a->argc != 1) {
        reply_arity(c, r, "shard.nodes");
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
        if (ps->ejected_until != 0)
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
    struct resp_w w = out(c, r);

    if (a->argc < 2) {
        reply_arity(c, r, maxify ? "shard.maxify" : "shard.minify");
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

int (*local_reload)(char *out, size_t outlen, char *err, size_t errlen);

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
    {"client", cmd_client, false, true, 0, true},
    {"command", cmd_command, false, false, 0, false},
    {"time", cmd_time, false, false, 0, false},
    {"info", info_command, false, true, 0, false},
    {"slowlog", slowlog_command, false, false, 0, true},
    {"latency", cmd_latency, false, false, 0, true},
    {"monitor", monitor_command, false, false, 0, true},
    {"acl", cmd_acl, false, false, 0, false},
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

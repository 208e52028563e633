/* local_acl.c -- ACL, answered by the proxy: WHOAMI, USERS, LIST,
 * GETUSER, DRYRUN, CAT, GENPASS, as redis-server 7.0 answers them, from
 * the users the config file gives (acl.c). What would change users
 * (SETUSER, DELUSER, LOAD, SAVE) is refused: a reload changes them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/core/acl.h"
#include "proxy/transport/args.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/ops/local.h"
#include "proxy/ops/local_int.h"
#include "proxy/core/pool.h"
#include "proxy/core/route.h"
#include "proxy/base/util.h"

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
    struct resp_w w = local_w(c, r);
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
                    local_reply_ok(c, r);
                } else {
                    snprintf(msg, sizeof(msg), "This user has no permissions to run the "
                             "'%s' command", s);
                    local_reply_str(c, r, msg);
                }
                return;
            }
        client_reply_error(c, r, "ERR Command '%.*s' not found", (int)(nlen < 128 ? nlen : 128),
                           name);
        return;
    }
    if (!cmd_arity_ok(cmd, argc)) {
        local_reply_arity(c, r, cmd->name);
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
        local_reply_ok(c, r);
    } else {
        if (k == 1)
            snprintf(msg, sizeof(msg), "This user has no permissions to run the '%s' command",
                     cmd->name);
        else
            snprintf(msg, sizeof(msg), "This user has no permissions to access the '%.*s' %s",
                     (int)(avlen[at] < 128 ? avlen[at] : 128), av[at], k == 2 ? "key" : "channel");
        local_reply_str(c, r, msg);
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
        local_reply_str(c, r, pass);
    }
}

/* ACL: about the pool's users (acl.c), which the config file defines:
 * WHOAMI, USERS, CAT, GENPASS, HELP, LIST, GETUSER and DRYRUN as
 * redis-server answers them; what would change users or read the ACL log
 * is refused (edit users: and reload). */
/* ACL CAT category: the commands in it. */
static void acl_cat(struct client *c, struct req *r, struct args *a)
{
    struct resp_w w;
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
    w = local_w(c, r);
    resp_w_array(&w, (uint32_t)count);
    for (size_t i = 0; i < n; i++)
        if ((t[i].acl >> ci) & 1)
            resp_w_bulk_str(&w, t[i].name);
}

/* ACL LIST: each user's line, in name order, as redis-server's (its users
 * are a radix tree). */
static void acl_list(struct client *c, struct req *r)
{
    const struct acl *acl = c->pool->acl;
    struct resp_w w = local_w(c, r);

    resp_w_array(&w, (uint32_t)acl->n);
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
}

void local_acl_command(struct client *c, struct req *r, struct args *a)
{
    const struct acl *acl = c->pool->acl;
    struct resp_w w;
    size_t len;
    const char *sub = args_get(a, 1, &len);

    if (args_is(a, 1, "whoami")) {
        w = local_w(c, r);
        resp_w_bulk_str(&w, c->user->name);
    } else if (args_is(a, 1, "users")) {
        w = local_w(c, r);
        resp_w_array(&w, (uint32_t)acl->n);
        for (size_t i = 0; i < acl->n; i++)
            resp_w_bulk_str(&w, acl->users[i].name);
    } else if (args_is(a, 1, "cat") && a->argc == 2) {
        w = local_w(c, r);
        resp_w_array(&w, (uint32_t)cmd_acl_count);
        for (size_t i = 0; i < cmd_acl_count; i++)
            resp_w_bulk_str(&w, cmd_acl_names[i]);
    } else if (args_is(a, 1, "cat")) {
        acl_cat(c, r, a);
    } else if (args_is(a, 1, "genpass")) {
        acl_genpass_cmd(c, r, a);
    } else if (args_is(a, 1, "list")) {
        if (acl_shown(c, r, "LIST"))
            acl_list(c, r);
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

/* srvuser.c -- the user clients' commands and scripts run as on the
 * servers, made by shardis itself.
 *
 * shardis reads every command a client sends it, but not what a script
 * does once it runs: there, it may do whatever the user its connection
 * signed in as may. So clients' connections never sign in as shardis's
 * own user (which writes the migration record, moves keys, keeps
 * SHARD.GENKEY's sequences, runs admin commands). Where the pool names a
 * backend_user, that is the operator's; where it does not, shardis makes
 * one, with rules that give a script no more than a client has through
 * shardis:
 *
 *   - every key but shardis's own ("__shardis:", "$equence{"): Redis
 *     patterns cannot say "but", so one pattern per prefix of each;
 *   - every channel but shardis's ("__shardis:"), and any PSUBSCRIBE
 *     pattern (a selector: Redis compares a pattern with the user's
 *     patterns as text, so no list of ours would take "news.*");
 *   - every command but @admin and @dangerous ones (FLUSHALL, KEYS,
 *     CONFIG, MIGRATE, SHUTDOWN, SWAPDB ...: shardis runs those a client
 *     may run as its own user, with admin_commands), given back the
 *     @dangerous ones shardis routes by key on clients' connections
 *     (SORT, RESTORE: route.c decides, and this reads it); SELECT only of
 *     the databases the pool serves; no MOVE (no rule can bound its
 *     database: shardis runs a client's MOVE, and SORT's BY and GET
 *     patterns, which need every key, as its own user: route.c); with
 *     admin_commands, DEBUG SLEEP, which a transaction queues there.
 *
 * How it gets to the servers: every connection that signs in as it
 * first signs in as shardis's own user and sends the ACL SETUSER
 * (srvuser_sign_in, in every clients' connection's handshake): a server
 * that restarted, a replica promoted by a failover, a replica read from,
 * each has the user before the first client command. ACL SETUSER of
 * rules a user already has changes nothing (no client of it is
 * disconnected).
 *
 * Several shardis in front of the same servers never undo each other:
 * the name is the hash of the rules, and the password is derived from
 * the name and shardis's own password, so the same config makes the same
 * user with the same password anywhere; a shardis whose rules differ
 * (other databases, another version) makes a user of its own beside it.
 * The password is sent only as its SHA-256 (#...). Each ACL SETUSER
 * resets the user's passwords to the one it gives (resetpass): one
 * derived from a redis_auth since rotated stops working as soon as a
 * connection signs in again. Two shardis whose own passwords differ (a
 * rotation under way) each reset it to theirs: the SETUSER and the AUTH
 * after it are written together, and redis-server runs a connection's
 * pipelined commands back to back, so neither's AUTH fails, and
 * connections signed in already stay so.
 *
 * Trade-offs: COPY ... DB n in a script can copy into a database the
 * pool does not serve (ACL rules cannot see the argument); a script's
 * SCAN, RANDOMKEY or PUBSUB CHANNELS may name shardis's keys or
 * channels (not read them). Where the server refuses the ACL SETUSER
 * (shardis's own user lacks +acl), the connection goes on as clients'
 * connections signed in before (redis_auth's default user), and the
 * log says so, with the command to run (srvuser_refused). Also here:
 * the start's check of what the users may do there (srvuser_check). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/base/cmd.h"
#include "proxy/base/digest.h"
#include "proxy/base/log.h"
#include "proxy/base/resp.h"
#include "proxy/core/pool.h"
#include "proxy/core/pool_conn.h"
#include "proxy/core/route.h"
#include "proxy/core/srvuser.h"
#include "proxy/transport/backend.h"
#include "proxy/base/util.h"

/* ~10 ms at start and on a reload that changes redis_auth. */
#define SRVUSER_PBKDF2_ROUNDS 20000

/* A growing list of strings, owned. */
struct words {
    char **v;
    int n, cap;
};

static void add(struct words *w, const char *s)
{
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->v = xrealloc(w->v, (size_t)w->cap * sizeof(*w->v));
    }
    w->v[w->n++] = xstrdup(s);
}

/* Patterns (each after sigil) matching every name that does not start
 * with one of the prefixes: the empty name; names whose first byte
 * starts none of them; then, for each prefix, each of its proper
 * prefixes alone and followed by any byte but the next. None of the
 * prefixes' bytes is special in a glob. */
static void all_but(struct words *w, char sigil, const char *const *prefixes, size_t n)
{
    char first[16] = "", buf[64];
    size_t nf = 0;

    for (size_t i = 0; i < n && nf + 1 < sizeof(first); i++)
        if (strchr(first, prefixes[i][0]) == NULL)
            first[nf++] = prefixes[i][0];
    snprintf(buf, sizeof(buf), "%c", sigil);
    add(w, buf);
    snprintf(buf, sizeof(buf), "%c[^%s]*", sigil, first);
    add(w, buf);
    for (size_t i = 0; i < n; i++) {
        const char *p = prefixes[i];
        for (int k = 1; k < (int)strlen(p); k++) {
            snprintf(buf, sizeof(buf), "%c%.*s", sigil, k, p);
            add(w, buf);
            snprintf(buf, sizeof(buf), "%c%.*s[^%c]*", sigil, k, p, p[k]);
            add(w, buf);
        }
    }
}

/* The rules, after the name and password. */
static void rules(const struct conf_pool *pc, struct words *w)
{
    static const char *const keys[] = {SHARDIS_RESERVED, SHARDIS_SEQUENCE};
    static const char *const chans[] = {SHARDIS_RESERVED};
    size_t n;
    const struct cmd *table = cmd_table(&n);

    add(w, "resetkeys");
    all_but(w, '~', keys, 2);
    add(w, "resetchannels");
    all_but(w, '&', chans, 1);
    add(w, "clearselectors");
    add(w, "+@all");
    add(w, "-@admin");
    add(w, "-@dangerous");
    for (size_t i = 0; i < n; i++) {
        const struct cmd *c = &table[i];
        enum route_kind k = route_kind(c);
        if (!(c->acl & (CMD_CAT_ADMIN | CMD_CAT_DANGEROUS)) || !cmd_current(c) ||
            (c->flags & CMD_ALWAYS))
            continue;
        /* keyed, on the client's own or shared connections */
        if (k == ROUTE_KEY || k == ROUTE_SAME_SERVER || k == ROUTE_SPLIT ||
            k == ROUTE_BLOCKING) {
            char buf[80];
            snprintf(buf, sizeof(buf), "+%s", c->name);
            add(w, buf);
        }
    }
    add(w, "-select");
    for (int db = 0; db < pc->databases; db++) {   /* (conf: redis_db is one of them) */
        char buf[24];
        snprintf(buf, sizeof(buf), "+select|%d", db);
        add(w, buf);
    }
    add(w, "-move");            /* (shardis runs a client's as its own: route.c) */
    /* DEBUG SLEEP queued in a client's transaction (pin.c), where admin
     * commands are a client's; no script may run DEBUG (noscript). */
    if (pc->admin_commands)
        add(w, "+debug|sleep");
    add(w, "(allchannels +psubscribe)");
}

/* The words as one line redis-cli takes: quoted where they hold a space. */
static char *join(char *const *v, int n)
{
    size_t len = 1;
    for (int i = 0; i < n; i++)
        len += strlen(v[i]) + 3;
    char *s = xmalloc(len), *p = s;
    for (int i = 0; i < n; i++) {
        bool q = strchr(v[i], ' ') != NULL;
        p += sprintf(p, "%s%s%s%s", i ? " " : "", q ? "\"" : "", v[i], q ? "\"" : "");
    }
    *p = '\0';
    return s;
}

static void words_free(struct words *w)
{
    for (int i = 0; i < w->n; i++)
        free(w->v[i]);
    free(w->v);
}

char *srvuser_rules_line(const struct conf_pool *pc, const char *name, const char *hash_hex)
{
    struct words w = {0};
    char pw[70];

    add(&w, "ACL");
    add(&w, "SETUSER");
    add(&w, name);
    add(&w, "on");
    snprintf(pw, sizeof(pw), "#%s", hash_hex);
    add(&w, pw);
    rules(pc, &w);
    char *line = join(w.v, w.n);
    words_free(&w);
    return line;
}

struct srvuser *srvuser_make(const struct conf_pool *pc)
{
    struct srvuser *u = xcalloc(1, sizeof(*u));
    struct words w = {0};
    char h[65], pwhash[66];

    rules(pc, &w);
    char *body = join(w.v, w.n);
    digest_sha256_hex(body, strlen(body), h);
    free(body);
    snprintf(u->name, sizeof(u->name), "shardis-clients-%.12s", h);
    /* From the password shardis's own connections sign in with: anyone
     * who knows it could sign in as shardis, so the derived one gives
     * them nothing more. Its hash shows (the log's ACL SETUSER, ACL
     * LIST): PBKDF2 makes guessing shardis's own password from it slow. */
    const char *secret = pc->internal_user != NULL ? pc->internal_password : pc->redis_auth;
    uint8_t dk[32];
    digest_pbkdf2(secret != NULL ? secret : "", secret != NULL ? strlen(secret) : 0, u->name,
                  strlen(u->name), SRVUSER_PBKDF2_ROUNDS, dk);
    for (int i = 0; i < 32; i++)
        snprintf(u->password + 2 * i, 3, "%02x", dk[i]);
    digest_sha256_hex(u->password, strlen(u->password), h);
    snprintf(pwhash, sizeof(pwhash), "#%s", h);

    struct words all = {0};
    add(&all, "ACL");
    add(&all, "SETUSER");
    add(&all, u->name);
    add(&all, "on");
    add(&all, "resetpass");     /* (below) */
    add(&all, pwhash);
    for (int i = 0; i < w.n; i++)
        add(&all, w.v[i]);
    words_free(&w);
    u->argc = all.n;
    u->argv = all.v;
    u->line = join(all.v, all.n);
    return u;
}

void srvuser_free(struct srvuser *u)
{
    if (u == NULL)
        return;
    words_free(&(struct words){.v = u->argv, .n = u->argc});
    free(u->line);
    free(u);
}

/* ---- signing in ------------------------------------------------------------------ */
/* The clients' user on a clients' connection: ACL SETUSER, as shardis's
 * own user, then AUTH as it. A refusal of the SETUSER is
 * the AUTH's to judge (the operator may have made the user); a refused
 * AUTH leaves the connection signed in as clients' connections were
 * before (redis_auth's default user: srvuser_sign_in), which works but
 * lets a client's script do what that user may: srvuser_refused. */
static int made_reply(struct backend *b, struct req *r)
{
    char first[160];

    if (r->rsp.len != 0 && resp_rd_head(&r->rsp, first, sizeof(first)) == RESP_ERROR)
        log_info("pool '%s': %s: ACL SETUSER %s: %s", b->pool->conf->name,
                 b->pool->servers[b->server].label, b->pool->clients_user->name, first);
    return 0;
}

static int auth_reply(struct backend *b, struct req *r)
{
    struct pool_server *ps = &b->pool->servers[b->server];
    char first[160];

    if (r->rsp.len == 0)
        return 0;                   /* failed: the connection has failed already */
    if (resp_rd_head(&r->rsp, first, sizeof(first)) != RESP_ERROR) {
        if (ps->user_refused)
            log_notice("pool '%s': %s: clients' connections sign in as %s again",
                       b->pool->conf->name, ps->label, b->pool->clients_user->name);
        ps->user_refused = false;
        return 0;
    }
    srvuser_refused(b->pool, ps, first);
    return 0;
}

void srvuser_refused(const struct pool *p, struct pool_server *ps, const char *why)
{
    const char *own = p->conf->internal_user != NULL ? p->conf->internal_user : "default";

    if (!ps->user_refused)
        log_warn("pool '%s': %s (%s) has no clients' user %s shardis may make or sign in as "
                 "(%s): clients' commands and scripts there run as the default user, with "
                 "every right it has (a script may FLUSHALL, run KEYS, write shardis's own "
                 "keys). Give '%s' +acl, or run on that server: %s", p->conf->name, ps->label,
                 ps->addr, p->clients_user->name, why, own, p->clients_user->line);
    ps->user_refused = true;
}

bool srvuser_sign_in(struct backend *b)
{
    const struct conf_pool *pc = b->pool->conf;
    const struct srvuser *u = b->pool->clients_user;

    if (u == NULL)
        return false;
    /* Sent: AUTH as shardis's own user (queued after, by backend_hello),
     * ACL SETUSER, then, where shardis's own user is not redis_auth's
     * default one, RESET and AUTH as that (what clients' connections were
     * before there was a clients' user: where the next AUTH is refused,
     * they stay so, never shardis's own; RESET signs out, to the default
     * user if it needs no password), and AUTH as the clients' user. Each
     * goes to the front: the last queued is the first sent. */
    backend_queue_own(b, auth_reply, true, 3, (const char *const[]){"AUTH", u->name, u->password});
    if (pc->internal_user != NULL) {
        const char *before[3];
        int nbefore = backend_auth_args(pc, BACKEND_AS_CLIENT, before);
        if (nbefore > 0)
            backend_queue_own(b, backend_hello_reply, true, nbefore, before);
        backend_queue_own(b, backend_hello_reply, true, 1, (const char *const[]){"RESET"});
    }
    backend_queue_own(b, made_reply, true, u->argc, (const char *const *)u->argv);
    return true;
}

/* ---- checking the users --------------------------------------------------------- */

/* What clients' user (the backend_user, or the one shardis makes:
 * above) must not be able to do, since a client's script runs as it
 * and shardis cannot read scripts; and what the internal_user must, or
 * shardis's own work fails. Each is asked of ACL DRYRUN (Redis 7), as
 * the internal user. */
static const struct user_probe {
    bool internal;              /* the internal_user must be allowed it */
    int argc;
    const char *argv[7];
    const char *what;
} probes[] = {
    {false, 3, {"SET", "__shardis:ctl:x", "1"}, "write shardis's migration record"},
    {false, 2, {"GET", "$equence{00}"}, "read SHARD.GENKEY's sequences"},
    {false, 3, {"PUBLISH", "__shardis:x", "1"}, "publish on shardis's channels"},
    {false, 1, {"FLUSHALL"}, "empty a server"},
    {false, 2, {"KEYS", "*"}, "list every key"},
    {false, 6, {"MIGRATE", "127.0.0.1", "1", "k", "0", "1"}, "send keys to any host"},
    {false, 3, {"MOVE", "k", "1"}, "move a key to another database"},
    {false, 2, {"SELECT", "99"}, "select a database the pool does not serve"},
    {false, 4, {"CONFIG", "SET", "dir", "/tmp"}, "reconfigure a server"},
    {false, 3, {"ACL", "SETUSER", "x"}, "change ACL users"},
    {false, 1, {"SHUTDOWN"}, "stop a server"},
    {true, 3, {"SET", "__shardis:ctl:x", "1"}, "write the migration record"},
    {true, 6, {"MIGRATE", "127.0.0.1", "1", "k", "0", "1"}, "move keys"},
    {true, 4, {"EVALSHA", "0000000000000000000000000000000000000000", "1", "$equence{00}"},
     "run SHARD.GENKEY's script"},
    {true, 2, {"INCR", "$equence{00}"}, "keep SHARD.GENKEY's sequences"},
    {true, 4, {"CLIENT", "UNBLOCK", "1", "ERROR"}, "unblock a moving key's waiter"},
    {true, 3, {"PUBSUB", "CHANNELS", "__shardis:*"}, "find the group's proxies"},
    {true, 2, {"SUBSCRIBE", "__shardis:x"}, "join the group's channels"},
    {true, 3, {"SCRIPT", "LOAD", "return 1"}, "load SHARD.GENKEY's script"},
    {true, 2, {"INFO", "server"}, "read the server's run_id"},
    {true, 3, {"ACL", "GETUSER", "x"}, "check the keyless_user"},
};

int srvuser_check(const struct pool *p, struct pool_server *ps, bool make)
{
    struct backend_server sv;
    const struct conf_pool *pc = p->conf;
    const char *internal = pc->internal_user != NULL ? pc->internal_user : "default";
    const char *clients = srvuser_name(pc, p->clients_user);
    int found = 0;

    pool_conn_server_of(p, (uint32_t)(ps - p->servers), 0, &sv);

    if (p->clients_user != NULL) {
        /* Made here first, at start: its refusal is said now, not when
         * a client's connection first goes there. On one connection:
         * (ACL SETUSER and) AUTH as it, whose answer tells. */
        const struct srvuser *u = p->clients_user;
        const char *auth[3] = {"AUTH", u->name, u->password};
        size_t len;
        char *said = backend_sync(&sv, make ? u->argc : 0, (const char *const *)u->argv, 3, auth,
                                  true, &len);
        if (said == NULL)
            return -1;                  /* (down: its connections will make it) */
        if (said[0] == '-') {
            char why[160];
            snprintf(why, sizeof(why), "%.*s", (int)strcspn(said + 1, "\r\n"), said + 1);
            srvuser_refused(p, ps, why);
        }
        free(said);
        if (ps->user_refused)
            return 1;
        /* What shardis made is what srvuser.c says: asked of the servers
         * where an operator made users (or asks: shardis acl --check). */
        if (make && pc->internal_user == NULL)
            return 0;
    }
    for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
        const struct user_probe *pr = &probes[i];
        const char *user = pr->internal ? internal : clients;
        if (!pr->internal && !strcmp(pr->argv[0], "SELECT") && pc->databases > 99)
            continue;                   /* what the pool lets clients do */
        const char *argv[10] = {"ACL", "DRYRUN", user};
        size_t len;
        for (int k = 0; k < pr->argc; k++)
            argv[3 + k] = pr->argv[k];
        char *said = backend_sync(&sv, 0, NULL, 3 + pr->argc, argv, false, &len);
        if (said == NULL) {
            log_warn("pool '%s': cannot check what ACL user '%s' may do on %s (ACL DRYRUN, "
                     "Redis 7, run as '%s', gave no answer or an error): see doc/security.md, "
                     "backend_user and internal_user", pc->name, user, ps->label, internal);
            return -1;
        }
        bool allowed = strcmp(said, "OK") == 0;
        free(said);
        if (allowed == pr->internal)
            continue;
        found++;
        if (pr->internal)
            log_warn("pool '%s': internal user '%s' may not %s (%s) on %s: shardis's own "
                     "work will fail there", pc->name, user, pr->what, pr->argv[0], ps->label);
        else
            log_warn("pool '%s': clients' user on the servers, '%s', may %s (%s) on %s: a client's script "
                     "could, whatever shardis allows its user", pc->name, user, pr->what,
                     pr->argv[0], ps->label);
    }
    return found;
}

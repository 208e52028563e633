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
 *     patterns, which need every key, as its own user: route.c).
 *
 * How it gets to the servers: every connection that signs in as it
 * first signs in as shardis's own user and sends the ACL SETUSER
 * (backend.c's handshake): a server that restarted, a replica promoted
 * by a failover, a replica read from, each has the user before the first
 * client command. ACL SETUSER of rules a user already has changes
 * nothing (no client of it is disconnected).
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
 * log says so, with the command to run (backend.c, backend_sync.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/base/cmd.h"
#include "proxy/base/digest.h"
#include "proxy/core/route.h"
#include "proxy/core/srvuser.h"
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

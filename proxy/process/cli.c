/* cli.c -- `shardis -t`, `shardis locate`, `shardis diff` and `shardis
 * acl`.
 *
 * These run the same conf/ and ring/ code the proxy routes with, so what
 * they print is what the proxy does. locate answers from the ring
 * directly; diff prints the exact arcs' shares from ring_diff; acl
 * prints the users srvuser.c makes (and --check asks the servers, as the
 * proxy's start does: srvuser_check). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "proxy/process/cli.h"
#include "proxy/base/cmd.h"
#include "proxy/core/route.h"
#include "proxy/core/acl.h"
#include "proxy/transport/backend.h"
#include "proxy/base/digest.h"
#include "proxy/core/pool.h"
#include "proxy/core/srvuser.h"
#include "proxy/base/tls.h"
#include "proxy/base/util.h"
#include "ring/ring.h"

static struct conf *load(const char *path)
{
    char err[CONF_ERRLEN];
    struct conf *cf;

    if (conf_load(&cf, path, err, sizeof(err)) < 0 ||
        (acl_check(cf, err, sizeof(err)) < 0 && (conf_free(cf), true))) {
        fprintf(stderr, "shardis: %s\n", err);
        return NULL;
    }
    return cf;
}

static struct ring *pool_ring(const struct conf *cf, const char *name,
                              const struct conf_pool **poolp)
{
    const struct conf_pool *pool = conf_pool(cf, name);
    char err[CONF_ERRLEN];
    struct ring *r;

    if (pool == NULL) {
        fprintf(stderr, "shardis: %s: no pool named '%s'\n", cf->path, name);
        return NULL;
    }
    if (conf_pool_ring(pool, &r, err, sizeof(err)) < 0) {
        fprintf(stderr, "shardis: %s: pool '%s': %s\n", cf->path, pool->name, err);
        return NULL;
    }
    *poolp = pool;
    return r;
}

int cli_test_conf(const char *path)
{
    struct conf *cf = load(path);
    int ok = cf != NULL;

    /* Building every ring catches what parsing alone cannot. */
    for (size_t i = 0; ok && i < cf->npools; i++) {
        const struct conf_pool *pool;
        struct ring *r = pool_ring(cf, cf->pools[i].name, &pool);
        ok = r != NULL;
        ring_unref(r);
    }
    conf_free(cf);
    if (!ok) {
        fprintf(stderr, "shardis: configuration file '%s' syntax is invalid\n", path);
        return 1;
    }
    printf("shardis: configuration file '%s' syntax is ok\n", path);
    return 0;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Decode hex in place; returns the byte count or -1. */
static ssize_t unhex(const char *s, size_t n, char *out)
{
    if (n % 2 != 0)
        return -1;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hexval((unsigned char)s[i]), lo = hexval((unsigned char)s[i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i / 2] = (char)(hi << 4 | lo);
    }
    return (ssize_t)(n / 2);
}

int cli_locate(const char *path, const char *poolname, bool hex, FILE *in, FILE *out)
{
    const struct conf_pool *pool = NULL;
    struct conf *cf = load(path);
    struct ring *r = cf != NULL ? pool_ring(cf, poolname, &pool) : NULL;
    char *line = NULL, *key = NULL;
    size_t cap = 0, keycap = 0, lineno = 0;
    ssize_t n;
    int rc = 0;

    if (r == NULL) {
        conf_free(cf);
        return 1;
    }
    if (ring_distribution(r) == RING_DIST_RANDOM) {
        fprintf(stderr, "shardis: pool '%s' uses distribution random: its keys "
                "have no fixed server to locate\n", pool->name);
        ring_unref(r);
        conf_free(cf);
        return 1;
    }
    while ((n = getline(&line, &cap, in)) >= 0) {
        const char *k = line;
        ssize_t klen;

        lineno++;
        if (n > 0 && line[n - 1] == '\n')
            line[--n] = '\0';
        klen = n;
        if (hex) {
            if ((size_t)n / 2 + 1 > keycap) {
                keycap = (size_t)n / 2 + 1;
                free(key);
                if ((key = malloc(keycap)) == NULL) {
                    fprintf(stderr, "shardis: out of memory\n");
                    rc = 1;
                    break;
                }
            }
            klen = unhex(line, (size_t)n, key);
            if (klen < 0) {
                fprintf(stderr, "shardis: stdin:%zu: '%s' is not hex (use two hex "
                        "digits per byte)\n", lineno, line);
                rc = 1;
                break;
            }
            k = key;
        }
        fwrite(line, 1, (size_t)n, out);
        fprintf(out, "\t%s\n", ring_server_label(r, ring_lookup(r, k, (size_t)klen)));
    }
    if (fflush(out) != 0 || ferror(out)) {
        fprintf(stderr, "shardis: cannot write the output: %s\n", strerror(errno));
        rc = 1;
    }
    free(line);
    free(key);
    ring_unref(r);
    conf_free(cf);
    return rc;
}

static uint32_t find_addr(const struct ring *r, const char *addr)
{
    for (uint32_t i = 0; i < ring_nservers(r); i++)
        if (strcmp(ring_server_addr(r, i), addr) == 0)
            return i;
    return UINT32_MAX;
}

static void print_server(FILE *out, const struct ring *r, uint32_t i)
{
    const char *label = ring_server_label(r, i), *addr = ring_server_addr(r, i);
    char buf[600];

    if (strcmp(label, addr) == 0)
        snprintf(buf, sizeof(buf), "%s", addr);
    else
        snprintf(buf, sizeof(buf), "%s (%s)", label, addr);
    fprintf(out, "  %-40s", buf);
}

static void print_share(FILE *out, const struct ring *r, uint32_t i)
{
    if (i == UINT32_MAX)
        fprintf(out, "  %9s", "-");
    else
        fprintf(out, "  %8.4f%%", 100 * ring_server_share(r, i));
}

int cli_diff(const char *oldpath, const char *newpath, const char *poolname, FILE *out)
{
    struct conf *ca = load(oldpath), *cb = ca != NULL ? load(newpath) : NULL;
    const struct conf_pool *pa = NULL, *pb = NULL;
    struct ring *ra = NULL, *rb = NULL;
    struct ring_diff *d = NULL;
    char err[CONF_ERRLEN];
    int rc = 1;

    if (cb == NULL)
        goto done;
    if ((ra = pool_ring(ca, poolname, &pa)) == NULL ||
        (rb = pool_ring(cb, pa->name, &pb)) == NULL)
        goto done;
    if (ring_diff_create(&d, ra, rb, err, sizeof(err)) < 0) {
        fprintf(stderr, "shardis: pool '%s': %s\n", pa->name, err);
        goto done;
    }

    fprintf(out, "pool '%s': %s, hash %s\n\n", pa->name,
            ring_dist_name(ring_distribution(ra)), ring_hash_name(ring_hash_function(ra)));
    fprintf(out, "  %-40s  %9s  %9s\n", "server", "before", "after");
    for (uint32_t i = 0; i < ring_nservers(ra); i++) {
        print_server(out, ra, i);
        print_share(out, ra, i);
        print_share(out, rb, find_addr(rb, ring_server_addr(ra, i)));
        fputc('\n', out);
    }
    for (uint32_t j = 0; j < ring_nservers(rb); j++) {
        if (find_addr(ra, ring_server_addr(rb, j)) != UINT32_MAX)
            continue;
        print_server(out, rb, j);
        print_share(out, ra, UINT32_MAX);
        print_share(out, rb, j);
        fputc('\n', out);
    }

    fprintf(out, "\nkeys moving: %.4f%%", 100 * d->moving);
    if (d->narcs > 0)
        fprintf(out, " (%zu arcs)", d->narcs);
    fputc('\n', out);
    for (uint32_t i = 0; i < ring_nservers(ra); i++)
        for (uint32_t j = 0; j < ring_nservers(rb); j++) {
            double s = ring_diff_share(d, i, j);
            if (s <= 0)
                continue;
            fprintf(out, "  %s -> %s: %.4f%%\n", ring_server_label(ra, i),
                    ring_server_label(rb, j), 100 * s);
        }
    rc = fflush(out) == 0 ? 0 : 1;
done:
    ring_diff_free(d);
    ring_unref(ra);
    ring_unref(rb);
    conf_free(ca);
    conf_free(cb);
    return rc;
}

/* ---- the command-support table ------------------------------------------------------- */

static const struct {
    const char *does, *otherwise;
} kinds[] = {
    [ROUTE_LOCAL] = {"answered by shardis itself", "-"},
    [ROUTE_KEY] = {"sent to the server of its key",
                   "`-ERR backend <server> unavailable: <reason>` while that server is down"},
    [ROUTE_SAME_SERVER] = {"sent to the server of its keys when they all share one",
                           "`-CROSSSLOT Keys in request don't hash to the same node`"},
    [ROUTE_SPLIT] = {"split into one request per server, replies merged (values in key "
                     "order, counts summed, OK if every server said OK)",
                     "the error of a server that fails"},
    [ROUTE_BLOCKING] = {"sent to the server of its keys on the client's own connection, "
                        "so that it never holds up others", "`-CROSSSLOT`"},
    [ROUTE_EVERY] = {"sent to every server, replies merged by Redis's response policy",
                     "the first error"},
    [ROUTE_EVERY_ADMIN] = {"the same, with `admin_commands: true`",
                           "`-ERR '<command>' is an admin command: ...`"},
    [ROUTE_FIRST_ADMIN] = {"answered by the first server, with `admin_commands: true`",
                           "`-ERR '<command>' is an admin command: ...`"},
    [ROUTE_FIRST] = {"answered by the first server (redis-server's own command table, and "
                     "LOLWUT)", "-"},
    [ROUTE_SCAN] = {"one cursor over every server in turn", "`-ERR invalid cursor`"},
    [ROUTE_DEBUG] = {"by subcommand, with `admin_commands: true`: a key's to its server, "
                     "DEBUG DIGEST merged, RELOAD and the like to every server, others to "
                     "the first",
                     "POPULATE, LOADAOF, REPLICATE: `-ERR DEBUG <sub> is not supported by "
                     "shardis: ...`"},
    [ROUTE_WAIT] = {"every server, on connections of its own after a marker write; the "
                    "smallest count", "-"},
    [ROUTE_TX] = {"on the client's own connection to the server of the first key",
                  "`-CROSSSLOT`, then `-EXECABORT` at EXEC"},
    [ROUTE_PUBSUB] = {"(S)PUBLISH and SSUBSCRIBE by channel on the ring; (P)SUBSCRIBE on every server; PUBSUB's counts and lists merged over every server", "-"},
    [ROUTE_KEYLESS] = {"refused: it names no key to route by",
                       "`-ERR command '<command>' is not supported by shardis: it names no "
                       "key to route by`"},
    [ROUTE_UNSUPPORTED] = {"refused", "`-ERR command '<command>' is not supported by shardis`"},
};

/* A command's name as a client types it: "config get" for "config|get". */
static void print_name(FILE *out, const char *name, bool *first)
{
    fprintf(out, "%s", *first ? "" : ", ");
    for (const char *p = name; *p != '\0'; p++)
        fputc(*p == '|' ? ' ' : *p, out);
    *first = false;
}

int cli_commands(FILE *out)
{
    size_t n;
    const struct cmd *table = cmd_table(&n);

    fprintf(out, "| what shardis does | commands | otherwise |\n|---|---|---|\n");
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        bool first = true;
        fprintf(out, "| %s | ", kinds[k].does);
        for (size_t i = 0; i < n; i++) {
            /* A command with subcommands is listed by them, unless all
             * of them are treated alike. */
            if (cmd_has_subcommands(&table[i])) {
                size_t len = strlen(table[i].name), j;
                bool alike = true;
                for (j = i + 1; j < n && !strncmp(table[j].name, table[i].name, len) &&
                                table[j].name[len] == '|'; j++)
                    alike &= route_kind(&table[j]) == route_kind(&table[i + 1]);
                if (alike) {
                    if (route_kind(&table[i + 1]) == (enum route_kind)k)
                        print_name(out, table[i].name, &first);
                    i = j - 1;
                }
                continue;
            }
            if (route_kind(&table[i]) == (enum route_kind)k)
                print_name(out, table[i].name, &first);
        }
        if (k == ROUTE_LOCAL)
            print_name(out, "shard.*", &first);
        fprintf(out, " | %s |\n", kinds[k].otherwise);
    }
    return 0;
}

/* ---- shardis acl -------------------------------------------------------------------- */

/* Ask each of pc's servers, as the proxy's start does; the findings are
 * warnings on stderr. The number of servers with findings. */
static int check_pool(const struct conf_pool *pc, FILE *out)
{
    struct pool p = {.conf = pc};
    char err[256];
    SSL_CTX *srv = NULL;
    int bad = 0;

    if (tls_ctx_build(pc, &srv, &p.tls_client, err, sizeof(err)) < 0) {
        fprintf(stderr, "shardis: pool '%s': %s\n", pc->name, err);
        return (int)pc->nservers;
    }
    p.clients_user = pc->backend_user == NULL ? srvuser_make(pc) : NULL;
    p.servers = xcalloc(pc->nservers, sizeof(*p.servers));
    p.nservers = (uint32_t)pc->nservers;
    for (size_t i = 0; i < pc->nservers; i++) {
        struct pool_server *ps = &p.servers[i];
        const struct conf_server *sv = &pc->servers[i];
        ps->addr = sv->addr.text;
        ps->host = sv->addr.host;
        ps->port = sv->addr.port;
        ps->unix_socket = sv->addr.unix_socket;
        ps->label = sv->name != NULL ? sv->name : sv->addr.text;
        ps->resolved = true;    /* (with sentinels: the address written) */
        int found = srvuser_check(&p, ps, false);
        fprintf(out, "# %s (%s): %s\n", ps->label, ps->addr,
                found == 0 ? "ok" : found < 0 ? "cannot tell (above)" : "not as printed (above)");
        bad += found != 0;
    }
    free(p.servers);
    srvuser_free(p.clients_user);
    tls_ctx_free(srv);
    tls_ctx_free(p.tls_client);
    return bad;
}

int cli_acl(const char *path, const char *poolname, bool check, FILE *out)
{
    struct conf *cf = load(path);
    int bad = 0;

    if (cf == NULL)
        return 1;
    for (size_t i = 0; i < cf->npools; i++) {
        const struct conf_pool *pc = &cf->pools[i];
        char h[65];
        if (poolname != NULL && strcmp(poolname, pc->name) != 0)
            continue;
        fprintf(out, "# pool '%s': on each of its servers (", pc->name);
        for (size_t k = 0; k < pc->nservers; k++)
            fprintf(out, "%s%s", k ? ", " : "", pc->servers[k].addr.text);
        fprintf(out, "), as a user that may ACL SETUSER\n");
        if (pc->internal_user != NULL) {
            digest_sha256_hex(pc->internal_password, strlen(pc->internal_password), h);
            fprintf(out, "# shardis's own work (internal_user)\nACL SETUSER %s on #%s ~* &* "
                    "+@all\n", pc->internal_user, h);
        }
        if (pc->backend_user != NULL) {
            digest_sha256_hex(pc->backend_password, strlen(pc->backend_password), h);
            char *line = srvuser_rules_line(pc, pc->backend_user, h);
            fprintf(out, "# clients' commands and scripts (backend_user)\n%s\n", line);
            free(line);
        } else {
            struct srvuser *u = srvuser_make(pc);
            fprintf(out, "# clients' commands and scripts: shardis makes this user itself where "
                    "its own user may ACL SETUSER\n%s\n", u->line);
            srvuser_free(u);
        }
        if (pc->keyless_user != NULL) {
            digest_sha256_hex(pc->keyless_password, strlen(pc->keyless_password), h);
            fprintf(out, "# scripts that declare no key (keyless_user)\nACL SETUSER %s on #%s "
                    "resetkeys resetchannels +@all -@dangerous\n", pc->keyless_user, h);
        }
        if (check)
            bad += check_pool(pc, out);
    }
    conf_free(cf);
    return bad > 0 ? 1 : 0;
}

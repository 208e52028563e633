/* conf.c -- parse and validate the YAML configuration.
 *
 * libyaml loads the whole document into a node tree (aliases are shared
 * nodes, never expanded, so a hostile file cannot make the tree explode);
 * the code below walks only the shapes the format allows: a mapping of
 * pools, each a mapping of known keys to scalars, a `servers` sequence and
 * an `idgen` mapping. Pool keys are described by one table, so adding a key
 * is one line there plus its field in struct conf_pool.
 *
 * Every error is "path:line:col: what is wrong; what is allowed", with the
 * position of the node at fault (libyaml counts from 0, people from 1). */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <yaml.h>

#include "conf/conf.h"

#define IDGEN_TYPE_MAX      3842    /* 3843 is the default type */
#define CONF_FILE_MAX       (16u << 20)

struct parser {
    const char     *path;
    yaml_document_t doc;
    char           *err;
    size_t          errlen;
};

static int fail(struct parser *p, const yaml_node_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct parser *p, const yaml_node_t *n, const char *fmt, ...)
{
    va_list ap;
    int off = snprintf(p->err, p->errlen, "%s:%zu:%zu: ", p->path,
                       n != NULL ? n->start_mark.line + 1 : 1,
                       n != NULL ? n->start_mark.column + 1 : 1);

    if (off >= 0 && (size_t)off < p->errlen) {
        va_start(ap, fmt);
        vsnprintf(p->err + off, p->errlen - (size_t)off, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int oom(struct parser *p)
{
    snprintf(p->err, p->errlen, "%s: out of memory", p->path);
    return -ENOMEM;
}

static yaml_node_t *node(struct parser *p, int id)
{
    return yaml_document_get_node(&p->doc, id);
}

static const char *kind_name(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:   return "a scalar";
    case YAML_SEQUENCE_NODE: return "a list";
    case YAML_MAPPING_NODE:  return "a mapping";
    default:                 return "empty";
    }
}

/* The scalar's text, NUL-terminated by libyaml. Embedded NULs are refused
 * so that C string handling downstream sees the whole value. Returns 0,
 * or -EINVAL written out rather than fail()'s value: every caller uses *s
 * when this returns 0, and only a constant lets gcc -O3 see that *s is
 * then set (else -Wmaybe-uninitialized in each of them). */
static int scalar(struct parser *p, const yaml_node_t *n, const char *what,
                  const char **s)
{
    if (n->type != YAML_SCALAR_NODE) {
        fail(p, n, "%s must be a scalar, not %s", what, kind_name(n));
        return -EINVAL;
    }
    *s = (const char *)n->data.scalar.value;
    if (strlen(*s) != n->data.scalar.length) {
        fail(p, n, "%s contains a NUL byte", what);
        return -EINVAL;
    }
    return 0;
}

static int dup_scalar(struct parser *p, const yaml_node_t *n, const char *what,
                      char **out)
{
    const char *s;
    int rc = scalar(p, n, what, &s);

    if (rc < 0)
        return rc;
    free(*out);
    *out = strdup(s);
    return *out != NULL ? 0 : oom(p);
}

/* A whole decimal number in [min, max]. */
static int number(struct parser *p, const yaml_node_t *n, const char *what,
                  long long min, long long max, long long *out)
{
    const char *s;
    char *end;
    int rc = scalar(p, n, what, &s);

    if (rc < 0)
        return rc;
    errno = 0;
    *out = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || *out < min || *out > max)
        return fail(p, n, "%s '%s' is not a valid number; expected a whole "
                    "number from %lld to %lld", what, s, min, max);
    return 0;
}

/* A size as redis-server's configuration writes one: digits, then no unit
 * (bytes), k, m, g (powers of 1000) or kb, mb, gb (of 1024), any case. */
static bool size_text(const char *s, size_t len, long long *out)
{
    static const struct { const char *unit; long long mul; } units[] = {
        {"", 1}, {"b", 1}, {"k", 1000}, {"kb", 1024}, {"m", 1000 * 1000}, {"mb", 1 << 20},
        {"g", 1000LL * 1000 * 1000}, {"gb", 1LL << 30},
    };
    unsigned long long v = 0;
    size_t i = 0;

    for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
        if (v > (unsigned long long)LLONG_MAX / 10)
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (i == 0)
        return false;
    for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
        if (len - i == strlen(units[u].unit) && strncasecmp(s + i, units[u].unit, len - i) == 0) {
            if (v > (unsigned long long)(LLONG_MAX / units[u].mul))
                return false;
            *out = (long long)v * units[u].mul;
            return true;
        }
    }
    return false;
}

static int size_value(struct parser *p, const yaml_node_t *n, const char *what, long long *out)
{
    const char *s;
    int rc = scalar(p, n, what, &s);

    if (rc < 0)
        return rc;
    if (!size_text(s, strlen(s), out))
        return fail(p, n, "%s '%s' is not a size; expected a number of bytes, with k, kb, "
                    "m, mb, g or gb after it if you like (1gb, 512mb)", what, s);
    return 0;
}

/* client_output_buffer_limit: redis-server's "<class> <hard> <soft>
 * <soft seconds>" groups, for the classes normal and pubsub; a class not
 * named keeps its defaults. */
static int client_limits(struct parser *p, const yaml_node_t *n, struct conf_pool *pool)
{
    static const char *const classes[CONF_CLIENT_CLASSES] = {"normal", "pubsub"};
    const char *s, *w[64];
    size_t wl[64], nw = 0;
    int rc = scalar(p, n, "client_output_buffer_limit", &s);

    if (rc < 0)
        return rc;
    for (const char *q = s; *q != '\0'; ) {
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q == '\0')
            break;
        if (nw == 64)
            return fail(p, n, "client_output_buffer_limit has too many words");
        w[nw] = q;
        while (*q != '\0' && *q != ' ' && *q != '\t')
            q++;
        wl[nw] = (size_t)(q - w[nw]);
        nw++;
    }
    if (nw == 0 || nw % 4 != 0)
        return fail(p, n, "client_output_buffer_limit '%s' is not groups of four words: "
                    "<class> <hard> <soft> <soft seconds>, as 'normal 512mb 256mb 60 "
                    "pubsub 32mb 8mb 60'", s);
    for (size_t g = 0; g < nw; g += 4) {
        int cls = -1;
        long long hard, soft, secs;
        for (int k = 0; k < CONF_CLIENT_CLASSES; k++)
            if (wl[g] == strlen(classes[k]) && strncasecmp(w[g], classes[k], wl[g]) == 0)
                cls = k;
        if (cls < 0)
            return fail(p, n, "client_output_buffer_limit: unknown class '%.*s'; expected "
                        "normal or pubsub (shardis has no replica clients)", (int)wl[g], w[g]);
        if (!size_text(w[g + 1], wl[g + 1], &hard) || !size_text(w[g + 2], wl[g + 2], &soft) ||
            !size_text(w[g + 3], wl[g + 3], &secs) || secs > INT_MAX)
            return fail(p, n, "client_output_buffer_limit: '%.*s %.*s %.*s' for %s is not "
                        "<hard> <soft> <soft seconds> (sizes as 512mb, seconds whole)",
                        (int)wl[g + 1], w[g + 1], (int)wl[g + 2], w[g + 2], (int)wl[g + 3],
                        w[g + 3], classes[cls]);
        pool->client_limits[cls] = (struct conf_client_limit){hard, soft, (int)secs};
    }
    return 0;
}

static int boolean(struct parser *p, const yaml_node_t *n, const char *what,
                   bool *out)
{
    const char *s;
    int rc = scalar(p, n, what, &s);

    if (rc < 0)
        return rc;
    if (strcmp(s, "true") == 0)
        *out = true;
    else if (strcmp(s, "false") == 0)
        *out = false;
    else
        return fail(p, n, "%s '%s' is not a boolean; expected true or false", what, s);
    return 0;
}

/* Walk a mapping's pairs, refusing duplicate keys and non-scalar keys. */
typedef int (*pair_fn)(struct parser *p, yaml_node_t *key, const char *name,
                       yaml_node_t *value, void *arg);

static int each_pair(struct parser *p, yaml_node_t *map, const char *what,
                     pair_fn fn, void *arg)
{
    yaml_node_pair_t *start, *top;

    if (map->type != YAML_MAPPING_NODE)
        return fail(p, map, "%s must be a mapping, not %s", what, kind_name(map));
    start = map->data.mapping.pairs.start;
    top = map->data.mapping.pairs.top;
    for (yaml_node_pair_t *pair = start; pair < top; pair++) {
        yaml_node_t *k = node(p, pair->key), *v = node(p, pair->value);
        const char *name;
        int rc;

        if (k == NULL || v == NULL)
            return fail(p, map, "%s has an incomplete entry", what);
        if ((rc = scalar(p, k, "a key", &name)) < 0)
            return rc;
        for (yaml_node_pair_t *q = start; q < pair; q++) {
            yaml_node_t *qk = node(p, q->key);
            if (qk != NULL && qk->type == YAML_SCALAR_NODE &&
                strcmp((const char *)qk->data.scalar.value, name) == 0)
                return fail(p, k, "duplicate key '%s' (first at line %zu)",
                            name, qk->start_mark.line + 1);
        }
        if ((rc = fn(p, k, name, v, arg)) < 0)
            return rc;
    }
    return 0;
}

/* ---- addresses ---------------------------------------------------------- */

/* "host:port", "[v6]:port" or "/unix/path". */
static int parse_addr(struct parser *p, const yaml_node_t *n, const char *what,
                      const char *s, size_t len, struct conf_addr *a)
{
    const char *colon, *host = s;
    size_t hostlen, portlen;
    char *end, port[8];
    long v;

    a->text = strndup(s, len);
    if (a->text == NULL)
        return oom(p);
    if (len > 0 && s[0] == '/') {
        a->unix_socket = true;
        a->host = strdup(a->text);
        return a->host != NULL ? 0 : oom(p);
    }
    colon = memrchr(s, ':', len);
    if (colon == NULL || colon == s)
        return fail(p, n, "%s '%s' is not an address; expected host:port, "
                    "[ipv6]:port or /unix/socket/path", what, a->text);
    hostlen = (size_t)(colon - s);
    portlen = len - hostlen - 1;
    if (s[0] == '[') {
        if (hostlen < 3 || s[hostlen - 1] != ']')
            return fail(p, n, "%s '%s': an IPv6 host goes in brackets, as "
                        "[::1]:6379", what, a->text);
        host++;
        hostlen -= 2;
    } else if (memchr(s, ':', hostlen) != NULL || memchr(s, '[', hostlen) != NULL) {
        return fail(p, n, "%s '%s': an IPv6 host goes in brackets, as "
                    "[::1]:6379", what, a->text);
    }
    if (portlen == 0 || portlen >= sizeof(port))
        return fail(p, n, "%s '%s' has an invalid port; expected 1 to 65535",
                    what, a->text);
    memcpy(port, colon + 1, portlen);
    port[portlen] = '\0';
    errno = 0;
    v = strtol(port, &end, 10);
    if (*end != '\0' || port[0] < '0' || port[0] > '9' || errno != 0 ||
        v < 1 || v > 65535)
        return fail(p, n, "%s '%s' has an invalid port '%s'; expected 1 to 65535",
                    what, a->text, port);
    a->port = (uint16_t)v;
    a->host = strndup(host, hostlen);
    return a->host != NULL ? 0 : oom(p);
}

static void addr_free(struct conf_addr *a)
{
    free(a->text);
    free(a->host);
}

/* listen: "host:port" or "/path [permissions]". */
static int set_listen(struct parser *p, const yaml_node_t *n, const char *what,
                      struct conf_addr *addr)
{
    const char *s, *sp;
    size_t len;
    int rc;

    if ((rc = scalar(p, n, what, &s)) < 0)
        return rc;
    len = strlen(s);
    sp = s[0] == '/' ? strchr(s, ' ') : NULL;
    if (sp != NULL) {
        char *end;
        unsigned long perm;

        len = (size_t)(sp - s);
        errno = 0;
        perm = strtoul(sp + 1, &end, 8);
        if (sp[1] == '\0' || *end != '\0' || errno != 0 || perm > 0777)
            return fail(p, n, "%s '%s' has invalid permissions '%s'; expected "
                        "octal 0 to 0777", what, s, sp + 1);
        addr->perm = (uint32_t)perm;
    }
    return parse_addr(p, n, what, s, len, addr);
}

/* "host:port:weight [name]" or "/unix/path:weight [name]". */
static int parse_server(struct parser *p, const yaml_node_t *n, struct conf_server *sv)
{
    const char *s, *sp, *colon, *w;
    char *end;
    size_t len;
    unsigned long weight;
    int rc;

    if ((rc = scalar(p, n, "a server", &s)) < 0)
        return rc;
    sv->line = (int)n->start_mark.line + 1;
    sv->col = (int)n->start_mark.column + 1;
    sp = strchr(s, ' ');
    len = sp != NULL ? (size_t)(sp - s) : strlen(s);
    if (sp != NULL) {
        const char *name = sp + strspn(sp, " ");
        if (*name == '\0' || strchr(name, ' ') != NULL)
            return fail(p, n, "server '%s': the name after the address must be "
                        "one word, as in 127.0.0.1:6379:1 redis1", s);
        if ((sv->name = strdup(name)) == NULL)
            return oom(p);
    }
    colon = memrchr(s, ':', len);
    if (colon == NULL)
        return fail(p, n, "server '%s' is not host:port:weight [name] or "
                    "/unix/path:weight [name]", s);
    w = colon + 1;
    errno = 0;
    weight = strtoul(w, &end, 10);
    if (w[0] < '0' || w[0] > '9' || end != s + len || errno != 0 ||
        weight < 1 || weight > 1000000)
        return fail(p, n, "server '%s' has an invalid weight '%.*s'; expected a "
                    "whole number from 1 to 1000000", s, (int)(s + len - w), w);
    sv->weight = (uint32_t)weight;
    if (s[0] != '/' && memrchr(s, ':', (size_t)(colon - s)) == NULL)
        return fail(p, n, "server '%s' is not host:port:weight [name] or "
                    "/unix/path:weight [name]", s);
    return parse_addr(p, n, "server", s, (size_t)(colon - s), &sv->addr);
}

static int set_servers(struct parser *p, yaml_node_t *n, struct conf_pool *pool)
{
    yaml_node_item_t *start, *top;
    size_t count;

    if (n->type != YAML_SEQUENCE_NODE)
        return fail(p, n, "servers must be a list of \"host:port:weight [name]\", "
                    "not %s", kind_name(n));
    start = n->data.sequence.items.start;
    top = n->data.sequence.items.top;
    count = (size_t)(top - start);
    if (count == 0)
        return fail(p, n, "pool '%s' has no servers; list at least one "
                    "\"host:port:weight [name]\"", pool->name);
    pool->servers = calloc(count, sizeof(*pool->servers));
    if (pool->servers == NULL)
        return oom(p);
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *item = node(p, start[i]);
        struct conf_server *sv = &pool->servers[i];
        int rc;

        if (item == NULL)
            return fail(p, n, "servers has an empty entry");
        pool->nservers = i + 1;
        if ((rc = parse_server(p, item, sv)) < 0)
            return rc;
        for (size_t j = 0; j < i; j++) {
            const struct conf_server *o = &pool->servers[j];
            if (sv->name != NULL && o->name != NULL && strcmp(sv->name, o->name) == 0)
                return fail(p, item, "server name '%s' is already used at line %d; "
                            "names must be unique in a pool", sv->name, o->line);
            if (strcmp(sv->addr.text, o->addr.text) == 0)
                return fail(p, item, "server address '%s' is already listed at "
                            "line %d", sv->addr.text, o->line);
        }
    }
    return 0;
}

/* ---- sentinels ---------------------------------------------------------- */

/* A list of "host:port", each once. */
static int set_sentinels(struct parser *p, yaml_node_t *n, struct conf_pool *pool)
{
    yaml_node_item_t *start, *top;
    size_t count;
    const char *s;
    int rc;

    if (n->type != YAML_SEQUENCE_NODE)
        return fail(p, n, "sentinels must be a list of \"host:port\", not %s", kind_name(n));
    start = n->data.sequence.items.start;
    top = n->data.sequence.items.top;
    count = (size_t)(top - start);
    if (count == 0)
        return fail(p, n, "sentinels is empty; list the Sentinels watching the servers, "
                    "or leave the key out");
    if ((pool->sentinels = calloc(count, sizeof(*pool->sentinels))) == NULL)
        return oom(p);
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *item = node(p, start[i]);
        struct conf_addr *a = &pool->sentinels[i];
        if (item == NULL)
            return fail(p, n, "sentinels has an empty entry");
        if ((rc = scalar(p, item, "a sentinel", &s)) < 0)
            return rc;
        pool->nsentinels = i + 1;
        if ((rc = parse_addr(p, item, "sentinel", s, strlen(s), a)) < 0)
            return rc;
        if (a->unix_socket)
            return fail(p, item, "sentinel '%s': a Sentinel is reached over TCP, as "
                        "host:port", s);
        for (size_t j = 0; j < i; j++)
            if (strcmp(pool->sentinels[j].text, a->text) == 0)
                return fail(p, item, "sentinel '%s' is listed twice", s);
    }
    return 0;
}

/* ---- users -------------------------------------------------------------- */

/* A list of ACL lines; what each says is checked by proxy/acl.c, which
 * knows the commands. */
static int set_users(struct parser *p, yaml_node_t *n, struct conf_pool *pool)
{
    yaml_node_item_t *start, *top;

    if (n->type != YAML_SEQUENCE_NODE)
        return fail(p, n, "users must be a list of ACL lines (\"name on >password "
                    "~keys:* +@all\"), not %s", kind_name(n));
    start = n->data.sequence.items.start;
    top = n->data.sequence.items.top;
    if (top - start > 1024)
        return fail(p, n, "users lists more than 1024 users");
    pool->users = calloc((size_t)(top - start) + 1, sizeof(*pool->users));
    if (pool->users == NULL)
        return oom(p);
    for (yaml_node_item_t *it = start; it < top; it++) {
        yaml_node_t *item = node(p, *it);
        struct conf_user *u = &pool->users[pool->nusers];
        int rc;

        if (item == NULL)
            return fail(p, n, "users has an empty entry");
        u->line = (int)item->start_mark.line + 1;
        u->col = (int)item->start_mark.column + 1;
        if ((rc = dup_scalar(p, item, "a user", &u->rule)) < 0)
            return rc;
        pool->nusers++;
        if (strlen(u->rule) > 65536)
            return fail(p, item, "a user's line is longer than 65536 bytes");
    }
    return 0;
}

/* ---- idgen -------------------------------------------------------------- */

struct entries {
    struct conf_idgen_entry **list;
    size_t *n;
    bool types;                 /* name -> code, else name -> type name */
};

static int add_entry(struct parser *p, yaml_node_t *k, const char *name,
                     yaml_node_t *v, void *arg)
{
    struct entries *e = arg;
    struct conf_idgen_entry *list, *ent;
    long long code = 0;
    int rc;

    if (name[0] == '\0')
        return fail(p, k, "an empty name is not allowed here");
    /* SHARD.GENKEY takes a type by name or by number, and calls 3843
     * "default": a type name must be neither. */
    if (e->types && (strcmp(name, "default") == 0 || (name[0] >= '0' && name[0] <= '9')))
        return fail(p, k, "type name '%s' is not allowed: it must not start with a digit "
                    "nor be 'default'", name);
    if (e->types && (rc = number(p, v, "a type code", 0, IDGEN_TYPE_MAX, &code)) < 0)
        return rc;
    list = realloc(*e->list, (*e->n + 1) * sizeof(*list));
    if (list == NULL)
        return oom(p);
    *e->list = list;
    ent = &list[(*e->n)++];
    memset(ent, 0, sizeof(*ent));
    ent->code = (uint32_t)code;
    if ((ent->name = strdup(name)) == NULL)
        return oom(p);
    if (e->types) {
        for (size_t i = 0; i + 1 < *e->n; i++)
            if (list[i].code == ent->code)
                return fail(p, v, "type code %u is already type '%s'", ent->code,
                            list[i].name);
        return 0;
    }
    return dup_scalar(p, v, "a fixed key's type", &ent->type);
}

static int add_subkey(struct parser *p, yaml_node_t *k, const char *name, yaml_node_t *v,
                      void *arg)
{
    struct conf_idgen *ig = arg;
    struct conf_subkey *list, *sk;
    int rc;

    if (name[0] == '\0')
        return fail(p, k, "an empty name is not allowed here");
    /* (Looked up by a scan: a dictionary of field names is small.) */
    if (ig->nsubkeys == CONF_SUBKEYS_MAX)
        return fail(p, k, "idgen.subkeys has more than %d names", CONF_SUBKEYS_MAX);
    list = realloc(ig->subkeys, (ig->nsubkeys + 1) * sizeof(*list));
    if (list == NULL)
        return oom(p);
    ig->subkeys = list;
    sk = &list[ig->nsubkeys++];
    memset(sk, 0, sizeof(*sk));
    if ((sk->name = strdup(name)) == NULL)
        return oom(p);
    if ((rc = dup_scalar(p, v, "a short name", &sk->abbr)) < 0)
        return rc;
    if (sk->abbr[0] == '\0')
        return fail(p, v, "idgen.subkeys '%s' has an empty short name", name);
    if (strlen(sk->abbr) > CONF_SUBKEY_SHORT_MAX)
        return fail(p, v, "idgen.subkeys '%s' has a short name of more than %d bytes", name,
                    CONF_SUBKEY_SHORT_MAX);
    /* Both ways one to one, and no name read both ways: a field stored
     * short must never be taken for a long one, nor the other way. */
    for (size_t i = 0; i + 1 < ig->nsubkeys; i++) {
        if (strcmp(list[i].abbr, sk->abbr) == 0)
            return fail(p, v, "idgen.subkeys: '%s' and '%s' both shorten to '%s'",
                        list[i].name, name, sk->abbr);
        if (strcmp(list[i].name, sk->abbr) == 0 || strcmp(list[i].abbr, name) == 0)
            return fail(p, v, "idgen.subkeys: '%s' is both a long and a short name",
                        strcmp(list[i].name, sk->abbr) == 0 ? sk->abbr : name);
    }
    if (strcmp(name, sk->abbr) == 0)
        return fail(p, v, "idgen.subkeys: '%s' is both a long and a short name", name);
    return 0;
}

/* idgen.minify: a list of type names, resolved to codes by check_idgen
 * (types may be written after it). */
static int set_minify(struct parser *p, yaml_node_t *n, struct conf_idgen *ig)
{
    yaml_node_item_t *start, *top;
    size_t count;
    int rc;

    if (n->type != YAML_SEQUENCE_NODE)
        return fail(p, n, "idgen.minify must be a list of type names, not %s", kind_name(n));
    start = n->data.sequence.items.start;
    top = n->data.sequence.items.top;
    count = (size_t)(top - start);
    if ((ig->minify = calloc(count + 1, sizeof(*ig->minify))) == NULL ||
        (ig->minify_types = calloc(count + 1, sizeof(*ig->minify_types))) == NULL)
        return oom(p);
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *item = node(p, start[i]);
        if (item == NULL)
            return fail(p, n, "idgen.minify has an empty entry");
        if ((rc = dup_scalar(p, item, "a type name", &ig->minify[i])) < 0)
            return rc;
        ig->nminify = i + 1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(ig->minify[j], ig->minify[i]) == 0)
                return fail(p, item, "idgen.minify names type '%s' twice", ig->minify[i]);
    }
    return 0;
}

static int set_idgen_key(struct parser *p, yaml_node_t *k, const char *name,
                         yaml_node_t *v, void *arg)
{
    struct conf_idgen *ig = arg;
    long long num;
    int rc;

    if (strcmp(name, "types") == 0) {
        struct entries e = {&ig->types, &ig->ntypes, true};
        return each_pair(p, v, "idgen.types", add_entry, &e);
    }
    if (strcmp(name, "fixed") == 0) {
        struct entries e = {&ig->fixed, &ig->nfixed, false};
        return each_pair(p, v, "idgen.fixed", add_entry, &e);
    }
    if (strcmp(name, "subkeys") == 0)
        return each_pair(p, v, "idgen.subkeys", add_subkey, ig);
    if (strcmp(name, "minify") == 0)
        return set_minify(p, v, ig);
    if (strcmp(name, "epoch_ms") == 0) {
        /* 62^7 ms must fit after the epoch: 7 base62 digits of time. */
        if ((rc = number(p, v, "idgen.epoch_ms", 0, 4102444800000LL, &num)) < 0)
            return rc;
        ig->epoch_ms = num;
        return 0;
    }
    if (strcmp(name, "max_ahead_ms") == 0) {
        if ((rc = number(p, v, "idgen.max_ahead_ms", 1, 3600000, &num)) < 0)
            return rc;
        ig->max_ahead_ms = num;
        return 0;
    }
    if (strcmp(name, "restart_guard_ms") == 0) {
        if ((rc = number(p, v, "idgen.restart_guard_ms", 0, 3600000, &num)) < 0)
            return rc;
        ig->restart_guard_ms = num;
        return 0;
    }
    return fail(p, k, "unknown key 'idgen.%s'; expected one of: epoch_ms, "
                "max_ahead_ms, restart_guard_ms, types, fixed, subkeys, minify", name);
}

static int check_idgen(struct parser *p, yaml_node_t *n, struct conf_idgen *ig)
{
    /* A restarted server's ids start restart_guard_ms ahead of its clock,
     * and the allocator refuses to run more than max_ahead_ms ahead. */
    if (ig->restart_guard_ms >= ig->max_ahead_ms)
        return fail(p, n, "idgen.restart_guard_ms (%lld) must be less than "
                    "idgen.max_ahead_ms (%lld)", (long long)ig->restart_guard_ms,
                    (long long)ig->max_ahead_ms);
    for (size_t i = 0; i < ig->nfixed; i++) {
        const char *t = ig->fixed[i].type;
        bool known = strcmp(t, "default") == 0;
        for (size_t j = 0; !known && j < ig->ntypes; j++)
            known = strcmp(t, ig->types[j].name) == 0;
        if (!known)
            return fail(p, n, "idgen.fixed '%s' names type '%s', which is not in "
                        "idgen.types (or 'default')", ig->fixed[i].name, t);
    }
    for (size_t i = 0; i < ig->nminify; i++) {
        const char *t = ig->minify[i];
        bool known = strcmp(t, "default") == 0;
        ig->minify_types[i] = IDGEN_TYPE_MAX + 1;  /* "default" */
        for (size_t j = 0; !known && j < ig->ntypes; j++)
            if ((known = strcmp(t, ig->types[j].name) == 0))
                ig->minify_types[i] = ig->types[j].code;
        if (!known)
            return fail(p, n, "idgen.minify names type '%s', which is not in idgen.types "
                        "(or 'default')", t);
    }
    if (ig->nminify > 0 && ig->nsubkeys == 0)
        return fail(p, n, "idgen.minify needs idgen.subkeys: the dictionary its types' "
                    "hash fields are mapped by");
    return 0;
}

/* ---- pools -------------------------------------------------------------- */

enum key_kind {
    K_INT, K_BOOL, K_STR, K_HASH, K_DIST, K_TAG, K_LISTEN, K_SERVERS,
    K_REDIS, K_EJECT, K_IDGEN, K_USERS, K_TLS_LISTEN, K_TLS_AUTH, K_SENTINELS, K_READ_FROM, K_STATS_LISTEN,
    K_SIZE, K_CLIENT_LIMITS
};

struct pool_key {
    const char   *name;
    enum key_kind kind;
    size_t        off;
    long long     min, max;
};

#define F(field) offsetof(struct conf_pool, field)

static const struct pool_key pool_keys[] = {
    {"listen",               K_LISTEN,  0, 0, 0},
    {"hash",                 K_HASH,    F(hash), 0, 0},
    {"hash_tag",             K_TAG,     0, 0, 0},
    {"distribution",         K_DIST,    F(distribution), 0, 0},
    {"timeout",              K_INT,     F(timeout), 1, INT_MAX},
    {"backlog",              K_INT,     F(backlog), 1, 65535},
    {"client_connections",   K_INT,     F(client_connections), 0, INT_MAX},
    {"redis",                K_REDIS,   F(redis), 0, 0},
    {"redis_auth",           K_STR,     F(redis_auth), 0, 4096},
    {"redis_db",             K_INT,     F(redis_db), 0, INT_MAX},
    {"databases",            K_INT,     F(databases), 1, CONF_DATABASES_MAX},
    {"preconnect",           K_BOOL,    F(preconnect), 0, 0},
    {"auto_eject_hosts",     K_BOOL,    F(auto_eject_hosts), 0, 0},
    {"server_connections",   K_INT,     F(server_connections), 1, 1024},
    {"server_retry_timeout", K_INT,     F(server_retry_timeout), 0, INT_MAX},
    {"server_failure_limit", K_INT,     F(server_failure_limit), 1, INT_MAX},
    {"tcpkeepalive",         K_BOOL,    F(tcpkeepalive), 0, 0},
    {"reuseport",            K_BOOL,    F(reuseport), 0, 0},
    {"servers",              K_SERVERS, 0, 0, 0},
    {"jedis_version",        K_INT,     F(jedis_version), 2, 3},
    {"eject_mode",           K_EJECT,   F(eject_mode), 0, 0},
    {"admin_commands",       K_BOOL,    F(admin_commands), 0, 0},
    {"keyless_user",         K_STR,     F(keyless_user), 1, 128},
    {"keyless_password",     K_STR,     F(keyless_password), 0, 4096},
    {"backend_user",         K_STR,     F(backend_user), 1, 128},
    {"backend_password",     K_STR,     F(backend_password), 0, 4096},
    {"internal_user",        K_STR,     F(internal_user), 1, 128},
    {"internal_password",    K_STR,     F(internal_password), 0, 4096},
    {"users",                K_USERS,   0, 0, 0},
    {"sentinels",            K_SENTINELS, 0, 0, 0},
    {"sentinel_auth",        K_STR,     F(sentinel_auth), 0, 4096},
    {"read_from",            K_READ_FROM, F(read_from), 0, 0},
    {"idgen",                K_IDGEN,   0, 0, 0},
    {"migration_rate",       K_INT,     F(migration_rate), 0, INT_MAX},
    {"migration_batch",      K_INT,     F(migration_batch), 1, 10000},
    {"migrate_timeout",      K_INT,     F(migrate_timeout), 1, INT_MAX},
    {"migrate_retries",      K_INT,     F(migrate_retries), 0, 100},
    {"lock_max_ms",          K_INT,     F(lock_max_ms), 1, INT_MAX},
    {"bigkey_bytes",         K_INT,     F(bigkey_bytes), 1, INT_MAX},
    {"stats_listen",         K_STATS_LISTEN, 0, 0, 0},
    {"client_output_buffer_limit", K_CLIENT_LIMITS, 0, 0, 0},
    {"maxmemory_clients",    K_SIZE,    F(maxmemory_clients), 0, 0},
    {"slowlog_log_slower_than", K_INT,  F(slowlog_log_slower_than), -1, INT_MAX},
    {"slowlog_max_len",      K_INT,     F(slowlog_max_len), 0, 100000},
    {"tls_listen",           K_TLS_LISTEN, 0, 0, 0},
    {"tls_cert_file",        K_STR,     F(tls.cert_file), 1, 4096},
    {"tls_key_file",         K_STR,     F(tls.key_file), 1, 4096},
    {"tls_ca_cert_file",     K_STR,     F(tls.ca_cert_file), 1, 4096},
    {"tls_auth_clients",     K_TLS_AUTH, F(tls.auth_clients), 0, 0},
    {"tls_handshake_timeout", K_INT,    F(tls.handshake_timeout), 1, INT_MAX},
    {"backend_tls",          K_BOOL,    F(tls.backend), 0, 0},
    {"backend_tls_ca_cert_file", K_STR, F(tls.backend_ca_cert_file), 1, 4096},
    {"backend_tls_cert_file", K_STR,    F(tls.backend_cert_file), 1, 4096},
    {"backend_tls_key_file", K_STR,     F(tls.backend_key_file), 1, 4096},
    {"backend_tls_server_name", K_STR,  F(tls.backend_server_name), 1, 255},
};

#undef F

#define NKEYS (sizeof(pool_keys) / sizeof(pool_keys[0]))

struct pool_state {
    struct conf_pool *pool;
    yaml_node_t      *where[NKEYS];  /* the value node of each key given */
};

static const char *pool_key_names(void)
{
    static char buf[1024];
    size_t off = 0;

    if (buf[0] != '\0')
        return buf;
    for (size_t i = 0; i < NKEYS; i++)
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s",
                                i > 0 ? ", " : "", pool_keys[i].name);
    return buf;
}

static int set_pool_key(struct parser *p, yaml_node_t *k, const char *name,
                        yaml_node_t *v, void *arg)
{
    struct pool_state *st = arg;
    struct conf_pool *pool = st->pool;
    const struct pool_key *key = NULL;
    char *field;
    const char *s;
    long long num;
    int rc, id;

    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(pool_keys[i].name, name) == 0) {
            key = &pool_keys[i];
            st->where[i] = v;
        }
    if (key == NULL)
        return fail(p, k, "unknown key '%s' in pool '%s'; expected one of: %s",
                    name, pool->name, pool_key_names());
    field = (char *)pool + key->off;

    switch (key->kind) {
    case K_INT:
        if ((rc = number(p, v, name, key->min, key->max, &num)) < 0)
            return rc;
        *(int *)field = (int)num;
        return 0;
    case K_BOOL:
        return boolean(p, v, name, (bool *)field);
    case K_SIZE:
        return size_value(p, v, name, (long long *)field);
    case K_CLIENT_LIMITS:
        return client_limits(p, v, pool);
    case K_REDIS:
        if ((rc = boolean(p, v, name, (bool *)field)) < 0)
            return rc;
        if (!pool->redis)
            return fail(p, v, "redis: false asks for a memcached pool; memcached "
                        "pools are not supported (shardis speaks Redis only)");
        return 0;
    case K_STR:                 /* max: the longest string allowed */
        if ((rc = dup_scalar(p, v, name, (char **)field)) < 0)
            return rc;
        if (strlen(*(char **)field) > (size_t)key->max)
            return fail(p, v, "%s is longer than %lld bytes", name, key->max);
        return 0;
    case K_HASH:
        if ((rc = scalar(p, v, name, &s)) < 0)
            return rc;
        if ((id = ring_hash_from_name(s)) < 0)
            return fail(p, v, "unknown hash '%s'; expected one of: %s", s,
                        ring_hash_names());
        *(enum ring_hash *)field = (enum ring_hash)id;
        return 0;
    case K_DIST:
        if ((rc = scalar(p, v, name, &s)) < 0)
            return rc;
        if ((id = ring_dist_from_name(s)) < 0)
            return fail(p, v, "unknown distribution '%s'; expected one of: %s", s,
                        ring_dist_names());
        *(enum ring_dist *)field = (enum ring_dist)id;
        return 0;
    case K_EJECT:
        if ((rc = scalar(p, v, name, &s)) < 0)
            return rc;
        if (strcmp(s, "fail") == 0)
            pool->eject_mode = CONF_EJECT_FAIL;
        else if (strcmp(s, "rehash") == 0)
            pool->eject_mode = CONF_EJECT_REHASH;
        else
            return fail(p, v, "unknown eject_mode '%s'; expected one of: fail, rehash", s);
        return 0;
    case K_READ_FROM:
        if ((rc = scalar(p, v, name, &s)) < 0)
            return rc;
        if (strcmp(s, "master") == 0)
            pool->read_from = CONF_READ_MASTER;
        else if (strcmp(s, "replica") == 0)
            pool->read_from = CONF_READ_REPLICA;
        else if (strcmp(s, "prefer_replica") == 0)
            pool->read_from = CONF_READ_PREFER_REPLICA;
        else
            return fail(p, v, "unknown read_from '%s'; expected one of: master, replica, "
                        "prefer_replica", s);
        return 0;
    case K_TAG:
        if ((rc = scalar(p, v, name, &s)) < 0)
            return rc;
        if (strlen(s) != 2)
            return fail(p, v, "hash_tag '%s' is not two characters; expected an "
                        "open and a close character, as \"{}\"", s);
        memcpy(pool->hash_tag, s, 2);
        pool->has_hash_tag = true;
        return 0;
    case K_LISTEN:
        return set_listen(p, v, "listen", &pool->listen);
    case K_TLS_LISTEN:
        return set_listen(p, v, "tls_listen", &pool->tls.listen);
    case K_STATS_LISTEN:
        if ((rc = set_listen(p, v, "stats_listen", &pool->stats_listen)) < 0)
            return rc;
        if (pool->stats_listen.unix_socket)
            return fail(p, v, "stats_listen '%s': metrics are served over TCP, as "
                        "host:port", pool->stats_listen.text);
        return 0;
    case K_TLS_AUTH:
        if ((rc = scalar(p, v, name, &s)) < 0)
            return rc;
        if (strcmp(s, "yes") == 0)
            pool->tls.auth_clients = CONF_TLS_AUTH_YES;
        else if (strcmp(s, "no") == 0)
            pool->tls.auth_clients = CONF_TLS_AUTH_NO;
        else if (strcmp(s, "optional") == 0)
            pool->tls.auth_clients = CONF_TLS_AUTH_OPTIONAL;
        else
            return fail(p, v, "unknown tls_auth_clients '%s'; expected one of: yes, no, "
                        "optional", s);
        return 0;
    case K_SERVERS:
        return set_servers(p, v, pool);
    case K_IDGEN:
        if ((rc = each_pair(p, v, "idgen", set_idgen_key, &pool->idgen)) < 0)
            return rc;
        return check_idgen(p, v, &pool->idgen);
    case K_USERS:
        return set_users(p, v, pool);
    case K_SENTINELS:
        return set_sentinels(p, v, pool);
    }
    return 0;
}

static yaml_node_t *given(const struct pool_state *st, const char *name)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(pool_keys[i].name, name) == 0)
            return st->where[i];
    return NULL;
}

static void pool_defaults(struct conf_pool *pool)
{
    pool->hash = RING_HASH_COUNT;           /* unset: depends on distribution */
    pool->distribution = RING_DIST_KETAMA;
    pool->timeout = -1;
    pool->backlog = 512;
    pool->redis = true;
    pool->server_connections = 1;
    pool->databases = 16;                   /* redis-server's default */
    pool->server_retry_timeout = 30000;
    pool->server_failure_limit = 2;
    pool->jedis_version = 3;
    pool->eject_mode = CONF_EJECT_FAIL;
    pool->idgen.epoch_ms = 1325404800000LL;
    pool->idgen.max_ahead_ms = 5000;
    pool->idgen.restart_guard_ms = 2000;
    pool->migration_rate = 3000;
    pool->migration_batch = 50;
    pool->migrate_timeout = 2000;
    pool->migrate_retries = 3;
    pool->lock_max_ms = 2000;
    pool->bigkey_bytes = 8 * 1024 * 1024;
    pool->slowlog_log_slower_than = 10000;
    pool->slowlog_max_len = 128;
    pool->client_limits[CONF_CLIENT_NORMAL] = (struct conf_client_limit){512 << 20, 256 << 20, 60};
    pool->client_limits[CONF_CLIENT_PUBSUB] = (struct conf_client_limit){32 << 20, 8 << 20, 60};
    pool->maxmemory_clients = 1LL << 30;
    pool->tls.auth_clients = CONF_TLS_AUTH_NO;
    pool->tls.handshake_timeout = 10000;
}

/* TLS keys make sense together: a listener with its certificate, a CA
 * for clients' certificates, backend_tls_* with backend_tls. (That the
 * files hold what they should is proxy/tls.c's to check, at start and at
 * each reload.) */
static int check_tls(struct parser *p, const struct pool_state *st, struct conf_pool *pool)
{
    static const char *const listener_keys[] = {
        "tls_cert_file", "tls_key_file", "tls_ca_cert_file", "tls_auth_clients",
    };
    static const char *const backend_keys[] = {
        "backend_tls_ca_cert_file", "backend_tls_cert_file", "backend_tls_key_file",
        "backend_tls_server_name",
    };
    struct conf_tls *t = &pool->tls;
    yaml_node_t *at;

    for (size_t i = 0; i < sizeof(listener_keys) / sizeof(listener_keys[0]); i++)
        if (t->listen.text == NULL && (at = given(st, listener_keys[i])) != NULL)
            return fail(p, at, "%s applies only to a TLS listener: add tls_listen: "
                        "host:port", listener_keys[i]);
    for (size_t i = 0; i < sizeof(backend_keys) / sizeof(backend_keys[0]); i++)
        if (!t->backend && (at = given(st, backend_keys[i])) != NULL)
            return fail(p, at, "%s applies only with backend_tls: true", backend_keys[i]);
    if (t->listen.text == NULL && !t->backend &&
        (at = given(st, "tls_handshake_timeout")) != NULL)
        return fail(p, at, "tls_handshake_timeout applies only with tls_listen or "
                    "backend_tls: true");
    if (t->listen.text != NULL && (t->cert_file == NULL || t->key_file == NULL))
        return fail(p, given(st, "tls_listen"), "tls_listen needs tls_cert_file and "
                    "tls_key_file (the listener's certificate and its private key)");
    if (given(st, "tls_auth_clients") == NULL && t->ca_cert_file != NULL)
        t->auth_clients = CONF_TLS_AUTH_YES;        /* redis-server's default */
    if (t->auth_clients != CONF_TLS_AUTH_NO && t->ca_cert_file == NULL)
        return fail(p, given(st, "tls_auth_clients"), "tls_auth_clients asks for clients' "
                    "certificates: add tls_ca_cert_file, the CA that signs them");
    if ((t->backend_cert_file == NULL) != (t->backend_key_file == NULL))
        return fail(p, given(st, t->backend_cert_file ? "backend_tls_cert_file"
                                                      : "backend_tls_key_file"),
                    "backend_tls_cert_file and backend_tls_key_file go together "
                    "(shardis's certificate for servers that ask for one)");
    return 0;
}

static int parse_pool(struct parser *p, yaml_node_t *k, const char *name,
                      yaml_node_t *v, void *arg)
{
    struct conf *cf = arg;
    struct conf_pool *pool = &cf->pools[cf->npools++];
    struct pool_state st = {.pool = pool};
    yaml_node_t *at;
    char why[CONF_ERRLEN];
    int rc;

    pool_defaults(pool);
    pool->line = (int)k->start_mark.line + 1;
    pool->col = (int)k->start_mark.column + 1;
    if ((pool->name = strdup(name)) == NULL)
        return oom(p);
    if (name[0] == '\0')
        return fail(p, k, "a pool needs a name");
    if ((rc = each_pair(p, v, "a pool", set_pool_key, &st)) < 0)
        return rc;

    if (pool->listen.text == NULL)
        return fail(p, k, "pool '%s' has no listen address; add listen: "
                    "host:port or /unix/socket/path", name);
    if (pool->servers == NULL)
        return fail(p, k, "pool '%s' has no servers; add servers: with at least "
                    "one \"host:port:weight [name]\"", name);
    if (pool->hash == RING_HASH_COUNT)
        pool->hash = ring_default_hash(pool->distribution);
    if (ring_check_hash(pool->distribution, pool->hash, why, sizeof(why)) < 0) {
        at = given(&st, "hash");
        return fail(p, at != NULL ? at : given(&st, "distribution"), "%s", why);
    }
    static const struct {
        const char *user, *password, *what;
        size_t uoff, poff;
    } creds[] = {
        {"keyless_user", "keyless_password", "the ACL user a script that declares no key "
         "runs as", offsetof(struct conf_pool, keyless_user),
         offsetof(struct conf_pool, keyless_password)},
        {"backend_user", "backend_password", "the ACL user clients' commands run as on the "
         "servers", offsetof(struct conf_pool, backend_user),
         offsetof(struct conf_pool, backend_password)},
        {"internal_user", "internal_password", "the ACL user shardis's own work runs as on "
         "the servers", offsetof(struct conf_pool, internal_user),
         offsetof(struct conf_pool, internal_password)},
    };
    for (size_t i = 0; i < sizeof(creds) / sizeof(creds[0]); i++) {
        const char *user = *(char **)((char *)pool + creds[i].uoff);
        const char *pass = *(char **)((char *)pool + creds[i].poff);
        if (user != NULL && user[0] == '\0')
            return fail(p, given(&st, creds[i].user), "%s is empty", creds[i].user);
        if ((user == NULL) != (pass == NULL))
            return fail(p, given(&st, user ? creds[i].user : creds[i].password),
                        "%s and %s go together (%s)", creds[i].user, creds[i].password,
                        creds[i].what);
    }
    if ((rc = check_tls(p, &st, pool)) < 0)
        return rc;
    if (pool->nsentinels == 0 && (at = given(&st, "sentinel_auth")) != NULL)
        return fail(p, at, "sentinel_auth applies only with sentinels");
    /* A config from before databases, with redis_db 16 or more, keeps
     * working: the servers have that many. */
    if (given(&st, "databases") == NULL && pool->redis_db >= pool->databases &&
        pool->redis_db < CONF_DATABASES_MAX)
        pool->databases = pool->redis_db + 1;
    if (pool->redis_db >= pool->databases)
        return fail(p, given(&st, "redis_db") != NULL ? given(&st, "redis_db")
                                                       : given(&st, "databases"),
                    "redis_db (%d) must be less than databases (%d)", pool->redis_db,
                    pool->databases);
    if (pool->nsentinels == 0 && pool->read_from != CONF_READ_MASTER)
        return fail(p, given(&st, "read_from"), "read_from: %s needs sentinels: they list "
                    "each master's replicas", pool->read_from == CONF_READ_REPLICA
                                                   ? "replica" : "prefer_replica");
    if (pool->nsentinels > 0 && pool->eject_mode == CONF_EJECT_REHASH)
        return fail(p, given(&st, "eject_mode"), "eject_mode: rehash would move a failing "
                    "master's keys to other servers; with sentinels its replica takes over "
                    "instead (use eject_mode: fail)");
    for (size_t j = 0; pool->nsentinels > 0 && j < pool->nservers; j++)
        if (pool->servers[j].name == NULL)
            return fail(p, given(&st, "servers"), "server '%s' has no name: with "
                        "sentinels every server is named as its master, as in "
                        "\"%s:1 mymaster\"", pool->servers[j].addr.text,
                        pool->servers[j].addr.text);
    if (given(&st, "jedis_version") != NULL && pool->distribution != RING_DIST_JEDIS)
        return fail(p, given(&st, "jedis_version"), "jedis_version applies only to "
                    "distribution: jedis");
    /* Building the ring catches what the keys alone cannot (point budgets,
     * over-long identities); a config that parses always builds. */
    struct ring *r;
    if ((rc = conf_pool_ring(pool, &r, why, sizeof(why))) < 0)
        return rc == -ENOMEM ? oom(p) : fail(p, given(&st, "servers"), "%s", why);
    ring_free(r);
    /* Every listener, plain or TLS, of every pool needs its own address. */
    const struct conf_addr *mine[2] = {&pool->listen, &pool->tls.listen};
    for (size_t i = 0; i < cf->npools; i++)
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                const struct conf_pool *o = &cf->pools[i];
                const struct conf_addr *theirs = b == 0 ? &o->listen : &o->tls.listen;
                if ((o == pool && a <= b) || mine[a]->text == NULL || theirs->text == NULL ||
                    strcmp(mine[a]->text, theirs->text) != 0)
                    continue;
                return fail(p, given(&st, a == 0 ? "listen" : "tls_listen"), "pool '%s' "
                            "listens on '%s', as pool '%s' does (line %d, its %s); each "
                            "listener needs its own address", name, mine[a]->text, o->name,
                            o->line, b == 0 ? "listen" : "tls_listen");
            }
    return 0;
}

/* ---- entry points ------------------------------------------------------- */

static void pool_free(struct conf_pool *pool)
{
    free(pool->name);
    addr_free(&pool->listen);
    addr_free(&pool->tls.listen);
    addr_free(&pool->stats_listen);
    for (size_t i = 0; i < pool->nsentinels; i++)
        addr_free(&pool->sentinels[i]);
    free(pool->sentinels);
    free(pool->sentinel_auth);
    free(pool->tls.cert_file);
    free(pool->tls.key_file);
    free(pool->tls.ca_cert_file);
    free(pool->tls.backend_ca_cert_file);
    free(pool->tls.backend_cert_file);
    free(pool->tls.backend_key_file);
    free(pool->tls.backend_server_name);
    free(pool->redis_auth);
    free(pool->keyless_user);
    free(pool->keyless_password);
    free(pool->backend_user);
    free(pool->backend_password);
    free(pool->internal_user);
    free(pool->internal_password);
    for (size_t i = 0; i < pool->nusers; i++)
        free(pool->users[i].rule);
    free(pool->users);
    for (size_t i = 0; i < pool->nservers; i++) {
        addr_free(&pool->servers[i].addr);
        free(pool->servers[i].name);
    }
    free(pool->servers);
    for (size_t i = 0; i < pool->idgen.ntypes; i++)
        free(pool->idgen.types[i].name);
    free(pool->idgen.types);
    for (size_t i = 0; i < pool->idgen.nfixed; i++) {
        free(pool->idgen.fixed[i].name);
        free(pool->idgen.fixed[i].type);
    }
    free(pool->idgen.fixed);
    for (size_t i = 0; i < pool->idgen.nsubkeys; i++) {
        free(pool->idgen.subkeys[i].name);
        free(pool->idgen.subkeys[i].abbr);
    }
    free(pool->idgen.subkeys);
    for (size_t i = 0; i < pool->idgen.nminify; i++)
        free(pool->idgen.minify[i]);
    free(pool->idgen.minify);
    free(pool->idgen.minify_types);
}

/* Configs allocated and not freed: conf_held. (A process has one loop,
 * conf_ref's callers are all on it.) */
static size_t nheld;

struct conf *conf_ref(struct conf *cf)
{
    if (cf != NULL)
        cf->refs++;
    return cf;
}

void conf_unref(struct conf *cf)
{
    if (cf == NULL || --cf->refs > 0)
        return;
    for (size_t i = 0; i < cf->npools; i++)
        pool_free(&cf->pools[i]);
    free(cf->pools);
    free(cf->path);
    free(cf->text);
    free(cf);
    nheld--;
}

void conf_free(struct conf *cf)
{
    if (cf != NULL && cf->refs != 1)
        abort();                        /* shared: its holders conf_unref it */
    conf_unref(cf);
}

size_t conf_held(void)
{
    return nheld;
}

int conf_parse(struct conf **out, const char *path, const char *buf, size_t len,
               char *err, size_t errlen)
{
    struct parser p = {.path = path, .err = err, .errlen = errlen};
    yaml_parser_t yp;
    yaml_node_t *root;
    struct conf *cf;
    int rc;

    *out = NULL;
    if (!yaml_parser_initialize(&yp))
        return oom(&p);
    yaml_parser_set_input_string(&yp, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&yp, &p.doc)) {
        snprintf(err, errlen, "%s:%zu:%zu: invalid YAML: %s%s%s", path,
                 yp.problem_mark.line + 1, yp.problem_mark.column + 1,
                 yp.problem != NULL ? yp.problem : "cannot parse",
                 yp.context != NULL ? " " : "", yp.context != NULL ? yp.context : "");
        yaml_parser_delete(&yp);
        return yp.error == YAML_MEMORY_ERROR ? -ENOMEM : -EINVAL;
    }
    yaml_parser_delete(&yp);

    cf = calloc(1, sizeof(*cf));
    if (cf == NULL || (cf->path = strdup(path)) == NULL ||
        (cf->text = malloc(len + 1)) == NULL) {
        yaml_document_delete(&p.doc);
        if (cf != NULL)
            free(cf->path);
        free(cf);
        return oom(&p);
    }
    cf->refs = 1;
    nheld++;
    memcpy(cf->text, buf, len);
    cf->text[len] = '\0';
    cf->textlen = len;
    root = yaml_document_get_root_node(&p.doc);
    if (root == NULL || (root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0)) {
        rc = fail(&p, root, "no pools: the file must map pool names to pools");
    } else if (root->type != YAML_MAPPING_NODE) {
        rc = fail(&p, root, "the top level must map pool names to pools, not be %s",
                  kind_name(root));
    } else {
        size_t n = (size_t)(root->data.mapping.pairs.top - root->data.mapping.pairs.start);
        cf->pools = calloc(n > 0 ? n : 1, sizeof(*cf->pools));
        if (cf->pools == NULL)
            rc = oom(&p);
        else if (n == 0)
            rc = fail(&p, root, "no pools: the file must map pool names to pools");
        else
            rc = each_pair(&p, root, "the top level", parse_pool, cf);
    }
    yaml_document_delete(&p.doc);
    if (rc < 0) {
        conf_free(cf);
        return rc;
    }
    for (size_t i = 0; i < cf->npools; i++)
        cf->pools[i].owner = cf;
    *out = cf;
    return 0;
}

int conf_load(struct conf **out, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    struct stat stbuf;
    char *buf;
    size_t n;
    int rc;

    *out = NULL;
    if (f == NULL) {
        rc = -errno;
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return rc;
    }
    if (fstat(fileno(f), &stbuf) != 0 || !S_ISREG(stbuf.st_mode) ||
        (size_t)stbuf.st_size > CONF_FILE_MAX) {
        snprintf(err, errlen, "%s: not a regular file of at most %u bytes", path,
                 CONF_FILE_MAX);
        fclose(f);
        return -EINVAL;
    }
    buf = malloc((size_t)stbuf.st_size + 1);
    if (buf == NULL) {
        fclose(f);
        snprintf(err, errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    n = fread(buf, 1, (size_t)stbuf.st_size, f);
    if (ferror(f)) {
        rc = -EIO;
        snprintf(err, errlen, "%s: cannot read", path);
    } else {
        rc = conf_parse(out, path, buf, n, err, errlen);
    }
    fclose(f);
    free(buf);
    return rc;
}

bool conf_str_eq(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Who may do what, where data lives, and how keys are placed: what a
 * planted record must not change. (The rest, timeouts and the
 * migration's pace, is the file's to tune; listen and TLS are each
 * proxy's own, and the record's are its writer's: conf_pool_swap_own.) */
static const char *const guarded[] = {
    "hash", "hash_tag", "distribution", "jedis_version", "redis_auth",
    "redis_db", "databases", "admin_commands", "keyless_user", "keyless_password", "users",
    "eject_mode",
    "backend_user", "backend_password", "internal_user", "internal_password", "idgen",
};

void conf_pool_swap_own(struct conf_pool *a, struct conf_pool *b)
{
    struct conf_addr l = a->listen;
    struct conf_tls t = a->tls;

    a->listen = b->listen;
    b->listen = l;
    a->tls = b->tls;
    b->tls = t;
}

const char *conf_pool_differs(const struct conf_pool *a, const struct conf_pool *b)
{
    for (size_t g = 0; g < sizeof(guarded) / sizeof(guarded[0]); g++) {
        const struct pool_key *key = NULL;
        for (size_t i = 0; i < NKEYS; i++)
            if (strcmp(pool_keys[i].name, guarded[g]) == 0)
                key = &pool_keys[i];
        if (key == NULL)
            abort();                            /* a name above that is no key */
        const char *fa = (const char *)a + key->off, *fb = (const char *)b + key->off;
        bool same = true;
        switch (key->kind) {
        case K_INT:    same = *(const int *)fa == *(const int *)fb; break;
        case K_BOOL:   same = *(const bool *)fa == *(const bool *)fb; break;
        case K_STR:    same = conf_str_eq(*(char *const *)fa, *(char *const *)fb); break;
        case K_HASH:   same = a->hash == b->hash; break;
        case K_DIST:   same = a->distribution == b->distribution; break;
        case K_EJECT:  same = a->eject_mode == b->eject_mode; break;
        case K_LISTEN: same = strcmp(a->listen.text, b->listen.text) == 0; break;
        case K_TAG:
            same = a->has_hash_tag == b->has_hash_tag &&
                   memcmp(a->hash_tag, b->hash_tag, 2) == 0;
            break;
        case K_IDGEN:
            /* What a reload cannot change: the epoch ids decode by, and
             * the short names b stores fields under, which a must keep (a
             * reload may have added names since b was written). */
            same = a->idgen.epoch_ms == b->idgen.epoch_ms && conf_subkeys_kept(b, a) == NULL &&
                   conf_minify_eq(a, b);
            break;
        case K_USERS:
            same = a->nusers == b->nusers;
            for (size_t i = 0; same && i < a->nusers; i++)
                same = strcmp(a->users[i].rule, b->users[i].rule) == 0;
            break;
        default:
            break;
        }
        if (!same)
            return key->name;
    }
    return NULL;
}

const char *conf_subkeys_kept(const struct conf_pool *a, const struct conf_pool *b)
{
    for (size_t i = 0; i < a->idgen.nsubkeys; i++) {
        const struct conf_subkey *sk = &a->idgen.subkeys[i];
        const char *now = conf_subkey(b, sk->name, strlen(sk->name), false);
        if (now == NULL || strcmp(now, sk->abbr) != 0)
            return sk->name;
    }
    return NULL;
}

bool conf_minify_eq(const struct conf_pool *a, const struct conf_pool *b)
{
    if (a->idgen.nminify != b->idgen.nminify)
        return false;
    for (size_t i = 0; i < a->idgen.nminify; i++) {
        bool found = false;
        for (size_t j = 0; !found && j < b->idgen.nminify; j++)
            found = a->idgen.minify_types[i] == b->idgen.minify_types[j];
        if (!found)
            return false;
    }
    return true;
}

const char *conf_subkey(const struct conf_pool *pc, const char *name, size_t len, bool maxify)
{
    /* (A scan: only a reload's check asks; requests use proxy/minify.c's
     * index of the same names.) */
    for (size_t i = 0; i < pc->idgen.nsubkeys; i++) {
        const struct conf_subkey *sk = &pc->idgen.subkeys[i];
        const char *from = maxify ? sk->abbr : sk->name;
        if (strlen(from) == len && memcmp(from, name, len) == 0)
            return maxify ? sk->name : sk->abbr;
    }
    return NULL;
}

const struct conf_pool *conf_pool(const struct conf *cf, const char *name)
{
    if (name == NULL)
        return cf->npools > 0 ? &cf->pools[0] : NULL;
    for (size_t i = 0; i < cf->npools; i++)
        if (strcmp(cf->pools[i].name, name) == 0)
            return &cf->pools[i];
    return NULL;
}

int conf_pool_ring(const struct conf_pool *pool, struct ring **out,
                   char *err, size_t errlen)
{
    struct ring_options opt = {
        .dist = pool->distribution,
        .hash = pool->hash,
        .has_tag = pool->has_hash_tag,
        .jedis_version = pool->jedis_version,
    };
    struct ring_server *sv = calloc(pool->nservers, sizeof(*sv));
    int rc;

    if (sv == NULL) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    memcpy(opt.tag, pool->hash_tag, 2);
    for (size_t i = 0; i < pool->nservers; i++) {
        sv[i].name = pool->servers[i].name;
        sv[i].addr = pool->servers[i].addr.text;
        sv[i].port = pool->servers[i].addr.port;
        sv[i].weight = pool->servers[i].weight;
    }
    rc = ring_create(out, &opt, sv, pool->nservers, err, errlen);
    free(sv);
    return rc;
}

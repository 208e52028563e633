/* conf_parts.c -- the parts of a pool with a shape of their own, each
 * parsed and checked here for conf_pool.c's keys: addresses (listen,
 * stats_listen, tls_listen), the servers, the sentinels, the users and
 * idgen (its entries, subkeys and minify list). */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "conf/conf.h"
#include "conf/conf_int.h"

#define IDGEN_TYPE_MAX      3842    /* 3843 is the default type */

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
        return conf_oom(p);
    if (len > 0 && s[0] == '/') {
        a->unix_socket = true;
        a->host = strdup(a->text);
        return a->host != NULL ? 0 : conf_oom(p);
    }
    colon = memrchr(s, ':', len);
    if (colon == NULL || colon == s)
        return conf_fail(p, n, "%s '%s' is not an address; expected host:port, "
                         "[ipv6]:port or /unix/socket/path", what, a->text);
    hostlen = (size_t)(colon - s);
    portlen = len - hostlen - 1;
    if (s[0] == '[') {
        if (hostlen < 3 || s[hostlen - 1] != ']')
            return conf_fail(p, n, "%s '%s': an IPv6 host goes in brackets, as "
                             "[::1]:6379", what, a->text);
        host++;
        hostlen -= 2;
    } else if (memchr(s, ':', hostlen) != NULL || memchr(s, '[', hostlen) != NULL) {
        return conf_fail(p, n, "%s '%s': an IPv6 host goes in brackets, as "
                         "[::1]:6379", what, a->text);
    }
    if (portlen == 0 || portlen >= sizeof(port))
        return conf_fail(p, n, "%s '%s' has an invalid port; expected 1 to 65535",
                         what, a->text);
    memcpy(port, colon + 1, portlen);
    port[portlen] = '\0';
    errno = 0;
    v = strtol(port, &end, 10);
    if (*end != '\0' || port[0] < '0' || port[0] > '9' || errno != 0 ||
        v < 1 || v > 65535)
        return conf_fail(p, n, "%s '%s' has an invalid port '%s'; expected 1 to 65535",
                         what, a->text, port);
    a->port = (uint16_t)v;
    a->host = strndup(host, hostlen);
    return a->host != NULL ? 0 : conf_oom(p);
}

/* listen: "host:port" or "/path [permissions]". */
int conf_set_listen(struct parser *p, const yaml_node_t *n, const char *what,
                    struct conf_addr *addr)
{
    const char *s, *sp;
    size_t len;
    int rc;

    if ((rc = conf_scalar(p, n, what, &s)) < 0)
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
            return conf_fail(p, n, "%s '%s' has invalid permissions '%s'; expected "
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

    if ((rc = conf_scalar(p, n, "a server", &s)) < 0)
        return rc;
    sv->line = (int)n->start_mark.line + 1;
    sv->col = (int)n->start_mark.column + 1;
    sp = strchr(s, ' ');
    len = sp != NULL ? (size_t)(sp - s) : strlen(s);
    if (sp != NULL) {
        const char *name = sp + strspn(sp, " ");
        if (*name == '\0' || strchr(name, ' ') != NULL)
            return conf_fail(p, n, "server '%s': the name after the address must be "
                             "one word, as in 127.0.0.1:6379:1 redis1", s);
        if ((sv->name = strdup(name)) == NULL)
            return conf_oom(p);
    }
    colon = memrchr(s, ':', len);
    if (colon == NULL)
        return conf_fail(p, n, "server '%s' is not host:port:weight [name] or "
                         "/unix/path:weight [name]", s);
    w = colon + 1;
    errno = 0;
    weight = strtoul(w, &end, 10);
    if (w[0] < '0' || w[0] > '9' || end != s + len || errno != 0 ||
        weight < 1 || weight > 1000000)
        return conf_fail(p, n, "server '%s' has an invalid weight '%.*s'; expected a "
                         "whole number from 1 to 1000000", s, (int)(s + len - w), w);
    sv->weight = (uint32_t)weight;
    if (s[0] != '/' && memrchr(s, ':', (size_t)(colon - s)) == NULL)
        return conf_fail(p, n, "server '%s' is not host:port:weight [name] or "
                         "/unix/path:weight [name]", s);
    return parse_addr(p, n, "server", s, (size_t)(colon - s), &sv->addr);
}

int conf_set_servers(struct parser *p, yaml_node_t *n, struct conf_pool *pool)
{
    yaml_node_item_t *start, *top;
    size_t count;

    if (n->type != YAML_SEQUENCE_NODE)
        return conf_fail(p, n, "servers must be a list of \"host:port:weight [name]\", "
                         "not %s", conf_kind_name(n));
    start = n->data.sequence.items.start;
    top = n->data.sequence.items.top;
    count = (size_t)(top - start);
    if (count == 0)
        return conf_fail(p, n, "pool '%s' has no servers; list at least one "
                         "\"host:port:weight [name]\"", pool->name);
    pool->servers = calloc(count, sizeof(*pool->servers));
    if (pool->servers == NULL)
        return conf_oom(p);
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *item = conf_node(p, start[i]);
        struct conf_server *sv = &pool->servers[i];
        int rc;

        if (item == NULL)
            return conf_fail(p, n, "servers has an empty entry");
        pool->nservers = i + 1;
        if ((rc = parse_server(p, item, sv)) < 0)
            return rc;
        for (size_t j = 0; j < i; j++) {
            const struct conf_server *o = &pool->servers[j];
            if (sv->name != NULL && o->name != NULL && strcmp(sv->name, o->name) == 0)
                return conf_fail(p, item, "server name '%s' is already used at line %d; "
                                 "names must be unique in a pool", sv->name, o->line);
            if (strcmp(sv->addr.text, o->addr.text) == 0)
                return conf_fail(p, item, "server address '%s' is already listed at "
                                 "line %d", sv->addr.text, o->line);
        }
    }
    return 0;
}

/* ---- sentinels ---------------------------------------------------------- */

/* A list of "host:port", each once. */
int conf_set_sentinels(struct parser *p, yaml_node_t *n, struct conf_pool *pool)
{
    yaml_node_item_t *start, *top;
    size_t count;
    const char *s;
    int rc;

    if (n->type != YAML_SEQUENCE_NODE)
        return conf_fail(p, n, "sentinels must be a list of \"host:port\", not %s",
                         conf_kind_name(n));
    start = n->data.sequence.items.start;
    top = n->data.sequence.items.top;
    count = (size_t)(top - start);
    if (count == 0)
        return conf_fail(p, n, "sentinels is empty; list the Sentinels watching the servers, "
                         "or leave the key out");
    if ((pool->sentinels = calloc(count, sizeof(*pool->sentinels))) == NULL)
        return conf_oom(p);
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *item = conf_node(p, start[i]);
        struct conf_addr *a = &pool->sentinels[i];
        if (item == NULL)
            return conf_fail(p, n, "sentinels has an empty entry");
        if ((rc = conf_scalar(p, item, "a sentinel", &s)) < 0)
            return rc;
        pool->nsentinels = i + 1;
        if ((rc = parse_addr(p, item, "sentinel", s, strlen(s), a)) < 0)
            return rc;
        if (a->unix_socket)
            return conf_fail(p, item, "sentinel '%s': a Sentinel is reached over TCP, as "
                             "host:port", s);
        for (size_t j = 0; j < i; j++)
            if (strcmp(pool->sentinels[j].text, a->text) == 0)
                return conf_fail(p, item, "sentinel '%s' is listed twice", s);
    }
    return 0;
}

/* ---- users -------------------------------------------------------------- */

/* A list of ACL lines; what each says is checked by proxy/acl.c, which
 * knows the commands. */
int conf_set_users(struct parser *p, yaml_node_t *n, struct conf_pool *pool)
{
    yaml_node_item_t *start, *top;

    if (n->type != YAML_SEQUENCE_NODE)
        return conf_fail(p, n, "users must be a list of ACL lines (\"name on >password "
                    "~keys:* +@all\"), not %s", conf_kind_name(n));
    start = n->data.sequence.items.start;
    top = n->data.sequence.items.top;
    if (top - start > 1024)
        return conf_fail(p, n, "users lists more than 1024 users");
    pool->users = calloc((size_t)(top - start) + 1, sizeof(*pool->users));
    if (pool->users == NULL)
        return conf_oom(p);
    for (yaml_node_item_t *it = start; it < top; it++) {
        yaml_node_t *item = conf_node(p, *it);
        struct conf_user *u = &pool->users[pool->nusers];
        int rc;

        if (item == NULL)
            return conf_fail(p, n, "users has an empty entry");
        u->line = (int)item->start_mark.line + 1;
        u->col = (int)item->start_mark.column + 1;
        if ((rc = conf_dup_scalar(p, item, "a user", &u->rule)) < 0)
            return rc;
        pool->nusers++;
        if (strlen(u->rule) > 65536)
            return conf_fail(p, item, "a user's line is longer than 65536 bytes");
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
        return conf_fail(p, k, "an empty name is not allowed here");
    /* SHARD.GENKEY takes a type by name or by number, and calls 3843
     * "default": a type name must be neither. */
    if (e->types && (strcmp(name, "default") == 0 || (name[0] >= '0' && name[0] <= '9')))
        return conf_fail(p, k, "type name '%s' is not allowed: it must not start with a digit "
                         "nor be 'default'", name);
    if (e->types && (rc = conf_number(p, v, "a type code", 0, IDGEN_TYPE_MAX, &code)) < 0)
        return rc;
    list = realloc(*e->list, (*e->n + 1) * sizeof(*list));
    if (list == NULL)
        return conf_oom(p);
    *e->list = list;
    ent = &list[(*e->n)++];
    memset(ent, 0, sizeof(*ent));
    ent->code = (uint32_t)code;
    if ((ent->name = strdup(name)) == NULL)
        return conf_oom(p);
    if (e->types) {
        for (size_t i = 0; i + 1 < *e->n; i++)
            if (list[i].code == ent->code)
                return conf_fail(p, v, "type code %u is already type '%s'", ent->code,
                                 list[i].name);
        return 0;
    }
    return conf_dup_scalar(p, v, "a fixed key's type", &ent->type);
}

static int add_subkey(struct parser *p, yaml_node_t *k, const char *name, yaml_node_t *v,
                      void *arg)
{
    struct conf_idgen *ig = arg;
    struct conf_subkey *list, *sk;
    int rc;

    if (name[0] == '\0')
        return conf_fail(p, k, "an empty name is not allowed here");
    /* (Looked up by a scan: a dictionary of field names is small.) */
    if (ig->nsubkeys == CONF_SUBKEYS_MAX)
        return conf_fail(p, k, "idgen.subkeys has more than %d names", CONF_SUBKEYS_MAX);
    list = realloc(ig->subkeys, (ig->nsubkeys + 1) * sizeof(*list));
    if (list == NULL)
        return conf_oom(p);
    ig->subkeys = list;
    sk = &list[ig->nsubkeys++];
    memset(sk, 0, sizeof(*sk));
    if ((sk->name = strdup(name)) == NULL)
        return conf_oom(p);
    if ((rc = conf_dup_scalar(p, v, "a short name", &sk->abbr)) < 0)
        return rc;
    if (sk->abbr[0] == '\0')
        return conf_fail(p, v, "idgen.subkeys '%s' has an empty short name", name);
    if (strlen(sk->abbr) > CONF_SUBKEY_SHORT_MAX)
        return conf_fail(p, v, "idgen.subkeys '%s' has a short name of more than %d bytes", name,
                         CONF_SUBKEY_SHORT_MAX);
    /* Both ways one to one, and no name read both ways: a field stored
     * short must never be taken for a long one, nor the other way. */
    for (size_t i = 0; i + 1 < ig->nsubkeys; i++) {
        if (strcmp(list[i].abbr, sk->abbr) == 0)
            return conf_fail(p, v, "idgen.subkeys: '%s' and '%s' both shorten to '%s'",
                             list[i].name, name, sk->abbr);
        if (strcmp(list[i].name, sk->abbr) == 0 || strcmp(list[i].abbr, name) == 0)
            return conf_fail(p, v, "idgen.subkeys: '%s' is both a long and a short name",
                             strcmp(list[i].name, sk->abbr) == 0 ? sk->abbr : name);
    }
    if (strcmp(name, sk->abbr) == 0)
        return conf_fail(p, v, "idgen.subkeys: '%s' is both a long and a short name", name);
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
        return conf_fail(p, n, "idgen.minify must be a list of type names, not %s",
                         conf_kind_name(n));
    start = n->data.sequence.items.start;
    top = n->data.sequence.items.top;
    count = (size_t)(top - start);
    if ((ig->minify = calloc(count + 1, sizeof(*ig->minify))) == NULL ||
        (ig->minify_types = calloc(count + 1, sizeof(*ig->minify_types))) == NULL)
        return conf_oom(p);
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *item = conf_node(p, start[i]);
        if (item == NULL)
            return conf_fail(p, n, "idgen.minify has an empty entry");
        if ((rc = conf_dup_scalar(p, item, "a type name", &ig->minify[i])) < 0)
            return rc;
        ig->nminify = i + 1;
        for (size_t j = 0; j < i; j++)
            if (strcmp(ig->minify[j], ig->minify[i]) == 0)
                return conf_fail(p, item, "idgen.minify names type '%s' twice", ig->minify[i]);
    }
    return 0;
}

int conf_set_idgen_key(struct parser *p, yaml_node_t *k, const char *name,
                       yaml_node_t *v, void *arg)
{
    struct conf_idgen *ig = arg;
    long long num;
    int rc;

    if (strcmp(name, "types") == 0) {
        struct entries e = {&ig->types, &ig->ntypes, true};
        return conf_each_pair(p, v, "idgen.types", add_entry, &e);
    }
    if (strcmp(name, "fixed") == 0) {
        struct entries e = {&ig->fixed, &ig->nfixed, false};
        return conf_each_pair(p, v, "idgen.fixed", add_entry, &e);
    }
    if (strcmp(name, "subkeys") == 0)
        return conf_each_pair(p, v, "idgen.subkeys", add_subkey, ig);
    if (strcmp(name, "minify") == 0)
        return set_minify(p, v, ig);
    if (strcmp(name, "epoch_ms") == 0) {
        /* 62^7 ms must fit after the epoch: 7 base62 digits of time. */
        if ((rc = conf_number(p, v, "idgen.epoch_ms", 0, 4102444800000LL, &num)) < 0)
            return rc;
        ig->epoch_ms = num;
        return 0;
    }
    if (strcmp(name, "max_ahead_ms") == 0) {
        if ((rc = conf_number(p, v, "idgen.max_ahead_ms", 1, 3600000, &num)) < 0)
            return rc;
        ig->max_ahead_ms = num;
        return 0;
    }
    if (strcmp(name, "restart_guard_ms") == 0) {
        if ((rc = conf_number(p, v, "idgen.restart_guard_ms", 0, 3600000, &num)) < 0)
            return rc;
        ig->restart_guard_ms = num;
        return 0;
    }
    return conf_fail(p, k, "unknown key 'idgen.%s'; expected one of: epoch_ms, "
                     "max_ahead_ms, restart_guard_ms, types, fixed, subkeys, minify", name);
}

int conf_check_idgen(struct parser *p, yaml_node_t *n, struct conf_idgen *ig)
{
    /* A restarted server's ids start restart_guard_ms ahead of its clock,
     * and the allocator refuses to run more than max_ahead_ms ahead. */
    if (ig->restart_guard_ms >= ig->max_ahead_ms)
        return conf_fail(p, n, "idgen.restart_guard_ms (%lld) must be less than "
                         "idgen.max_ahead_ms (%lld)", (long long)ig->restart_guard_ms,
                         (long long)ig->max_ahead_ms);
    for (size_t i = 0; i < ig->nfixed; i++) {
        const char *t = ig->fixed[i].type;
        bool known = strcmp(t, "default") == 0;
        for (size_t j = 0; !known && j < ig->ntypes; j++)
            known = strcmp(t, ig->types[j].name) == 0;
        if (!known)
            return conf_fail(p, n, "idgen.fixed '%s' names type '%s', which is not in "
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
            return conf_fail(p, n, "idgen.minify names type '%s', which is not in idgen.types "
                             "(or 'default')", t);
    }
    if (ig->nminify > 0 && ig->nsubkeys == 0)
        return conf_fail(p, n, "idgen.minify needs idgen.subkeys: the dictionary its types' "
                         "hash fields are mapped by");
    return 0;
}

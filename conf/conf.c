/* conf.c -- parse and validate the YAML configuration: the parser's
 * primitives (scalars, numbers, sizes, mappings walked, errors), the
 * entry points (conf_parse, conf_load) and a config's lifetime. A pool's
 * keys are conf_pool.c's, the parts with a shape of their own (addresses,
 * servers, sentinels, users, idgen) conf_parts.c's.
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
#include "conf/conf_int.h"

#define CONF_FILE_MAX       (16u << 20)

int conf_fail(struct parser *p, const yaml_node_t *n, const char *fmt, ...)
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

int conf_oom(struct parser *p)
{
    snprintf(p->err, p->errlen, "%s: out of memory", p->path);
    return -ENOMEM;
}

yaml_node_t *conf_node(struct parser *p, int id)
{
    return yaml_document_get_node(&p->doc, id);
}

const char *conf_kind_name(const yaml_node_t *n)
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
 * or -EINVAL written out rather than conf_fail()'s value: every caller uses *s
 * when this returns 0, and only a constant lets gcc -O3 see that *s is
 * then set (else -Wmaybe-uninitialized in each of them). */
int conf_scalar(struct parser *p, const yaml_node_t *n, const char *what,
                const char **s)
{
    if (n->type != YAML_SCALAR_NODE) {
        conf_fail(p, n, "%s must be a scalar, not %s", what, conf_kind_name(n));
        return -EINVAL;
    }
    *s = (const char *)n->data.scalar.value;
    if (strlen(*s) != n->data.scalar.length) {
        conf_fail(p, n, "%s contains a NUL byte", what);
        return -EINVAL;
    }
    return 0;
}

int conf_dup_scalar(struct parser *p, const yaml_node_t *n, const char *what,
                    char **out)
{
    const char *s;
    int rc = conf_scalar(p, n, what, &s);

    if (rc < 0)
        return rc;
    free(*out);
    *out = strdup(s);
    return *out != NULL ? 0 : conf_oom(p);
}

/* A whole decimal number in [min, max]. */
int conf_number(struct parser *p, const yaml_node_t *n, const char *what,
                long long min, long long max, long long *out)
{
    const char *s;
    char *end;
    int rc = conf_scalar(p, n, what, &s);

    if (rc < 0)
        return rc;
    errno = 0;
    *out = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || *out < min || *out > max)
        return conf_fail(p, n, "%s '%s' is not a valid number; expected a whole "
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

int conf_size_value(struct parser *p, const yaml_node_t *n, const char *what, long long *out)
{
    const char *s;
    int rc = conf_scalar(p, n, what, &s);

    if (rc < 0)
        return rc;
    if (!size_text(s, strlen(s), out))
        return conf_fail(p, n, "%s '%s' is not a size; expected a number of bytes, with k, kb, "
                         "m, mb, g or gb after it if you like (1gb, 512mb)", what, s);
    return 0;
}

/* client_output_buffer_limit: redis-server's "<class> <hard> <soft>
 * <soft seconds>" groups, for the classes normal and pubsub; a class not
 * named keeps its defaults. */
int conf_client_limits(struct parser *p, const yaml_node_t *n, struct conf_pool *pool)
{
    static const char *const classes[CONF_CLIENT_CLASSES] = {"normal", "pubsub"};
    const char *s, *w[64];
    size_t wl[64], nw = 0;
    int rc = conf_scalar(p, n, "client_output_buffer_limit", &s);

    if (rc < 0)
        return rc;
    for (const char *q = s; *q != '\0'; ) {
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q == '\0')
            break;
        if (nw == 64)
            return conf_fail(p, n, "client_output_buffer_limit has too many words");
        w[nw] = q;
        while (*q != '\0' && *q != ' ' && *q != '\t')
            q++;
        wl[nw] = (size_t)(q - w[nw]);
        nw++;
    }
    if (nw == 0 || nw % 4 != 0)
        return conf_fail(p, n, "client_output_buffer_limit '%s' is not groups of four words: "
                         "<class> <hard> <soft> <soft seconds>, as 'normal 512mb 256mb 60 "
                         "pubsub 32mb 8mb 60'", s);
    for (size_t g = 0; g < nw; g += 4) {
        int cls = -1;
        long long hard, soft, secs;
        for (int k = 0; k < CONF_CLIENT_CLASSES; k++)
            if (wl[g] == strlen(classes[k]) && strncasecmp(w[g], classes[k], wl[g]) == 0)
                cls = k;
        if (cls < 0)
            return conf_fail(p, n, "client_output_buffer_limit: unknown class '%.*s'; expected "
                             "normal or pubsub (shardis has no replica clients)", (int)wl[g], w[g]);
        if (!size_text(w[g + 1], wl[g + 1], &hard) || !size_text(w[g + 2], wl[g + 2], &soft) ||
            !size_text(w[g + 3], wl[g + 3], &secs) || secs > INT_MAX)
            return conf_fail(p, n, "client_output_buffer_limit: '%.*s %.*s %.*s' for %s is not "
                             "<hard> <soft> <soft seconds> (sizes as 512mb, seconds whole)",
                             (int)wl[g + 1], w[g + 1], (int)wl[g + 2], w[g + 2], (int)wl[g + 3],
                             w[g + 3], classes[cls]);
        pool->client_limits[cls] = (struct conf_client_limit){hard, soft, (int)secs};
    }
    return 0;
}

int conf_boolean(struct parser *p, const yaml_node_t *n, const char *what,
                 bool *out)
{
    const char *s;
    int rc = conf_scalar(p, n, what, &s);

    if (rc < 0)
        return rc;
    if (strcmp(s, "true") == 0)
        *out = true;
    else if (strcmp(s, "false") == 0)
        *out = false;
    else
        return conf_fail(p, n, "%s '%s' is not a boolean; expected true or false", what, s);
    return 0;
}

/* threads: N | auto, the process's one key at the top level (a pool's
 * value is a mapping, so no pool is taken for it); every other key is a
 * pool. */
static int top_pair(struct parser *p, yaml_node_t *k, const char *name, yaml_node_t *v,
                    void *arg)
{
    struct conf *cf = arg;
    long long n;
    int rc;

    if (strcmp(name, "threads") != 0 || v->type != YAML_SCALAR_NODE)
        return conf_parse_pool(p, k, name, v, arg);
    if (strcmp((const char *)v->data.scalar.value, "auto") == 0) {
        cf->threads = 0;
        return 0;
    }
    if ((rc = conf_number(p, v, "threads", 0, CONF_THREADS_MAX, &n)) < 0)
        return rc;
    cf->threads = (int)n;
    return 0;
}

/* Walk a mapping's pairs, refusing duplicate keys and non-scalar keys. */
int conf_each_pair(struct parser *p, yaml_node_t *map, const char *what,
                   pair_fn fn, void *arg)
{
    yaml_node_pair_t *start, *top;

    if (map->type != YAML_MAPPING_NODE)
        return conf_fail(p, map, "%s must be a mapping, not %s", what, conf_kind_name(map));
    start = map->data.mapping.pairs.start;
    top = map->data.mapping.pairs.top;
    for (yaml_node_pair_t *pair = start; pair < top; pair++) {
        yaml_node_t *k = conf_node(p, pair->key), *v = conf_node(p, pair->value);
        const char *name;
        int rc;

        if (k == NULL || v == NULL)
            return conf_fail(p, map, "%s has an incomplete entry", what);
        if ((rc = conf_scalar(p, k, "a key", &name)) < 0)
            return rc;
        for (yaml_node_pair_t *q = start; q < pair; q++) {
            yaml_node_t *qk = conf_node(p, q->key);
            if (qk != NULL && qk->type == YAML_SCALAR_NODE &&
                strcmp((const char *)qk->data.scalar.value, name) == 0)
                return conf_fail(p, k, "duplicate key '%s' (first at line %zu)",
                                 name, qk->start_mark.line + 1);
        }
        if ((rc = fn(p, k, name, v, arg)) < 0)
            return rc;
    }
    return 0;
}

/* ---- entry points ------------------------------------------------------- */

/* An address's strings (a config's parts are freed with it). */
void conf_addr_free(struct conf_addr *a)
{
    free(a->text);
    free(a->host);
}

static void conf_pool_free(struct conf_pool *pool)
{
    free(pool->name);
    conf_addr_free(&pool->listen);
    conf_addr_free(&pool->tls.listen);
    conf_addr_free(&pool->stats_listen);
    for (size_t i = 0; i < pool->nsentinels; i++)
        conf_addr_free(&pool->sentinels[i]);
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
        conf_addr_free(&pool->servers[i].addr);
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

/* Configs allocated and not freed: conf_held. */
static atomic_size_t nheld;

struct conf *conf_ref(struct conf *cf)
{
    if (cf != NULL)
        atomic_fetch_add_explicit(&cf->refs, 1, memory_order_relaxed);
    return cf;
}

/* (As ring_unref: acq_rel, each holder's reads before the free.) */
void conf_unref(struct conf *cf)
{
    if (cf == NULL || atomic_fetch_sub_explicit(&cf->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < cf->npools; i++)
        conf_pool_free(&cf->pools[i]);
    free(cf->pools);
    free(cf->path);
    free(cf->text);
    free(cf);
    nheld--;
}

void conf_free(struct conf *cf)
{
    if (cf != NULL && atomic_load(&cf->refs) != 1)
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
        return conf_oom(&p);
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
        return conf_oom(&p);
    }
    atomic_init(&cf->refs, 1);
    cf->threads = -1;
    nheld++;
    memcpy(cf->text, buf, len);
    cf->text[len] = '\0';
    cf->textlen = len;
    root = yaml_document_get_root_node(&p.doc);
    if (root == NULL || (root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0)) {
        rc = conf_fail(&p, root, "no pools: the file must map pool names to pools");
    } else if (root->type != YAML_MAPPING_NODE) {
        rc = conf_fail(&p, root, "the top level must map pool names to pools, not be %s",
                       conf_kind_name(root));
    } else {
        size_t n = (size_t)(root->data.mapping.pairs.top - root->data.mapping.pairs.start);
        cf->pools = calloc(n > 0 ? n : 1, sizeof(*cf->pools));
        if (cf->pools == NULL)
            rc = conf_oom(&p);
        else if (n == 0)
            rc = conf_fail(&p, root, "no pools: the file must map pool names to pools");
        else
            rc = conf_each_pair(&p, root, "the top level", top_pair, cf);
        if (rc == 0 && cf->npools == 0)
            rc = conf_fail(&p, root, "no pools: the file must map pool names to pools");
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

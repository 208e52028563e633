/* conf_pool.c -- a pool: its keys, described by one table (adding a key
 * is one line there plus its field in struct conf_pool), each value
 * checked, the defaults, and the checks across keys (TLS); then what
 * other files ask of a parsed pool: whether two differ where a reload or
 * a migration record may not (conf_pool_differs), idgen's subkeys, its
 * ring. */
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

/* A key whose value is one word, or two characters (hash_tag), of those
 * its kind allows: field is its place in pool. */
static int set_word_key(struct parser *p, enum key_kind kind, const char *name,
                        yaml_node_t *v, struct conf_pool *pool, char *field)
{
    const char *s;
    int rc, id;

    switch (kind) {
    case K_HASH:
        if ((rc = conf_scalar(p, v, name, &s)) < 0)
            return rc;
        if ((id = ring_hash_from_name(s)) < 0)
            return conf_fail(p, v, "unknown hash '%s'; expected one of: %s", s,
                             ring_hash_names());
        *(enum ring_hash *)field = (enum ring_hash)id;
        return 0;
    case K_DIST:
        if ((rc = conf_scalar(p, v, name, &s)) < 0)
            return rc;
        if ((id = ring_dist_from_name(s)) < 0)
            return conf_fail(p, v, "unknown distribution '%s'; expected one of: %s", s,
                             ring_dist_names());
        *(enum ring_dist *)field = (enum ring_dist)id;
        return 0;
    case K_EJECT:
        if ((rc = conf_scalar(p, v, name, &s)) < 0)
            return rc;
        if (strcmp(s, "fail") == 0)
            pool->eject_mode = CONF_EJECT_FAIL;
        else if (strcmp(s, "rehash") == 0)
            pool->eject_mode = CONF_EJECT_REHASH;
        else
            return conf_fail(p, v, "unknown eject_mode '%s'; expected one of: fail, rehash", s);
        return 0;
    case K_READ_FROM:
        if ((rc = conf_scalar(p, v, name, &s)) < 0)
            return rc;
        if (strcmp(s, "master") == 0)
            pool->read_from = CONF_READ_MASTER;
        else if (strcmp(s, "replica") == 0)
            pool->read_from = CONF_READ_REPLICA;
        else if (strcmp(s, "prefer_replica") == 0)
            pool->read_from = CONF_READ_PREFER_REPLICA;
        else
            return conf_fail(p, v, "unknown read_from '%s'; expected one of: master, replica, "
                             "prefer_replica", s);
        return 0;
    case K_TAG:
        if ((rc = conf_scalar(p, v, name, &s)) < 0)
            return rc;
        if (strlen(s) != 2)
            return conf_fail(p, v, "hash_tag '%s' is not two characters; expected an "
                             "open and a close character, as \"{}\"", s);
        memcpy(pool->hash_tag, s, 2);
        pool->has_hash_tag = true;
        return 0;
    case K_TLS_AUTH:
        if ((rc = conf_scalar(p, v, name, &s)) < 0)
            return rc;
        if (strcmp(s, "yes") == 0)
            pool->tls.auth_clients = CONF_TLS_AUTH_YES;
        else if (strcmp(s, "no") == 0)
            pool->tls.auth_clients = CONF_TLS_AUTH_NO;
        else if (strcmp(s, "optional") == 0)
            pool->tls.auth_clients = CONF_TLS_AUTH_OPTIONAL;
        else
            return conf_fail(p, v, "unknown tls_auth_clients '%s'; expected one of: yes, no, "
                             "optional", s);
        return 0;
    default:
        break;
    }
    return 0;
}

static int set_pool_key(struct parser *p, yaml_node_t *k, const char *name,
                        yaml_node_t *v, void *arg)
{
    struct pool_state *st = arg;
    struct conf_pool *pool = st->pool;
    const struct pool_key *key = NULL;
    char *field;
    long long num;
    int rc;

    for (size_t i = 0; i < NKEYS; i++)
        if (strcmp(pool_keys[i].name, name) == 0) {
            key = &pool_keys[i];
            st->where[i] = v;
        }
    if (key == NULL)
        return conf_fail(p, k, "unknown key '%s' in pool '%s'; expected one of: %s",
                         name, pool->name, pool_key_names());
    field = (char *)pool + key->off;

    switch (key->kind) {
    case K_INT:
        if ((rc = conf_number(p, v, name, key->min, key->max, &num)) < 0)
            return rc;
        *(int *)field = (int)num;
        return 0;
    case K_BOOL:
        return conf_boolean(p, v, name, (bool *)field);
    case K_SIZE:
        return conf_size_value(p, v, name, (long long *)field);
    case K_CLIENT_LIMITS:
        return conf_client_limits(p, v, pool);
    case K_REDIS:
        if ((rc = conf_boolean(p, v, name, (bool *)field)) < 0)
            return rc;
        if (!pool->redis)
            return conf_fail(p, v, "redis: false asks for a memcached pool; memcached "
                             "pools are not supported (shardis speaks Redis only)");
        return 0;
    case K_STR:                 /* max: the longest string allowed */
        if ((rc = conf_dup_scalar(p, v, name, (char **)field)) < 0)
            return rc;
        if (strlen(*(char **)field) > (size_t)key->max)
            return conf_fail(p, v, "%s is longer than %lld bytes", name, key->max);
        return 0;
    case K_HASH:
    case K_DIST:
    case K_EJECT:
    case K_READ_FROM:
    case K_TAG:
    case K_TLS_AUTH:
        return set_word_key(p, key->kind, name, v, pool, field);
    case K_LISTEN:
        return conf_set_listen(p, v, "listen", &pool->listen);
    case K_TLS_LISTEN:
        return conf_set_listen(p, v, "tls_listen", &pool->tls.listen);
    case K_STATS_LISTEN:
        if ((rc = conf_set_listen(p, v, "stats_listen", &pool->stats_listen)) < 0)
            return rc;
        if (pool->stats_listen.unix_socket)
            return conf_fail(p, v, "stats_listen '%s': metrics are served over TCP, as "
                             "host:port", pool->stats_listen.text);
        return 0;
    case K_SERVERS:
        return conf_set_servers(p, v, pool);
    case K_IDGEN:
        if ((rc = conf_each_pair(p, v, "idgen", conf_set_idgen_key, &pool->idgen)) < 0)
            return rc;
        return conf_check_idgen(p, v, &pool->idgen);
    case K_USERS:
        return conf_set_users(p, v, pool);
    case K_SENTINELS:
        return conf_set_sentinels(p, v, pool);
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
            return conf_fail(p, at, "%s applies only to a TLS listener: add tls_listen: "
                             "host:port", listener_keys[i]);
    for (size_t i = 0; i < sizeof(backend_keys) / sizeof(backend_keys[0]); i++)
        if (!t->backend && (at = given(st, backend_keys[i])) != NULL)
            return conf_fail(p, at, "%s applies only with backend_tls: true", backend_keys[i]);
    if (t->listen.text == NULL && !t->backend &&
        (at = given(st, "tls_handshake_timeout")) != NULL)
        return conf_fail(p, at, "tls_handshake_timeout applies only with tls_listen or "
                         "backend_tls: true");
    if (t->listen.text != NULL && (t->cert_file == NULL || t->key_file == NULL))
        return conf_fail(p, given(st, "tls_listen"), "tls_listen needs tls_cert_file and "
                         "tls_key_file (the listener's certificate and its private key)");
    if (given(st, "tls_auth_clients") == NULL && t->ca_cert_file != NULL)
        t->auth_clients = CONF_TLS_AUTH_YES;        /* redis-server's default */
    if (t->auth_clients != CONF_TLS_AUTH_NO && t->ca_cert_file == NULL)
        return conf_fail(p, given(st, "tls_auth_clients"), "tls_auth_clients asks for clients' "
                         "certificates: add tls_ca_cert_file, the CA that signs them");
    if ((t->backend_cert_file == NULL) != (t->backend_key_file == NULL))
        return conf_fail(p, given(st, t->backend_cert_file ? "backend_tls_cert_file"
                                                      : "backend_tls_key_file"),
                    "backend_tls_cert_file and backend_tls_key_file go together "
                    "(shardis's certificate for servers that ask for one)");
    return 0;
}

/* The user and password pairs: both or neither, and no empty name. */
static int check_creds(struct parser *p, const struct pool_state *st, struct conf_pool *pool)
{
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
            return conf_fail(p, given(st, creds[i].user), "%s is empty", creds[i].user);
        if ((user == NULL) != (pass == NULL))
            return conf_fail(p, given(st, user ? creds[i].user : creds[i].password),
                             "%s and %s go together (%s)", creds[i].user, creds[i].password,
                             creds[i].what);
    }
    return 0;
}

/* Every listener, plain or TLS, of every pool parsed so far (pool the
 * last) needs its own address. */
static int check_listeners(struct parser *p, struct conf *cf, const struct pool_state *st,
                           struct conf_pool *pool)
{
    const struct conf_addr *mine[2] = {&pool->listen, &pool->tls.listen};

    for (size_t i = 0; i < cf->npools; i++)
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) {
                const struct conf_pool *o = &cf->pools[i];
                const struct conf_addr *theirs = b == 0 ? &o->listen : &o->tls.listen;
                if ((o == pool && a <= b) || mine[a]->text == NULL || theirs->text == NULL ||
                    strcmp(mine[a]->text, theirs->text) != 0)
                    continue;
                return conf_fail(p, given(st, a == 0 ? "listen" : "tls_listen"), "pool '%s' "
                                 "listens on '%s', as pool '%s' does (line %d, its %s); each "
                                 "listener needs its own address", pool->name, mine[a]->text,
                                 o->name, o->line, b == 0 ? "listen" : "tls_listen");
            }
    return 0;
}

int conf_parse_pool(struct parser *p, yaml_node_t *k, const char *name,
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
        return conf_oom(p);
    if (name[0] == '\0')
        return conf_fail(p, k, "a pool needs a name");
    if ((rc = conf_each_pair(p, v, "a pool", set_pool_key, &st)) < 0)
        return rc;

    if (pool->listen.text == NULL)
        return conf_fail(p, k, "pool '%s' has no listen address; add listen: "
                         "host:port or /unix/socket/path", name);
    if (pool->servers == NULL)
        return conf_fail(p, k, "pool '%s' has no servers; add servers: with at least "
                         "one \"host:port:weight [name]\"", name);
    if (pool->hash == RING_HASH_COUNT)
        pool->hash = ring_default_hash(pool->distribution);
    if (ring_check_hash(pool->distribution, pool->hash, why, sizeof(why)) < 0) {
        at = given(&st, "hash");
        return conf_fail(p, at != NULL ? at : given(&st, "distribution"), "%s", why);
    }
    if ((rc = check_creds(p, &st, pool)) < 0)
        return rc;
    if ((rc = check_tls(p, &st, pool)) < 0)
        return rc;
    if (pool->nsentinels == 0 && (at = given(&st, "sentinel_auth")) != NULL)
        return conf_fail(p, at, "sentinel_auth applies only with sentinels");
    /* A config from before databases, with redis_db 16 or more, keeps
     * working: the servers have that many. */
    if (given(&st, "databases") == NULL && pool->redis_db >= pool->databases &&
        pool->redis_db < CONF_DATABASES_MAX)
        pool->databases = pool->redis_db + 1;
    if (pool->redis_db >= pool->databases)
        return conf_fail(p, given(&st, "redis_db") != NULL ? given(&st, "redis_db")
                                                       : given(&st, "databases"),
                         "redis_db (%d) must be less than databases (%d)", pool->redis_db,
                         pool->databases);
    if (pool->nsentinels == 0 && pool->read_from != CONF_READ_MASTER)
        return conf_fail(p, given(&st, "read_from"), "read_from: %s needs sentinels: they list "
                         "each master's replicas", pool->read_from == CONF_READ_REPLICA
                                                   ? "replica" : "prefer_replica");
    if (pool->nsentinels > 0 && pool->eject_mode == CONF_EJECT_REHASH)
        return conf_fail(p, given(&st, "eject_mode"), "eject_mode: rehash would move a failing "
                         "master's keys to other servers; with sentinels its replica takes over "
                         "instead (use eject_mode: fail)");
    for (size_t j = 0; pool->nsentinels > 0 && j < pool->nservers; j++)
        if (pool->servers[j].name == NULL)
            return conf_fail(p, given(&st, "servers"), "server '%s' has no name: with "
                             "sentinels every server is named as its master, as in "
                             "\"%s:1 mymaster\"", pool->servers[j].addr.text,
                             pool->servers[j].addr.text);
    if (given(&st, "jedis_version") != NULL && pool->distribution != RING_DIST_JEDIS)
        return conf_fail(p, given(&st, "jedis_version"), "jedis_version applies only to "
                         "distribution: jedis");
    /* Building the ring catches what the keys alone cannot (point budgets,
     * over-long identities); a config that parses always builds. */
    struct ring *r;
    if ((rc = conf_pool_ring(pool, &r, why, sizeof(why))) < 0)
        return rc == -ENOMEM ? conf_oom(p) : conf_fail(p, given(&st, "servers"), "%s", why);
    ring_unref(r);
    return check_listeners(p, cf, &st, pool);
}

/* ---- what other files ask of a pool ------------------------------------ */

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

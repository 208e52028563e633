/* test_conf.c -- the config parser: twemproxy's defaults, every shardis
 * key, and an error with file:line:col and the allowed values for every
 * kind of bad input. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conf/conf.h"

static struct conf *parse_ok(const char *yml)
{
    struct conf *cf;
    char err[CONF_ERRLEN];
    int rc = conf_parse(&cf, "t.yml", yml, strlen(yml), err, sizeof(err));
    cr_assert(eq(int, rc, 0), "%s", err);
    return cf;
}

Test(conf, nutcracker_defaults)
{
    struct conf *cf = parse_ok(
        "alpha:\n"
        "  listen: 127.0.0.1:22121\n"
        "  servers:\n"
        "   - 127.0.0.1:6379:1\n");
    const struct conf_pool *p = conf_pool(cf, NULL);

    cr_assert(eq(sz, cf->npools, 1));
    cr_assert(eq(str, p->name, "alpha"));
    cr_assert(eq(str, p->listen.host, "127.0.0.1"));
    cr_assert(eq(u16, p->listen.port, 22121));
    cr_assert(eq(int, p->hash, RING_HASH_FNV1A_64));
    cr_assert(eq(int, p->distribution, RING_DIST_KETAMA));
    cr_assert(eq(int, p->has_hash_tag, 0));
    cr_assert(eq(int, p->timeout, -1));
    cr_assert(eq(int, p->backlog, 512));
    cr_assert(eq(int, p->client_connections, 0));
    cr_assert(eq(int, p->redis, 1));
    cr_assert(zero(ptr, p->redis_auth));
    cr_assert(eq(int, p->redis_db, 0));
    cr_assert(eq(int, p->server_connections, 1));
    cr_assert(eq(int, p->preconnect, 0));
    cr_assert(eq(int, p->auto_eject_hosts, 0));
    cr_assert(eq(int, p->server_retry_timeout, 30000));
    cr_assert(eq(int, p->server_failure_limit, 2));
    cr_assert(eq(int, p->tcpkeepalive, 0));
    cr_assert(eq(int, p->reuseport, 0));
    cr_assert(eq(int, p->jedis_version, 3));
    cr_assert(eq(int, p->eject_mode, CONF_EJECT_FAIL));
    cr_assert(eq(int, p->admin_commands, 0));
    cr_assert(eq(int, p->migration_rate, 3000));
    cr_assert(eq(int, p->migration_batch, 50));
    cr_assert(eq(int, p->migrate_timeout, 2000));
    cr_assert(eq(int, p->migrate_retries, 3));
    cr_assert(eq(int, p->lock_max_ms, 2000));
    cr_assert(eq(int, p->bigkey_bytes, 8 * 1024 * 1024));
    cr_assert(eq(i64, p->idgen.epoch_ms, 1325404800000LL));
    cr_assert(eq(i64, p->idgen.max_ahead_ms, 5000));
    cr_assert(eq(i64, p->idgen.restart_guard_ms, 2000));
    cr_assert(eq(sz, p->nservers, 1));
    cr_assert(eq(str, p->servers[0].addr.text, "127.0.0.1:6379"));
    cr_assert(eq(u32, p->servers[0].weight, 1));
    cr_assert(zero(ptr, p->servers[0].name));
    cr_assert(eq(int, p->servers[0].line, 4));
    conf_free(cf);
}

Test(conf, every_key)
{
    struct conf *cf = parse_ok(
        "beta:\n"
        "  listen: /tmp/shardis.sock 0660\n"
        "  hash: murmur64a\n"
        "  hash_tag: \"{}\"\n"
        "  distribution: jedis\n"
        "  jedis_version: 2\n"
        "  timeout: 400\n"
        "  backlog: 1024\n"
        "  client_connections: 100\n"
        "  redis: true\n"
        "  redis_auth: s3cret\n"
        "  redis_db: 3\n"
        "  server_connections: 2\n"
        "  preconnect: true\n"
        "  auto_eject_hosts: true\n"
        "  server_retry_timeout: 1000\n"
        "  server_failure_limit: 3\n"
        "  tcpkeepalive: true\n"
        "  reuseport: true\n"
        "  eject_mode: rehash\n"
        "  admin_commands: true\n"
        "  keyless_user: shardis-keyless\n"
        "  keyless_password: kpw\n"
        "  idgen:\n"
        "    epoch_ms: 1500000000000\n"
        "    max_ahead_ms: 100\n"
        "    restart_guard_ms: 50\n"
        "    types: {user: 1, token: 3842}\n"
        "    fixed: {users: user, all: default}\n"
        "  migration_rate: 0\n"
        "  migration_batch: 7\n"
        "  migrate_timeout: 900\n"
        "  migrate_retries: 0\n"
        "  lock_max_ms: 300\n"
        "  bigkey_bytes: 1000\n"
        "  servers:\n"
        "   - 10.0.0.1:6379:2 one\n"
        "   - '[::1]:6380:1'\n"
        "   - /var/run/redis.sock:3 sock\n");
    const struct conf_pool *p = conf_pool(cf, "beta");

    cr_assert(not(zero(ptr, (void *)p)));
    cr_assert(eq(int, p->listen.unix_socket, 1));
    cr_assert(eq(str, p->listen.host, "/tmp/shardis.sock"));
    cr_assert(eq(u32, p->listen.perm, 0660));
    cr_assert(eq(int, p->hash, RING_HASH_MURMUR64A));
    cr_assert(memcmp(p->hash_tag, "{}", 2) == 0);
    cr_assert(eq(int, p->distribution, RING_DIST_JEDIS));
    cr_assert(eq(int, p->jedis_version, 2));
    cr_assert(eq(int, p->timeout, 400));
    cr_assert(eq(int, p->backlog, 1024));
    cr_assert(eq(int, p->client_connections, 100));
    cr_assert(eq(str, p->redis_auth, "s3cret"));
    cr_assert(eq(str, p->keyless_user, "shardis-keyless"));
    cr_assert(eq(str, p->keyless_password, "kpw"));
    cr_assert(eq(int, p->redis_db, 3));
    cr_assert(eq(int, p->server_connections, 2));
    cr_assert(eq(int, p->preconnect && p->auto_eject_hosts && p->tcpkeepalive &&
                 p->reuseport && p->admin_commands, 1));
    cr_assert(eq(int, p->server_retry_timeout, 1000));
    cr_assert(eq(int, p->server_failure_limit, 3));
    cr_assert(eq(int, p->eject_mode, CONF_EJECT_REHASH));
    cr_assert(eq(i64, p->idgen.epoch_ms, 1500000000000LL));
    cr_assert(eq(i64, p->idgen.max_ahead_ms, 100));
    cr_assert(eq(i64, p->idgen.restart_guard_ms, 50));
    cr_assert(eq(sz, p->idgen.ntypes, 2));
    cr_assert(eq(str, p->idgen.types[1].name, "token"));
    cr_assert(eq(u32, p->idgen.types[1].code, 3842));
    cr_assert(eq(sz, p->idgen.nfixed, 2));
    cr_assert(eq(str, p->idgen.fixed[0].type, "user"));
    cr_assert(eq(int, p->migration_rate, 0));
    cr_assert(eq(int, p->migration_batch, 7));
    cr_assert(eq(int, p->migrate_timeout, 900));
    cr_assert(eq(int, p->migrate_retries, 0));
    cr_assert(eq(int, p->lock_max_ms, 300));
    cr_assert(eq(int, p->bigkey_bytes, 1000));
    /* The text is kept: a migration records it on the backends. */
    cr_assert(eq(sz, cf->textlen, strlen(cf->text)));
    cr_assert(not(zero(ptr, strstr(cf->text, "lock_max_ms: 300\n"))));

    cr_assert(eq(sz, p->nservers, 3));
    cr_assert(eq(str, p->servers[0].name, "one"));
    cr_assert(eq(u32, p->servers[0].weight, 2));
    cr_assert(eq(str, p->servers[1].addr.text, "[::1]:6380"));
    cr_assert(eq(str, p->servers[1].addr.host, "::1"));
    cr_assert(eq(u16, p->servers[1].addr.port, 6380));
    cr_assert(eq(int, p->servers[2].addr.unix_socket, 1));
    cr_assert(eq(str, p->servers[2].addr.host, "/var/run/redis.sock"));
    cr_assert(eq(u16, p->servers[2].addr.port, 0));
    conf_free(cf);
}

Test(conf, pools_and_their_rings)
{
    struct conf *cf = parse_ok(
        "a:\n"
        "  listen: 127.0.0.1:1\n"
        "  servers: ['127.0.0.1:6379:1', '127.0.0.1:6380:1', '127.0.0.1:6381:1']\n"
        "b:\n"
        "  listen: 127.0.0.1:2\n"
        "  distribution: modula\n"
        "  servers: ['127.0.0.1:7000:1 x']\n");
    struct ring *r;
    char err[CONF_ERRLEN];

    cr_assert(eq(sz, cf->npools, 2));
    cr_assert(zero(ptr, (void *)conf_pool(cf, "c")));
    cr_assert(eq(int, conf_pool_ring(conf_pool(cf, "a"), &r, err, sizeof(err)), 0));
    /* The ketama golden placement from twemproxy. */
    cr_assert(eq(str, (char *)ring_server_label(r, ring_lookup(r, "foo", 3)), "127.0.0.1:6381"));
    ring_unref(r);
    cr_assert(eq(int, conf_pool_ring(conf_pool(cf, "b"), &r, err, sizeof(err)), 0));
    cr_assert(eq(str, (char *)ring_server_label(r, 0), "x"));
    ring_unref(r);
    conf_free(cf);
}

Test(conf, example_file_is_valid)
{
    struct conf *cf;
    char err[CONF_ERRLEN];
    int rc = conf_load(&cf, SOURCE_ROOT "/conf/example.yml", err, sizeof(err));
    cr_assert(eq(int, rc, 0), "%s", err);
    const struct conf_pool *p = conf_pool(cf, NULL);
    cr_assert(eq(str, p->listen.text, "127.0.0.1:6380"));
    cr_assert(eq(sz, p->nservers, 3));
    cr_assert(eq(u16, p->servers[2].addr.port, 7003));
    cr_assert(eq(int, p->has_hash_tag, 1));
    conf_free(cf);
}

Test(conf, load_reports_missing_file)
{
    struct conf *cf;
    char err[CONF_ERRLEN];
    cr_assert(eq(int, conf_load(&cf, "/nonexistent/x.yml", err, sizeof(err)), -ENOENT));
    cr_assert(not(zero(ptr, strstr(err, "/nonexistent/x.yml: cannot open"))));
    cr_assert(zero(ptr, cf));
}

/* Bad files: each must fail with exactly this prefix (file:line:col) and
 * contain the explanation. */
struct bad_case {
    char yml[400];
    char where[24];
    char what[160];
};

#define HEAD "alpha:\n  listen: 127.0.0.1:22121\n"
#define SERVERS "  servers:\n   - 127.0.0.1:6379:1\n"
#define LONG16 "xxxxxxxxxxxxxxxx"
#define LONG256 LONG16 LONG16 LONG16 LONG16 LONG16 LONG16 LONG16 LONG16 \
                LONG16 LONG16 LONG16 LONG16 LONG16 LONG16 LONG16 LONG16

/* client_output_buffer_limit and maxmemory_clients: redis-server's sizes
 * (k and m are 1000s, kb and mb 1024s, any case), a class left out keeps
 * its defaults. */
Test(conf, client_memory_limits)
{
    struct conf *cf = parse_ok(HEAD "  maxmemory_clients: 64MB\n" SERVERS);
    const struct conf_pool *p = conf_pool(cf, NULL);

    cr_assert(eq(i64, p->maxmemory_clients, 64LL << 20));
    cr_assert(eq(i64, p->client_limits[CONF_CLIENT_NORMAL].hard, 512LL << 20));
    cr_assert(eq(i64, p->client_limits[CONF_CLIENT_NORMAL].soft, 256LL << 20));
    cr_assert(eq(int, p->client_limits[CONF_CLIENT_NORMAL].soft_seconds, 60));
    cr_assert(eq(i64, p->client_limits[CONF_CLIENT_PUBSUB].hard, 32LL << 20));
    cr_assert(eq(i64, p->client_limits[CONF_CLIENT_PUBSUB].soft, 8LL << 20));
    cr_assert(eq(int, p->client_limits[CONF_CLIENT_PUBSUB].soft_seconds, 60));
    conf_free(cf);

    cf = parse_ok(HEAD "  maxmemory_clients: 0\n"
                  "  client_output_buffer_limit: \"pubsub 2k 1kb 5  Normal 0 3m 0\"\n" SERVERS);
    p = conf_pool(cf, NULL);
    cr_assert(eq(i64, p->maxmemory_clients, 0));
    cr_assert(eq(i64, p->client_limits[CONF_CLIENT_PUBSUB].hard, 2000));
    cr_assert(eq(i64, p->client_limits[CONF_CLIENT_PUBSUB].soft, 1024));
    cr_assert(eq(int, p->client_limits[CONF_CLIENT_PUBSUB].soft_seconds, 5));
    cr_assert(eq(i64, p->client_limits[CONF_CLIENT_NORMAL].hard, 0));
    cr_assert(eq(i64, p->client_limits[CONF_CLIENT_NORMAL].soft, 3000000));
    cr_assert(eq(int, p->client_limits[CONF_CLIENT_NORMAL].soft_seconds, 0));
    conf_free(cf);
}

Test(conf, databases)
{
    char err[CONF_ERRLEN];
    struct conf *cf = parse_ok(HEAD SERVERS);

    cr_assert(eq(int, conf_pool(cf, NULL)->databases, 16));
    conf_free(cf);
    /* A config from before databases, redis_db 20: the servers have 21. */
    cf = parse_ok(HEAD "  redis_db: 20\n" SERVERS);
    cr_assert(eq(int, conf_pool(cf, NULL)->databases, 21));
    conf_free(cf);
    cf = parse_ok(HEAD "  databases: 1\n" SERVERS);
    cr_assert(eq(int, conf_pool(cf, NULL)->databases, 1));
    conf_free(cf);
    const char bad[] = HEAD "  databases: 4\n  redis_db: 4\n" SERVERS;
    cr_assert(eq(int, conf_parse(&cf, "t.yml", bad, sizeof(bad) - 1, err, sizeof(err)),
                 -EINVAL));
    cr_assert(eq(str, err, "t.yml:4:13: redis_db (4) must be less than databases (4)"), "%s",
              err);
}

Test(conf, redis_auth_length)
{
    char yml[5000], err[CONF_ERRLEN];
    struct conf *cf;

    for (int len = 4096; len <= 4097; len++) {
        int n = snprintf(yml, sizeof(yml), HEAD "  redis_auth: %0*d\n" SERVERS, len, 7);
        int rc = conf_parse(&cf, "t.yml", yml, (size_t)n, err, sizeof(err));
        if (len == 4096) {
            cr_assert(eq(int, rc, 0), "%s", err);
            cr_assert(eq(sz, strlen(conf_pool(cf, NULL)->redis_auth), 4096));
            conf_free(cf);
        } else {
            cr_assert(eq(int, rc, -EINVAL));
            cr_assert(eq(str, err, "t.yml:3:15: redis_auth is longer than 4096 bytes"));
        }
    }
}

#define TLS "  tls_cert_file: /c\n  tls_key_file: /k\n"

ParameterizedTestParameters(conf, errors)
{
    static struct bad_case cases[] = {
        {HEAD "  lisen: x\n" SERVERS, "t.yml:3:3: ",
         "unknown key 'lisen' in pool 'alpha'; expected one of: listen, hash,"},
        {HEAD "  hash: fnv2\n" SERVERS, "t.yml:3:9: ",
         "unknown hash 'fnv2'; expected one of: one_at_a_time, md5,"},
        {HEAD "  distribution: vnode\n" SERVERS, "t.yml:3:17: ",
         "unknown distribution 'vnode'; expected one of: ketama, jedis"},
        {HEAD "  timeout: 4\n  timeout: 5\n" SERVERS, "t.yml:4:3: ",
         "duplicate key 'timeout' (first at line 3)"},
        {HEAD "  servers: []\n", "t.yml:3:12: ", "pool 'alpha' has no servers"},
        {HEAD "  maxmemory_clients: 1tb\n" SERVERS, "t.yml:3:22: ",
         "maxmemory_clients '1tb' is not a size; expected a number of bytes"},
        {HEAD "  maxmemory_clients: -1\n" SERVERS, "t.yml:3:22: ",
         "maxmemory_clients '-1' is not a size"},
        {HEAD "  maxmemory_clients: 99999999999999999999\n" SERVERS, "t.yml:3:22: ",
         "maxmemory_clients '99999999999999999999' is not a size"},
        {HEAD "  client_output_buffer_limit: normal 1mb 1mb\n" SERVERS, "t.yml:3:31: ",
         "client_output_buffer_limit 'normal 1mb 1mb' is not groups of four words"},
        {HEAD "  client_output_buffer_limit: replica 1mb 1mb 1\n" SERVERS, "t.yml:3:31: ",
         "client_output_buffer_limit: unknown class 'replica'; expected normal or pubsub"},
        {HEAD "  client_output_buffer_limit: pubsub 1mb x 1\n" SERVERS, "t.yml:3:31: ",
         "client_output_buffer_limit: '1mb x 1' for pubsub is not <hard> <soft> <soft seconds>"},
        {HEAD, "t.yml:1:1: ", "pool 'alpha' has no servers"},
        {"alpha:\n" SERVERS, "t.yml:1:1: ", "pool 'alpha' has no listen address"},
        {HEAD SERVERS "beta:\n  listen: 127.0.0.1:22121\n" SERVERS, "t.yml:6:11: ",
         "listens on '127.0.0.1:22121', as pool 'alpha' does (line 1, its listen)"},
        {HEAD "  tls_listen: 127.0.0.1:22121\n" TLS SERVERS, "t.yml:3:15: ",
         "pool 'alpha' listens on '127.0.0.1:22121', as pool 'alpha' does (line 1, its listen)"},
        {HEAD "  tls_listen: 127.0.0.1:6380\n" TLS SERVERS "beta:\n  listen: 127.0.0.1:6380\n"
         SERVERS, "t.yml:9:11: ", "as pool 'alpha' does (line 1, its tls_listen)"},
        {HEAD "  tls_listen: 127.0.0.1:6380\n" SERVERS, "t.yml:3:15: ",
         "tls_listen needs tls_cert_file and tls_key_file"},
        {HEAD "  tls_cert_file: /c\n" SERVERS, "t.yml:3:18: ",
         "tls_cert_file applies only to a TLS listener: add tls_listen"},
        {HEAD "  tls_listen: 127.0.0.1:6380\n" TLS "  tls_auth_clients: yes\n" SERVERS,
         "t.yml:6:21: ", "tls_auth_clients asks for clients' certificates: add tls_ca_cert_file"},
        {HEAD "  tls_listen: 127.0.0.1:6380\n" TLS "  tls_auth_clients: maybe\n" SERVERS,
         "t.yml:6:21: ", "unknown tls_auth_clients 'maybe'; expected one of: yes, no, optional"},
        {HEAD "  tls_handshake_timeout: 100\n" SERVERS, "t.yml:3:26: ",
         "tls_handshake_timeout applies only with tls_listen or backend_tls: true"},
        {HEAD "  backend_tls_ca_cert_file: /c\n" SERVERS, "t.yml:3:29: ",
         "backend_tls_ca_cert_file applies only with backend_tls: true"},
        {HEAD "  backend_tls: true\n  backend_tls_cert_file: /c\n" SERVERS, "t.yml:4:26: ",
         "backend_tls_cert_file and backend_tls_key_file go together"},
        {HEAD "  redis: false\n" SERVERS, "t.yml:3:10: ", "memcached pools are not supported"},
        {HEAD "  redis: maybe\n" SERVERS, "t.yml:3:10: ", "expected true or false"},
        {HEAD "  servers:\n   - 127.0.0.1:6379:0\n", "t.yml:4:6: ",
         "invalid weight '0'; expected a whole number from 1 to 1000000"},
        {HEAD "  servers:\n   - 127.0.0.1:6379:-1\n", "t.yml:4:6: ", "invalid weight '-1'"},
        {HEAD "  servers:\n   - 127.0.0.1:6379:x1\n", "t.yml:4:6: ", "invalid weight 'x1'"},
        {HEAD "  servers:\n   - 127.0.0.1:6379\n", "t.yml:4:6: ",
         "is not host:port:weight [name] or /unix/path:weight [name]"},
        {HEAD "  servers:\n   - 127.0.0.1:70000:1\n", "t.yml:4:6: ",
         "invalid port '70000'; expected 1 to 65535"},
        {HEAD "  servers:\n   - ::1:6379:1\n", "t.yml:4:6: ", "an IPv6 host goes in brackets"},
        {HEAD "  servers:\n   - 127.0.0.1:6379:1 a\n   - 127.0.0.1:6380:1 a\n", "t.yml:5:6: ",
         "server name 'a' is already used at line 4"},
        {HEAD "  servers:\n   - 127.0.0.1:6379:1\n   - 127.0.0.1:6379:2\n", "t.yml:5:6: ",
         "server address '127.0.0.1:6379' is already listed at line 4"},
        {HEAD "  servers:\n   - 127.0.0.1:6379:1 a b\n", "t.yml:4:6: ", "must be one word"},
        {HEAD "  servers: 127.0.0.1:6379:1\n", "t.yml:3:12: ", "servers must be a list"},
        {HEAD "  hash_tag: \"{\"\n" SERVERS, "t.yml:3:13: ", "is not two characters"},
        {HEAD "  distribution: jedis\n  hash: fnv1a_64\n" SERVERS, "t.yml:4:9: ",
         "distribution 'jedis' hashes with murmur64a or md5"},
        {HEAD "  hash: murmur64a\n" SERVERS, "t.yml:3:9: ", "only for distribution 'jedis'"},
        {HEAD "  jedis_version: 2\n" SERVERS, "t.yml:3:18: ",
         "jedis_version applies only to distribution: jedis"},
        {HEAD "  distribution: jedis\n  jedis_version: 4\n" SERVERS, "t.yml:4:18: ",
         "expected a whole number from 2 to 3"},
        {HEAD "  keyless_user: kl\n" SERVERS, "t.yml:3:17: ",
         "keyless_user and keyless_password go together"},
        {HEAD "  keyless_password: pw\n" SERVERS, "t.yml:3:21: ",
         "keyless_user and keyless_password go together"},
        {HEAD "  keyless_user: ''\n  keyless_password: pw\n" SERVERS, "t.yml:3:17: ",
         "keyless_user is empty"},
        {HEAD "  backend_user: app\n" SERVERS, "t.yml:3:17: ",
         "backend_user and backend_password go together"},
        {HEAD "  internal_password: pw\n" SERVERS, "t.yml:3:22: ",
         "internal_user and internal_password go together"},
        {HEAD "  internal_user: ''\n  internal_password: pw\n" SERVERS, "t.yml:3:18: ",
         "internal_user is empty"},
        {HEAD "  timeout: soon\n" SERVERS, "t.yml:3:12: ", "timeout 'soon' is not a valid number"},
        {HEAD "  timeout: -5\n" SERVERS, "t.yml:3:12: ", "from 1 to 2147483647"},
        {HEAD "  backlog: 99999999999999999999\n" SERVERS, "t.yml:3:12: ", "not a valid number"},
        {HEAD "  eject_mode: later\n" SERVERS, "t.yml:3:15: ", "expected one of: fail, rehash"},
        {HEAD "  listen: 127.0.0.1:1\n" SERVERS, "t.yml:3:3: ",
         "duplicate key 'listen' (first at line 2)"},
        {"alpha:\n  listen: nowhere\n" SERVERS, "t.yml:2:11: ",
         "listen 'nowhere' is not an address; expected host:port"},
        {"alpha:\n  listen: /tmp/s.sock 999\n" SERVERS, "t.yml:2:11: ",
         "invalid permissions '999'"},
        {"alpha:\n  listen: \"a\\0b:1\"\n" SERVERS, "t.yml:2:11: ", "contains a NUL byte"},
        {HEAD "  idgen: {colour: red}\n" SERVERS, "t.yml:3:11: ", "unknown key 'idgen.colour'"},
        {HEAD "  idgen: {subkeys: {name: n, nick: n}}\n" SERVERS, "t.yml:3:36: ",
         "idgen.subkeys: 'name' and 'nick' both shorten to 'n'"},
        {HEAD "  idgen: {subkeys: {name: n, n: x}}\n" SERVERS, "t.yml:3:33: ",
         "idgen.subkeys: 'n' is both a long and a short name"},
        {HEAD "  idgen: {subkeys: {city: c, name: city}}\n" SERVERS, "t.yml:3:36: ",
         "idgen.subkeys: 'city' is both a long and a short name"},
        {HEAD "  idgen: {subkeys: {name: name}}\n" SERVERS, "t.yml:3:27: ",
         "idgen.subkeys: 'name' is both a long and a short name"},
        {HEAD "  idgen: {subkeys: {name: ''}}\n" SERVERS, "t.yml:3:27: ",
         "idgen.subkeys 'name' has an empty short name"},
        {HEAD "  sentinels: [127.0.0.1:26379]\n" SERVERS, "t.yml:5:4: ",
         "server '127.0.0.1:6379' has no name: with sentinels every server is named"},
        {HEAD "  sentinels: []\n" SERVERS, "t.yml:3:14: ", "sentinels is empty"},
        {HEAD "  sentinels: [h:1]\n  eject_mode: rehash\n  servers: ['h:2:1 m']\n",
         "t.yml:4:15: ", "eject_mode: rehash would move a failing master's keys"},
        {HEAD "  sentinels: [a:1, a:1]\n" SERVERS, "t.yml:3:20: ", "sentinel 'a:1' is listed twice"},
        {HEAD "  sentinels: [/tmp/s.sock]\n" SERVERS, "t.yml:3:15: ",
         "a Sentinel is reached over TCP"},
        {HEAD "  sentinels: 127.0.0.1:1\n" SERVERS, "t.yml:3:14: ", "sentinels must be a list"},
        {HEAD "  sentinel_auth: pw\n" SERVERS, "t.yml:3:18: ",
         "sentinel_auth applies only with sentinels"},
        {HEAD "  stats_listen: /tmp/m.sock\n" SERVERS, "t.yml:3:17: ",
         "stats_listen '/tmp/m.sock': metrics are served over TCP"},
        {HEAD "  slowlog_log_slower_than: -2\n" SERVERS, "t.yml:3:28: ",
         "slowlog_log_slower_than"},
        {HEAD "  read_from: replica\n" SERVERS, "t.yml:3:14: ",
         "read_from: replica needs sentinels: they list each master's replicas"},
        {HEAD "  sentinels: [h:1]\n  read_from: slave\n  servers: ['h:2:1 m']\n",
         "t.yml:4:14: ", "unknown read_from 'slave'; expected one of: master, replica, "
         "prefer_replica"},
        {HEAD "  idgen: {types: {user: 1}, minify: [user]}\n" SERVERS, "t.yml:3:10: ",
         "idgen.minify needs idgen.subkeys"},
        {HEAD "  idgen: {subkeys: {name: n}, minify: [person]}\n" SERVERS, "t.yml:3:10: ",
         "idgen.minify names type 'person', which is not in idgen.types (or 'default')"},
        {HEAD "  idgen: {types: {u: 1}, subkeys: {a: b}, minify: [u, u]}\n" SERVERS,
         "t.yml:3:55: ", "idgen.minify names type 'u' twice"},
        {HEAD "  idgen: {subkeys: {a: b}, minify: default}\n" SERVERS, "t.yml:3:36: ",
         "idgen.minify must be a list of type names, not a scalar"},
        {HEAD "  idgen: {subkeys: {a: " LONG256 "}}\n" SERVERS, "t.yml:3:24: ",
         "idgen.subkeys 'a' has a short name of more than 255 bytes"},
        {HEAD "  idgen: {types: {user: 3843}}\n" SERVERS, "t.yml:3:25: ",
         "expected a whole number from 0 to 3842"},
        {HEAD "  idgen: {types: {a: 1, b: 1}}\n" SERVERS, "t.yml:3:28: ",
         "type code 1 is already type 'a'"},
        {HEAD "  idgen: {fixed: {users: person}}\n" SERVERS, "t.yml:3:10: ",
         "names type 'person', which is not in idgen.types"},
        {HEAD "  idgen: {types: {default: 7}}\n" SERVERS, "t.yml:3:19: ",
         "type name 'default' is not allowed"},
        {HEAD "  idgen: {types: {2fa: 7}}\n" SERVERS, "t.yml:3:19: ",
         "type name '2fa' is not allowed: it must not start with a digit"},
        {HEAD "  idgen: {max_ahead_ms: 100, restart_guard_ms: 100}\n" SERVERS, "t.yml:3:10: ",
         "idgen.restart_guard_ms (100) must be less than idgen.max_ahead_ms (100)"},
        {HEAD "  idgen: {max_ahead_ms: 1000}\n" SERVERS, "t.yml:3:10: ",
         "idgen.restart_guard_ms (2000) must be less than idgen.max_ahead_ms (1000)"},
        {HEAD "  distribution: jedis\n  servers: ['h:1:9000', 'h:2:1001']\n", "t.yml:4:12: ",
         "the total weight 10001 is over 10000"},
        {HEAD "  servers: {a: b}\n", "t.yml:3:12: ", "servers must be a list"},
        {"alpha: [1, 2]\n", "t.yml:1:8: ", "a pool must be a mapping, not a list"},
        {"- a\n- b\n", "t.yml:1:1: ", "the top level must map pool names to pools"},
        {"", "t.yml:1:1: ", "no pools"},
        {"# only a comment\n", "t.yml:1:1: ", "no pools"},
        {"alpha:\n  listen: [unclosed\n", "t.yml:3:1: ", "invalid YAML"},
        {"alpha: {listen: 1\n", "t.yml:2:1: ", "invalid YAML"},
        {"\talpha: 1\n", "t.yml:1:1: ", "invalid YAML"},
    };
    return cr_make_param_array(struct bad_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct bad_case *bc, conf, errors)
{
    struct conf *cf = (void *)1;
    char err[CONF_ERRLEN];
    int rc = conf_parse(&cf, "t.yml", bc->yml, strlen(bc->yml), err, sizeof(err));

    cr_assert(eq(int, rc, -EINVAL), "accepted:\n%s", bc->yml);
    cr_assert(zero(ptr, cf));
    cr_assert(strncmp(err, bc->where, strlen(bc->where)) == 0,
              "got '%s', want prefix '%s'", err, bc->where);
    cr_assert(not(zero(ptr, strstr(err, bc->what))), "got '%s', want '%s'", err, bc->what);
}

/* conf.h -- the shardis configuration: a superset of twemproxy's
 * nutcracker.yml.
 *
 * A file that runs under nutcracker runs under shardis with the same
 * meaning and the same key placement. Top-level keys are pool names; each
 * pool has a listen address, servers and options (twemproxy's, with its
 * defaults, plus shardis's own). Parsing is pure: bytes in, a struct conf
 * or an error out. Every error names file:line:col, says what is wrong and
 * what is allowed, and the parser never crashes on any input (there is a
 * fuzz target for conf_parse).
 *
 * A struct conf owns all its memory, and is immutable once parsed: what a
 * process shares of it (the pools' settings, users, the text) is shared
 * whole, by reference count (conf_ref), and swapped whole on a reload. */
#ifndef SHARDIS_CONF_H
#define SHARDIS_CONF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ring/ring.h"

#define CONF_ERRLEN 512

/* Where a pool listens or a server lives. */
struct conf_addr {
    char    *text;          /* as written: "host:port" or "/path" */
    char    *host;          /* host without brackets, or the unix path */
    uint16_t port;          /* 0 for a unix socket */
    uint32_t perm;          /* unix socket mode (listen only; 0: default) */
    bool     unix_socket;
};

struct conf_server {
    struct conf_addr addr;
    uint32_t weight;        /* >= 1 */
    char    *name;          /* optional name, NULL if none */
    int      line, col;     /* where it was written, 1-based */
};

/* What happens to the keys of a backend that keeps failing. */
enum conf_eject {
    CONF_EJECT_FAIL,        /* keep the ring; fail its keys fast (default) */
    CONF_EJECT_REHASH,      /* twemproxy: drop it from the ring for a while */
};

/* Where a read-only command goes (read_from; proxy/pool.c decides). */
enum conf_read_from {
    CONF_READ_MASTER,           /* every command to the master (default) */
    CONF_READ_REPLICA,          /* reads to a replica; none up: an error */
    CONF_READ_PREFER_REPLICA,   /* reads to a replica; none up: the master */
};

/* A client user: a line in Redis's ACL SETUSER terms ("name on >pw ~app:*
 * +@all"), compiled and checked by proxy/acl.c. */
struct conf_user {
    char    *rule;
    int      line, col;     /* where it was written, 1-based */
};

/* Whether a TLS listener asks clients for a certificate (redis-server's
 * tls-auth-clients). */
enum conf_tls_auth {
    CONF_TLS_AUTH_NO,
    CONF_TLS_AUTH_YES,          /* one signed by tls_ca_cert_file, or no handshake */
    CONF_TLS_AUTH_OPTIONAL,     /* checked if sent */
};

/* TLS: a pool's TLS listener and its connections to the servers
 * (proxy/tls.c). Each proxy's own, as listen is: a migration record never
 * brings another proxy's. Files are read again at each reload. */
struct conf_tls {
    struct conf_addr listen;        /* tls_listen; text NULL: none */
    char    *cert_file;             /* tls_cert_file, tls_key_file: both with tls_listen */
    char    *key_file;
    char    *ca_cert_file;          /* tls_ca_cert_file: verifies clients' certificates */
    enum conf_tls_auth auth_clients;/* tls_auth_clients: yes with a CA file, else no */
    int      handshake_timeout;     /* tls_handshake_timeout, ms (10000): clients' and
                                       servers' handshakes */
    bool     backend;               /* backend_tls: the servers speak TLS */
    char    *backend_ca_cert_file;  /* NULL: the system's CAs */
    char    *backend_cert_file;     /* shardis's own certificate, if they ask for one */
    char    *backend_key_file;
    char    *backend_server_name;   /* the name their certificates must bear (and SNI);
                                       NULL: each server's host or IP as written */
};

struct conf_idgen_entry {
    char    *name;
    uint32_t code;          /* type code (types) */
    char    *type;          /* type name (fixed) */
};

/* A hash field's long name and the short one stored for it (shardjs's
 * subKeys); a dictionary has at most CONF_SUBKEYS_MAX. */
#define CONF_SUBKEYS_MAX 1024
/* databases: a client's database is kept in 16 bits of each request, and
 * a server's connections for each database in use are made on first use
 * (pool.h): 1024 is more than any redis-server is run with. */
#define CONF_DATABASES_MAX 1024
#define CONF_SUBKEY_SHORT_MAX 255   /* bytes of a short name: a reply's are read in place */
struct conf_subkey {
    char    *name;
    char    *abbr;
};

struct conf_idgen {
    int64_t  epoch_ms;          /* default 1325404800000 (shardjs's epoch) */
    int64_t  max_ahead_ms;      /* default 5000 */
    int64_t  restart_guard_ms;  /* default 2000 */
    struct conf_idgen_entry *types;   /* name -> code 0..3842 */
    size_t   ntypes;
    struct conf_idgen_entry *fixed;   /* name -> type name */
    size_t   nfixed;
    /* subkeys: long -> short, a bijection in which no short name is also a
     * long one (SHARD.MINIFY, SHARD.MAXIFY). A reload may add names, never
     * change or remove one: what was stored under it would read wrongly. */
    struct conf_subkey *subkeys;
    size_t   nsubkeys;
    /* minify: the types, by name (or "default"), whose hashes have their
     * field names mapped by subkeys on the way to the servers and back
     * (proxy/minify.c), and their codes, each once. Like subkeys, fixed for
     * the life of the data: a reload may not change the list. */
    char   **minify;
    uint32_t *minify_types;
    size_t   nminify;
};

/* What a client may make shardis hold (proxy/client.c): redis-server's
 * client-output-buffer-limit, by class. Closed at once past hard, or once
 * past soft for soft_seconds on end; 0 is no limit. */
enum conf_client_class {
    CONF_CLIENT_NORMAL,
    CONF_CLIENT_PUBSUB,         /* subscribed to a channel or pattern */
    CONF_CLIENT_CLASSES,
};

struct conf_client_limit {
    long long hard, soft;       /* bytes */
    int       soft_seconds;
};

struct conf_pool {
    struct conf *owner;             /* the config it is part of (conf_ref) */
    char    *name;
    int      line, col;
    struct conf_addr listen;
    struct conf_addr stats_listen;  /* GET /metrics (proxy/metrics.c); text NULL: none */

    /* twemproxy's keys, with its defaults */
    enum ring_hash hash;            /* fnv1a_64 (murmur64a for jedis) */
    char     hash_tag[2];
    bool     has_hash_tag;
    enum ring_dist distribution;    /* ketama */
    int      timeout;               /* ms; -1 = none */
    int      backlog;               /* 512 */
    int      client_connections;    /* 0 = unlimited */
    bool     redis;                 /* must be true */
    char    *redis_auth;            /* NULL = none */
    int      redis_db;              /* 0: the database a client starts in */
    int      databases;             /* 16: SELECT takes 0 .. databases - 1 */
    int      server_connections;    /* 1 */
    bool     preconnect;
    bool     auto_eject_hosts;
    int      server_retry_timeout;  /* 30000 ms */
    int      server_failure_limit;  /* 2 */
    bool     tcpkeepalive;
    bool     reuseport;

    /* shardis's keys */
    int      jedis_version;         /* 3 */
    enum conf_eject eject_mode;     /* fail */
    bool     admin_commands;        /* false */
    /* An ACL user on every server with no key (and no channel) access: a
     * script that declares no key runs as it (proxy/pin.c), so it may do
     * anything but touch data, which could live on another server. Both
     * or neither; NULL: such scripts run read-only (EVAL_RO ...). */
    char    *keyless_user;
    char    *keyless_password;
    /* The ACL users shardis signs in as on the servers (both or neither of
     * each pair; NULL: AUTH redis_auth, as before). backend_user carries
     * clients' commands, and so their scripts: least privilege, none of
     * shardis's keys or channels. internal_user does shardis's own work:
     * migration, the group, SHARD.GENKEY's sequences, admin commands,
     * keyless_user's check. */
    char    *backend_user;
    char    *backend_password;
    char    *internal_user;
    char    *internal_password;
    /* Client users (proxy/acl.c); none: the default user alone, whose
     * password is redis_auth. */
    struct conf_user *users;
    size_t   nusers;
    struct conf_tls tls;
    /* High availability (proxy/sentinel.c): the Sentinels watching the
     * servers. With any, every server has a name, the master name they
     * know it by, and its address is only the first guess: the ring is
     * built from the names, so a failover moves no key. */
    struct conf_addr *sentinels;
    size_t   nsentinels;
    char    *sentinel_auth;         /* the Sentinels' password, or NULL */
    enum conf_read_from read_from;  /* master; the others need sentinels, who list
                                       each master's replicas */
    /* live resharding after a reload (proxy/mig.c) */
    int      migration_rate;        /* keys/s the background mover may move; 0: no limit
                                       (3000; a reload can change it mid-migration) */
    int      migration_batch;       /* keys per MIGRATE of the mover (50) */
    int      migrate_timeout;       /* ms: MIGRATE's own timeout (2000) */
    int      migrate_retries;       /* a failed MIGRATE is tried again this often (3) */
    int      lock_max_ms;           /* a request for a moving key held longer than this
                                       while a reload drains gets -TRYAGAIN (2000) */
    int      bigkey_bytes;          /* the mover moves keys bigger than this (MEMORY USAGE)
                                       last, one at a time (8 MiB) */
    /* memory (proxy/client.c): client_output_buffer_limit, by class
     * (normal 512mb 256mb 60, pubsub 32mb 8mb 60), and maxmemory_clients,
     * all of the pool's clients together (1gb; 0: no limit) */
    struct conf_client_limit client_limits[CONF_CLIENT_CLASSES];
    long long maxmemory_clients;
    /* operations (proxy/slowlog.c) */
    int      slowlog_log_slower_than;   /* us from request read to reply complete: a
                                           request as slow is logged; -1 none (10000) */
    int      slowlog_max_len;       /* entries kept (128) */
    struct conf_idgen idgen;

    struct conf_server *servers;
    size_t   nservers;
};

/* The most event loops a process runs (threads:, --threads). */
#define CONF_THREADS_MAX 64
#define CONF_THREADS_MAX_TEXT "64"

struct conf {
    char    *path;                  /* the name errors use */
    char    *text;                  /* the text it was parsed from (a migration keeps
                                       it on the backends: proxy/mig.c) */
    size_t   textlen;
    struct conf_pool *pools;
    size_t   npools;
    int      threads;               /* event loops (threads: N | auto): -1 not said;
                                       0 auto, one per core the process may run on */
    atomic_uint refs;               /* its holders (conf_ref) */
};

/* Parse a config held in memory. `path` names it in error messages. On
 * success *out is a new conf for conf_free; on failure *out is NULL, err
 * holds "path:line:col: what is wrong", and the return is -EINVAL (bad
 * file) or -ENOMEM. */
int conf_parse(struct conf **out, const char *path, const char *buf, size_t len,
               char *err, size_t errlen);

/* Read and parse a file. Also -errno when it cannot be read. */
int conf_load(struct conf **out, const char *path, char *err, size_t errlen);

/* A config's lifetime: conf_parse's caller holds its first reference;
 * conf_ref takes another (and returns cf), conf_unref drops one, and the
 * last one frees it. In the proxy the loop holds the running config
 * (cur_loop->conf) and each pool the one it routes by (pool_set_conf), so
 * one a reload replaced lives until the last pool has switched off it
 * (group.c), however many reloads came meanwhile. The count is atomic and
 * nothing in a parsed config changes, so holders on different threads
 * share one without a lock. conf_free: the same as
 * conf_unref, for a config no one else holds (it aborts if one does).
 * NULL: nothing. */
struct conf *conf_ref(struct conf *cf);
void conf_unref(struct conf *cf);
void conf_free(struct conf *cf);
/* How many configs this process holds: parsed and not freed yet (INFO's
 * configs_held: the running one and those a pool still routes by). */
size_t conf_held(void);

/* The pool called name, or the first pool when name is NULL; NULL if none. */
const struct conf_pool *conf_pool(const struct conf *cf, const char *name);

/* The first setting, other than the servers and the migration's pace,
 * in which a (the file) and b (a migration record) differ, by its key's
 * name; NULL if none. A record on the servers is followed only if it
 * differs from the file in nothing else (proxy/mig_record.c); of idgen,
 * only the epoch must be the same, and b's subkeys kept by a. */
const char *conf_pool_differs(const struct conf_pool *a, const struct conf_pool *b);
/* idgen.subkeys: the short name of the long one name[0 .. len) (maxify:
 * the long name of a short one), or NULL if the dictionary has none. */
const char *conf_subkey(const struct conf_pool *pc, const char *name, size_t len, bool maxify);
/* The first long name of a's subkeys that b drops or shortens otherwise
 * (a reload may only add names), or NULL. */
const char *conf_subkeys_kept(const struct conf_pool *a, const struct conf_pool *b);
/* Whether a and b minify the same types (idgen.minify, in any order). */
bool conf_minify_eq(const struct conf_pool *a, const struct conf_pool *b);
/* Two optional settings are the same: both NULL or equal strings. */
bool conf_str_eq(const char *a, const char *b);
/* Swap what is each proxy's own, its listen addresses and TLS settings,
 * between a and b (each conf goes on owning what it holds): a pool taken
 * from a migration record listens, and speaks TLS, as this proxy's file
 * says, not as the record's writer did. */
void conf_pool_swap_own(struct conf_pool *a, struct conf_pool *b);

/* Build the pool's ring (ring_create's contract). */
int conf_pool_ring(const struct conf_pool *pool, struct ring **out,
                   char *err, size_t errlen);

#endif

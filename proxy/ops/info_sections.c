/* info_sections.c -- INFO's text: each section, in redis-server's order
 * and field names, from the proxy's own figures and the servers' last
 * INFO (info.c asks them); which server figure is summed, and which is a
 * maximum, a minimum or the worst status, is the tables below. Also what
 * other files read of the servers' figures: which databases hold keys
 * (info_other_databases), the servers' version (info_servers_version). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "proxy/transport/args.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/base/cmd.h"
#include "proxy/ops/info.h"
#include "proxy/ops/info_int.h"
#include "proxy/base/text.h"
#include "proxy/modules/own.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/modules/sentinel.h"
#include "proxy/core/srvuser.h"
#include "proxy/ops/stats.h"
#include "proxy/ops/totals.h"
#include "proxy/base/util.h"

double info_ops_per_sec(const struct pool *p)
{
    const struct info *in = p->info;
    uint32_t n;
    double sum = 0;

    if (in == NULL || in->nsample == 0)
        return 0;
    n = in->nsample < INFO_SAMPLES ? in->nsample : INFO_SAMPLES;
    for (uint32_t i = 0; i < n; i++)
        sum += in->samples[i];
    return sum / n;
}

/* Server s's value of name, from its last INFO, into buf; NULL if s is
 * not active, its INFO is not known yet, or has no such field. The one
 * way the servers' figures are read. */
static const char *server_field(const struct pool *p, uint32_t s, const char *name, char *buf,
                                size_t size)
{
    const struct info *in = p->info;

    if (in == NULL || s >= in->nservers || !p->servers[s].active ||
        in->servers[s].text == NULL)
        return NULL;
    return text_field(in->servers[s].text, name, buf, size);
}

/* A server's INFO tells which databases hold keys as of when it was
 * asked: keys a request of this pool made in another database show if
 * the question was asked after that request was routed and when none
 * such was alive (answered and freed: executed before the question was
 * sent). Until then the answer is "cannot tell", and a reload is to be
 * tried again a second later, when the background poll has asked again.
 * Databases from `databases` on are no client's of this pool (another
 * pool's or application's on the same servers). */
bool info_other_databases(const struct pool *p, const uint32_t *servers, uint32_t n,
                          char *why, size_t size)
{
    const struct info *in = p->info;

    if (p->conf->databases == 1)
        return false;                   /* (redis_db is every client's) */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t s = servers[i];
        const struct pool_server *ps = &p->servers[s];
        const struct info_server *is;
        is = in != NULL && s < in->nservers ? &in->servers[s] : NULL;
        if (p->other_db_seq != 0 && (is == NULL || is->clean <= p->other_db_seq)) {
            snprintf(why, size, "clients used another database than %d since server %s "
                     "last said which hold keys: try again in a second",
                     p->conf->redis_db, ps->label);
            return true;
        }
        for (int db = 0; db < p->conf->databases; db++) {
            char name[16], line[256];
            snprintf(name, sizeof(name), "db%d", db);
            if (db == p->conf->redis_db || server_field(p, s, name, line, sizeof(line)) == NULL)
                continue;               /* (a line only for a database with keys) */
            snprintf(why, size, "server %s holds keys in database %d, which resharding "
                     "does not move (only redis_db %d's keys move)", ps->label, db,
                     p->conf->redis_db);
            return true;
        }
    }
    return false;
}

/* How a servers' field is shown for the pool. */
enum agg {
    AGG_SUM,        /* counts and bytes */
    AGG_MAX,        /* a flag any server raises (loading, a save in progress) */
    AGG_MIN,        /* a time of the oldest (the last save) */
    AGG_STATUS,     /* "ok" unless a server says otherwise */
    AGG_FIRST,      /* a setting (maxmemory_policy): the first server's */
    AGG_LIMIT,      /* a limit (maxmemory): the sum, or 0 (none) if any has none */
};

struct server_field {
    const char *name;
    enum agg    agg;
};

/* (Four are shown humanized too: section_memory.) */
static const struct server_field memory_fields[] = {
    {"used_memory", AGG_SUM}, {"used_memory_rss", AGG_SUM}, {"used_memory_peak", AGG_SUM},
    {"used_memory_overhead", AGG_SUM}, {"used_memory_startup", AGG_SUM},
    {"used_memory_dataset", AGG_SUM}, {"allocator_allocated", AGG_SUM},
    {"allocator_active", AGG_SUM}, {"allocator_resident", AGG_SUM},
    {"total_system_memory", AGG_MAX}, {"used_memory_lua", AGG_SUM},
    {"used_memory_vm_eval", AGG_SUM}, {"used_memory_scripts_eval", AGG_SUM},
    {"number_of_cached_scripts", AGG_SUM}, {"number_of_functions", AGG_SUM},
    {"used_memory_vm_functions", AGG_SUM}, {"used_memory_vm_total", AGG_SUM},
    {"used_memory_functions", AGG_SUM}, {"used_memory_scripts", AGG_SUM},
    {"maxmemory", AGG_LIMIT}, {"maxmemory_policy", AGG_FIRST},
    {"mem_fragmentation_bytes", AGG_SUM}, {"mem_not_counted_for_evict", AGG_SUM},
    {"mem_replication_backlog", AGG_SUM}, {"mem_clients_slaves", AGG_SUM},
    {"mem_clients_normal", AGG_SUM}, {"mem_aof_buffer", AGG_SUM},
    {"mem_allocator", AGG_FIRST}, {"active_defrag_running", AGG_MAX},
    {"lazyfree_pending_objects", AGG_SUM}, {"lazyfreed_objects", AGG_SUM},
};

static const struct server_field persistence_fields[] = {
    {"loading", AGG_MAX}, {"async_loading", AGG_MAX}, {"current_cow_peak", AGG_MAX},
    {"current_cow_size", AGG_MAX}, {"current_fork_perc", AGG_MAX},
    {"current_save_keys_processed", AGG_SUM}, {"current_save_keys_total", AGG_SUM},
    {"rdb_changes_since_last_save", AGG_SUM}, {"rdb_bgsave_in_progress", AGG_MAX},
    {"rdb_last_save_time", AGG_MIN}, {"rdb_last_bgsave_status", AGG_STATUS},
    {"rdb_last_bgsave_time_sec", AGG_MAX}, {"rdb_current_bgsave_time_sec", AGG_MAX},
    {"rdb_saves", AGG_SUM}, {"rdb_last_cow_size", AGG_MAX},
    {"rdb_last_load_keys_expired", AGG_SUM}, {"rdb_last_load_keys_loaded", AGG_SUM},
    {"aof_enabled", AGG_MAX}, {"aof_rewrite_in_progress", AGG_MAX},
    {"aof_rewrite_scheduled", AGG_MAX}, {"aof_last_rewrite_time_sec", AGG_MAX},
    {"aof_current_rewrite_time_sec", AGG_MAX}, {"aof_last_bgrewrite_status", AGG_STATUS},
    {"aof_rewrites", AGG_SUM}, {"aof_last_write_status", AGG_STATUS},
    {"aof_last_cow_size", AGG_MAX}, {"module_fork_in_progress", AGG_MAX},
    {"module_fork_last_cow_size", AGG_MAX},
};

static const struct server_field stats_fields[] = {
    {"total_net_input_bytes", AGG_SUM}, {"total_net_output_bytes", AGG_SUM},
    {"total_net_repl_input_bytes", AGG_SUM}, {"total_net_repl_output_bytes", AGG_SUM},
    {"instantaneous_input_kbps", AGG_SUM}, {"instantaneous_output_kbps", AGG_SUM},
    {"sync_full", AGG_SUM}, {"sync_partial_ok", AGG_SUM}, {"sync_partial_err", AGG_SUM},
    {"expired_keys", AGG_SUM}, {"expired_stale_perc", AGG_MAX},
    {"expired_time_cap_reached_count", AGG_SUM}, {"expire_cycle_cpu_milliseconds", AGG_SUM},
    {"evicted_keys", AGG_SUM},   /* (evicted_clients: shardis's own, above) */
    {"total_eviction_exceeded_time", AGG_SUM}, {"current_eviction_exceeded_time", AGG_MAX},
    {"keyspace_hits", AGG_SUM}, {"keyspace_misses", AGG_SUM},
    {"pubsub_channels", AGG_SUM}, {"pubsub_patterns", AGG_SUM},
    {"pubsubshard_channels", AGG_SUM}, {"latest_fork_usec", AGG_MAX},
    {"total_forks", AGG_SUM}, {"migrate_cached_sockets", AGG_SUM},
    {"slave_expires_tracked_keys", AGG_SUM}, {"active_defrag_hits", AGG_SUM},
    {"active_defrag_misses", AGG_SUM}, {"active_defrag_key_hits", AGG_SUM},
    {"active_defrag_key_misses", AGG_SUM}, {"total_active_defrag_time", AGG_SUM},
    {"current_active_defrag_time", AGG_MAX},
    /* (tracking_*: shardis's own, above: the servers track its connections) */
    {"dump_payload_sanitizations", AGG_SUM},
};

/* sf over the pool's servers: its value as sf->agg says, in *value (and
 * *text for a setting or a status); the number of servers that have it. */
static uint32_t aggregate(const struct pool *p, const struct server_field *sf, double *value,
                          char *text, size_t size, bool *integer)
{
    double sum = 0, max = 0, min = 0;
    uint32_t known = 0;
    char buf[128];

    *integer = true;
    snprintf(text, size, "%s", sf->agg == AGG_STATUS ? "ok" : "");
    for (uint32_t s = 0; s < p->nservers; s++) {
        const char *v = server_field(p, s, sf->name, buf, sizeof(buf));
        if (v == NULL)
            continue;
        double x = strtod(v, NULL);
        *integer &= strchr(v, '.') == NULL;
        if ((known == 0 && sf->agg == AGG_FIRST) ||
            (sf->agg == AGG_STATUS && strcmp(v, "ok") != 0))
            snprintf(text, size, "%s", v);
        if (known == 0)
            max = min = x;
        sum += x;
        max = x > max ? x : max;
        min = x < min ? x : min;
        known++;
    }
    switch (sf->agg) {
    case AGG_LIMIT: sum = min == 0 ? 0 : sum; break;   /* (one with none: none) */
    case AGG_MAX:   sum = max; break;
    case AGG_MIN:   sum = min; break;
    default:        break;
    }
    *value = sum;
    return known;
}

/* fields' values over the pool's servers, as "name:value" lines. */
static void servers_lines(const struct pool *p, const struct server_field *fields, size_t n,
                          FILE *f)
{
    for (size_t i = 0; i < n; i++) {
        const struct server_field *sf = &fields[i];
        char text[128];
        double v;
        bool integer;
        if (aggregate(p, sf, &v, text, sizeof(text), &integer) == 0)
            continue;               /* no server has it (another version): neither do we */
        if (sf->agg == AGG_FIRST || sf->agg == AGG_STATUS)
            fprintf(f, "%s:%s\r\n", sf->name, text);
        else if (integer)
            fprintf(f, "%s:%.0f\r\n", sf->name, v);
        else
            fprintf(f, "%s:%.2f\r\n", sf->name, v);
    }
}

/* redis-server's bytesToHuman. */
static void human(char *buf, size_t size, double n)
{
    static const char unit[] = "KMGTPE";

    if (!(n >= 0 && n < 1e30)) {        /* (NaN, or a server's nonsense) */
        snprintf(buf, size, "0B");
        return;
    }
    if (n < 1024) {
        snprintf(buf, size, "%.0fB", n);
        return;
    }
    int u = -1;
    while (n >= 1024 && u < 5) {
        n /= 1024;
        u++;
    }
    snprintf(buf, size, "%.2f%c", n, unit[u]);
}

/* The proxy's own resident set, from /proc (0 where there is none). */
static uint64_t own_rss(void)
{
    unsigned long long size = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f == NULL)
        return 0;
    if (fscanf(f, "%llu %llu", &size, &rss) != 2)
        rss = 0;
    fclose(f);
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void section_memory(const struct pool *p, FILE *f)
{
    /* These, as their lines show them. */
    static const char *const humanized[4] = {"used_memory", "used_memory_rss",
                                             "used_memory_peak", "maxmemory"};
    double v[4];
    char h[4][32], text[8];
    bool integer;
    uint32_t known = 0;
    uint64_t own = own_rss();

    for (int i = 0; i < 4; i++) {
        const struct server_field *fd = memory_fields, *end = fd + ARRAY_SIZE(memory_fields);
        while (fd < end && strcmp(fd->name, humanized[i]) != 0)
            fd++;
        CHECK(fd < end);
        uint32_t k = aggregate(p, fd, &v[i], text, sizeof(text), &integer);
        known = k > known ? k : known;
        human(h[i], sizeof(h[i]), v[i]);
    }
    double used = v[0], rss = v[1];
    fputs("# Memory\r\n", f);
    servers_lines(p, memory_fields, ARRAY_SIZE(memory_fields), f);
    fprintf(f, "used_memory_human:%s\r\nused_memory_rss_human:%s\r\n"
            "used_memory_peak_human:%s\r\nmaxmemory_human:%s\r\n"
            "mem_fragmentation_ratio:%.2f\r\nshardis_used_memory_rss:%" PRIu64 "\r\n"
            "shardis_servers_reporting:%u\r\n\r\n", h[0], h[1], h[2], h[3],
            used > 0 ? rss / used : 0.0, own, known);
}

/* Database db's line, if it holds keys on any server. */
static void keyspace_line(const struct pool *p, int db, FILE *f)
{
    char name[32], line[256];
    unsigned long long keys = 0, expires = 0;
    double ttl_sum = 0;
    bool any = false;

    snprintf(name, sizeof(name), "db%d", db);
    for (uint32_t s = 0; s < p->nservers; s++) {
        unsigned long long k, e, t;
        const char *v[3];
        char *end;
        if (server_field(p, s, name, line, sizeof(line)) == NULL ||
            (v[0] = strstr(line, "keys=")) == NULL ||
            (v[1] = strstr(line, "expires=")) == NULL ||
            (v[2] = strstr(line, "avg_ttl=")) == NULL)
            continue;
        /* (strtoull: a number out of range is ULLONG_MAX, not undefined.) */
        k = strtoull(v[0] + 5, &end, 10);
        e = strtoull(v[1] + 8, &end, 10);
        t = strtoull(v[2] + 8, &end, 10);
        if (k > (1ull << 48) || e > k || t > (1ull << 48))
            continue;                   /* no server's figures */
        if (db == p->conf->redis_db)        /* shardis's own have no TTL */
            k -= k < p->info->servers[s].own ? k : p->info->servers[s].own;
        keys += k;
        expires += e;
        ttl_sum += (double)t * (double)e;
        any = true;
    }
    if (any && keys > 0)
        fprintf(f, "db%d:keys=%llu,expires=%llu,avg_ttl=%.0f\r\n", db, keys, expires,
                expires > 0 ? ttl_sum / (double)expires : 0.0);
}

/* Keyspace: each database a client may SELECT that holds keys, its keys
 * and expires summed over the servers, avg_ttl weighted by expires. */
static void section_keyspace(const struct pool *p, FILE *f)
{
    fputs("# Keyspace\r\n", f);
    for (int db = 0; db < p->conf->databases; db++)
        keyspace_line(p, db, f);
    fputs("\r\n", f);
}

/* A server's name and version as it says them in INFO: Valkey's
 * server_name and valkey_version, Redis's (no server_name) "redis" and
 * redis_version. False if it has not answered. */
static bool server_says(const struct pool *p, uint32_t s, struct info_version *v)
{
    char field[48];

    if (server_field(p, s, "server_name", v->name, sizeof(v->name)) == NULL)
        snprintf(v->name, sizeof(v->name), "redis");
    snprintf(field, sizeof(field), "%s_version", v->name);
    if (server_field(p, s, field, v->version, sizeof(v->version)) == NULL &&
        server_field(p, s, "redis_version", v->version, sizeof(v->version)) == NULL)
        return false;
    return server_field(p, s, "redis_version", v->redis_version,
                        sizeof(v->redis_version)) != NULL;
}

static bool older(const char *a, const char *b)
{
    unsigned x[3] = {0, 0, 0}, y[3] = {0, 0, 0};

    sscanf(a, "%u.%u.%u", &x[0], &x[1], &x[2]);
    sscanf(b, "%u.%u.%u", &y[0], &y[1], &y[2]);
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i])
            return x[i] < y[i];
    return false;
}

/* (info.h) The lowest version (what every one of them can do); by name
 * first (a Redis before a Valkey, whose redis_version says what Redis it
 * can stand for). */
static bool servers_version(const struct pool *p, struct info_version *out);

bool info_servers_version(const struct pool *p, struct info_version *out)
{
    struct info *in = p->info;

    if (in == NULL)
        return servers_version(p, out);
    if (in->version_stale) {
        in->version_mixed = servers_version(p, &in->version);
        in->version_stale = false;
    }
    *out = in->version;
    return in->version_mixed;
}

static bool servers_version(const struct pool *p, struct info_version *out)
{
    struct info_version v;
    bool mixed = false, any = false;

    snprintf(out->name, sizeof(out->name), "redis");
    snprintf(out->version, sizeof(out->version), "%s", cmd_redis_version);
    snprintf(out->redis_version, sizeof(out->redis_version), "%s", cmd_redis_version);
    for (uint32_t s = 0; s < p->nservers; s++) {
        if (!server_says(p, s, &v))
            continue;
        if (any && (strcmp(v.name, out->name) != 0 || strcmp(v.version, out->version) != 0))
            mixed = true;
        if (!any || older(v.redis_version, out->redis_version) ||
            (!strcmp(v.redis_version, out->redis_version) && older(v.version, out->version)))
            *out = v;
        any = true;
    }
    return mixed;
}

/* ---- the sections --------------------------------------------------------------- */

static const struct section {
    const char *name;
    bool        in_default, in_all;
} sections[] = {
    [S_SERVER] = {"server", true, true},            [S_CLIENTS] = {"clients", true, true},
    [S_MEMORY] = {"memory", true, true},            [S_PERSISTENCE] = {"persistence", true, true},
    [S_STATS] = {"stats", true, true},              [S_REPLICATION] = {"replication", true, true},
    [S_CPU] = {"cpu", true, true},                  [S_MODULES] = {"modules", false, false},
    [S_COMMANDSTATS] = {"commandstats", false, true},
    [S_ERRORSTATS] = {"errorstats", true, true},    [S_LATENCYSTATS] = {"latencystats", false, true},
    [S_CLUSTER] = {"cluster", true, true},          [S_KEYSPACE] = {"keyspace", true, true},
    [S_SHARDIS] = {"shardis", true, true},
};

/* The sections INFO's arguments ask for. */
uint32_t info_sections_of(struct args *a)
{
    uint32_t mask = 0;

    for (uint32_t k = 0; k < ARRAY_SIZE(sections); k++) {
        bool want = a->argc < 2 && sections[k].in_default;
        for (uint32_t i = 1; i < a->argc && !want; i++)
            want = args_is(a, i, sections[k].name) || args_is(a, i, "everything") ||
                   (sections[k].in_all && args_is(a, i, "all")) ||
                   (sections[k].in_default && args_is(a, i, "default"));
        mask |= (uint32_t)want << k;
    }
    return mask;
}

/* The proxy's own CPU time, in redis-server's fields. */
static void section_cpu(FILE *f)
{
    static const struct { const char *name; int who; } of[] = {
        {"", RUSAGE_SELF}, {"_children", RUSAGE_CHILDREN}, {"_main_thread", RUSAGE_THREAD},
    };

    fputs("# CPU\r\n", f);
    for (size_t i = 0; i < ARRAY_SIZE(of); i++) {
        struct rusage ru;
        if (getrusage(of[i].who, &ru) != 0)
            continue;
        fprintf(f, "used_cpu_sys%s:%ld.%06ld\r\nused_cpu_user%s:%ld.%06ld\r\n", of[i].name,
                (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec, of[i].name,
                (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec);
    }
    fputs("\r\n", f);
}

static void section_server(const struct pool *p, FILE *f, uint64_t now)
{
    struct utsname u;
    struct timeval tv;
    struct info_version v;
    uint64_t up = (now - cur_loop->started_ms) / 1000;
    bool mixed = info_servers_version(p, &v);

    if (uname(&u) != 0)
        memset(&u, 0, sizeof(u));
    gettimeofday(&tv, NULL);
    fprintf(f, "# Server\r\nredis_version:%s\r\n", v.redis_version);
    if (strcmp(v.name, "redis") != 0)   /* as Valkey says it */
        fprintf(f, "server_name:%s\r\n%s_version:%s\r\n", v.name, v.name, v.version);
    /* Servers of different versions (an upgrade under way): each said. */
    if (mixed) {
        fputs("servers_versions:", f);
        for (uint32_t s = 0; s < p->nservers; s++) {
            struct info_version sv;
            bool known = server_says(p, s, &sv);
            fprintf(f, "%s%s=%s%s%s", s > 0 ? "," : "", p->servers[s].label,
                    known ? sv.name : "unknown", known ? "-" : "", known ? sv.version : "");
        }
        fputs("\r\n", f);
    }
    fprintf(f, "shardis_version:%s\r\n"
            "redis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\n"
            "redis_mode:proxy\r\nos:%s %s %s\r\narch_bits:%d\r\nmonotonic_clock:POSIX "
            "clock_gettime\r\nmultiplexing_api:epoll\r\natomicvar_api:c11-builtin\r\n"
            "gcc_version:%d.%d.%d\r\nprocess_id:%d\r\nprocess_supervised:%s\r\n"
            "run_id:%s\r\ntcp_port:%d\r\nserver_time_usec:%lld\r\n"
            "uptime_in_seconds:%" PRIu64 "\r\nuptime_in_days:%" PRIu64 "\r\nhz:10\r\n"
            "configured_hz:10\r\nlru_clock:%lld\r\nexecutable:%s\r\nconfig_file:%s\r\n"
            "io_threads_active:0\r\n\r\n", SHARDIS_VERSION, u.sysname, u.release,
            u.machine, (int)(8 * sizeof(void *)),
#ifdef __GNUC__
            __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__,
#else
            0, 0, 0,
#endif
            (int)getpid(), getenv("NOTIFY_SOCKET") != NULL ? "systemd" : "no", cur_loop->run_id,
            cur_loop->port, (long long)tv.tv_sec * 1000000 + tv.tv_usec, up, up / 86400,
            (long long)(tv.tv_sec & ((1 << 24) - 1)), cur_loop->executable,
            cur_loop->conf->path);
}

static void section_shardis(FILE *f, uint64_t now, const struct totals *t)
{
    /* configs_held: the running config and the old ones a pool still
     * routes by (bounded however many reloads came). */
    fprintf(f, "# Shardis\r\npools:%zu\r\nconfigs_held:%zu\r\nloops:%u\r\n", cur_loop->npools,
            conf_held(), t->nloops);
    /* Each loop's clients and commands (--threads: how loop 0 spread them) */
    for (uint32_t l = 0; l < t->nloops; l++)
        fprintf(f, "loop_%u:clients=%u,commands=%llu\r\n", l, t->loops[l].clients,
                (unsigned long long)t->loops[l].commands);
    for (size_t i = 0; i < cur_loop->npools; i++) {
        struct pool *p = &cur_loop->pools[i];
        const struct pool_totals *pt = &t->pools[i];
        /* clients_user: what clients' commands and scripts run as on the
         * servers (srvuser.c); a server where it is not is marked below */
        fprintf(f, "pool_%zu:name=%s,listen=%s,distribution=%s,hash=%s,servers=%u,"
                "clients=%u,requests=%llu,errors=%llu,slowlog_skipped=%llu,clients_user=%s\r\n",
                i, p->conf->name, p->conf->listen.text,
                ring_dist_name(ring_distribution(p->ring)),
                ring_hash_name(ring_hash_function(p->ring)), p->nservers, pt->nclients,
                (unsigned long long)pt->requests, (unsigned long long)pt->errors,
                (unsigned long long)pt->slowlog_skipped,
                srvuser_name(p->conf, p->clients_user));
        for (uint32_t s = 0; s < p->nservers; s++) {
            const struct info *in = p->info;
            long long age = in != NULL && s < in->nservers && in->servers[s].text != NULL
                                ? (long long)(now - in->servers[s].at_ms) : -1;
            const struct pool_server_totals *st;
            if (!p->servers[s].active || s >= pt->nservers)
                continue;
            st = &pt->servers[s];
            fprintf(f, "backend_%zu_%u:name=%s,addr=%s,state=%s,requests=%llu,"
                    "errors=%llu,timeouts=%llu,info_age_ms=%lld", i, s, p->servers[s].label,
                    p->servers[s].addr, backend_state_name(&p->servers[s].conns[0]),
                    (unsigned long long)st->requests, (unsigned long long)st->errors,
                    (unsigned long long)st->timeouts, age);
            if (p->servers[s].user_refused)  /* (srvuser.c says why in the log) */
                fprintf(f, ",clients_user=missing");
            if (p->sentinel != NULL)        /* where its master is now */
                sentinel_info(p, s, f);
            fprintf(f, "\r\n");
        }
        /* (reason is the last field: it may hold commas.) */
        for (uint32_t s = 0; s < p->nservers; s++)
            if (p->servers[s].record_ignored != NULL)
                fprintf(f, "migration_record_ignored_%zu_%u:name=%s,reason=%s\r\n", i, s,
                        p->servers[s].label, p->servers[s].record_ignored);
    }
}

/* The sections that read the proxy's own counters, which every loop
 * keeps its own of (totals.h). */
#define OWN_FIGURES ((1u << S_CLIENTS) | (1u << S_STATS) | (1u << S_COMMANDSTATS) | \
                     (1u << S_ERRORSTATS) | (1u << S_LATENCYSTATS) | (1u << S_SHARDIS))

/* INFO's text is lines ended by CRLF: a payload, not RESP. Sections in
 * redis-server's order; "default" is all but commandstats, latencystats
 * and modules, "all" all but modules. The servers' figures are this
 * loop's copy's (every loop asks its servers alike). */
void info_render(struct client *c, struct req *r, uint32_t mask)
{
    struct pool *p = c->pool;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = xopen_memstream(&buf, &len);
    uint64_t now = uv_now(cur_loop->uv);
    struct totals t = {0};
    const struct pool_totals *pt;

    info_of(p);
    if (mask & OWN_FIGURES)
        totals_get(&t);
    pt = t.npools > 0 ? &t.pools[p - cur_loop->pools] : NULL;
    if (WANT(mask, S_SERVER))
        section_server(p, f, now);
    if (WANT(mask, S_CLIENTS)) {
        fprintf(f, "# Clients\r\nconnected_clients:%u\r\ncluster_connections:0\r\n"
                "maxclients:%d\r\nclient_recent_max_input_buffer:%llu\r\n"
                "client_recent_max_output_buffer:%llu\r\nblocked_clients:%u\r\n"
                "tracking_clients:%llu\r\nclients_in_timeout_table:0\r\n"
                "clients_memory:%llu\r\nmaxmemory_clients:%lld\r\n\r\n", t.nclients,
                p->conf->client_connections > 0 ? p->conf->client_connections : 10000,
                (unsigned long long)pt->peak_in, (unsigned long long)pt->peak_out, t.blocked,
                (unsigned long long)pt->track.clients,
                (unsigned long long)pt->clients_mem, p->conf->maxmemory_clients);
    }
    if (WANT(mask, S_MEMORY))
        section_memory(p, f);
    if (WANT(mask, S_PERSISTENCE)) {
        fputs("# Persistence\r\n", f);
        servers_lines(p, persistence_fields, ARRAY_SIZE(persistence_fields), f);
        fputs("\r\n", f);
    }
    if (WANT(mask, S_STATS)) {
        fprintf(f, "# Stats\r\ntotal_connections_received:%llu\r\n"
                "total_commands_processed:%llu\r\ninstantaneous_ops_per_sec:%.0f\r\n"
                "rejected_connections:%llu\r\ntotal_error_replies:%llu\r\n"
                "unexpected_error_replies:0\r\nevicted_clients:%llu\r\n"
                "client_output_buffer_limit_disconnections:%llu\r\n"
                "chunks_allocated:%zu\r\nchunks_free:%zu\r\n"
                "tracking_total_keys:%llu\r\ntracking_total_items:%llu\r\n"
                "tracking_total_prefixes:%llu\r\n",
                (unsigned long long)pt->accepted, (unsigned long long)pt->requests,
                pt->ops_per_sec, (unsigned long long)pt->rejected,
                (unsigned long long)pt->stats.error_replies,
                (unsigned long long)pt->evicted_clients,
                (unsigned long long)pt->obl_disconnections, t.chunks_alloc, t.chunks_free,
                (unsigned long long)pt->track.keys, (unsigned long long)pt->track.items,
                (unsigned long long)pt->track.prefixes);
        servers_lines(p, stats_fields, ARRAY_SIZE(stats_fields), f);
        fputs("\r\n", f);
    }
    if (WANT(mask, S_REPLICATION))
        fprintf(f, "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"
                "master_failover_state:no-failover\r\nmaster_replid:%s\r\n"
                "master_replid2:0000000000000000000000000000000000000000\r\n"
                "master_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\n"
                "repl_backlog_size:0\r\nrepl_backlog_first_byte_offset:0\r\n"
                "repl_backlog_histlen:0\r\n\r\n", cur_loop->run_id);
    if (WANT(mask, S_CPU))
        section_cpu(f);
    if (WANT(mask, S_MODULES))
        fputs("# Modules\r\n\r\n", f);
    if (WANT(mask, S_COMMANDSTATS)) {
        fputs("# Commandstats\r\n", f);
        stats_info_commandstats(&pt->stats, f);
        fputs("\r\n", f);
    }
    if (WANT(mask, S_ERRORSTATS)) {
        fputs("# Errorstats\r\n", f);
        stats_info_errorstats(&pt->stats, f);
        fputs("\r\n", f);
    }
    if (WANT(mask, S_LATENCYSTATS)) {
        fputs("# Latencystats\r\n", f);
        stats_info_latencystats(&pt->stats, f);
        fputs("\r\n", f);
    }
    if (WANT(mask, S_CLUSTER))
        fputs("# Cluster\r\ncluster_enabled:0\r\n\r\n", f);
    if (WANT(mask, S_KEYSPACE))
        section_keyspace(p, f);
    if (WANT(mask, S_SHARDIS))
        section_shardis(f, now, &t);
    totals_free(&t);
    fclose(f);
    struct resp_w w = client_w(c, &r->rsp);
    resp_w_verbatim(&w, "txt", buf, len);
    free(buf);
}

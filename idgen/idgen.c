/* idgen.c -- encoding and decoding of generated, shardjs and fixed keys,
 * and the Lua allocator script that hands out their (ms, slot) pairs.
 * Pure: the caller brings the clock, the buffers and the I/O. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "idgen/idgen.h"

#define B62_MAX_DECODE  10          /* 62^10 < 2^64 */
#define SHARDJS_MIN     5           /* 1 time char, variant, type */
#define SHARDJS_MAX     11          /* 7 time chars, variant, type */
#define DAY_MS          86400000LL

static const char b62_digits[] =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/* A byte's base62 value, or -1. */
static int b62_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'Z')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 36;
    return -1;
}

int idgen_b62_encode(uint64_t v, char *out, size_t width)
{
    uint64_t rest = v;
    size_t i;

    for (i = width; i > 0 && rest != 0; i--)
        rest /= 62;
    if (rest != 0)
        return -ERANGE;
    for (i = width; i > 0; i--) {
        out[i - 1] = b62_digits[v % 62];
        v /= 62;
    }
    return 0;
}

int idgen_b62_decode(const char *s, size_t len, uint64_t *v)
{
    uint64_t r = 0;

    if (len < 1 || len > B62_MAX_DECODE)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        int d = b62_value((unsigned char)s[i]);
        if (d < 0)
            return -EINVAL;
        r = r * 62 + (uint64_t)d;
    }
    *v = r;
    return 0;
}

/* Decode a field of a key already known to be all base62. */
static uint64_t b62_field(const char *s, size_t len)
{
    uint64_t v = 0;

    idgen_b62_decode(s, len, &v);
    return v;
}

static int all_b62(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (b62_value((unsigned char)s[i]) < 0)
            return 0;
    return 1;
}

/* The 16-byte head without checks: the caller validated every field. */
static void encode_head(int64_t ms, uint32_t shard, uint32_t slot, uint32_t type, char *out)
{
    idgen_b62_encode((uint64_t)ms, out, 7);
    out[7] = '{';
    idgen_b62_encode(shard, out + 8, 2);
    out[10] = '}';
    idgen_b62_encode(slot, out + 11, 3);
    idgen_b62_encode(type, out + 14, 2);
}

int idgen_encode(const struct idgen_id *id, char out[IDGEN_KEY_LEN])
{
    if (id->ms < 0 || id->ms > IDGEN_MAX_MS || id->shard >= IDGEN_SHARDS ||
        id->slot >= IDGEN_SLOTS || id->type >= IDGEN_TYPES)
        return -ERANGE;
    encode_head(id->ms, id->shard, id->slot, id->type, out);
    return 0;
}

void idgen_next(struct idgen_id *id)
{
    if (++id->slot == IDGEN_SLOTS) {
        id->slot = 0;
        id->ms++;
    }
}

/* key[0, 16) is TTTTTTT{LL}SSSYY. */
static int is_head(const char *key)
{
    return all_b62(key, 7) && key[7] == '{' && all_b62(key + 8, 2) &&
           key[10] == '}' && all_b62(key + 11, 5);
}

static enum idgen_format decode_head(const char *key, size_t len, struct idgen_info *info)
{
    if (len < IDGEN_KEY_LEN || !is_head(key))
        return IDGEN_FORMAT_UNKNOWN;
    if (len > IDGEN_KEY_LEN && key[IDGEN_KEY_LEN] != '-')
        return IDGEN_FORMAT_UNKNOWN;

    info->ms = (int64_t)b62_field(key, 7);
    info->shard = (uint32_t)b62_field(key + 8, 2);
    info->slot = (uint32_t)b62_field(key + 11, 3);
    info->type = (uint32_t)b62_field(key + 14, 2);
    info->type_at = 14;

    size_t name_len = len > IDGEN_KEY_LEN ? len - IDGEN_KEY_LEN - 1 : 0;
    if (info->ms == 0 && info->slot == 0 && name_len >= 1 && name_len <= IDGEN_NAME_MAX) {
        info->name_at = IDGEN_KEY_LEN + 1;
        return IDGEN_FORMAT_FIXED;
    }
    return IDGEN_FORMAT_SHARDIS;
}

/* Is epoch_ms + ms later than now_ms + one day? Written so that no sum
 * overflows, whatever the caller passes. */
static int from_future(int64_t ms, int64_t epoch_ms, int64_t now_ms)
{
    if (now_ms > INT64_MAX - DAY_MS)
        return 0;
    if (epoch_ms > INT64_MAX - ms)
        return 1;
    return epoch_ms + ms > now_ms + DAY_MS;
}

static enum idgen_format decode_shardjs(const char *key, size_t len, int64_t epoch_ms,
                                        int64_t now_ms, struct idgen_info *info)
{
    const char *dash = memchr(key, '-', len);
    size_t n = dash != NULL ? (size_t)(dash - key) : len;

    if (n < SHARDJS_MIN || n > SHARDJS_MAX || !all_b62(key, n))
        return IDGEN_FORMAT_UNKNOWN;

    int64_t ms = (int64_t)b62_field(key, n - 4);
    if (from_future(ms, epoch_ms, now_ms))
        return IDGEN_FORMAT_UNKNOWN;

    info->ms = ms;
    info->slot = (uint32_t)b62_field(key + n - 4, 2);
    info->type = (uint32_t)b62_field(key + n - 2, 2);
    info->type_at = n - 2;
    return IDGEN_FORMAT_SHARDJS;
}

enum idgen_format idgen_decode(const char *key, size_t len, int64_t epoch_ms,
                               int64_t now_ms, struct idgen_info *info)
{
    enum idgen_format f;

    memset(info, 0, sizeof(*info));
    f = decode_head(key, len, info);
    if (f == IDGEN_FORMAT_UNKNOWN)
        f = decode_shardjs(key, len, epoch_ms, now_ms, info);
    if (f == IDGEN_FORMAT_UNKNOWN)
        memset(info, 0, sizeof(*info));
    info->format = f;
    return f;
}

static uint32_t fnv1a32(const char *s, size_t len)
{
    uint32_t h = 0x811c9dc5;

    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x01000193;
    }
    return h;
}

int idgen_fixed_key(const char *name, size_t len, uint32_t type, char *out, size_t *outlen)
{
    if (len < 1 || len > IDGEN_NAME_MAX || type >= IDGEN_TYPES)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x21 || c > 0x7e)
            return -EINVAL;
    }

    encode_head(0, fnv1a32(name, len) % IDGEN_SHARDS, 0, type, out);
    out[IDGEN_KEY_LEN] = '-';
    memcpy(out + IDGEN_KEY_LEN + 1, name, len);
    *outlen = IDGEN_KEY_LEN + 1 + len;
    return 0;
}

int idgen_iso_time(int64_t unix_ms, char *out)
{
    int64_t sec = unix_ms / 1000;
    int msec = (int)(unix_ms % 1000);
    struct tm tm;

    if (msec < 0) {     /* floor, so -1 ms is 23:59:59.999 the day before */
        msec += 1000;
        sec--;
    }
    time_t t = (time_t)sec;
    if (gmtime_r(&t, &tm) == NULL) {
        out[0] = '\0';
        return -ERANGE;
    }
    /* Any int64 ms is a year of at most 9 digits and a sign: 32 bytes. */
    return snprintf(out, 32, "%04lld-%02d-%02dT%02d:%02d:%02d.%03dZ",
                    (long long)tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                    tm.tm_hour, tm.tm_min, tm.tm_sec, msec);
}

/* Sent to Redis on every connect, so kept short. The state hash holds the
 * next free (ms, slot) and the run_id that wrote it: a hash from another
 * run_id may be an old snapshot's, so it only counts if it is already at
 * least restart_guard_ms ahead. */
const char idgen_script[] =
    "-- shardis id allocator. KEYS[1] = $equence{LL}\n"
    "-- ARGV: n, epoch_ms, max_ahead_ms, restart_guard_ms, run_id, skew_ms\n"
    "local n = tonumber(ARGV[1])\n"
    "local ahead, guard = tonumber(ARGV[3]), tonumber(ARGV[4])\n"
    "local rid = ARGV[5]\n"
    "if rid == '' then rid = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') end\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)"
    " - tonumber(ARGV[2]) + tonumber(ARGV[6])\n"
    "local st = redis.call('HMGET', KEYS[1], 'ms', 'slot', 'rid')\n"
    "local ms, slot = tonumber(st[1]), tonumber(st[2])\n"
    "if ms == nil or slot == nil then -- first use, or state lost\n"
    "  ms, slot = now + guard, 0\n"
    "elseif st[3] ~= rid then -- restarted, failed over or migrated: maybe stale\n"
    "  if ms < now + guard then ms, slot = now + guard, 0 end\n"
    "elseif ms < now then\n"
    "  ms, slot = now, 0\n"
    "end\n"
    "local total = slot + n\n"
    "local last = ms + math.floor((total - 1) / 238328)\n"
    "if last - now > ahead then\n"
    "  return redis.error_reply('TRYAGAIN id sequence ' .. KEYS[1] .. ' would run ' .."
    " (last - now) .. ' ms ahead of the clock (max_ahead_ms ' .. ahead .. ')')\n"
    "end\n"
    "redis.call('HSET', KEYS[1], 'ms', ms + math.floor(total / 238328),"
    " 'slot', total % 238328, 'rid', rid)\n"
    "return {ms, slot}\n";

/* test_idgen.c -- generated keys: base62 at every width, encode/decode
 * round trips at every field boundary, byte order as time order, legacy
 * shardjs and fixed keys, golden keys worked out by hand (and checked with
 * Python), and the allocator script's text only: the script itself is run
 * against real redis-servers by the integration tests. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "idgen/idgen.h"

#define DAY_MS  86400000LL
#define NOW_MS  1764000000000LL     /* 2025-11-24T16:00:00Z */

static const char alphabet[] =
    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/* xorshift64*: the same "random" ids on every run. */
static uint64_t rnd(void)
{
    static uint64_t x = 0x9e3779b97f4a7c15ULL;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * 0x2545f4914f6cdd1dULL;
}

static uint64_t pow62(int k)
{
    uint64_t p = 1;

    while (k-- > 0)
        p *= 62;
    return p;
}

static struct idgen_id random_id(void)
{
    struct idgen_id id = {
        .ms = (int64_t)(rnd() % (uint64_t)(IDGEN_MAX_MS + 1)),
        .shard = (uint32_t)(rnd() % IDGEN_SHARDS),
        .slot = (uint32_t)(rnd() % IDGEN_SLOTS),
        .type = (uint32_t)(rnd() % IDGEN_TYPES),
    };
    return id;
}

/* id's key as a C string. */
static void key_of(const struct idgen_id *id, char out[IDGEN_KEY_LEN + 1])
{
    cr_assert(eq(int, idgen_encode(id, out), 0));
    out[IDGEN_KEY_LEN] = '\0';
}

static enum idgen_format decode(const char *key, struct idgen_info *info)
{
    enum idgen_format f = idgen_decode(key, strlen(key), IDGEN_EPOCH_MS, NOW_MS, info);

    cr_assert(eq(int, f, info->format));
    return f;
}

/* ---- base62 ------------------------------------------------------------ */

Test(b62, boundaries)
{
    char out[16];
    uint64_t v;

    memset(out, 0, sizeof(out));
    cr_assert(eq(int, idgen_b62_encode(0, out, 1), 0));
    cr_assert(eq(str, out, "0"));
    cr_assert(eq(int, idgen_b62_encode(61, out, 1), 0));
    cr_assert(eq(str, out, "z"));
    cr_assert(eq(int, idgen_b62_encode(62, out, 2), 0));
    cr_assert(eq(str, out, "10"));
    cr_assert(eq(int, idgen_b62_encode(0, out, 0), 0));
    cr_assert(eq(int, idgen_b62_encode(1, out, 0), -ERANGE));

    for (int k = 1; k <= 10; k++) {
        char want[16], got[16];

        /* 62^k - 1 is k z's, and comes back. */
        memset(want, 'z', (size_t)k);
        want[k] = '\0';
        memset(got, 0, sizeof(got));
        cr_assert(eq(int, idgen_b62_encode(pow62(k) - 1, got, (size_t)k), 0));
        cr_assert(eq(str, got, want), "k %d", k);
        cr_assert(eq(int, idgen_b62_decode(got, (size_t)k, &v), 0));
        cr_assert(eq(u64, v, pow62(k) - 1));

        /* 62^k does not fit in k digits and leaves out untouched... */
        memset(got, '#', sizeof(got) - 1);
        got[sizeof(got) - 1] = '\0';
        cr_assert(eq(int, idgen_b62_encode(pow62(k), got, (size_t)k), -ERANGE), "k %d", k);
        cr_assert(eq(str, got, "###############"));

        /* ...but is "1" and k zeros in k + 1. */
        memset(want, '0', (size_t)k + 1);
        want[0] = '1';
        want[k + 1] = '\0';
        memset(got, 0, sizeof(got));
        cr_assert(eq(int, idgen_b62_encode(pow62(k), got, (size_t)k + 1), 0));
        cr_assert(eq(str, got, want), "k %d", k);
        if (k + 1 <= 10) {          /* decode reads at most 10 */
            cr_assert(eq(int, idgen_b62_decode(got, (size_t)k + 1, &v), 0));
            cr_assert(eq(u64, v, pow62(k)));
        }
    }

    /* Zero padding, and the widest values. */
    memset(out, 0, sizeof(out));
    cr_assert(eq(int, idgen_b62_encode(61, out, 7), 0));
    cr_assert(eq(str, out, "000000z"));
    memset(out, 0, sizeof(out));
    cr_assert(eq(int, idgen_b62_encode(UINT64_MAX, out, 11), 0));
    cr_assert(eq(str, out, "LygHa16AHYF"));     /* Python: 2**64 - 1 */
    cr_assert(eq(int, idgen_b62_encode(UINT64_MAX, out, 10), -ERANGE));
    memset(out, 0, sizeof(out));
    cr_assert(eq(int, idgen_b62_encode(1, out, 15), 0));
    cr_assert(eq(str, out, "000000000000001"));
}

Test(b62, decode_rejects)
{
    uint64_t v = 42;

    cr_assert(eq(int, idgen_b62_decode("0", 0, &v), -EINVAL));
    cr_assert(eq(int, idgen_b62_decode("00000000000", 11, &v), -EINVAL));
    cr_assert(eq(int, idgen_b62_decode("zzzzzzzzzz", 10, &v), 0));
    cr_assert(eq(u64, v, pow62(10) - 1));

    /* The neighbours of each range, and bytes that are never digits. */
    const char bad[] = "/:@[`{-} \x7f\x80\xff";
    for (size_t i = 0; i < sizeof(bad) - 1; i++) {
        char s[4] = {'1', bad[i], '2', '\0'};
        v = 42;
        cr_assert(eq(int, idgen_b62_decode(s, 3, &v), -EINVAL), "byte 0x%02x",
                  (unsigned char)bad[i]);
        cr_assert(eq(u64, v, 42));
    }
    cr_assert(eq(int, idgen_b62_decode("1\0" "2", 3, &v), -EINVAL));
}

Test(b62, every_digit)
{
    for (int d = 0; d < 62; d++) {
        char c;
        uint64_t v;

        cr_assert(eq(int, idgen_b62_encode((uint64_t)d, &c, 1), 0));
        cr_assert(eq(chr, c, alphabet[d]));
        cr_assert(eq(int, idgen_b62_decode(&c, 1, &v), 0));
        cr_assert(eq(u64, v, (uint64_t)d));
    }
}

Test(b62, round_trips)
{
    for (int i = 0; i < 100000; i++) {
        size_t width = 1 + rnd() % 10;
        uint64_t v = rnd() % pow62((int)width), back;
        char s[10];

        cr_assert(eq(int, idgen_b62_encode(v, s, width), 0));
        cr_assert(eq(int, idgen_b62_decode(s, width, &back), 0));
        cr_assert(eq(u64, back, v));
    }
}

/* ---- generated keys ---------------------------------------------------- */

static void check_round_trip(const struct idgen_id *id)
{
    char key[IDGEN_KEY_LEN + 8];
    struct idgen_info info;

    key_of(id, key);
    cr_assert(eq(int, decode(key, &info), IDGEN_FORMAT_SHARDIS), "%s", key);
    cr_assert(eq(i64, info.ms, id->ms), "%s", key);
    cr_assert(eq(u32, info.shard, id->shard), "%s", key);
    cr_assert(eq(u32, info.slot, id->slot), "%s", key);
    cr_assert(eq(u32, info.type, id->type), "%s", key);
    cr_assert(eq(sz, info.type_at, 14));

    /* With a suffix: still SHARDIS, unless T and S are 0 (then FIXED). */
    strcat(key, "-x:y");
    enum idgen_format want = id->ms == 0 && id->slot == 0 ? IDGEN_FORMAT_FIXED
                                                          : IDGEN_FORMAT_SHARDIS;
    cr_assert(eq(int, decode(key, &info), want), "%s", key);
    cr_assert(eq(i64, info.ms, id->ms));
    cr_assert(eq(u32, info.shard, id->shard));
    cr_assert(eq(u32, info.slot, id->slot));
    cr_assert(eq(u32, info.type, id->type));
    cr_assert(eq(sz, info.type_at, 14));
}

Test(encode, round_trips)
{
    const int64_t mss[] = {0, 1, 61, 62, IDGEN_MAX_MS - 1, IDGEN_MAX_MS};
    const uint32_t shards[] = {0, 1, IDGEN_SHARDS - 1};
    const uint32_t slots[] = {0, 1, IDGEN_SLOTS - 1};
    const uint32_t types[] = {0, IDGEN_TYPE_DEFAULT};

    for (size_t a = 0; a < sizeof(mss) / sizeof(mss[0]); a++)
        for (size_t b = 0; b < sizeof(shards) / sizeof(shards[0]); b++)
            for (size_t c = 0; c < sizeof(slots) / sizeof(slots[0]); c++)
                for (size_t d = 0; d < sizeof(types) / sizeof(types[0]); d++) {
                    struct idgen_id id = {mss[a], shards[b], slots[c], types[d]};
                    check_round_trip(&id);
                }

    for (int i = 0; i < 100000; i++) {
        struct idgen_id id = random_id();
        check_round_trip(&id);
    }
}

Test(encode, out_of_range)
{
    const struct idgen_id bad[] = {
        {-1, 0, 0, 0},
        {IDGEN_MAX_MS + 1, 0, 0, 0},
        {INT64_MIN, 0, 0, 0},
        {0, IDGEN_SHARDS, 0, 0},
        {0, UINT32_MAX, 0, 0},
        {0, 0, IDGEN_SLOTS, 0},
        {0, 0, 0, IDGEN_TYPES},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char out[IDGEN_KEY_LEN + 1] = "################";
        cr_assert(eq(int, idgen_encode(&bad[i], out), -ERANGE), "case %zu", i);
        cr_assert(eq(str, out, "################"), "case %zu", i);
    }
}

Test(encode, golden)
{
    struct idgen_id id = {0, 0, 0, IDGEN_TYPE_DEFAULT};
    char key[IDGEN_KEY_LEN + 1];

    key_of(&id, key);
    cr_assert(eq(str, key, "0000000{00}000zz"));

    /* 1000000000 = 1*62^5 + 5*62^4 + 41*62^3 + 55*62^2 + 42*62 + 16
     *            = "15ftgG"; 1234 = 19*62 + 56 = "Ju";
     * 56789 = 14*62^2 + 47*62 + 59 = "Elx"; 42 = "0g". */
    id = (struct idgen_id){1000000000, 1234, 56789, 42};
    key_of(&id, key);
    cr_assert(eq(str, key, "015ftgG{Ju}Elx0g"));

    id = (struct idgen_id){IDGEN_MAX_MS, IDGEN_SHARDS - 1, IDGEN_SLOTS - 1, IDGEN_TYPES - 1};
    key_of(&id, key);
    cr_assert(eq(str, key, "zzzzzzz{zz}zzzzz"));
}

static int cmp_id(const void *a, const void *b)
{
    const struct idgen_id *x = a, *y = b;

    if (x->ms != y->ms)
        return x->ms < y->ms ? -1 : 1;
    if (x->slot != y->slot)
        return x->slot < y->slot ? -1 : 1;
    return 0;
}

static int cmp_key(const void *a, const void *b)
{
    return memcmp(a, b, IDGEN_KEY_LEN);
}

/* Keys of one shard and type sort like their (ms, slot). */
Test(encode, byte_order_is_time_order)
{
    enum { N = 20000 };
    static struct idgen_id ids[N];
    static char keys[N][IDGEN_KEY_LEN];

    for (int i = 0; i < N; i++) {
        ids[i] = random_id();
        ids[i].shard = 777;
        ids[i].type = IDGEN_TYPE_DEFAULT;
        if (i % 4 == 1) {           /* plenty of equal ms and near slots */
            ids[i].ms = ids[i - 1].ms;
            ids[i].slot = (uint32_t)(rnd() % 3);
        }
        if (i % 50 == 2)
            ids[i].ms = i % 100 == 2 ? 0 : IDGEN_MAX_MS;
    }
    for (int i = 0; i < N; i++)
        cr_assert(eq(int, idgen_encode(&ids[i], keys[i]), 0));

    qsort(ids, N, sizeof(ids[0]), cmp_id);
    qsort(keys, N, sizeof(keys[0]), cmp_key);
    for (int i = 0; i < N; i++) {
        char want[IDGEN_KEY_LEN];
        cr_assert(eq(int, idgen_encode(&ids[i], want), 0));
        cr_assert(eq(int, memcmp(keys[i], want, IDGEN_KEY_LEN), 0), "at %d", i);
    }
}

Test(encode, next)
{
    struct idgen_id id = {5, 7, IDGEN_SLOTS - 2, 9};
    char a[IDGEN_KEY_LEN + 1], b[IDGEN_KEY_LEN + 1];

    key_of(&id, a);
    idgen_next(&id);
    cr_assert(eq(i64, id.ms, 5));
    cr_assert(eq(u32, id.slot, IDGEN_SLOTS - 1));
    key_of(&id, b);
    cr_assert(eq(str, b, "0000005{07}zzz09"));
    cr_assert(lt(int, memcmp(a, b, IDGEN_KEY_LEN), 0));

    idgen_next(&id);
    cr_assert(eq(i64, id.ms, 6));
    cr_assert(eq(u32, id.slot, 0));
    cr_assert(eq(u32, id.shard, 7));
    cr_assert(eq(u32, id.type, 9));
    key_of(&id, a);
    cr_assert(eq(str, a, "0000006{07}00009"));
    cr_assert(gt(int, memcmp(a, b, IDGEN_KEY_LEN), 0));

    idgen_next(&id);
    cr_assert(eq(i64, id.ms, 6));
    cr_assert(eq(u32, id.slot, 1));
}

/* ---- legacy shardjs keys ----------------------------------------------- */

/* What shardjs writes: toInt62(ms) + toInt62(variant, 2) + toInt62(type, 2). */
static void shardjs_key(int64_t ms, uint32_t variant, uint32_t type, char *out)
{
    size_t n = 1;

    while ((uint64_t)ms >= pow62((int)n))
        n++;
    cr_assert(eq(int, idgen_b62_encode((uint64_t)ms, out, n), 0));
    cr_assert(eq(int, idgen_b62_encode(variant, out + n, 2), 0));
    cr_assert(eq(int, idgen_b62_encode(type, out + n + 2, 2), 0));
    out[n + 4] = '\0';
}

static void check_shardjs(const char *key, int64_t ms, uint32_t variant, uint32_t type,
                          size_t type_at)
{
    struct idgen_info info;

    cr_assert(eq(int, decode(key, &info), IDGEN_FORMAT_SHARDJS), "%s", key);
    cr_assert(eq(i64, info.ms, ms), "%s", key);
    cr_assert(eq(u32, info.slot, variant), "%s", key);
    cr_assert(eq(u32, info.type, type), "%s", key);
    cr_assert(eq(sz, info.type_at, type_at), "%s", key);
    cr_assert(eq(u32, info.shard, 0));
    cr_assert(eq(sz, info.name_at, 0));
}

Test(shardjs, golden)
{
    char key[32];

    shardjs_key(1, 2, 3, key);
    cr_assert(eq(str, key, "10203"));
    check_shardjs("10203", 1, 2, 3, 3);
    check_shardjs("10203-", 1, 2, 3, 3);
    check_shardjs("10203-some:suffix-with-dashes and spaces", 1, 2, 3, 3);
    /* By shardjs's own rule any 5..11 alphanumerics are a key. */
    check_shardjs("hello", 43, 40 * 62 + 47, 47 * 62 + 50, 3);
}

Test(shardjs, time_parts)
{
    const int64_t today = NOW_MS - IDGEN_EPOCH_MS;     /* 7 chars */
    const int64_t mss[] = {0, 61, 62, 3844, (int64_t)pow62(5), (int64_t)pow62(6) - 1,
                           (int64_t)pow62(6), today - 1, today, today + DAY_MS};
    char key[64];

    for (size_t i = 0; i < sizeof(mss) / sizeof(mss[0]); i++) {
        uint32_t v = (uint32_t)(rnd() % 3844), t = (uint32_t)(rnd() % 3844);

        shardjs_key(mss[i], v, t, key);
        size_t n = strlen(key);
        check_shardjs(key, mss[i], v, t, n - 2);
        strcat(key, "-suffix");
        check_shardjs(key, mss[i], v, t, n - 2);
    }

    shardjs_key((int64_t)pow62(5), 0, 0, key);
    cr_assert(eq(sz, strlen(key), 10));     /* a 6-char time part */
    shardjs_key(today, 0, 0, key);
    cr_assert(eq(sz, strlen(key), 11));     /* today's: 7 chars */
}

Test(shardjs, future_is_unknown)
{
    const int64_t limit = NOW_MS + DAY_MS - IDGEN_EPOCH_MS;
    struct idgen_info info;
    char key[32];

    shardjs_key(limit, 1, 1, key);
    cr_assert(eq(int, decode(key, &info), IDGEN_FORMAT_SHARDJS), "%s", key);
    shardjs_key(limit + 1, 1, 1, key);
    cr_assert(eq(int, decode(key, &info), IDGEN_FORMAT_UNKNOWN), "%s", key);
    cr_assert(eq(i64, info.ms, 0));
    cr_assert(eq(u32, info.type, 0));

    /* The same key is fine once its time has come, or with a later epoch. */
    cr_assert(eq(int, idgen_decode(key, strlen(key), IDGEN_EPOCH_MS, NOW_MS + 1, &info),
                 IDGEN_FORMAT_SHARDJS));
    cr_assert(eq(int, idgen_decode(key, strlen(key), IDGEN_EPOCH_MS - 1, NOW_MS, &info),
                 IDGEN_FORMAT_SHARDJS));
    cr_assert(eq(int, idgen_decode("zzzzzzz0000", 11, IDGEN_EPOCH_MS, NOW_MS, &info),
                 IDGEN_FORMAT_UNKNOWN));
    /* Extreme clocks and epochs: no overflow, no crash. */
    cr_assert(eq(int, idgen_decode("zzzzzzz0000", 11, INT64_MAX, INT64_MIN, &info),
                 IDGEN_FORMAT_UNKNOWN));
    cr_assert(eq(int, idgen_decode("zzzzzzz0000", 11, INT64_MIN, INT64_MAX, &info),
                 IDGEN_FORMAT_SHARDJS));
    cr_assert(eq(int, idgen_decode("zzzzzzz0000", 11, 0, INT64_MAX - 1, &info),
                 IDGEN_FORMAT_SHARDJS));
}

Test(shardjs, unknown)
{
    static const char keys[][40] = {
        "", "1", "1020", "-10203", "-", "user:1000", "1020:", "10203:x", "10 203",
        "10203 ", " 10203", "1020\x7f", "102\xc3\xa9", "abcdefghijkl", "abcdefghijkl-x",
        "zzzzzzzz0000", "abcdefghijklmnop", "abcdefghijklmnop-x", "a_bcde",
        "0000000{00}000z", "0000000{00}000zzz", "0000000{00}000zz_x",
        "0000000(00)000zz", "0000000{0-}000zz", "0000-00{00}000zz",
    };
    struct idgen_info info;

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        memset(&info, 0xa5, sizeof(info));
        cr_assert(eq(int, decode(keys[i], &info), IDGEN_FORMAT_UNKNOWN), "'%s'", keys[i]);
        cr_assert(eq(i64, info.ms, 0));
        cr_assert(eq(u32, info.shard, 0));
        cr_assert(eq(u32, info.slot, 0));
        cr_assert(eq(u32, info.type, 0));
        cr_assert(eq(sz, info.type_at, 0));
        cr_assert(eq(sz, info.name_at, 0));
    }
    /* An embedded NUL is just another bad byte. */
    cr_assert(eq(int, idgen_decode("102\0" "03", 6, IDGEN_EPOCH_MS, NOW_MS, &info),
                 IDGEN_FORMAT_UNKNOWN));
}

/* A generated key is never mistaken for a shardjs one, with or without a
 * suffix, whatever its date. */
Test(shardjs, shardis_wins)
{
    struct idgen_info info;

    cr_assert(eq(int, decode("zzzzzzz{01}00101-abc", &info), IDGEN_FORMAT_SHARDIS));
    cr_assert(eq(i64, info.ms, IDGEN_MAX_MS));
    cr_assert(eq(u32, info.shard, 1));
    cr_assert(eq(u32, info.slot, 1));
    cr_assert(eq(u32, info.type, 1));
    cr_assert(eq(int, decode("015ftgG{Ju}Elx0g--", &info), IDGEN_FORMAT_SHARDIS));
    cr_assert(eq(u32, info.slot, 56789));
}

/* ---- fixed keys -------------------------------------------------------- */

Test(fixed, golden)
{
    char key[IDGEN_KEY_LEN + 1 + IDGEN_NAME_MAX + 1];
    size_t len = 0;
    struct idgen_info info;

    /* FNV-1a 32 of "users" is 0x5e7cc513; mod 3844 that is 371 = 5*62 + 61,
     * "5z". Checked with
     *   python3 -c 'h=0x811c9dc5
     *   for b in b"users": h=((h^b)*0x01000193)&0xffffffff
     *   print(hex(h), h%3844)' */
    cr_assert(eq(int, idgen_fixed_key("users", 5, IDGEN_TYPE_DEFAULT, key, &len), 0));
    key[len] = '\0';
    cr_assert(eq(sz, len, 22));
    cr_assert(eq(str, key, "0000000{5z}000zz-users"));

    cr_assert(eq(int, decode(key, &info), IDGEN_FORMAT_FIXED));
    cr_assert(eq(i64, info.ms, 0));
    cr_assert(eq(u32, info.shard, 371));
    cr_assert(eq(u32, info.slot, 0));
    cr_assert(eq(u32, info.type, IDGEN_TYPE_DEFAULT));
    cr_assert(eq(sz, info.type_at, 14));
    cr_assert(eq(sz, info.name_at, 17));
    cr_assert(eq(str, key + info.name_at, "users"));

    /* Same inputs, same key; another type changes only YY. */
    cr_assert(eq(int, idgen_fixed_key("users", 5, 0, key, &len), 0));
    key[len] = '\0';
    cr_assert(eq(str, key, "0000000{5z}00000-users"));
    /* "a": 0xe40c292c, 3672 = 59*62 + 14, "xE". */
    cr_assert(eq(int, idgen_fixed_key("a", 1, 62, key, &len), 0));
    key[len] = '\0';
    cr_assert(eq(str, key, "0000000{xE}00010-a"));
    cr_assert(eq(int, decode(key, &info), IDGEN_FORMAT_FIXED));
    cr_assert(eq(u32, info.shard, 3672));
    cr_assert(eq(u32, info.type, 62));
}

Test(fixed, name_lengths)
{
    char name[IDGEN_NAME_MAX + 2];
    char key[IDGEN_KEY_LEN + 1 + sizeof(name)];
    size_t len = 0;
    struct idgen_info info;

    for (size_t i = 0; i < sizeof(name); i++)
        name[i] = (char)(0x21 + i % 94);    /* every printable but space */

    cr_assert(eq(int, idgen_fixed_key(name, IDGEN_NAME_MAX, 5, key, &len), 0));
    cr_assert(eq(sz, len, IDGEN_KEY_LEN + 1 + IDGEN_NAME_MAX));
    cr_assert(eq(int, memcmp(key + 17, name, IDGEN_NAME_MAX), 0));
    cr_assert(eq(int, idgen_decode(key, len, IDGEN_EPOCH_MS, NOW_MS, &info),
                 IDGEN_FORMAT_FIXED));
    cr_assert(eq(u32, info.type, 5));
    cr_assert(eq(sz, info.name_at, 17));

    /* One byte more is no fixed key: by the rules, a generated key at ms 0
     * with a suffix. */
    key[len++] = 'x';
    cr_assert(eq(int, idgen_decode(key, len, IDGEN_EPOCH_MS, NOW_MS, &info),
                 IDGEN_FORMAT_SHARDIS));
    cr_assert(eq(sz, info.name_at, 0));
    /* Nor is an empty name, or a head whose T or S is not zero. */
    cr_assert(eq(int, decode("0000000{00}000zz-", &info), IDGEN_FORMAT_SHARDIS));
    cr_assert(eq(int, decode("0000001{00}000zz-users", &info), IDGEN_FORMAT_SHARDIS));
    cr_assert(eq(int, decode("0000000{00}001zz-users", &info), IDGEN_FORMAT_SHARDIS));
    cr_assert(eq(int, decode("0000000{00}000zz", &info), IDGEN_FORMAT_SHARDIS));
}

Test(fixed, bad_names)
{
    static const struct {
        char name[IDGEN_NAME_MAX + 2];
        size_t len;
    } bad[] = {
        {"", 0},
        {"a b", 3},
        {"ab\x7f", 3},
        {"\x80", 1},
        {"tab\t", 4},
        {"nul\0x", 5},
        {" ", 1},
    };
    char key[IDGEN_KEY_LEN + 1 + sizeof(bad[0].name)] = "untouched";
    char longname[IDGEN_NAME_MAX + 1];
    size_t len = 99;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert(eq(int, idgen_fixed_key(bad[i].name, bad[i].len, 0, key, &len), -EINVAL),
                  "case %zu", i);
        cr_assert(eq(str, key, "untouched"));
        cr_assert(eq(sz, len, 99));
    }
    memset(longname, 'n', sizeof(longname));
    cr_assert(eq(int, idgen_fixed_key(longname, IDGEN_NAME_MAX + 1, 0, key, &len), -EINVAL));
    cr_assert(eq(int, idgen_fixed_key("users", 5, IDGEN_TYPES, key, &len), -EINVAL));
    cr_assert(eq(str, key, "untouched"));
}

/* Fixed keys sort before every generated key from ms 1 on. */
Test(fixed, sorts_first)
{
    static const char names[][16] = {"users", "a", "~~~~", "zzzzzzzzzzzzzzz"};

    for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
        char fixed[64];
        size_t flen;

        for (uint32_t type = 0; type < IDGEN_TYPES; type += IDGEN_TYPES - 1) {
            cr_assert(eq(int, idgen_fixed_key(names[n], strlen(names[n]), type, fixed, &flen),
                         0));
            for (int i = 0; i < 2000; i++) {
                struct idgen_id id = random_id();
                char key[IDGEN_KEY_LEN];

                if (i < 4)
                    id = (struct idgen_id){1, i & 1 ? IDGEN_SHARDS - 1 : 0, 0, i & 2 ? 3843 : 0};
                else if (id.ms == 0)
                    id.ms = 1;
                cr_assert(eq(int, idgen_encode(&id, key), 0));
                cr_assert(lt(int, memcmp(fixed, key, IDGEN_KEY_LEN), 0), "%s vs %.16s",
                          names[n], key);
            }
        }
    }
}

/* ---- time and script ---------------------------------------------------- */

Test(iso_time, values)
{
    char out[32];

    cr_assert(eq(int, idgen_iso_time(0, out), 24));
    cr_assert(eq(str, out, "1970-01-01T00:00:00.000Z"));
    cr_assert(eq(int, idgen_iso_time(IDGEN_EPOCH_MS, out), 24));
    cr_assert(eq(str, out, "2012-01-01T08:00:00.000Z"));
    cr_assert(eq(int, idgen_iso_time(NOW_MS + 123, out), 24));
    cr_assert(eq(str, out, "2025-11-24T16:00:00.123Z"));
    cr_assert(eq(int, idgen_iso_time(IDGEN_EPOCH_MS + 1000000000, out), 24));
    cr_assert(eq(str, out, "2012-01-12T21:46:40.000Z"));
    cr_assert(eq(int, idgen_iso_time(-1, out), 24));
    cr_assert(eq(str, out, "1969-12-31T23:59:59.999Z"));
}

Test(iso_time, extremes_do_not_crash)
{
    const int64_t v[] = {INT64_MIN, INT64_MIN + 1, -1000, INT64_MAX,
                         IDGEN_EPOCH_MS + IDGEN_MAX_MS};

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char out[32];
        int n = idgen_iso_time(v[i], out);

        cr_assert(lt(int, n, 32));
        if (n >= 0)
            cr_assert(eq(sz, strlen(out), (size_t)n));
    }
}

Test(script, text)
{
    size_t len = strlen(idgen_script);

    cr_assert(gt(sz, len, 0));
    cr_assert(lt(sz, len, 2048), "sent on every connect: keep it short");
    cr_assert(not(zero(ptr, strstr(idgen_script, "KEYS[1]"))));
    cr_assert(not(zero(ptr, strstr(idgen_script, "TRYAGAIN"))));
    cr_assert(not(zero(ptr, strstr(idgen_script, "238328"))));
    cr_assert(eq(chr, idgen_script[len - 1], '\n'));
}

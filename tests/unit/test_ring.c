/* test_ring.c -- hashes, rings and ring diffs against golden values taken
 * from the systems shardis must match (twemproxy 0.5.0 built from source,
 * Jedis 3.0.0, hash_ring 0.2.1's README), and diffs against brute force.
 * The integration test tests/integration/test_nutcracker.py checks the
 * same placement against a running nutcracker. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring/ring.h"

static uint64_t H(enum ring_hash h, const char *s)
{
    return ring_hash_raw(h, s, strlen(s));
}

static struct ring *make(enum ring_dist dist, enum ring_hash hash, const char *tag,
                         const struct ring_server *sv, size_t n)
{
    struct ring_options o = {.dist = dist, .hash = hash, .jedis_version = 3};
    struct ring *r;
    char err[256];

    if (tag != NULL) {
        memcpy(o.tag, tag, 2);
        o.has_tag = 1;
    }
    cr_assert(eq(int, ring_create(&r, &o, sv, n, err, sizeof(err)), 0), "%s", err);
    return r;
}

static const char *owner(const struct ring *r, const char *key)
{
    return ring_server_label(r, ring_lookup(r, key, strlen(key)));
}

/* ---- hash functions ----------------------------------------------------- */

Test(hash, md5_rfc1321_vectors)
{
    static const struct { const char *in, *hex; } v[] = {
        {"", "d41d8cd98f00b204e9800998ecf8427e"},
        {"a", "0cc175b9c0f1b6a831c399e269772661"},
        {"abc", "900150983cd24fb0d6963f7d28e17f72"},
        {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
        {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
        {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
         "57edf4a22be3c955ac49da2e2107b67a"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        unsigned char d[16];
        char hex[33];
        ring_md5(v[i].in, strlen(v[i].in), d);
        for (int j = 0; j < 16; j++)
            sprintf(hex + 2 * j, "%02x", d[j]);
        cr_assert(eq(str, hex, (char *)v[i].hex), "md5('%s')", v[i].in);
    }
}

Test(hash, md5_block_boundaries)
{
    /* 55, 56 and 64 bytes straddle the padding cases (one or two final
     * blocks); 1000 spans many blocks. Digests from Python's hashlib. */
    static const struct { size_t n; const char *hex; } v[] = {
        {55, "ef1772b6dff9a122358552954ad0df65"},
        {56, "3b0c8ac703f828b04c6c197006d17218"},
        {64, "014842d480b571495a4a0363793f7367"},
        {1000, "cabe45dcc9ae5b66ba86600cca6b8ba8"},
    };
    char buf[1000];
    memset(buf, 'a', sizeof(buf));
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        unsigned char d[16];
        char hex[33];
        ring_md5(buf, v[i].n, d);
        for (int j = 0; j < 16; j++)
            sprintf(hex + 2 * j, "%02x", d[j]);
        cr_assert(eq(str, hex, (char *)v[i].hex), "md5('a' x %zu)", v[i].n);
    }
}

Test(hash, fnv1a_64_is_twemproxy_32bit_with_signed_chars)
{
    cr_assert(eq(u64, H(RING_HASH_FNV1A_64, "foo"), 4275688823u));
    cr_assert(eq(u64, H(RING_HASH_FNV1A_64, "bar"), 322520602u));
    cr_assert(eq(u64, H(RING_HASH_FNV1A_64, "user:1000"), 2927313545u));
    cr_assert(eq(u64, H(RING_HASH_FNV1A_64, "hello"), 2158673163u));
    /* x86 sign-extends 0xff and 0x80; unsigned chars would give 125548702. */
    cr_assert(eq(u64, ring_hash_raw(RING_HASH_FNV1A_64, "\xff\x80" "abc", 5), 3424020126u));
}

Test(hash, murmur64a_is_jedis)
{
    cr_assert(eq(i64, (int64_t)H(RING_HASH_MURMUR64A, "foo"), -7063922479176959649LL));
    cr_assert(eq(i64, (int64_t)H(RING_HASH_MURMUR64A, "bar"), -1976929963327131893LL));
    cr_assert(eq(i64, (int64_t)H(RING_HASH_MURMUR64A, "SHARD-0-NODE-0"),
                 -4813603235750630532LL));
}

Test(hash, standard_checks)
{
    /* Published check values of the underlying algorithms for "123456789":
     * CRC-32 0xCBF43926, FNV-1a-32 0xBB86B11C,
     * FNV-1-32 0x24148816 (all-ASCII input, so signedness does not matter). */
    cr_assert(eq(u64, H(RING_HASH_CRC32A, "123456789"), 0xcbf43926u));
    /* twemproxy 0.5.0's crc16 is XMODEM on an uncut 32-bit state: the low
     * 16 bits are XMODEM's check value 0x31C3. Values read from Debian's
     * nutcracker 0.5.0. */
    cr_assert(eq(u64, H(RING_HASH_CRC16, "123456789"), 0x869031c3u));
    cr_assert(eq(u64, H(RING_HASH_CRC16, "key:0"), 0x70128a20u));
    cr_assert(eq(u64, ring_hash_raw(RING_HASH_CRC16, "\xff\x80" "abc", 5), 0xa8041a41u));
    /* libmemcached's crc32 keeps bits 16..30 of the real CRC-32. */
    cr_assert(eq(u64, H(RING_HASH_CRC32, "123456789"), (0xcbf43926u >> 16) & 0x7fff));
    cr_assert(eq(u64, H(RING_HASH_FNV1A_32, "123456789"), 0xbb86b11cu));
    cr_assert(eq(u64, H(RING_HASH_FNV1_32, "123456789"), 0x24148816u));
    /* Jenkins one-at-a-time of "a" is 0xca2e9442. */
    cr_assert(eq(u64, H(RING_HASH_ONE_AT_A_TIME, "a"), 0xca2e9442u));
}

Test(hash, every_twemproxy_hash_is_32bit_and_sees_high_bytes)
{
    /* Exact agreement with twemproxy for bytes >= 0x80 is proven against a
     * running nutcracker in tests/integration/test_nutcracker.py. */
    for (int h = 0; h < RING_HASH_MURMUR64A; h++) {
        uint64_t a = ring_hash_raw(h, "k\x80", 2), b = ring_hash_raw(h, "k\x7f", 2);
        cr_assert(a != b, "%s", ring_hash_name(h));
        cr_assert(a <= UINT32_MAX, "%s is 32-bit", ring_hash_name(h));
    }
}

Test(hash, names_round_trip)
{
    for (int h = 0; h < RING_HASH_COUNT; h++)
        cr_assert(eq(int, ring_hash_from_name(ring_hash_name(h)), h));
    for (int d = 0; d < RING_DIST_COUNT; d++)
        cr_assert(eq(int, ring_dist_from_name(ring_dist_name(d)), d));
    cr_assert(eq(int, ring_hash_from_name("fnv2"), -EINVAL));
    cr_assert(eq(int, ring_dist_from_name("vnode"), -EINVAL));
}

Test(hash, hash_and_distribution_compatibility)
{
    char err[256];
    cr_assert(eq(int, ring_check_hash(RING_DIST_JEDIS, RING_HASH_FNV1A_64, err, sizeof(err)), -EINVAL));
    cr_assert(not(zero(ptr, strstr(err, "murmur64a or md5"))));
    cr_assert(eq(int, ring_check_hash(RING_DIST_KETAMA, RING_HASH_MURMUR64A, err, sizeof(err)), -EINVAL));
    cr_assert(eq(int, ring_check_hash(RING_DIST_HASH_RING, RING_HASH_CRC16, err, sizeof(err)), -EINVAL));
    cr_assert(eq(int, ring_check_hash(RING_DIST_JEDIS, RING_HASH_MD5, err, sizeof(err)), 0));
    cr_assert(eq(int, ring_check_hash(RING_DIST_MODULA, RING_HASH_HSIEH, err, sizeof(err)), 0));
    cr_assert(eq(int, ring_default_hash(RING_DIST_JEDIS), RING_HASH_MURMUR64A));
    cr_assert(eq(int, ring_default_hash(RING_DIST_KETAMA), RING_HASH_FNV1A_64));
}

/* ---- sharing --------------------------------------------------------------- */

/* Three servers of equal weight (the sharing case and ketama's goldens). */
static const struct ring_server three[] = {
    {NULL, "127.0.0.1:6379", 6379, 1},
    {NULL, "127.0.0.1:6380", 6380, 1},
    {NULL, "127.0.0.1:6381", 6381, 1},
};

/* Holders on several threads take and give back references while they
 * look keys up: the ring outlives all of them and the last unref frees it
 * (ASan's use-after-free and leak checks watch: a ring_ref that took
 * nothing is freed by the first unref while the threads read it). */
static void *hold_and_look(void *arg)
{
    struct ring *r = arg;
    uint32_t seen = 0;

    for (int i = 0; i < 20000; i++) {
        struct ring *mine = ring_ref(r);
        seen |= 1u << ring_lookup(mine, &i, sizeof(i));
        ring_unref(mine);
    }
    return (void *)(uintptr_t)seen;
}

Test(ring, shared_by_reference_across_threads)
{
    struct ring *r = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, NULL, three, 3);
    pthread_t t[4];
    void *seen;

    cr_assert(eq(ptr, ring_ref(r), r));
    for (int i = 0; i < 4; i++)
        cr_assert(eq(int, pthread_create(&t[i], NULL, hold_and_look, r), 0));
    ring_unref(r);                      /* the threads and the first holder remain */
    for (int i = 0; i < 4; i++) {
        cr_assert(eq(int, pthread_join(t[i], &seen), 0));
        cr_assert(eq(u32, (uint32_t)(uintptr_t)seen, 7u), "every server owns some keys");
    }
    cr_assert(eq(str, (char *)ring_server_addr(r, 2), "127.0.0.1:6381"));
    ring_unref(r);
    ring_unref(NULL);
}

/* ---- ketama -------------------------------------------------------------- */

Test(ketama, twemproxy_golden_placement)
{
    struct ring *r = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, NULL, three, 3);
    uint32_t o;

    cr_assert(eq(sz, ring_npoints(r), 480));
    cr_assert(eq(str, (char *)owner(r, "foo"), "127.0.0.1:6381"));
    cr_assert(eq(str, (char *)owner(r, "bar"), "127.0.0.1:6379"));
    cr_assert(eq(str, (char *)owner(r, "user:1000"), "127.0.0.1:6381"));
    cr_assert(eq(str, (char *)owner(r, "hello"), "127.0.0.1:6379"));
    /* The first points of twemproxy's continuum, with their servers. */
    cr_assert(eq(u64, ring_point(r, 0, &o), 20075150u)); cr_assert(eq(u32, o, 0));
    cr_assert(eq(u64, ring_point(r, 1, &o), 23409604u)); cr_assert(eq(u32, o, 1));
    cr_assert(eq(u64, ring_point(r, 2, &o), 29345296u)); cr_assert(eq(u32, o, 1));
    cr_assert(eq(u64, ring_point(r, 3, &o), 38654231u)); cr_assert(eq(u32, o, 0));
    ring_unref(r);
}

Test(ketama, weighted_golden_placement)
{
    struct ring_server sv[3];
    memcpy(sv, three, sizeof(sv));
    sv[1].weight = 2;
    struct ring *r = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, NULL, sv, 3);
    cr_assert(eq(str, (char *)owner(r, "foo"), "127.0.0.1:6381"));
    cr_assert(eq(str, (char *)owner(r, "bar"), "127.0.0.1:6381"));
    cr_assert(eq(str, (char *)owner(r, "user:1000"), "127.0.0.1:6381"));
    cr_assert(eq(str, (char *)owner(r, "hello"), "127.0.0.1:6379"));
    ring_unref(r);
}

struct points_case {
    uint32_t weights[5];
    size_t   n;
    uint32_t points[5];
};

ParameterizedTestParameters(ketama, float_point_counts)
{
    static struct points_case cases[] = {
        {{1, 2, 5, 7, 10}, 5, {28, 60, 160, 224, 320}},
        {{1, 2}, 2, {104, 212}},
        {{1, 1, 2}, 3, {120, 120, 240}},
        {{3, 1}, 2, {240, 80}},
        {{1, 1, 1}, 3, {160, 160, 160}},
    };
    return cr_make_param_array(struct points_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct points_case *pc, ketama, float_point_counts)
{
    struct ring_server sv[5];
    char addr[5][40];
    for (size_t i = 0; i < pc->n; i++) {
        snprintf(addr[i], sizeof(addr[i]), "10.0.0.%zu:6379", i + 1);
        sv[i] = (struct ring_server){NULL, addr[i], 6379, pc->weights[i]};
    }
    struct ring *r = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, NULL, sv, pc->n);
    for (size_t i = 0; i < pc->n; i++)
        cr_assert(eq(u32, ring_server_points(r, (uint32_t)i), pc->points[i]), "server %zu", i);
    ring_unref(r);
}

Test(ketama, identity_is_name_else_addr_else_host_for_11211)
{
    /* A named server hashes its name: moving its address keeps its keys. */
    struct ring_server a[] = {{"s1", "10.0.0.1:6379", 6379, 1}, {"s2", "10.0.0.2:6379", 6379, 1}};
    struct ring_server b[] = {{"s1", "10.9.9.9:7000", 7000, 1}, {"s2", "10.0.0.2:6379", 6379, 1}};
    struct ring *ra = make(RING_DIST_KETAMA, RING_HASH_MD5, NULL, a, 2);
    struct ring *rb = make(RING_DIST_KETAMA, RING_HASH_MD5, NULL, b, 2);
    for (size_t i = 0; i < ring_npoints(ra); i++)
        cr_assert(eq(u64, ring_point(ra, i, NULL), ring_point(rb, i, NULL)));
    ring_unref(ra);
    ring_unref(rb);

    /* Port 11211: the host alone is hashed, so host:11211 == a server named
     * after the host. */
    struct ring_server c[] = {{NULL, "cache1:11211", 11211, 1}, {NULL, "cache2:11211", 11211, 1}};
    struct ring_server d[] = {{"cache1", "x:1", 1, 1}, {"cache2", "y:2", 2, 1}};
    ra = make(RING_DIST_KETAMA, RING_HASH_MD5, NULL, c, 2);
    rb = make(RING_DIST_KETAMA, RING_HASH_MD5, NULL, d, 2);
    for (size_t i = 0; i < ring_npoints(ra); i++)
        cr_assert(eq(u64, ring_point(ra, i, NULL), ring_point(rb, i, NULL)));
    ring_unref(ra);
    ring_unref(rb);

    /* An unnamed unix socket hashes "<path>:" as twemproxy's parser leaves it. */
    struct ring_server e[] = {{NULL, "/tmp/r1.sock", 0, 1}, {NULL, "/tmp/r2.sock", 0, 1}};
    struct ring_server f[] = {{"/tmp/r1.sock:", "a:1", 1, 1}, {"/tmp/r2.sock:", "b:1", 1, 1}};
    ra = make(RING_DIST_KETAMA, RING_HASH_MD5, NULL, e, 2);
    rb = make(RING_DIST_KETAMA, RING_HASH_MD5, NULL, f, 2);
    for (size_t i = 0; i < ring_npoints(ra); i++)
        cr_assert(eq(u64, ring_point(ra, i, NULL), ring_point(rb, i, NULL)));
    ring_unref(ra);
    ring_unref(rb);
}

Test(ketama, empty_key_hashes_to_zero)
{
    struct ring *r = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, "{}", three, 3);
    cr_assert(eq(u64, ring_key_hash(r, "", 0), 0));
    cr_assert(eq(u32, ring_lookup(r, "", 0), ring_lookup_hash(r, 0)));
    /* An empty tag falls back to the whole key, not to the empty string. */
    cr_assert(eq(u64, ring_key_hash(r, "a{}b", 4), H(RING_HASH_FNV1A_64, "a{}b")));
    ring_unref(r);
}

Test(ketama, lookup_is_lower_bound_with_wrap)
{
    struct ring *r = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, NULL, three, 3);
    size_t n = ring_npoints(r);
    uint32_t o0, o1, olast;
    uint64_t p0 = ring_point(r, 0, &o0), p1 = ring_point(r, 1, &o1);
    uint64_t plast = ring_point(r, n - 1, &olast);

    cr_assert(eq(u32, ring_lookup_hash(r, 0), o0));
    cr_assert(eq(u32, ring_lookup_hash(r, p0), o0));
    cr_assert(eq(u32, ring_lookup_hash(r, p0 + 1), o1));
    cr_assert(eq(u32, ring_lookup_hash(r, p1), o1));
    cr_assert(eq(u32, ring_lookup_hash(r, plast), olast));
    cr_assert(eq(u32, ring_lookup_hash(r, plast + 1), o0));
    cr_assert(eq(u32, ring_lookup_hash(r, UINT32_MAX), o0));
    ring_unref(r);
}

Test(ketama, shares_sum_to_one_and_follow_weights)
{
    struct ring_server sv[3];
    memcpy(sv, three, sizeof(sv));
    sv[2].weight = 2;
    struct ring *r = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, NULL, sv, 3);
    double sum = 0;
    for (uint32_t i = 0; i < 3; i++)
        sum += ring_server_share(r, i);
    cr_assert(ieee_ulp_eq(dbl, sum, 1.0, 64));
    cr_assert(gt(dbl, ring_server_share(r, 2), 0.4));
    cr_assert(lt(dbl, ring_server_share(r, 0), 0.32));
    ring_unref(r);
}

Test(ring, twemproxy_hash_tag_rule)
{
    struct ring *r = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, "{}", three, 3);
    static const struct { const char *key, *part; } v[] = {
        {"{user1000}.following", "user1000"},
        {"foo{bar}{zap}", "bar"},
        {"{}{a}", "{}{a}"},       /* first '{' then first '}': empty -> whole key */
        {"a{}b}", "a{}b}"},
        {"{{a}}", "{a"},
        {"x{y", "x{y"},
        {"}{a}", "a"},
        {"plain", "plain"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        const char *part;
        size_t len;
        ring_tag(r, v[i].key, strlen(v[i].key), &part, &len);
        cr_assert(eq(int, (int)len, (int)strlen(v[i].part)), "%s", v[i].key);
        cr_assert(memcmp(part, v[i].part, len) == 0, "%s", v[i].key);
        cr_assert(eq(str, (char *)owner(r, v[i].key), (char *)owner(r, v[i].part)));
    }
    ring_unref(r);
}

/* ---- jedis --------------------------------------------------------------- */

Test(jedis, golden_unnamed)
{
    struct ring *r = make(RING_DIST_JEDIS, RING_HASH_MURMUR64A, NULL, three, 3);
    cr_assert(eq(u32, ring_lookup(r, "foo", 3), 0));
    cr_assert(eq(u32, ring_lookup(r, "bar", 3), 2));
    cr_assert(eq(u32, ring_lookup(r, "user:1000", 9), 2));
    cr_assert(eq(u32, ring_lookup(r, "hello", 5), 1));
    cr_assert(eq(sz, ring_npoints(r), 480));
    ring_unref(r);
}

Test(jedis, golden_named_with_tags)
{
    static const struct ring_server sv[] = {
        {"shard0", "127.0.0.1:6379", 6379, 1},
        {"shard1", "127.0.0.1:6380", 6380, 1},
        {"shard2", "127.0.0.1:6381", 6381, 1},
    };
    struct ring *r = make(RING_DIST_JEDIS, RING_HASH_MURMUR64A, "{}", sv, 3);
    cr_assert(eq(str, (char *)owner(r, "foo"), "shard2"));
    cr_assert(eq(str, (char *)owner(r, "bar"), "shard0"));
    cr_assert(eq(str, (char *)owner(r, "{user1000}.following"), "shard0"));
    cr_assert(eq(str, (char *)owner(r, "a{b}c"), "shard2"));
    ring_unref(r);
}

Test(jedis, java_regex_tag_semantics)
{
    struct ring *r = make(RING_DIST_JEDIS, RING_HASH_MURMUR64A, "{}", three, 3);
    static const struct { const char *key, *part; } v[] = {
        {"{}{a}", "}{a"},          /* .+? takes the '}' itself */
        {"a{}b}", "}b"},
        {"{{a}}", "{a"},
        {"foo{bar}{zap}", "bar"},
        {"{a\nb}{c}", "c"},        /* '.' stops at a line terminator */
        {"{a\r}", "{a\r}"},
        {"{\xe2\x80\xa8x}", "{\xe2\x80\xa8x}"},   /* U+2028 */
        {"{\xc2\x85}{z}", "z"},    /* U+0085 */
        {"{\xc3\xa9}", "\xc3\xa9"},   /* é is an ordinary char */
        {"{}", "{}"},
        {"{", "{"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        const char *part;
        size_t len;
        ring_tag(r, v[i].key, strlen(v[i].key), &part, &len);
        cr_assert(eq(int, (int)len, (int)strlen(v[i].part)), "case %zu", i);
        cr_assert(memcmp(part, v[i].part, len) == 0, "case %zu", i);
    }
    ring_unref(r);
}

/* The tag ring_tag gives key under tag chars tag, as a string. */
static void tag_of(const char *tag, const char *key, size_t klen, char *out, size_t outlen)
{
    struct ring *r = make(RING_DIST_JEDIS, RING_HASH_MURMUR64A, tag, three, 3);
    const char *part;
    size_t len;

    ring_tag(r, key, klen, &part, &len);
    cr_assert(part >= key && part + len <= key + klen);
    cr_assert(lt(sz, len, outlen));
    memcpy(out, part, len);
    out[len] = '\0';
    ring_unref(r);
}

Test(jedis, tricky_tags)
{
    static const struct { char tag[3], key[16], part[16]; } v[] = {
        {"{}", "{{}", "{"},               /* the second '{' is the one char */
        {"{}", "{}}", "}"},
        {"{}", "{{{{a}", "{{{a"},         /* leftmost open wins, not the nearest */
        {"{}", "}{", "}{"},
        {"{}", "{\n{a}", "a"},            /* a terminator ends the first open's run */
        {"{}", "{a\n}{b}", "b"},
        {"{}", "x{\r\n{y}z", "y"},
        {"{}", "{\xe2\x80\xa8{q}", "q"},  /* after a 3-byte U+2028 */
        {"{}", "{\xc2\x85}", "{\xc2\x85}"},
        {"{}", "{\n}", "{\n}"},
        {"{}", "{{\n", "{{\n"},
        {"||", "|a|", "a"},               /* same open and close char */
        {"||", "||a||", "|a"},
        {"||", "|||", "|"},
        {"\x85}", "\xc2\x85" "a}", "a"},  /* an open char inside a terminator */
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        char got[16];
        tag_of(v[i].tag, v[i].key, strlen(v[i].key), got, sizeof(got));
        cr_assert(eq(str, got, (char *)v[i].part), "case %zu", i);
    }
}

/* The rule as Jedis's regex applies it, written the slow way (from each
 * open char, scan to the first close char or line terminator): the oracle
 * ring_tag's one pass must agree with. */
static void tag_oracle(const char tag[2], const char *k, size_t n, size_t *at, size_t *len)
{
    *at = 0;
    *len = n;
    for (size_t o = 0; o < n; o++) {
        if (k[o] != tag[0])
            continue;
        for (size_t p = o + 1; p < n; p++) {
            unsigned char b = (unsigned char)k[p];
            if (b == '\n' || b == '\r' ||
                (b == 0xc2 && p + 1 < n && (unsigned char)k[p + 1] == 0x85) ||
                (b == 0xe2 && p + 2 < n && (unsigned char)k[p + 1] == 0x80 &&
                 ((unsigned char)k[p + 2] == 0xa8 || (unsigned char)k[p + 2] == 0xa9)))
                break;
            if (k[p] == tag[1] && p > o + 1) {
                *at = o + 1;
                *len = p - o - 1;
                return;
            }
        }
    }
}

Test(jedis, one_pass_tag_agrees_with_the_regex_rule)
{
    static const char alphabet[] = "{}|ab\n\r\xc2\x85\xe2\x80\xa8";
    static const char *const tags[] = {"{}", "||", "\x85}", "{\x85", "\n}", "}{"};
    unsigned seed = 12345;

    for (size_t t = 0; t < sizeof(tags) / sizeof(tags[0]); t++) {
        struct ring *r = make(RING_DIST_JEDIS, RING_HASH_MURMUR64A, tags[t], three, 3);
        for (int i = 0; i < 200000; i++) {
            char key[12];
            size_t n = (size_t)(i % 12), at, len, plen;
            const char *part;
            for (size_t j = 0; j < n; j++) {
                seed = seed * 1103515245u + 12345u;
                key[j] = alphabet[(seed >> 16) % (sizeof(alphabet) - 1)];
            }
            tag_oracle(tags[t], key, n, &at, &len);
            ring_tag(r, key, n, &part, &plen);
            cr_assert(part == key + at && plen == len,
                      "tag %zu, key %zu bytes: got [%td, +%zu), want [%zu, +%zu)", t, n,
                      part - key, plen, at, len);
        }
        ring_unref(r);
    }
}

/* A key of 4 MB of open chars (and one with a terminator every other
 * byte) is one pass: rescanning from each open char took minutes. */
Test(jedis, long_run_of_open_chars_is_linear, .timeout = 20)
{
    size_t n = 4u << 20;
    char *key = malloc(n), got[4];
    cr_assert(not(zero(ptr, key)));
    memset(key, '{', n);
    struct ring *r = make(RING_DIST_JEDIS, RING_HASH_MURMUR64A, "{}", three, 3);
    const char *part;
    size_t len;
    ring_tag(r, key, n, &part, &len);
    cr_assert(part == key && len == n);
    for (size_t i = 1; i < n; i += 2)
        key[i] = '\n';
    ring_tag(r, key, n, &part, &len);
    cr_assert(part == key && len == n);
    memcpy(key + n - 4, "a{x}", 4);    /* "\na{x}" at the very end */
    tag_of("{}", key, n, got, sizeof(got));
    cr_assert(eq(str, got, "x"));
    ring_lookup(r, key, n);
    ring_unref(r);
    free(key);
}

Test(jedis, version2_named_points_include_weight)
{
    static const struct ring_server sv[] = {{"a", "h:1", 1, 1}, {"b", "h:2", 2, 2}};
    struct ring_options o = {.dist = RING_DIST_JEDIS, .hash = RING_HASH_MURMUR64A,
                             .jedis_version = 2};
    struct ring *r;
    char err[256];
    cr_assert(eq(int, ring_create(&r, &o, sv, 2, err, sizeof(err)), 0));
    /* "a*1" + "0" = "a*10" is a point of a; "b*2" + "5" of b. Points are
     * Java longs in signed order, stored with the sign bit flipped. */
    uint64_t pa = H(RING_HASH_MURMUR64A, "a*10") ^ (UINT64_C(1) << 63);
    uint64_t pb = H(RING_HASH_MURMUR64A, "b*25") ^ (UINT64_C(1) << 63);
    cr_assert(eq(u32, ring_lookup_hash(r, pa), 0));
    cr_assert(eq(u32, ring_lookup_hash(r, pb), 1));
    cr_assert(eq(u32, ring_server_points(r, 1), 320));
    ring_unref(r);

    o.jedis_version = 4;
    cr_assert(eq(int, ring_create(&r, &o, sv, 2, err, sizeof(err)), -EINVAL));
}

Test(jedis, md5_variant_uses_first_four_bytes)
{
    struct ring *r = make(RING_DIST_JEDIS, RING_HASH_MD5, NULL, three, 3);
    uint64_t h = ring_key_hash(r, "foo", 3);
    cr_assert(eq(u64, h ^ (UINT64_C(1) << 63), H(RING_HASH_MD5, "foo")));
    ring_unref(r);
}

/* ---- hash_ring, modula, random ------------------------------------------- */

Test(hash_ring, readme_golden_value)
{
    static const struct ring_server sv[] = {
        {NULL, "127.0.0.1:8080", 8080, 1},
        {NULL, "127.0.0.2:8080", 8080, 2},
        {NULL, "127.0.0.3:8080", 8080, 4},
    };
    struct ring *r = make(RING_DIST_HASH_RING, RING_HASH_MD5, NULL, sv, 3);
    cr_assert(eq(str, (char *)owner(r, "users:102"), "127.0.0.3:8080"));
    /* floorf(w/7 * 40.0 * 3) replicas of 4 points: 17, 34, 68. */
    cr_assert(eq(u32, ring_server_points(r, 0), 68));
    cr_assert(eq(u32, ring_server_points(r, 1), 136));
    cr_assert(eq(u32, ring_server_points(r, 2), 272));
    /* It hashed a C string: bytes after a NUL do not count. */
    cr_assert(eq(u64, ring_key_hash(r, "ab\0cd", 5), ring_key_hash(r, "ab", 2)));
    ring_unref(r);
}

Test(modula, slots_follow_twemproxys_sorted_server_order)
{
    /* twemproxy sorts servers by identity (shorter first, then bytes):
     * zeta:1, alpha:2, beta:1 become beta, zeta, alpha, alpha. */
    static const struct ring_server sv[] = {
        {"zeta", "10.0.0.1:1", 1, 1}, {"alpha", "10.0.0.2:1", 1, 2}, {"beta", "10.0.0.3:1", 1, 1},
    };
    static const uint32_t slots[] = {2, 0, 1, 1};
    struct ring *r = make(RING_DIST_MODULA, RING_HASH_FNV1A_64, NULL, sv, 3);
    for (uint64_t h = 0; h < 8; h++)
        cr_assert(eq(u32, ring_lookup_hash(r, h), slots[h % 4]), "h=%llu", (unsigned long long)h);
    ring_unref(r);
}

Test(ring, same_twemproxy_identity_refused)
{
    /* A server named like another's host:port would share its points. */
    static const struct ring_server sv[] = {
        {NULL, "10.0.0.1:6379", 6379, 1}, {"10.0.0.1:6379", "10.0.0.2:6379", 6379, 1},
    };
    struct ring_options o = {.dist = RING_DIST_KETAMA, .hash = RING_HASH_FNV1A_64};
    struct ring *r;
    char err[256];
    cr_assert(eq(int, ring_create(&r, &o, sv, 2, err, sizeof(err)), -EINVAL));
    cr_assert(not(zero(ptr, strstr(err, "same ring identity"))), "%s", err);
    o.dist = RING_DIST_JEDIS;           /* Jedis hashes positions, not these */
    o.hash = RING_HASH_MURMUR64A;
    o.jedis_version = 3;
    cr_assert(eq(int, ring_create(&r, &o, sv, 2, err, sizeof(err)), 0), "%s", err);
    ring_unref(r);
}

Test(modula, hash_mod_total_weight)
{
    struct ring_server sv[3];
    memcpy(sv, three, sizeof(sv));
    sv[1].weight = 2;
    struct ring *r = make(RING_DIST_MODULA, RING_HASH_FNV1A_64, NULL, sv, 3);
    static const uint32_t expanded[] = {0, 1, 1, 2};
    const char *keys[] = {"foo", "bar", "user:1000", "hello", "a", "b", "c"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        uint64_t h = H(RING_HASH_FNV1A_64, keys[i]);
        cr_assert(eq(u32, ring_lookup(r, keys[i], strlen(keys[i])), expanded[h % 4]));
    }
    cr_assert(eq(u32, ring_lookup(r, "", 0), 0));
    cr_assert(ieee_ulp_eq(dbl, ring_server_share(r, 1), 0.5, 4));
    ring_unref(r);
}

Test(random, picks_every_server)
{
    struct ring *r = make(RING_DIST_RANDOM, RING_HASH_FNV1A_64, NULL, three, 3);
    int seen[3] = {0};
    for (int i = 0; i < 300; i++)
        seen[ring_lookup(r, "foo", 3)]++;
    cr_assert(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
    cr_assert(eq(sz, ring_npoints(r), 0));
    ring_unref(r);
}

Test(ring, bad_servers_refused)
{
    struct ring_options o = {.dist = RING_DIST_KETAMA, .hash = RING_HASH_FNV1A_64};
    struct ring_server sv[] = {{NULL, "h:1", 1, 0}};
    struct ring *r;
    char err[256];
    cr_assert(eq(int, ring_create(&r, &o, sv, 0, err, sizeof(err)), -EINVAL));
    cr_assert(eq(int, ring_create(&r, &o, sv, 1, err, sizeof(err)), -EINVAL));
    cr_assert(not(zero(ptr, strstr(err, "weight"))));
    cr_assert(zero(ptr, r));
}

/* ---- diff ---------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Every sampled position's move must match two plain lookups exactly, and
 * the diff's total share must match the sampled share. */
static void check_diff(struct ring *a, struct ring *b, uint64_t mask, double want)
{
    struct ring_diff *d;
    char err[256];
    size_t moving = 0, n = 200000;

    cr_assert(eq(int, ring_diff_create(&d, a, b, err, sizeof(err)), 0), "%s", err);
    for (size_t i = 0; i < n; i++) {
        uint64_t h = rng() & mask;
        uint32_t oa = ring_lookup_hash(a, h), ob = ring_lookup_hash(b, h), f, t;
        int moves = strcmp(ring_server_addr(a, oa), ring_server_addr(b, ob)) != 0;
        cr_assert(eq(int, ring_diff_moving(d, h, &f, &t), moves), "h=%llu",
                  (unsigned long long)h);
        if (moves) {
            cr_assert(eq(u32, f, oa));
            cr_assert(eq(u32, t, ob));
            moving++;
        }
    }
    /* Point boundaries are where owners change: check them all. */
    for (size_t i = 0; i < ring_npoints(a) && ring_distribution(a) != RING_DIST_MODULA; i++) {
        uint64_t p = ring_point(a, i, NULL);
        for (int delta = -1; delta <= 1; delta++) {
            uint64_t h = (p + (uint64_t)delta) & mask;
            uint32_t oa = ring_lookup_hash(a, h), ob = ring_lookup_hash(b, h), f, t;
            int moves = strcmp(ring_server_addr(a, oa), ring_server_addr(b, ob)) != 0;
            cr_assert(eq(int, ring_diff_moving(d, h, &f, &t), moves));
        }
    }
    double sampled = (double)moving / (double)n;
    cr_assert(lt(dbl, sampled - d->moving, 0.01));
    cr_assert(lt(dbl, d->moving - sampled, 0.01));
    if (want >= 0) {
        cr_assert(lt(dbl, d->moving - want, 0.05), "moving %f want %f", d->moving, want);
        cr_assert(lt(dbl, want - d->moving, 0.05), "moving %f want %f", d->moving, want);
    }
    double sum = 0;
    for (uint32_t i = 0; i < ring_nservers(a); i++)
        for (uint32_t j = 0; j < ring_nservers(b); j++)
            sum += ring_diff_share(d, i, j);
    cr_assert(ieee_ulp_eq(dbl, sum, d->moving, 64));
    for (size_t i = 1; i < d->narcs; i++)
        cr_assert(lt(u64, d->arcs[i - 1].last, d->arcs[i].first));
    ring_diff_free(d);
}

static const struct ring_server four[] = {
    {NULL, "127.0.0.1:6379", 6379, 1},
    {NULL, "127.0.0.1:6380", 6380, 1},
    {NULL, "127.0.0.1:6381", 6381, 1},
    {NULL, "127.0.0.1:6382", 6382, 1},
};

Test(diff, ketama_add_a_server_moves_about_a_quarter)
{
    struct ring *a = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, NULL, four, 3);
    struct ring *b = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, NULL, four, 4);
    check_diff(a, b, UINT32_MAX, 0.25);
    /* Only the new server gains: nothing moves between old servers. */
    struct ring_diff *d;
    char err[256];
    cr_assert(eq(int, ring_diff_create(&d, a, b, err, sizeof(err)), 0));
    for (uint32_t i = 0; i < 3; i++)
        for (uint32_t j = 0; j < 3; j++)
            cr_assert(eq(dbl, ring_diff_share(d, i, j), 0.0));
    ring_diff_free(d);
    ring_unref(a);
    ring_unref(b);
}

Test(diff, ketama_remove_and_reweight)
{
    struct ring_server w[4];
    memcpy(w, four, sizeof(w));
    w[0].weight = 3;
    struct ring *a = make(RING_DIST_KETAMA, RING_HASH_MD5, "{}", four, 4);
    struct ring *b = make(RING_DIST_KETAMA, RING_HASH_MD5, "{}", four + 1, 3);
    struct ring *c = make(RING_DIST_KETAMA, RING_HASH_MD5, "{}", w, 4);
    check_diff(a, b, UINT32_MAX, 0.25);
    check_diff(a, c, UINT32_MAX, -1);
    check_diff(a, a, UINT32_MAX, 0.0);
    ring_unref(a);
    ring_unref(b);
    ring_unref(c);
}

Test(diff, same_address_renamed_is_not_a_move_by_itself)
{
    struct ring_server named[3];
    memcpy(named, three, sizeof(named));
    named[0].name = "renamed";
    struct ring *a = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, NULL, three, 3);
    struct ring *b = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, NULL, named, 3);
    struct ring_diff *d;
    char err[256];
    cr_assert(eq(int, ring_diff_create(&d, a, b, err, sizeof(err)), 0));
    /* Its points moved, so some keys move between servers, but none from
     * server 0 to server 0. */
    cr_assert(eq(dbl, ring_diff_share(d, 0, 0), 0.0));
    ring_diff_free(d);
    check_diff(a, b, UINT32_MAX, -1);
    ring_unref(a);
    ring_unref(b);
}

Test(diff, jedis_signed_space)
{
    struct ring *a = make(RING_DIST_JEDIS, RING_HASH_MURMUR64A, NULL, four, 3);
    struct ring *b = make(RING_DIST_JEDIS, RING_HASH_MURMUR64A, NULL, four, 4);
    check_diff(a, b, UINT64_MAX, 0.25);
    ring_unref(a);
    ring_unref(b);
}

Test(diff, hash_ring_and_modula)
{
    struct ring *a = make(RING_DIST_HASH_RING, RING_HASH_MD5, NULL, four, 3);
    struct ring *b = make(RING_DIST_HASH_RING, RING_HASH_MD5, NULL, four, 4);
    check_diff(a, b, UINT32_MAX, 0.25);
    ring_unref(a);
    ring_unref(b);

    /* modula 3 -> 4 servers: a key stays only where h%3 and h%4 pick the
     * same address: residues 0,1,2 of 12 -> 3/12 stay, 75% move. */
    a = make(RING_DIST_MODULA, RING_HASH_FNV1A_64, NULL, four, 3);
    b = make(RING_DIST_MODULA, RING_HASH_FNV1A_64, NULL, four, 4);
    check_diff(a, b, UINT32_MAX, 0.75);
    ring_unref(a);
    ring_unref(b);
}

Test(diff, refuses_rings_that_hash_differently)
{
    struct ring *a = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, NULL, four, 3);
    struct ring *b = make(RING_DIST_KETAMA, RING_HASH_MD5, NULL, four, 3);
    struct ring *c = make(RING_DIST_KETAMA, RING_HASH_FNV1A_64, "{}", four, 3);
    struct ring *rnd = make(RING_DIST_RANDOM, RING_HASH_FNV1A_64, NULL, four, 3);
    struct ring_diff *d;
    char err[256];
    cr_assert(eq(int, ring_diff_create(&d, a, b, err, sizeof(err)), -EINVAL));
    cr_assert(not(zero(ptr, strstr(err, "hash keys differently"))));
    cr_assert(eq(int, ring_diff_create(&d, a, c, err, sizeof(err)), -EINVAL));
    cr_assert(eq(int, ring_diff_create(&d, rnd, rnd, err, sizeof(err)), -EINVAL));
    cr_assert(zero(ptr, d));
    ring_unref(a);
    ring_unref(b);
    ring_unref(c);
    ring_unref(rnd);
}

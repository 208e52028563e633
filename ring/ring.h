/* ring.h -- key hashing and key placement: which backend owns a key.
 *
 * A ring is built from a plain list of servers (no config format involved)
 * and is immutable once built, so a proxy can swap rings at run time by
 * swapping one pointer. Every distribution places keys exactly as the
 * system it comes from, so users can move to shardis without moving data:
 *
 *   ketama     twemproxy 0.5.0's continuum (the default)
 *   jedis      Jedis ShardedJedis (2.x and 3.x point strings)
 *   hash_ring  the npm package hash_ring 0.2.1 used by shardjs
 *   modula     twemproxy's hash % total weight
 *   random     twemproxy's random: a key has no fixed owner
 *
 * Key hashes and ring points live in one ordered space, "ring order": a
 * uint64_t where 32-bit rings use the low half and the jedis ring maps its
 * signed int64 points to unsigned by flipping the sign bit. A lookup is a
 * lower_bound over that space, wrapping to the first point.
 *
 * Nothing here does I/O; lookups allocate nothing. Functions that can fail
 * return 0 or a negative errno and write a message for the operator into
 * the caller's buffer. */
#ifndef SHARDIS_RING_H
#define SHARDIS_RING_H

#include <stddef.h>
#include <stdint.h>

/* Hash functions: every twemproxy hash, with its exact 32-bit results on
 * x86-64 (signed char), plus Jedis's MurmurHash64A. */
enum ring_hash {
    RING_HASH_ONE_AT_A_TIME,
    RING_HASH_MD5,
    RING_HASH_CRC16,
    RING_HASH_CRC32,
    RING_HASH_CRC32A,
    RING_HASH_FNV1_64,
    RING_HASH_FNV1A_64,
    RING_HASH_FNV1_32,
    RING_HASH_FNV1A_32,
    RING_HASH_HSIEH,
    RING_HASH_MURMUR,
    RING_HASH_JENKINS,
    RING_HASH_MURMUR64A,
    RING_HASH_COUNT
};

enum ring_dist {
    RING_DIST_KETAMA,
    RING_DIST_JEDIS,
    RING_DIST_HASH_RING,
    RING_DIST_MODULA,
    RING_DIST_RANDOM,
    RING_DIST_COUNT
};

/* Name <-> enum. The _from_name functions return the enum value, or -EINVAL
 * for a name they do not know. */
const char *ring_hash_name(enum ring_hash h);
int ring_hash_from_name(const char *name);
const char *ring_dist_name(enum ring_dist d);
int ring_dist_from_name(const char *name);

/* The names accepted, as "a, b, c", for error messages. Static storage. */
const char *ring_hash_names(void);
const char *ring_dist_names(void);

/* The hash a distribution uses when the config names none. */
enum ring_hash ring_default_hash(enum ring_dist d);

/* 0 if distribution d can place keys with hash h, else -EINVAL with the
 * reason in err. */
int ring_check_hash(enum ring_dist d, enum ring_hash h, char *err, size_t errlen);

/* The hash function alone. 32-bit functions return their value zero
 * extended; murmur64a returns its 64 bits (as Jedis's long, two's
 * complement). */
uint64_t ring_hash_raw(enum ring_hash h, const void *key, size_t len);

/* MD5 of buf into out[16] (RFC 1321). Used by ketama, hash_ring and jedis. */
void ring_md5(const void *buf, size_t len, unsigned char out[16]);

/* One backend as the ring sees it. The ring copies what it needs; the
 * caller keeps ownership of these strings. */
struct ring_server {
    const char *name;       /* optional name (NULL: none) */
    const char *addr;       /* "host:port" as written, or a unix socket path */
    uint16_t    port;       /* 0 for a unix socket */
    uint32_t    weight;     /* >= 1 */
};

struct ring_options {
    enum ring_dist dist;
    enum ring_hash hash;
    char           tag[2];        /* hash tag open/close chars */
    unsigned       has_tag:1;     /* hash_tag configured */
    int            jedis_version; /* 2 or 3 (point strings of named shards) */
};

struct ring;

/* Build a ring over servers[0..n-1]. On success *out is a new ring, held
 * once by the caller. Returns -EINVAL (bad options or servers) or -ENOMEM,
 * with the reason in err. */
int ring_create(struct ring **out, const struct ring_options *opt,
                const struct ring_server *servers, size_t n,
                char *err, size_t errlen);

/* A ring is shared by whoever routes by it or keeps it (a pool, a reload
 * in flight, a migration's prior rings, and later a pool on each event
 * loop): each holder has one reference, ring_ref takes another (and
 * returns r), ring_unref gives one back, and the last frees the ring.
 * The count is atomic, so holders on different threads need no lock;
 * nothing else in a ring changes after ring_create, so reading it needs
 * none either. ring_unref(NULL) does nothing. */
struct ring *ring_ref(struct ring *r);
void ring_unref(struct ring *r);

/* The key's position in ring order: hash tag applied, then the hash. An
 * empty key (or empty hashed part) is at 0, as in twemproxy. twemproxy
 * also uses 0 for every key of a one-server pool; that changes no owner,
 * so it is not done here and positions stay comparable across rings. */
uint64_t ring_key_hash(const struct ring *r, const void *key, size_t len);

/* The index of the server that owns a ring-order position or a key. For
 * the random distribution every call picks a server at random. */
uint32_t ring_lookup_hash(const struct ring *r, uint64_t hash);
uint32_t ring_lookup(const struct ring *r, const void *key, size_t len);

/* The part of key that is hashed: the hash tag's inside where the tag
 * applies, else the whole key. Points into key. */
void ring_tag(const struct ring *r, const void *key, size_t len,
              const char **part, size_t *partlen);

/* Facts about a built ring. Strings belong to the ring. */
const struct ring_options *ring_options(const struct ring *r);
size_t ring_nservers(const struct ring *r);
enum ring_dist ring_distribution(const struct ring *r);
enum ring_hash ring_hash_function(const struct ring *r);
const char *ring_server_label(const struct ring *r, uint32_t idx);  /* name, else host:port */
const char *ring_server_addr(const struct ring *r, uint32_t idx);   /* host:port or path */
uint32_t ring_server_weight(const struct ring *r, uint32_t idx);
uint32_t ring_server_points(const struct ring *r, uint32_t idx);
/* Share of the key space (0..1) the server owns; 0 for random. */
double ring_server_share(const struct ring *r, uint32_t idx);
/* Number of points on the continuum (weight units for modula). */
size_t ring_npoints(const struct ring *r);
/* Point i in ring order, and its owner (point rings only). */
uint64_t ring_point(const struct ring *r, size_t i, uint32_t *owner);

/* ---- ring diff -------------------------------------------------------
 *
 * The parts of the key space whose owner changes between two rings. Owners
 * are compared by address, not by name: the data lives at an address, so a
 * renamed server at the same address keeps its keys. Both rings must hash
 * keys the same way (distribution, hash, hash tag). Point rings (ketama,
 * jedis, hash_ring) give arcs; modula rings give shares from residue
 * classes and answer ring_diff_moving by looking both rings up; random
 * rings have no owners to diff. */
struct ring_arc {
    uint64_t first;          /* first ring-order position, inclusive */
    uint64_t last;           /* last position, inclusive */
    uint32_t from;           /* owner in the old ring (index) */
    uint32_t to;             /* owner in the new ring (index) */
};

struct ring_diff {
    const struct ring *old;  /* borrowed: must outlive the diff */
    const struct ring *new;  /* borrowed */
    struct ring_arc   *arcs; /* sorted, coalesced, moving arcs (none for modula) */
    size_t             narcs;
    uint32_t          *map;  /* old index -> new index at the same address, or
                                UINT32_MAX where the address is gone */
    double            *pairs;/* [from * nnew + to]: share moving from -> to */
    double             moving;   /* share of the key space that moves */
};

/* Compute the diff; *out is freed with ring_diff_free. Returns -EINVAL when
 * the rings hash keys differently or are random, -E2BIG for modula rings
 * whose weight totals have a least common multiple above 2^26 (the reason
 * in err), or -ENOMEM. */
int ring_diff_create(struct ring_diff **out, const struct ring *old,
                     const struct ring *new, char *err, size_t errlen);
void ring_diff_free(struct ring_diff *d);

/* 1 if the key at ring-order position hash changes owner (and then *from,
 * *to are set to the old and new owner indexes), else 0. */
int ring_diff_moving(const struct ring_diff *d, uint64_t hash,
                     uint32_t *from, uint32_t *to);

/* Share (0..1) of the key space moving from old server `from` to new
 * server `to`. */
double ring_diff_share(const struct ring_diff *d, uint32_t from, uint32_t to);

#endif

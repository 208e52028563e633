/* idgen.h -- generated keys: unique, time-sorted base62 ids (design.md 5).
 *
 * A generated key is 16 bytes, TTTTTTT{LL}SSSYY, over the alphabet
 * 0-9A-Za-z (ASCII order, so byte order is time order):
 *
 *   T  7 chars  milliseconds since the pool's epoch_ms (111 years of them)
 *   L  2 chars  logical shard 0..3843, inside braces: a real hash tag, so
 *               every type of one id and the shard's sequence key
 *               "$equence{LL}" live on one backend
 *   S  3 chars  slot within that millisecond for that logical shard
 *   Y  2 chars  key type 0..3843; 3843 is the default type
 *
 * Uniqueness is on (T, L, S) and comes from the allocator script
 * (idgen_script), which runs on the backend that owns {LL} and keeps the
 * shard's next free (ms, slot) there. Everything in this module is pure:
 * no I/O, no clock (callers pass the time), no allocation.
 *
 * Two older layouts are decoded too: shardjs keys (<base62 ms, unpadded>
 * <variant 2><type 2>[-suffix], same epoch and alphabet) and fixed keys
 * (0000000{LL}000YY-name: a well-known name that sorts before every
 * generated key). */
#ifndef SHARDIS_IDGEN_H
#define SHARDIS_IDGEN_H

#include <stddef.h>
#include <stdint.h>

#define IDGEN_KEY_LEN       16                  /* a generated key's bytes */
#define IDGEN_SHARDS        3844                /* 62^2 logical shards */
#define IDGEN_SLOTS         238328              /* 62^3 slots per ms per shard */
#define IDGEN_TYPES         3844                /* 62^2 type codes */
#define IDGEN_TYPE_DEFAULT  3843                /* "zz" */
#define IDGEN_MAX_MS        3521614606207LL     /* 62^7 - 1 */
#define IDGEN_EPOCH_MS      1325404800000LL     /* shardjs's: 2012-01-01T08:00Z */
#define IDGEN_NAME_MAX      128                 /* bytes of a fixed key's name */

/* The parts of a generated key. */
struct idgen_id {
    int64_t  ms;        /* since the epoch, 0..IDGEN_MAX_MS */
    uint32_t shard;     /* 0..IDGEN_SHARDS-1 */
    uint32_t slot;      /* 0..IDGEN_SLOTS-1 */
    uint32_t type;      /* 0..IDGEN_TYPES-1 */
};

/* Write v as exactly width base62 digits, zero-padded. 0, or -ERANGE if v
 * needs more digits (out is then untouched). */
int idgen_b62_encode(uint64_t v, char *out, size_t width);
/* Read len (1..10) base62 digits. 0, -EINVAL for a byte outside the
 * alphabet or a bad length. */
int idgen_b62_decode(const char *s, size_t len, uint64_t *v);

/* Write id's 16-byte key to out (no NUL). 0, or -ERANGE if a field is out
 * of its range. */
int idgen_encode(const struct idgen_id *id, char out[IDGEN_KEY_LEN]);
/* Advance id to the next slot: slot + 1, spilling into the next ms. */
void idgen_next(struct idgen_id *id);

enum idgen_format {
    IDGEN_FORMAT_UNKNOWN,
    IDGEN_FORMAT_SHARDIS,   /* TTTTTTT{LL}SSSYY[-suffix] */
    IDGEN_FORMAT_SHARDJS,   /* legacy <T><VV><YY>[-suffix] */
    IDGEN_FORMAT_FIXED,     /* 0000000{LL}000YY-name */
};

/* What a key says about itself. */
struct idgen_info {
    enum idgen_format format;
    int64_t  ms;            /* since the epoch (SHARDIS, SHARDJS; 0 for FIXED) */
    uint32_t shard;         /* SHARDIS, FIXED */
    uint32_t slot;          /* SHARDIS: S; SHARDJS: the variant */
    uint32_t type;          /* every format but UNKNOWN */
    size_t   type_at;       /* offset of the two type chars in the key */
    size_t   name_at;       /* FIXED: the name is key[name_at, len) */
};

/* Decode key[0, len). Never fails: a key that is none of the layouts is
 * IDGEN_FORMAT_UNKNOWN (returned, and in info->format).
 *   SHARDIS  exactly 16 bytes as above, or those 16 then '-' and anything
 *            (the suffix is ignored); unless it is FIXED.
 *   FIXED    the 16-byte head has T = 0 and S = 0, then '-' and a name of
 *            1..IDGEN_NAME_MAX bytes.
 *   SHARDJS  the part before the first '-' is 5..11 base62 chars whose
 *            time (all but the last 4 chars) is at most 7 chars and not
 *            later than now_ms + one day (shardjs itself refused keys from
 *            the future); now_ms is Unix ms, epoch_ms the pool's epoch. */
enum idgen_format idgen_decode(const char *key, size_t len, int64_t epoch_ms,
                               int64_t now_ms, struct idgen_info *info);

/* The fixed key for name[0, len) with type: "0000000{LL}000YY-name", L a
 * hash of the name (FNV-1a 32-bit, mod IDGEN_SHARDS), so the same inputs
 * always give the same key. out must hold IDGEN_KEY_LEN + 1 + len bytes;
 * *outlen gets the length. 0, or -EINVAL for an empty name, one longer
 * than IDGEN_NAME_MAX or holding a byte outside 0x21..0x7e, or a type out
 * of range. */
int idgen_fixed_key(const char *name, size_t len, uint32_t type, char *out, size_t *outlen);

/* Unix ms as ISO-8601 UTC with milliseconds, "2026-11-24T03:00:52.123Z";
 * out must hold 32 bytes. Returns the length (24 for years 0..9999). */
int idgen_iso_time(int64_t unix_ms, char *out);

/* The allocator, as Lua for EVAL/EVALSHA (design.md 5). Call it as
 *
 *   EVALSHA <sha> 1 $equence{LL} n epoch_ms max_ahead_ms restart_guard_ms
 *           run_id skew_ms
 *
 * n slots (1..IDGEN_SLOTS*k, any positive count) are reserved for logical
 * shard LL and the first is returned as the array {ms, slot}; the rest
 * follow it contiguously (idgen_next). The hash keeps the next free
 * (ms, slot) and the run_id of the server that wrote it. Time is the
 * server's TIME (plus skew_ms, a test hook; 0 in production) minus the
 * epoch; it never goes backwards, a full ms spills into the next, a hash
 * that is missing or was written by another run_id (a restart from an old
 * snapshot, a failover, a MIGRATE) starts restart_guard_ms ahead, and a
 * reservation that would end more than max_ahead_ms ahead of the clock is
 * refused with "-TRYAGAIN ..." and changes nothing. An empty run_id makes
 * the script read the server's own from INFO. */
extern const char idgen_script[];

#endif

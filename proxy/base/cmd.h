/* cmd.h -- the command table: arity, flags, key specs, ACL categories
 * and tips of every command and subcommand, as the servers' COMMAND
 * reports them.
 *
 * It starts as the table generated from the Redis and Valkey versions
 * scripts/gen-commands was run against (cmdtab.h), and learns from the
 * servers themselves (cmdinfo.c): their rows replace the generated ones
 * and add what the generation did not know (a newer server, a module).
 * A row, once there, stays, at the same address and number: requests
 * and clients keep both. Only the loop changes it, between requests. */
#ifndef SHARDIS_CMD_H
#define SHARDIS_CMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    CMD_WRITE             = 1 << 0,
    CMD_READONLY          = 1 << 1,
    CMD_DENYOOM           = 1 << 2,
    CMD_ADMIN             = 1 << 3,
    CMD_PUBSUB            = 1 << 4,
    CMD_NOSCRIPT          = 1 << 5,
    CMD_BLOCKING          = 1 << 6,
    CMD_LOADING           = 1 << 7,
    CMD_STALE             = 1 << 8,
    CMD_FAST              = 1 << 9,
    CMD_NO_AUTH           = 1 << 10,
    CMD_MOVABLEKEYS       = 1 << 11,
    CMD_NO_MULTI          = 1 << 12,
    CMD_NO_MANDATORY_KEYS = 1 << 13,
    CMD_ALLOW_BUSY        = 1 << 14,
    CMD_DANGEROUS         = 1 << 15,    /* ACL category @dangerous */
    CMD_ALL_SHARDS        = 1 << 16,    /* request_policy all_shards/all_nodes */
    CMD_MULTI_SHARD       = 1 << 17,    /* request_policy multi_shard */
    CMD_ALWAYS            = 1 << 18,    /* shardis's own: answered by shardis whatever
                                           the servers have (gen-commands's LATER:
                                           CLIENT SETINFO), so never gone */
};

/* How the replies of a command sent to several servers become one: Redis
 * 7's response_policy tip. */
enum cmd_reply {
    CMD_REPLY_DEFAULT,      /* none given: arrays are concatenated */
    CMD_REPLY_SUM,          /* agg_sum: integers added */
    CMD_REPLY_ALL_OK,       /* all_succeeded: the reply if no server failed */
    CMD_REPLY_ONE_OK,       /* one_succeeded: success if any server succeeded */
    CMD_REPLY_AND,          /* agg_logical_and: element-wise AND of 0/1 arrays */
    CMD_REPLY_MIN,          /* agg_min */
    CMD_REPLY_SPECIAL,      /* special: no general rule */
    CMD_REPLY_DIGEST,       /* shardis's own, for DEBUG DIGEST: the digest of
                               the servers' keys together (frag.c) */
    CMD_REPLY_MAX,          /* shardis's own, for PUBSUB NUMPAT: the largest */
    CMD_REPLY_NAMES,        /* shardis's own, for PUBSUB (SHARD)CHANNELS: every
                               name once, shardis's own channels left out */
    CMD_REPLY_NUMSUB,       /* shardis's own, for PUBSUB (SHARD)NUMSUB: each
                               name's largest count (0 for shardis's own) */
    /* shardis's own, for the keyspace without shardis's keys (own.h): */
    CMD_REPLY_DBSIZE,       /* DBSIZE: summed, less each server's own keys */
    CMD_REPLY_RANDOMKEY,    /* RANDOMKEY, sent as own_randomkey: one non-nil */
    CMD_REPLY_KEYS,         /* KEYS: concatenated, shardis's own left out */
};

/* A key spec (Redis 7's COMMAND INFO key_specs): where to start looking
 * (begin_search) and how to find the keys from there (find_keys). keys.c
 * reads them, as redis-server does; nothing else does. */
enum {
    CMD_KEY_RO             = 1 << 0,
    CMD_KEY_RW             = 1 << 1,
    CMD_KEY_OW             = 1 << 2,
    CMD_KEY_RM             = 1 << 3,
    CMD_KEY_ACCESS         = 1 << 4,
    CMD_KEY_UPDATE         = 1 << 5,
    CMD_KEY_INSERT         = 1 << 6,
    CMD_KEY_DELETE         = 1 << 7,
    CMD_KEY_NOT_KEY        = 1 << 8,    /* not a key (SPUBLISH's channel ...) */
    CMD_KEY_INCOMPLETE     = 1 << 9,    /* may miss keys: a written rule finds them */
    CMD_KEY_VARIABLE_FLAGS = 1 << 10,
};
enum cmd_bs { CMD_BS_UNKNOWN, CMD_BS_INDEX, CMD_BS_KEYWORD };
enum cmd_fk { CMD_FK_UNKNOWN, CMD_FK_RANGE, CMD_FK_KEYNUM };

struct cmd_keyspec {
    uint16_t    flags;          /* CMD_KEY_* */
    uint8_t     bs;             /* enum cmd_bs */
    int16_t     pos;            /* INDEX: the position; KEYWORD: where the search
                                   starts (negative: from the end, backwards) */
    const char *keyword;        /* KEYWORD: the word before the keys */
    uint8_t     fk;             /* enum cmd_fk */
    int16_t     fk_args[3];     /* RANGE: lastkey, keystep, limit;
                                   KEYNUM: keynumidx, firstkey, keystep */
};

struct cmd {
    const char *name;       /* lower case; "parent|sub" for subcommands */
    int         arity;      /* n: exactly n args; -n: at least n */
    uint32_t    flags;      /* CMD_* */
    int         first;      /* first key position, 0 if none */
    int         last;       /* last key position, negative from the end */
    int         step;
    enum cmd_reply reply;   /* merging the replies of several servers */
    uint32_t    acl;        /* ACL categories: bit i is cmd_acl_names[i] */
    uint8_t     nspecs;     /* key specs */
    const struct cmd_keyspec *specs;
    /* The table's own (not in the generated rows): */
    uint32_t    known;      /* the kinds of server that said they have it (bit k:
                               kind k, cmd_kind); 0: only the generated table */
    uint32_t    ver;        /* the version (cmd_version) its attributes are of;
                               0: the generated table's */
    uint16_t    num;        /* cmd_number */
    uint8_t     has_sub;    /* it has subcommands ("name|...") */
    uint8_t     owned;      /* CMD_OWN_*: what the table frees when it replaces it */
    uint8_t     gone;       /* servers have said what they have, and not this */
    uint8_t     index_keys; /* its key specs are all at fixed indexes (INDEX and
                               RANGE, none incomplete): keys.c's quick path */
};
enum { CMD_OWN_NAME = 1, CMD_OWN_SPECS = 2 };

/* Rows ever: the generated ones and those the servers add. */
#define CMD_MAX 1024
/* Kinds of server (a name and version, "redis 8.0.2"): 1 .. CMD_KINDS-1. */
#define CMD_KINDS 32

/* struct cmd's acl bits: the ACL categories, in cmd_acl_names's order. */
enum {
    CMD_CAT_KEYSPACE = 1u << 0,
    CMD_CAT_READ = 1u << 1,
    CMD_CAT_WRITE = 1u << 2,
    CMD_CAT_SET = 1u << 3,
    CMD_CAT_SORTEDSET = 1u << 4,
    CMD_CAT_LIST = 1u << 5,
    CMD_CAT_HASH = 1u << 6,
    CMD_CAT_STRING = 1u << 7,
    CMD_CAT_BITMAP = 1u << 8,
    CMD_CAT_HYPERLOGLOG = 1u << 9,
    CMD_CAT_GEO = 1u << 10,
    CMD_CAT_STREAM = 1u << 11,
    CMD_CAT_PUBSUB = 1u << 12,
    CMD_CAT_ADMIN = 1u << 13,
    CMD_CAT_FAST = 1u << 14,
    CMD_CAT_SLOW = 1u << 15,
    CMD_CAT_BLOCKING = 1u << 16,
    CMD_CAT_DANGEROUS = 1u << 17,
    CMD_CAT_CONNECTION = 1u << 18,
    CMD_CAT_TRANSACTION = 1u << 19,
    CMD_CAT_SCRIPTING = 1u << 20,
};

/* The ACL categories of Redis 7.0, in the order of struct cmd's acl bits. */
extern const char *const cmd_acl_names[];
extern const size_t cmd_acl_count;

/* The oldest redis-server version the generated table is of (what shardis
 * says it is before any server has answered). */
extern const char cmd_redis_version[];

/* The command called name[0..len) (any case), or NULL. */
const struct cmd *cmd_lookup(const char *name, size_t len);
/* The subcommand sub of parent (any case), or NULL. */
const struct cmd *cmd_lookup_sub(const struct cmd *parent, const char *sub, size_t len);
/* True if the command has subcommands (CLIENT, CONFIG, OBJECT ...). */
int cmd_has_subcommands(const struct cmd *c);
/* Every command, for COMMAND COUNT/INFO. */
const struct cmd *cmd_table(size_t *n);
/* A command as a small number (req.cmd, client.last_cmd: 1 + its index
 * in cmd_table, below CMD_MAX + 1; 0 is none), and back (NULL for 0). */
uint16_t cmd_number(const struct cmd *c);
const struct cmd *cmd_numbered(uint16_t n);
int cmd_arity_ok(const struct cmd *c, uint32_t argc);
/* Bumped whenever the table changes: what is kept per command number
 * elsewhere (keys.c's rules, route.c's kinds, users' command bits) is
 * made again. */
uint32_t cmd_generation(void);

/* The number of the kind of server called name ("redis 8.0.2"), made on
 * first use; 0 when CMD_KINDS are taken. */
uint8_t cmd_kind(const char *name);
const char *cmd_kind_name(uint8_t kind);
/* "8.0.2" as one comparable number (8 << 20 | 0 << 10 | 2). */
uint32_t cmd_version(const char *v);
/* Whether a server of kind may be sent c: it has said it has c, or has
 * said nothing yet (kind 0), or no server has said it has c (then the
 * server's own error is the answer). */
static inline bool cmd_known(const struct cmd *c, uint8_t kind)
{
    return kind == 0 || c->known == 0 || ((c->known >> kind) & 1u);
}

/* Whether c is one the servers have: once any server has said what it
 * has, only what one said; before, every row (COMMAND COUNT, LIST). */
static inline bool cmd_current(const struct cmd *c)
{
    return !c->gone;
}

/* Whether every kind of server asked has answered (cmdinfo.c): until
 * then no row counts as gone, so that a command of a kind still to be
 * read is not taken for unknown. */
void cmd_settle(bool all_said);

/* Merge the rows a server of kind said it has (cmdinfo.c), of version
 * ver: a row not there is added (up to CMD_MAX), one there is marked
 * known to kind and takes the attributes of the newest version that has
 * it. The table takes the rows' names and specs (heap), the array stays
 * the caller's. Returns the rows added. */
size_t cmd_merge(uint8_t kind, uint32_t ver, struct cmd *rows, size_t n);

#endif

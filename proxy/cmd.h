/* cmd.h -- the Redis command table: arity, flags and key positions of
 * every Redis 7.0 command and subcommand, as redis-server's COMMAND
 * reports them (generated into cmdtab.h by scripts/gen-commands). */
#ifndef SHARDIS_CMD_H
#define SHARDIS_CMD_H

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
};

struct cmd {
    const char *name;       /* lower case; "parent|sub" for subcommands */
    int         arity;      /* n: exactly n args; -n: at least n */
    uint32_t    flags;      /* CMD_* */
    int         first;      /* first key position, 0 if none */
    int         last;       /* last key position, negative from the end */
    int         step;
};

/* The redis-server version the table was generated from. */
extern const char cmd_redis_version[];

/* The command called name[0..len) (any case), or NULL. */
const struct cmd *cmd_lookup(const char *name, size_t len);
/* The subcommand sub of parent (any case), or NULL. */
const struct cmd *cmd_lookup_sub(const struct cmd *parent, const char *sub, size_t len);
/* True if the command has subcommands (CLIENT, CONFIG, OBJECT ...). */
int cmd_has_subcommands(const struct cmd *c);
/* Every command, for COMMAND COUNT/INFO. */
const struct cmd *cmd_table(size_t *n);
int cmd_arity_ok(const struct cmd *c, uint32_t argc);

#endif

/* cmd.c -- look commands up in the generated table (binary search over
 * names sorted bytewise, subcommands as "parent|sub"). */
#include <string.h>
#include <strings.h>

#include "proxy/cmd.h"

static const struct cmd table[] = {
#include "proxy/cmdtab.h"
};

#define NCMDS (sizeof(table) / sizeof(table[0]))

const char cmd_redis_version[] = CMDTAB_REDIS_VERSION;

/* As scripts/gen-commands's ACL list. */
const char *const cmd_acl_names[] = {
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
    "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
    "dangerous", "connection", "transaction", "scripting",
};
const size_t cmd_acl_count = sizeof(cmd_acl_names) / sizeof(cmd_acl_names[0]);
#define NAME_MAX_LEN 64

static const struct cmd *find(const char *name)
{
    size_t lo = 0, hi = NCMDS;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(table[mid].name, name);
        if (c == 0)
            return &table[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static size_t lower(char *out, size_t off, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        out[off + i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    return off + len;
}

const struct cmd *cmd_lookup(const char *name, size_t len)
{
    char buf[NAME_MAX_LEN + 1];

    if (len == 0 || len > NAME_MAX_LEN || memchr(name, '|', len) != NULL ||
        memchr(name, '\0', len) != NULL)
        return NULL;
    buf[lower(buf, 0, name, len)] = '\0';
    return find(buf);
}

const struct cmd *cmd_lookup_sub(const struct cmd *parent, const char *sub, size_t len)
{
    char buf[2 * NAME_MAX_LEN + 2];
    size_t plen = strlen(parent->name), n;

    if (len == 0 || len > NAME_MAX_LEN || memchr(sub, '\0', len) != NULL)
        return NULL;
    memcpy(buf, parent->name, plen);
    buf[plen] = '|';
    n = lower(buf, plen + 1, sub, len);
    buf[n] = '\0';
    return find(buf);
}

int cmd_has_subcommands(const struct cmd *c)
{
    size_t i = (size_t)(c - table), len = strlen(c->name);
    return i + 1 < NCMDS && strncmp(table[i + 1].name, c->name, len) == 0 &&
           table[i + 1].name[len] == '|';
}

const struct cmd *cmd_table(size_t *n)
{
    *n = NCMDS;
    return table;
}

uint16_t cmd_number(const struct cmd *c)
{
    uintptr_t at = (uintptr_t)c, lo = (uintptr_t)table;

    /* 0 for a row of no table (debug.c's, for their key specs) */
    if (at < lo || at >= lo + sizeof(table))
        return 0;
    return (uint16_t)((at - lo) / sizeof(table[0]) + 1);
}

const struct cmd *cmd_numbered(uint16_t n)
{
    return n > 0 && n <= NCMDS ? &table[n - 1] : NULL;
}

static bool named(const char *s, size_t len, const char *name)
{
    return len == strlen(name) && strncasecmp(s, name, len) == 0;
}

bool cmd_secret_from(const char *name, size_t len, uint32_t i, const char *prev,
                     size_t prevlen)
{
    return (i == 1 && named(name, len, "auth")) || (i == 3 && named(name, len, "acl")) ||
           (i > 1 && named(name, len, "hello") && named(prev, prevlen, "auth"));
}

uint32_t cmd_generation(void)
{
    return 0;           /* (the generated table never changes) */
}

int cmd_arity_ok(const struct cmd *c, uint32_t argc)
{
    return c->arity > 0 ? argc == (uint32_t)c->arity : argc >= (uint32_t)-c->arity;
}

/* cmd.c -- the command table (cmd.h).
 *
 * Rows live in one array of CMD_MAX, made on first use from the generated
 * table: a row's address and number (its index + 1) never change, so a
 * request, a kept blocking command or a client's last command may hold
 * either for as long as it likes. Names ("parent|sub" for subcommands)
 * are looked up in `slots`, an open-addressed hash of the rows (FNV-1a,
 * linear probing, never more than half full), made again with `order`
 * (the rows sorted bytewise by name, which says which have subcommands)
 * when a row is added. Every request's command is looked up: a hash and,
 * nearly always, one compare, where a binary search over some 450 names
 * made nine.
 *
 * The trade-off: a fixed CMD_MAX (1024; Redis 8.0 has about 450 rows with
 * its subcommands) instead of a table that grows, so that nothing keeps a
 * pointer that a realloc could move; the untouched end costs address
 * space, not memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/base/cmd.h"
#include "proxy/base/log.h"
#include "proxy/base/util.h"

/* A generated row: what COMMAND says, the table's own fields zero. */
#define CMD_ROW(...) {__VA_ARGS__, 0, 0, 0, 0, 0, 0, 0}

static const struct cmd generated[] = {
#include "proxy/base/cmdtab.h"
};

#define NGENERATED (sizeof(generated) / sizeof(generated[0]))

const char cmd_redis_version[] = CMDTAB_REDIS_VERSION;

/* As scripts/gen-commands's ACL list. */
const char *const cmd_acl_names[] = {
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
    "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
    "dangerous", "connection", "transaction", "scripting",
};
const size_t cmd_acl_count = sizeof(cmd_acl_names) / sizeof(cmd_acl_names[0]);
#define NAME_MAX_LEN 64

static struct cmd *rows;            /* [CMD_MAX] */
static size_t nrows;
static uint16_t *order;             /* [CMD_MAX]: indexes into rows, by name */
#define CMD_SLOTS (2 * CMD_MAX)     /* a power of two, twice the rows at most */
static uint16_t *slots;             /* [CMD_SLOTS]: 1 + a row's index, at its name's
                                       hash or after; 0: free */
static uint32_t generation;
static char *kinds[CMD_KINDS];      /* kind k's name (owned); kinds[0] unused */
static bool merged;                 /* a server's rows have been merged */
static bool settled = true;         /* no kind's rows are still to come (cmd_settle) */

static int by_name(const void *a, const void *b)
{
    return strcmp(rows[*(const uint16_t *)a].name, rows[*(const uint16_t *)b].name);
}

/* Whether c's keys are all at fixed indexes (keys.c's quick path). */
static bool index_keys(const struct cmd *c)
{
    for (uint32_t j = 0; j < c->nspecs; j++)
        if (c->specs[j].bs != CMD_BS_INDEX || c->specs[j].fk != CMD_FK_RANGE ||
            (c->specs[j].flags & (CMD_KEY_INCOMPLETE | CMD_KEY_NOT_KEY)))
            return false;
    return c->nspecs > 0;
}

/* FNV-1a of a row's name, as find probes for it. */
static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;

    for (; *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* Sort `order` again, index the rows by name in `slots`, and mark the
 * rows that have subcommands, that the servers do not have, and whose
 * keys are at fixed indexes. */
static void reorder(void)
{
    memset(slots, 0, CMD_SLOTS * sizeof(*slots));
    for (size_t i = 0; i < nrows; i++) {
        uint32_t k = name_hash(rows[i].name) & (CMD_SLOTS - 1);
        while (slots[k] != 0)
            k = (k + 1) & (CMD_SLOTS - 1);
        slots[k] = (uint16_t)(i + 1);
    }
    for (size_t i = 0; i < nrows; i++)
        order[i] = (uint16_t)i;
    qsort(order, nrows, sizeof(*order), by_name);
    for (size_t i = 0; i < nrows; i++) {
        struct cmd *c = &rows[order[i]];
        size_t len = strlen(c->name);
        c->has_sub = i + 1 < nrows && strncmp(rows[order[i + 1]].name, c->name, len) == 0 &&
                     rows[order[i + 1]].name[len] == '|';
        c->gone = merged && settled && c->known == 0 && !(c->flags & CMD_ALWAYS);
        c->index_keys = index_keys(c);
    }
    generation++;
}

static void init(void)
{
    rows = xcalloc(CMD_MAX, sizeof(*rows));
    order = xcalloc(CMD_MAX, sizeof(*order));
    slots = xcalloc(CMD_SLOTS, sizeof(*slots));
    memcpy(rows, generated, sizeof(generated));
    nrows = NGENERATED;
    for (size_t i = 0; i < nrows; i++)
        rows[i].num = (uint16_t)(i + 1);
    reorder();
}

static inline void ready(void)
{
    if (rows == NULL)
        init();
}

static struct cmd *find(const char *name)
{
    for (uint32_t k = name_hash(name) & (CMD_SLOTS - 1); slots[k] != 0;
         k = (k + 1) & (CMD_SLOTS - 1)) {
        struct cmd *r = &rows[slots[k] - 1];
        if (strcmp(r->name, name) == 0)
            return r;
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

    ready();
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

    if (len == 0 || len > NAME_MAX_LEN || plen > NAME_MAX_LEN ||
        memchr(sub, '\0', len) != NULL)
        return NULL;
    memcpy(buf, parent->name, plen);
    buf[plen] = '|';
    n = lower(buf, plen + 1, sub, len);
    buf[n] = '\0';
    return find(buf);
}

int cmd_has_subcommands(const struct cmd *c)
{
    return c->has_sub;
}

const struct cmd *cmd_table(size_t *n)
{
    ready();
    *n = nrows;
    return rows;
}

uint16_t cmd_number(const struct cmd *c)
{
    return c->num;                      /* (0 for a row of no table: debug.c's) */
}

const struct cmd *cmd_numbered(uint16_t n)
{
    ready();
    return n > 0 && n <= nrows ? &rows[n - 1] : NULL;
}

uint32_t cmd_generation(void)
{
    ready();
    return generation;
}

uint8_t cmd_kind(const char *name)
{
    for (uint8_t k = 1; k < CMD_KINDS; k++) {
        if (kinds[k] == NULL) {
            kinds[k] = xstrdup(name);
            return k;
        }
        if (!strcmp(kinds[k], name))
            return k;
    }
    return 0;
}

const char *cmd_kind_name(uint8_t kind)
{
    return kind > 0 && kind < CMD_KINDS && kinds[kind] != NULL ? kinds[kind] : "unknown";
}

uint32_t cmd_version(const char *v)
{
    unsigned x[3] = {0, 0, 0};

    sscanf(v, "%u.%u.%u", &x[0], &x[1], &x[2]);
    return (x[0] & 0xfff) << 20 | (x[1] & 0x3ff) << 10 | (x[2] & 0x3ff);
}

void cmd_settle(bool all_said)
{
    ready();
    if (all_said != settled) {
        settled = all_said;
        reorder();
    }
}

static void drop_specs(struct cmd *c)
{
    if (c->owned & CMD_OWN_SPECS) {
        for (uint32_t j = 0; j < c->nspecs; j++)
            free((char *)c->specs[j].keyword);
        free((struct cmd_keyspec *)c->specs);
    }
    c->owned &= (uint8_t)~CMD_OWN_SPECS;
}

size_t cmd_merge(uint8_t kind, uint32_t ver, struct cmd *in, size_t n)
{
    size_t added = 0;

    ready();
    for (size_t i = 0; i < n; i++) {
        struct cmd *c = find(in[i].name);
        if (c == NULL && nrows == CMD_MAX) {
            log_warn("command table full (%d rows): '%s' is not learned", CMD_MAX, in[i].name);
            free((char *)in[i].name);
            drop_specs(&in[i]);
            continue;
        }
        if (c == NULL) {                /* new: added at the end, kept there */
            c = &rows[nrows];
            *c = in[i];
            c->num = (uint16_t)(++nrows);
            c->owned = CMD_OWN_NAME | CMD_OWN_SPECS;
            c->known = 0;
            c->ver = ver;
            added++;
        } else {
            free((char *)in[i].name);
            if (c->ver == 0 || ver >= c->ver) {
                /* the newest server's word: COMMAND of a newer version may
                 * allow more (ZRANK's WITHSCORE) */
                drop_specs(c);
                c->arity = in[i].arity;
                c->flags = in[i].flags;
                c->first = in[i].first;
                c->last = in[i].last;
                c->step = in[i].step;
                c->reply = in[i].reply;
                c->acl = in[i].acl;
                c->nspecs = in[i].nspecs;
                c->specs = in[i].specs;
                c->owned |= CMD_OWN_SPECS;
                c->ver = ver;
            } else {
                drop_specs(&in[i]);
            }
        }
        if (kind > 0)
            c->known |= 1u << kind;
    }
    merged = true;
    reorder();
    return added;
}

int cmd_arity_ok(const struct cmd *c, uint32_t argc)
{
    return c->arity > 0 ? argc == (uint32_t)c->arity : argc >= (uint32_t)-c->arity;
}

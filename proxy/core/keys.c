/* keys.c -- where a command's keys are (keys.h).
 *
 * Three steps, as redis-server 7's getKeysFromCommandWithSpecs:
 *
 *   1. The key specs, read in order (spec_keys). A spec's begin_search
 *      gives where its keys start: a fixed index, or the argument after
 *      a keyword, searched from startfrom forwards (or from the end
 *      backwards when startfrom is negative) and never in the last
 *      argument. A keyword not found means no keys from that spec. Its
 *      find_keys gives how many: a range (lastkey from the start, or
 *      counted from the end; with a limit, that share of what is left,
 *      as XREAD's STREAMS k1 k2 id1 id2), or a count read from the
 *      arguments (numkeys). A spec whose search is unknown or marked
 *      incomplete, a count that is no number, or keys out of bounds make
 *      the specs unusable, and step 2 decides.
 *   2. The written rules, for what specs cannot say: SORT and SORT_RO
 *      (STORE anywhere after BY, GET and LIMIT, whose arguments are
 *      skipped), MIGRATE (KEYS after COPY, REPLACE, AUTH pw, AUTH2 u pw).
 *      Each is redis-server's getkeys procedure, to the same quirks (SORT
 *      takes the last STORE; an unknown word is taken as an option
 *      without argument).
 *   3. What routing needs beyond positions: a command that needs keys
 *      and has none readable cannot be routed, so it gets redis-server's
 *      own error for its arguments here (bad_keys): a numkeys per family
 *      of commands, XREAD's unbalanced list, POP's missing direction.
 *
 * A sharded channel (SPUBLISH's, SSUBSCRIBE's) is placed as a key is:
 * for pub/sub commands, NOT_KEY specs count.
 *
 * Commands with VARIABLE_FLAGS specs (SET, BITFIELD) have procedures in
 * redis-server only for their flags; their positions are the specs'. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/transport/args.h"
#include "proxy/base/cmd.h"
#include "proxy/core/keys.h"
#include "proxy/base/util.h"

/* Append the span first..last by step; false if k is full. */
static bool add(struct keys *k, uint32_t first, uint32_t last, uint32_t step, uint16_t flags)
{
    if (k->n == KEYS_MAX_SPANS)
        return false;
    k->span[k->n++] = (struct keyspan){first, last, (uint16_t)step, flags};
    return true;
}

/* The position after a KEYWORD spec's keyword, or 0 if it is not there:
 * searched from startfrom forwards (backwards from the end when it is
 * negative), never in the last argument, as redis-server searches. */
static int64_t after_keyword(const struct cmd_keyspec *s, struct args *a)
{
    int64_t argc = a->argc;
    int64_t from = s->pos > 0 ? s->pos : argc + s->pos;
    int64_t to = s->pos > 0 ? argc - 1 : 1;     /* (not searched) */

    for (int64_t i = from; i != to && i >= 1 && i < argc; i += from <= to ? 1 : -1)
        if (args_is(a, (uint32_t)i, s->keyword))
            return i + 1;
    return 0;
}

/* Step 1: 1 keys found (or none: every keyword absent), 0 the specs cannot
 * say (step 2), -1 too many spans. */
static int spec_keys(const struct cmd *cmd, struct args *a, struct keys *k)
{
    int64_t argc = a->argc;

    for (uint32_t j = 0; j < cmd->nspecs; j++) {
        const struct cmd_keyspec *s = &cmd->specs[j];
        int64_t first = 0, last, step;

        if ((s->flags & CMD_KEY_NOT_KEY) && !(cmd->flags & CMD_PUBSUB))
            continue;
        if (s->bs == CMD_BS_INDEX) {
            first = s->pos;
        } else if (s->bs == CMD_BS_KEYWORD) {
            if ((first = after_keyword(s, a)) == 0)
                continue;
        } else {
            return 0;
        }
        if (s->fk == CMD_FK_RANGE) {
            int64_t lastkey = s->fk_args[0], limit = s->fk_args[2];
            step = s->fk_args[1];
            if (lastkey >= 0)
                last = first + lastkey;
            else if (limit == 0)
                last = argc + lastkey;
            else
                last = first + ((argc - first) / limit + lastkey);
        } else if (s->fk == CMD_FK_KEYNUM) {
            long long numkeys;
            if (s->fk_args[0] < 0 || first + s->fk_args[0] >= argc ||
                !args_ll(a, (uint32_t)(first + s->fk_args[0]), &numkeys) || numkeys < 0)
                return 0;
            step = s->fk_args[2];
            first += s->fk_args[1];
            last = first + numkeys - 1;
        } else {
            return 0;
        }
        if (first < 1 || last >= argc || last < first || first >= argc || step <= 0 ||
            step > UINT16_MAX)
            return 0;
        if (!add(k, (uint32_t)first, (uint32_t)last, (uint32_t)step, s->flags))
            return -1;
        if (s->flags & CMD_KEY_INCOMPLETE)
            return 0;
    }
    return 1;
}

/* Step 2: redis-server's sortGetKeys (SORT_RO: its key only). */
static void sort_keys(struct args *a, bool ro, struct keys *k)
{
    static const struct { const char *name; uint32_t skip; } skip[] = {
        {"limit", 2}, {"get", 1}, {"by", 1},
    };
    uint32_t store = 0;

    add(k, 1, 1, 1, CMD_KEY_RO | CMD_KEY_ACCESS);
    for (uint32_t i = 2; !ro && i < a->argc; i++) {
        size_t j;
        for (j = 0; j < sizeof(skip) / sizeof(skip[0]); j++)
            if (args_is(a, i, skip[j].name))
                break;
        if (j < sizeof(skip) / sizeof(skip[0]))
            i += skip[j].skip;
        else if (args_is(a, i, "store") && i + 1 < a->argc)
            store = i + 1;              /* the last STORE's, as SORT itself */
    }
    if (store != 0)
        add(k, store, store, 1, CMD_KEY_OW | CMD_KEY_UPDATE);
}

/* Step 2: redis-server's migrateGetKeys. MIGRATE host port key|"" db
 * timeout [COPY] [REPLACE] [AUTH pw | AUTH2 user pw] [KEYS k ...]: the
 * KEYS form names its keys only with an empty key argument (else
 * MIGRATE itself refuses it: no keys). */
static void migrate_keys(struct args *a, struct keys *k)
{
    static const struct { const char *name; uint32_t skip; } skip[] = {
        {"copy", 0}, {"replace", 0}, {"auth", 1}, {"auth2", 2},
    };
    const uint16_t flags = CMD_KEY_RW | CMD_KEY_ACCESS | CMD_KEY_DELETE;
    size_t len;

    for (uint32_t i = 6; a->argc > 6 && i < a->argc; i++) {
        if (args_is(a, i, "keys")) {
            args_get(a, 3, &len);
            if (len == 0 && i + 1 < a->argc)
                add(k, i + 1, a->argc - 1, 1, flags);
            return;
        }
        for (size_t j = 0; j < sizeof(skip) / sizeof(skip[0]); j++)
            if (args_is(a, i, skip[j].name)) {
                i += skip[j].skip;
                break;
            }
    }
    add(k, 3, 3, 1, flags);
}

/* Step 3: how redis-server refuses the arguments of a command whose keys
 * are counted by a numkeys (its keynum spec), per family. */
enum numkeys_style {
    NK_NONE,        /* not counted by a numkeys */
    NK_EVAL,        /* EVAL, EVALSHA (and _RO): 0 declares no key */
    NK_FCALL,       /* FCALL: as EVAL, but its own text for a numkeys that is no number */
    NK_ZSET,        /* ZUNION, ZINTER ... */
    NK_CARD,        /* SINTERCARD, and any numkeys command not named here */
    NK_POP,         /* [B]LMPOP, [B]ZMPOP: as NK_CARD, and LEFT|RIGHT / MIN|MAX after */
};

/* A command's written rules, decided once per command (keys_rules). */
enum keys_proc { PROC_NONE, PROC_SORT, PROC_SORT_RO, PROC_MIGRATE, PROC_XREAD };

struct keys_rule {
    uint8_t proc;           /* enum keys_proc */
    uint8_t style;          /* enum numkeys_style */
    uint16_t numkeys_at;    /* NK_*: where the numkeys is */
};

static const struct { const char *name; uint8_t proc, style; } written[] = {
    {"sort", PROC_SORT, NK_NONE}, {"sort_ro", PROC_SORT_RO, NK_NONE},
    {"migrate", PROC_MIGRATE, NK_NONE},
    {"xread", PROC_XREAD, NK_NONE}, {"xreadgroup", PROC_XREAD, NK_NONE},
    {"eval", PROC_NONE, NK_EVAL}, {"evalsha", PROC_NONE, NK_EVAL},
    {"eval_ro", PROC_NONE, NK_EVAL}, {"evalsha_ro", PROC_NONE, NK_EVAL},
    {"fcall", PROC_NONE, NK_FCALL}, {"fcall_ro", PROC_NONE, NK_FCALL},
    {"zunionstore", PROC_NONE, NK_ZSET}, {"zinterstore", PROC_NONE, NK_ZSET},
    {"zdiffstore", PROC_NONE, NK_ZSET}, {"zunion", PROC_NONE, NK_ZSET},
    {"zinter", PROC_NONE, NK_ZSET}, {"zdiff", PROC_NONE, NK_ZSET},
    {"zintercard", PROC_NONE, NK_ZSET},
    {"lmpop", PROC_NONE, NK_POP}, {"zmpop", PROC_NONE, NK_POP},
    {"blmpop", PROC_NONE, NK_POP}, {"bzmpop", PROC_NONE, NK_POP},
};

static struct keys_rule rule_of(const struct cmd *cmd)
{
    struct keys_rule r = {PROC_NONE, NK_NONE, 0};

    for (uint32_t j = 0; j < cmd->nspecs; j++) {
        const struct cmd_keyspec *s = &cmd->specs[j];
        if (s->fk == CMD_FK_KEYNUM && s->bs == CMD_BS_INDEX && r.style == NK_NONE) {
            r.style = NK_CARD;
            r.numkeys_at = (uint16_t)(s->pos + s->fk_args[0]);
        }
    }
    for (size_t i = 0; i < sizeof(written) / sizeof(written[0]); i++)
        if (!strcmp(cmd->name, written[i].name)) {
            r.proc = written[i].proc;
            if (r.style != NK_NONE)
                r.style = written[i].style;
        }
    return r;
}

/* Every command's rule, by cmd_number: made when first needed and again
 * whenever the command table changes (cmd_generation). Each thread's own
 * (a loop's, or one visiting it): a copy of what the table says, which
 * changes only while every loop waits, so no lock. */
static _Thread_local struct keys_rule *rules __attribute__((tls_model("initial-exec")));
static _Thread_local size_t nrules __attribute__((tls_model("initial-exec")));
static _Thread_local uint32_t rules_gen __attribute__((tls_model("initial-exec")));

void keys_cache_free(void)
{
    free(rules);
    rules = NULL;
    nrules = 0;
}

static struct keys_rule rule(const struct cmd *cmd)
{
    uint16_t n = cmd_number(cmd);

    if (rules == NULL || rules_gen != cmd_generation()) {
        size_t count;
        const struct cmd *t = cmd_table(&count);
        free(rules);
        rules = xmalloc((count ? count : 1) * sizeof(*rules));
        for (size_t i = 0; i < count; i++)
            rules[i] = rule_of(&t[i]);
        nrules = count;
        rules_gen = cmd_generation();
    }
    return n > 0 && n <= nrules ? rules[n - 1] : rule_of(cmd);
}

/* Step 3 (see above): KEYS_NONE for a script's numkeys 0, else KEYS_BAD
 * with the error; KEYS_FOUND if nothing is wrong. */
static enum keys_found bad_keys(const struct cmd *cmd, struct keys_rule ru, struct args *a,
                                const struct keys *k, char *err)
{
    uint32_t at = ru.numkeys_at;
    enum numkeys_style style = ru.style;
    long long nk = 0;
    bool is_int;

    if (style != NK_NONE) {
        is_int = at < a->argc && args_ll(a, at, &nk);
        if (is_int && nk == 0 && (style == NK_EVAL || style == NK_FCALL))
            return KEYS_NONE;
        if (!is_int || nk <= 0 || (uint64_t)nk > a->argc - at - 1) {
            if (style == NK_POP && is_int && nk > 0)    /* (no room for LEFT|RIGHT) */
                snprintf(err, KEYS_ERR_MAX, "ERR syntax error");
            else if (style == NK_CARD || style == NK_POP)
                snprintf(err, KEYS_ERR_MAX, "%s", is_int && nk > 0
                         ? "ERR Number of keys can't be greater than number of args"
                         : "ERR numkeys should be greater than 0");
            else if (!is_int)
                snprintf(err, KEYS_ERR_MAX, "%s", style == NK_FCALL
                         ? "ERR Bad number of keys provided"
                         : "ERR value is not an integer or out of range");
            else if (style == NK_ZSET && nk < 1)
                snprintf(err, KEYS_ERR_MAX,
                         "ERR at least 1 input key is needed for '%s' command", cmd->name);
            else if (style == NK_ZSET)
                snprintf(err, KEYS_ERR_MAX, "ERR syntax error");
            else if (nk < 0)
                snprintf(err, KEYS_ERR_MAX, "ERR Number of keys can't be negative");
            else
                snprintf(err, KEYS_ERR_MAX,
                         "ERR Number of keys can't be greater than number of args");
            return KEYS_BAD;
        }
        /* Without the direction after the keys redis-server says so before
         * anything about where the keys are. */
        if (style == NK_POP && at + (uint32_t)nk + 1 >= a->argc) {
            snprintf(err, KEYS_ERR_MAX, "ERR syntax error");
            return KEYS_BAD;
        }
    }
    if (ru.proc == PROC_XREAD) {
        /* The keys are the first half of what follows STREAMS. */
        int64_t streams = cmd->nspecs > 0 && cmd->specs[0].bs == CMD_BS_KEYWORD
                          ? after_keyword(&cmd->specs[0], a) : 0;
        uint32_t after = streams > 0 ? a->argc - (uint32_t)streams : 0;
        if (after < 1) {
            snprintf(err, KEYS_ERR_MAX, "ERR syntax error");
            return KEYS_BAD;
        }
        if (after % 2 != 0)
            return KEYS_SERVER_SAYS;    /* (7.0: "Unbalanced XREAD list ...", 7.2: "... 'xread'
                                           list ...", 8.0 adds '+') */
    }
    if (k->n == 0) {
        snprintf(err, KEYS_ERR_MAX, "ERR syntax error");
        return KEYS_BAD;
    }
    return KEYS_FOUND;
}

bool keys_indexed(const struct cmd *cmd, uint32_t argc, struct keys *k)
{
    k->n = 0;
    if (!cmd->index_keys)
        return false;
    /* Keys at fixed indexes (GET, MSET, LMOVE ...): step 1 read, with
     * nothing to search for and no rule to apply. */
    for (uint32_t j = 0; j < cmd->nspecs; j++) {
        const struct cmd_keyspec *s = &cmd->specs[j];
        int64_t first = s->pos, lastkey = s->fk_args[0], limit = s->fk_args[2], last;
        last = lastkey >= 0 ? first + lastkey
             : limit == 0 ? (int64_t)argc + lastkey
             : first + (((int64_t)argc - first) / limit + lastkey);
        if (first < 1 || last >= argc || last < first || first >= argc || s->fk_args[1] <= 0 ||
            !add(k, (uint32_t)first, (uint32_t)last, (uint32_t)s->fk_args[1], s->flags)) {
            k->n = 0;
            return false;
        }
    }
    return true;
}

enum keys_found keys_find(const struct cmd *cmd, struct args *a, struct keys *k, char *err)
{
    struct keys_rule ru;
    int found;

    if (keys_indexed(cmd, a->argc, k))
        return KEYS_FOUND;          /* the quick path */
    if (!keys_any(cmd))
        return KEYS_NONE;
    ru = rule(cmd);
    if ((found = spec_keys(cmd, a, k)) < 0) {
        snprintf(err, KEYS_ERR_MAX, "ERR command '%s' is not supported by shardis: "
                 "more key specs than it reads", cmd->name);
        return KEYS_BAD;
    }
    if (found == 0) {
        k->n = 0;
        if (ru.proc == PROC_SORT || ru.proc == PROC_SORT_RO)
            sort_keys(a, ru.proc == PROC_SORT_RO, k);
        else if (ru.proc == PROC_MIGRATE)
            migrate_keys(a, k);
    }
    return bad_keys(cmd, ru, a, k, err);
}

/* A sharded channel (SPUBLISH's, SSUBSCRIBE's: NOT_KEY specs) is placed
 * as a key is: pub/sub commands' NOT_KEY specs count. */
int keys_any(const struct cmd *cmd)
{
    for (uint32_t j = 0; j < cmd->nspecs; j++)
        if (!(cmd->specs[j].flags & CMD_KEY_NOT_KEY) || (cmd->flags & CMD_PUBSUB))
            return 1;
    return 0;
}

uint32_t keys_first_fixed(const struct cmd *cmd)
{
    for (uint32_t j = 0; j < cmd->nspecs; j++) {
        const struct cmd_keyspec *s = &cmd->specs[j];
        if (!(s->flags & CMD_KEY_NOT_KEY))
            return s->bs == CMD_BS_INDEX && s->pos > 0 ? (uint32_t)s->pos : 0;
    }
    return 0;
}

uint32_t keys_count(const struct keys *k)
{
    uint32_t n = 0;

    for (uint32_t s = 0; s < k->n; s++)
        n += (k->span[s].last - k->span[s].first) / k->span[s].step + 1;
    return n;
}

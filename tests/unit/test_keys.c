/* test_keys.c -- where a command's keys are (proxy/core/keys.c), on the
 * generated command table and on key specs a server could send: the
 * written rules' quirks as redis-server has them, the errors routing needs,
 * and specs that point before argument 1, which must never make a key of
 * the command's name or of a position outside the arguments. (Positions
 * are compared with a real server's COMMAND GETKEYS, argument by argument,
 * in tests/integration/test_commands.py.) */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <stdio.h>
#include <string.h>

#include "proxy/transport/args.h"
#include "proxy/base/cmd.h"
#include "proxy/core/keys.h"

#define MAXARGS 16

struct call {
    char  *av[MAXARGS];
    size_t len[MAXARGS];
    struct args a;
};

/* The arguments of one request, split at spaces, read as a kept request's
 * (args.av): no client needed. */
static void parse(struct call *c, const char *line)
{
    static char buf[512];
    uint32_t n = 0;

    strcpy(buf, line);
    for (char *t = strtok(buf, " "); t != NULL && n < MAXARGS; t = strtok(NULL, " ")) {
        c->av[n] = t;
        c->len[n] = strlen(t);
        n++;
    }
    memset(&c->a, 0, sizeof(c->a));
    c->a.argc = n;
    c->a.av = c->av;
    c->a.avlen = c->len;
}

/* keys_find on line for the table's command (and subcommand) it names;
 * *out the positions found, "1,3" ("" none), and the result. */
static enum keys_found find(const char *line, char *out, char *err)
{
    struct call c;
    const struct cmd *cmd;
    enum keys_found f;

    parse(&c, line);
    cmd = cmd_lookup(c.av[0], c.len[0]);
    cr_assert(cmd != NULL, "%s: not in the table", c.av[0]);
    if (cmd_has_subcommands(cmd) && c.a.argc > 1)
        cmd = cmd_lookup_sub(cmd, c.av[1], c.len[1]);
    f = keys_find(cmd, &c.a, &c.a.keys, err);
    out[0] = '\0';
    for (uint32_t s = 0; s < c.a.keys.n; s++)
        for (uint32_t i = c.a.keys.span[s].first; i <= c.a.keys.span[s].last;
             i += c.a.keys.span[s].step)
            sprintf(out + strlen(out), "%s%u", out[0] ? "," : "", i);
    return f;
}

#define KEYS(line, want_found, want)                                               \
    do {                                                                           \
        char got[128], err[KEYS_ERR_MAX] = "";                                      \
        enum keys_found f = find(line, got, err);                                  \
        cr_assert(eq(int, f, want_found), "%s: result %d (%s)", line, f, err);     \
        cr_assert(eq(str, got, want), "%s: keys at %s, want %s", line, got, want); \
    } while (0)

Test(keys, fixed_indexes)
{
    KEYS("GET k", KEYS_FOUND, "1");
    KEYS("MSET a 1 b 2", KEYS_FOUND, "1,3");
    KEYS("LMOVE a b LEFT RIGHT", KEYS_FOUND, "1,2");
    KEYS("BITOP AND d a b", KEYS_FOUND, "2,3,4");
    KEYS("OBJECT ENCODING k", KEYS_FOUND, "2");
}

Test(keys, keywords_are_searched_where_redis_searches)
{
    /* a consumer or a group named "streams", a stream named so */
    KEYS("XREADGROUP GROUP g streams COUNT 1 STREAMS s0 >", KEYS_FOUND, "7");
    KEYS("XREADGROUP GROUP streams c STREAMS s0 >", KEYS_FOUND, "5");
    KEYS("XREAD STREAMS streams a 0 0", KEYS_FOUND, "2,3");
    /* a member named "store": GEORADIUSBYMEMBER's options start at 5 */
    KEYS("GEORADIUSBYMEMBER geo0 store 10 km", KEYS_FOUND, "1");
    KEYS("GEORADIUS g 0 0 10 km STORE d STOREDIST e", KEYS_FOUND, "1,7,9");
}

Test(keys, sort_and_migrate_as_their_getkeys_procedures)
{
    KEYS("SORT list0 STORE dst0 GET store ALPHA", KEYS_FOUND, "1,3");
    KEYS("SORT k STORE a STORE b", KEYS_FOUND, "1,5");         /* the last */
    KEYS("SORT k LIMIT 0 store STORE x", KEYS_FOUND, "1,6");
    KEYS("SORT k store store x", KEYS_FOUND, "1,4");
    KEYS("SORT_RO k BY x", KEYS_FOUND, "1");
    KEYS("MIGRATE h 1 k 0 10", KEYS_FOUND, "3");
    KEYS("MIGRATE h 1 \"\" 0 10 COPY AUTH keys KEYS a b", KEYS_BAD, ""); /* the key is
                                                        not "": MIGRATE refuses KEYS */
}

Test(keys, numkeys_and_what_routing_must_answer)
{
    KEYS("EVAL x 2 a b", KEYS_FOUND, "3,4");
    KEYS("EVAL x 0", KEYS_NONE, "");
    KEYS("EVAL x 3 a b", KEYS_BAD, "");
    KEYS("ZUNIONSTORE d 2 a b", KEYS_FOUND, "1,3,4");
    KEYS("LMPOP 2 a b LEFT", KEYS_FOUND, "2,3");
    KEYS("LMPOP 3 a left", KEYS_BAD, "");
    KEYS("XREAD COUNT 1 STREAMS k", KEYS_SERVER_SAYS, "");
    KEYS("XREAD STREAMS a b c", KEYS_SERVER_SAYS, "2");
    KEYS("XREAD COUNT 1", KEYS_BAD, "");

    char got[128], err[KEYS_ERR_MAX];
    find("LMPOP 3 a left", got, err);
    cr_assert(eq(str, err, "ERR syntax error"));
    find("ZUNION 0 a", got, err);
    cr_assert(eq(str, err, "ERR at least 1 input key is needed for 'zunion' command"));
}

/* A row as a server could describe one: spec s, the rest a plain command. */
static enum keys_found find_spec(const struct cmd_keyspec *s, const char *line, char *out)
{
    struct cmd c = {"hostile", -2, 0, 1, 1, 1, CMD_REPLY_DEFAULT, 0, 1, s,
                    0, 0, 0, 0, 0, 0, 0};
    struct call call;
    char err[KEYS_ERR_MAX];
    enum keys_found f;

    c.index_keys = s->bs == CMD_BS_INDEX && s->fk == CMD_FK_RANGE;
    parse(&call, line);
    f = keys_find(&c, &call.a, &call.a.keys, err);
    out[0] = '\0';
    for (uint32_t i = 0; i < call.a.keys.n; i++) {
        cr_assert(call.a.keys.span[i].first >= 1 &&
                  call.a.keys.span[i].last < call.a.argc, "a key outside 1..argc-1");
        sprintf(out + strlen(out), "%u-%u ", call.a.keys.span[i].first,
                call.a.keys.span[i].last);
    }
    return f;
}

Test(keys, specs_pointing_before_argument_one_name_no_key)
{
    char got[128];
    const struct cmd_keyspec minus = {CMD_KEY_RW, CMD_BS_INDEX, -1, NULL, CMD_FK_RANGE,
                                      {0, 1, 0}};
    const struct cmd_keyspec zero = {CMD_KEY_RW, CMD_BS_INDEX, 0, NULL, CMD_FK_RANGE,
                                     {0, 1, 0}};
    const struct cmd_keyspec numkeys = {CMD_KEY_RW, CMD_BS_INDEX, 1, NULL, CMD_FK_KEYNUM,
                                        {-2, 1, 1}};
    const struct cmd_keyspec back = {CMD_KEY_RW, CMD_BS_KEYWORD, -2, "KEYS", CMD_FK_RANGE,
                                     {-1, 1, 0}};

    cr_assert(ne(int, find_spec(&minus, "hostile a b", got), KEYS_FOUND), "%s", got);
    cr_assert(ne(int, find_spec(&zero, "hostile a b", got), KEYS_FOUND), "%s", got);
    cr_assert(ne(int, find_spec(&numkeys, "hostile 1 a", got), KEYS_FOUND), "%s", got);
    /* a keyword searched backwards from argc - 2, as MIGRATE's KEYS */
    cr_assert(eq(int, find_spec(&back, "hostile x KEYS a b", got), KEYS_FOUND));
    cr_assert(eq(str, got, "3-4 "));
}

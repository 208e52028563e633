/* acl.c -- client users: built from the config's ACL lines, signed in to
 * by AUTH, and asked by route.c, pubsub.c and local.c whether a command,
 * a key or a channel is allowed. Where permission is decided is here;
 * where it is asked is route_request (every command, before it is split,
 * fanned out, queued in MULTI or sent), route_owner and frag.c (keys),
 * and pubsub.c (channels).
 *
 * A line is what ACL SETUSER takes, the user's name first: on, off,
 * >password, #sha256, <password, !sha256, nopass, resetpass, ~pattern,
 * allkeys, resetkeys, &pattern, allchannels, resetchannels, +command,
 * -command, +command|sub, +@category, -@category, allcommands,
 * nocommands, reset. As in Redis 7.0 a user starts off, with no password,
 * command, key or channel. Not supported (refused by name, so a line
 * never means less than it says): %R~ and %W~ key permissions, selectors.
 *
 * SHARD.* commands are named like Redis's own (+shard.genkey) and belong
 * to categories (local.c's table): the reshard's SHARD.RELOAD and
 * SHARD.MIGRATION are @admin and @dangerous.
 *
 * Passwords are kept as SHA-256, as redis-server keeps them, and a
 * password is checked against every one of the user's in constant time
 * (CRYPTO_memcmp), so neither its length nor a prefix shows in the time
 * AUTH takes. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "proxy/core/acl.h"
#include "proxy/base/digest.h"
#include "proxy/base/cmd.h"
#include "proxy/core/module.h"
#include "proxy/base/text.h"
#include "proxy/base/util.h"

/* ---- commands ------------------------------------------------------------------- */

/* Bits: the command table's rows (CMD_MAX: it may grow, cmd.h), then
 * local.c's SHARD.* commands. */
static size_t ncmd_bits(size_t *nredis)
{
    size_t n = 0;
    uint32_t acl;

    *nredis = CMD_MAX;
    while (module_role.shard_command(n, &acl) != NULL)
        n++;
    return *nredis + n;
}

static void set_bit(uint64_t *bits, size_t i, bool on)
{
    if (on)
        bits[i / 64] |= 1ull << (i % 64);
    else
        bits[i / 64] &= ~(1ull << (i % 64));
}

static bool get_bit(const uint64_t *bits, size_t i)
{
    return (bits[i / 64] >> (i % 64)) & 1;
}

bool acl_cmd_ok(const struct acl_user *u, const struct cmd *cmd)
{
    return cmd->num > 0 && get_bit(u->cmds, cmd->num - 1u);
}

bool acl_shard_ok(const struct acl_user *u, size_t i)
{
    return get_bit(u->cmds, CMD_MAX + i);
}

bool acl_key_ok(const struct acl_user *u, const char *key, size_t len)
{
    if (u->allkeys)
        return true;
    for (size_t i = 0; i < u->nkeys; i++)
        if (text_glob(u->keys[i], strlen(u->keys[i]), key, len))
            return true;
    return false;
}

bool acl_channel_ok(const struct acl_user *u, const char *name, size_t len, bool pattern)
{
    if (u->allchannels)
        return true;
    for (size_t i = 0; i < u->nchans; i++) {
        size_t n = strlen(u->chans[i]);
        if (pattern ? n == len && memcmp(u->chans[i], name, len) == 0
                    : text_glob(u->chans[i], n, name, len))
            return true;
    }
    return false;
}

bool acl_channels_narrowed(const struct acl_user *old, const struct acl_user *new)
{
    /* (allchannels is "*" in chans too: from every channel to fewer is
     * narrowed, unlike redis-server 7.0's check, which 7.2 fixed.) */
    if (new->allchannels)
        return false;
    for (size_t i = 0; i < old->nchans; i++) {
        bool kept = false;
        for (size_t k = 0; k < new->nchans && !kept; k++)
            kept = strcmp(old->chans[i], new->chans[k]) == 0;
        if (!kept)
            return true;
    }
    return false;
}

/* ---- signing in ----------------------------------------------------------------- */

const struct acl_user *acl_find(const struct acl *acl, const char *name, size_t len)
{
    for (size_t i = 0; i < acl->n; i++)
        if (acl->users[i].name != NULL && strlen(acl->users[i].name) == len && memcmp(acl->users[i].name, name, len) == 0)
            return &acl->users[i];
    return NULL;
}

const struct acl_user *acl_login(const struct acl *acl, const char *name, size_t nlen,
                                 const char *pw, size_t plen)
{
    const struct acl_user *u = acl_find(acl, name, nlen);
    uint8_t h[32];
    int match = 0;

    if (u == NULL || !u->on)
        return NULL;
    if (u->nopass)
        return u;
    digest_sha256(pw, plen, h);
    for (size_t i = 0; i < u->npass; i++)       /* every one, whichever matches */
        match |= CRYPTO_memcmp(h, u->pass[i], 32) == 0;
    return match ? u : NULL;
}

const struct acl_user *acl_new_session(const struct acl *acl)
{
    const struct acl_user *d = &acl->users[0];
    return d->on && d->nopass ? d : NULL;
}

/* ---- building ------------------------------------------------------------------- */

struct build {
    const char *path;
    const struct conf_user *line;   /* NULL: the default user redis_auth makes */
    char       *err;
    size_t      errlen;
    size_t      nredis, nbits;
};

static int bad(struct build *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct build *b, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(b->err, b->errlen, "%s:%d:%d: ", b->path,
                     b->line != NULL ? b->line->line : 0, b->line != NULL ? b->line->col : 0);
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < b->errlen)
        vsnprintf(b->err + n, b->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -EINVAL;
}

static void user_free(struct acl_user *u)
{
    free(u->name);
    free(u->pass);
    free(u->cmds);
    for (size_t i = 0; i < u->nkeys; i++)
        free(u->keys[i]);
    free(u->keys);
    for (size_t i = 0; i < u->nchans; i++)
        free(u->chans[i]);
    free(u->chans);
    memset(u, 0, sizeof(*u));
}

static void strs_add(char ***v, size_t *n, const char *s)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*v)[i], s))
            return;
    *v = xrealloc(*v, (*n + 1) * sizeof(**v));
    (*v)[(*n)++] = xstrdup(s);
}

static void strs_clear(char ***v, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free((*v)[i]);
    free(*v);
    *v = NULL;
    *n = 0;
}

static void pass_add(struct acl_user *u, const uint8_t h[32])
{
    for (size_t i = 0; i < u->npass; i++)
        if (!memcmp(u->pass[i], h, 32))
            return;
    u->pass = xrealloc(u->pass, (u->npass + 1) * sizeof(*u->pass));
    memcpy(u->pass[u->npass++], h, 32);
}

static void pass_del(struct acl_user *u, const uint8_t h[32])
{
    for (size_t i = 0; i < u->npass; i++)
        if (!memcmp(u->pass[i], h, 32)) {
            memmove(u->pass[i], u->pass[i + 1], (u->npass - i - 1) * 32);
            u->npass--;
            return;
        }
}

static bool parse_hex(const char *s, uint8_t out[32])
{
    if (strlen(s) != 64)
        return false;
    for (size_t i = 0; i < 32; i++) {
        unsigned v = 0;
        for (size_t k = 0; k < 2; k++) {
            char c = s[2 * i + k];
            unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                       : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                       : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10) : 16u;
            if (d > 15)
                return false;
            v = v * 16 + d;
        }
        out[i] = (uint8_t)v;
    }
    return true;
}

static void all_cmds(struct build *b, struct acl_user *u, bool on)
{
    u->future = on;
    for (size_t i = 0; i < b->nbits; i++)
        set_bit(u->cmds, i, on);
}

/* +@cat / -@cat: every command of the category, subcommands by their own. */
static int category(struct build *b, struct acl_user *u, const char *name, bool on)
{
    size_t n, ci;
    const struct cmd *t = cmd_table(&n);
    uint32_t acl;

    if (!strcasecmp(name, "all")) {
        all_cmds(b, u, on);
        return 0;
    }
    for (ci = 0; ci < cmd_acl_count; ci++)
        if (!strcasecmp(cmd_acl_names[ci], name))
            break;
    if (ci == cmd_acl_count)
        return bad(b, "user '%s': unknown command category '%s'", u->name, name);
    for (size_t i = 0; i < n; i++)
        if (t[i].acl & (1u << ci))
            set_bit(u->cmds, i, on);
    for (size_t i = 0; module_role.shard_command(i, &acl) != NULL; i++)
        if (acl & (1u << ci))
            set_bit(u->cmds, CMD_MAX + i, on);
    return 0;
}

/* +name / -name: the command with every subcommand, or "parent|sub". */
static int command(struct build *b, struct acl_user *u, const char *name, bool on)
{
    size_t n, len = strlen(name);
    const struct cmd *t = cmd_table(&n), *c;
    const char *bar = strchr(name, '|');
    uint32_t acl;
    const char *s;

    for (size_t i = 0; (s = module_role.shard_command(i, &acl)) != NULL; i++)
        if (!strcasecmp(s, name)) {
            set_bit(u->cmds, CMD_MAX + i, on);
            return 0;
        }
    if (bar == NULL) {
        if ((c = cmd_lookup(name, len)) == NULL)
            return bad(b, "user '%s': unknown command '%s'", u->name, name);
        set_bit(u->cmds, (size_t)(c - t), on);
        if (cmd_has_subcommands(c))
            for (size_t i = 0; i < n; i++)
                if (!strncmp(t[i].name, c->name, strlen(c->name)) &&
                    t[i].name[strlen(c->name)] == '|')
                    set_bit(u->cmds, i, on);
        return 0;
    }
    const struct cmd *parent = cmd_lookup(name, (size_t)(bar - name));
    if (parent == NULL || !cmd_has_subcommands(parent) ||
        (c = cmd_lookup_sub(parent, bar + 1, strlen(bar + 1))) == NULL)
        return bad(b, "user '%s': unknown subcommand '%s' (shardis takes +command|subcommand "
                   "only for commands that have subcommands)", u->name, name);
    set_bit(u->cmds, (size_t)(c - t), on);
    return 0;
}

/* A rule about commands (allcommands, nocommands, +/-@category,
 * +/-command): 1 applied, 0 not one, or an error. */
static int cmd_rule(struct build *b, struct acl_user *u, const char *tok)
{
    int rc;

    if (!strcasecmp(tok, "allcommands"))
        all_cmds(b, u, true);
    else if (!strcasecmp(tok, "nocommands"))
        all_cmds(b, u, false);
    else if ((tok[0] == '+' || tok[0] == '-') && tok[1] == '@')
        return (rc = category(b, u, tok + 2, tok[0] == '+')) < 0 ? rc : 1;
    else if ((tok[0] == '+' || tok[0] == '-') && tok[1] != '\0')
        return (rc = command(b, u, tok + 1, tok[0] == '+')) < 0 ? rc : 1;
    else
        return 0;
    return 1;
}

static int rule(struct build *b, struct acl_user *u, const char *tok)
{
    uint8_t h[32];
    int rc;

    if ((rc = cmd_rule(b, u, tok)) != 0)
        return rc < 0 ? rc : 0;
    if (!strcasecmp(tok, "on") || !strcasecmp(tok, "off")) {
        u->on = tok[1] == 'n' || tok[1] == 'N';
    } else if (!strcasecmp(tok, "nopass")) {
        u->nopass = true;
        u->npass = 0;
    } else if (!strcasecmp(tok, "resetpass")) {
        u->nopass = false;
        u->npass = 0;
    } else if (tok[0] == '>' || tok[0] == '<') {
        digest_sha256(tok + 1, strlen(tok + 1), h);
        if (tok[0] == '>') {
            pass_add(u, h);
            u->nopass = false;
        } else {
            pass_del(u, h);
        }
    } else if (tok[0] == '#' || tok[0] == '!') {
        if (!parse_hex(tok + 1, h))
            return bad(b, "user '%s': '%s' is not %c followed by a SHA-256 of 64 hex digits",
                       u->name, tok, tok[0]);
        if (tok[0] == '#') {
            pass_add(u, h);
            u->nopass = false;
        } else {
            pass_del(u, h);
        }
    } else if (tok[0] == '~') {
        u->allkeys |= !strcmp(tok, "~*");           /* as Redis: ~* is allkeys */
        strs_add(&u->keys, &u->nkeys, tok + 1);
    } else if (!strcasecmp(tok, "allkeys")) {
        u->allkeys = true;
        strs_add(&u->keys, &u->nkeys, "*");
    } else if (!strcasecmp(tok, "resetkeys")) {
        u->allkeys = false;
        strs_clear(&u->keys, &u->nkeys);
    } else if (tok[0] == '&') {
        u->allchannels |= !strcmp(tok, "&*");
        strs_add(&u->chans, &u->nchans, tok + 1);
    } else if (!strcasecmp(tok, "allchannels")) {
        u->allchannels = true;
        strs_add(&u->chans, &u->nchans, "*");
    } else if (!strcasecmp(tok, "resetchannels")) {
        u->allchannels = false;
        strs_clear(&u->chans, &u->nchans);
    } else if (!strcasecmp(tok, "reset")) {
        u->on = u->nopass = false;
        u->npass = 0;
        u->allkeys = u->allchannels = false;
        strs_clear(&u->keys, &u->nkeys);
        strs_clear(&u->chans, &u->nchans);
        all_cmds(b, u, false);
    } else if (tok[0] == '%') {
        return bad(b, "user '%s': '%s': shardis does not take %%R~ or %%W~ key permissions; "
                   "use ~pattern", u->name, tok);
    } else if (tok[0] == '(' || !strcasecmp(tok, "clearselectors")) {
        return bad(b, "user '%s': '%s': shardis does not take selectors", u->name, tok);
    } else {
        return bad(b, "user '%s': unknown ACL rule '%s'", u->name, tok);
    }
    return 0;
}

static void user_init(struct build *b, struct acl_user *u, const char *name)
{
    u->name = xstrdup(name);
    u->cmds = xcalloc((b->nbits + 63) / 64, sizeof(*u->cmds));
}

/* Whether u may do everything, so that its requests are not looked at. */
static void user_finish(struct build *b, struct acl_user *u)
{
    bool every = true;
    for (size_t i = 0; i < b->nbits && every; i++)
        every = get_bit(u->cmds, i);
    u->all = every && u->allkeys && u->allchannels;
}

static int user_line(struct build *b, struct acl *acl, const struct conf_user *line)
{
    char *text = xstrdup(line->rule), *save = NULL;
    const char *tok = strtok_r(text, " \t", &save);
    int rc = 0;

    b->line = line;
    if (tok == NULL) {
        free(text);
        return bad(b, "a user's line is empty; expected \"name on >password ~keys +@all\"");
    }
    if (acl_find(acl, tok, strlen(tok)) != NULL && strcmp(tok, "default") != 0) {
        rc = bad(b, "user '%s' is listed twice", tok);
        free(text);
        return rc;
    }
    struct acl_user *u;
    if (!strcmp(tok, "default")) {
        u = &acl->users[0];
        if (u->name != NULL) {
            free(text);
            return bad(b, "user 'default' is listed twice");
        }
    } else {
        u = &acl->users[acl->n++];
    }
    user_init(b, u, tok);
    while (rc == 0 && (tok = strtok_r(NULL, " \t", &save)) != NULL)
        rc = rule(b, u, tok);
    user_finish(b, u);
    free(text);
    return rc;
}

int acl_build(const struct conf_pool *pc, const char *path, struct acl **out,
              char *err, size_t errlen)
{
    struct build b = {.path = path, .err = err, .errlen = errlen};
    struct acl *acl = xcalloc(1, sizeof(*acl));
    int rc = 0;

    atomic_init(&acl->refs, 1);
    acl->pc = pc;
    conf_ref(pc->owner);                    /* (NULL: a config of no file, in tests) */
    b.nbits = ncmd_bits(&b.nredis);
    acl->users = xcalloc(pc->nusers + 1, sizeof(*acl->users));
    acl->n = 1;                             /* [0]: default, filled below if not listed */
    for (size_t i = 0; rc == 0 && i < pc->nusers; i++)
        rc = user_line(&b, acl, &pc->users[i]);
    if (rc == 0 && acl->users[0].name == NULL) {
        struct acl_user *d = &acl->users[0];
        user_init(&b, d, "default");
        d->on = true;
        d->allkeys = d->allchannels = true;
        strs_add(&d->keys, &d->nkeys, "*");
        strs_add(&d->chans, &d->nchans, "*");
        all_cmds(&b, d, true);
        if (pc->redis_auth != NULL) {
            uint8_t h[32];
            digest_sha256(pc->redis_auth, strlen(pc->redis_auth), h);
            pass_add(d, h);
        } else {
            d->nopass = true;
        }
        user_finish(&b, d);
    }
    if (rc < 0) {
        acl_unref(acl);
        *out = NULL;
        return rc;
    }
    *out = acl;
    return 0;
}

struct acl *acl_relearn(const struct acl *acl, char *err, size_t errlen)
{
    struct acl *again;

    return acl_build(acl->pc, "", &again, err, errlen) < 0 ? NULL : again;
}

struct acl *acl_ref(struct acl *acl)
{
    if (acl != NULL)
        atomic_fetch_add_explicit(&acl->refs, 1, memory_order_relaxed);
    return acl;
}

/* (As ring_unref: acq_rel, each holder's reads before the free.) */
void acl_unref(struct acl *acl)
{
    if (acl == NULL || atomic_fetch_sub_explicit(&acl->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < acl->n; i++)
        user_free(&acl->users[i]);
    free(acl->users);
    conf_unref(acl->pc->owner);
    free(acl);
}

/* ---- describing (ACL LIST, GETUSER) -------------------------------------------- */

/* Row i of the bitmap: the command table, then local.c's SHARD.*
 * commands; NULL for a row the table has not used yet. */
static const char *row(size_t i, size_t nredis, uint32_t *acl)
{
    size_t n;
    const struct cmd *t = cmd_table(&n);

    if (i < nredis) {
        *acl = i < n ? t[i].acl : 0;
        return i < n ? t[i].name : NULL;
    }
    return module_role.shard_command(i - nredis, acl);
}

/* A bitmap described as redis-server 6.2 describes one (its
 * ACLDescribeUserCommandRules; 7.0 prints the same form, but from the
 * rules it was given where it kept them: there, for +@all -@dangerous,
 * this prints the same commands in other rules, +@all -@admin -flushall
 * ...). From "+@all" (if the user's commands were last set by +@all) or
 * "-@all", each category in turn that more of the still unexplained
 * commands are in than not (counted on temp, which forgets those a
 * category explained), then each command whose bit still differs, in the
 * table's order (redis-server's: its hash table's). Categories are
 * counted over Redis's rows only, so that the same bitmap of Redis's
 * commands gets the same categories; SHARD.* and HOTKEYS, which
 * categories set too, follow as single commands where they still differ.
 * +parent sets its subcommands too (command() above), so after one only
 * a subcommand that differs follows. As redis-server checks it, what it
 * prints, applied to a blank user (fake), gives u's bitmap. */
char *acl_describe_commands(const struct acl_user *u)
{
    size_t nredis, nbits = ncmd_bits(&nredis), words = (nbits + 63) / 64;
    uint64_t *fake = xcalloc(words, sizeof(*fake)), *temp = xmalloc(words * sizeof(*temp));
    bool additive = !u->future;
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = xopen_memstream(&buf, &len);
    uint32_t acl;

    memcpy(temp, u->cmds, words * sizeof(*temp));
    fputs(additive ? "-@all" : "+@all", fp);
    for (size_t i = 0; i < nbits; i++)
        set_bit(fake, i, !additive);
    for (size_t ci = 0; ci < cmd_acl_count; ci++) {
        size_t on = 0, off = 0;
        for (size_t i = 0; i < nredis; i++)         /* (shardis's own: see above) */
            if (row(i, nredis, &acl) != NULL && (acl & (1u << ci)))
                get_bit(temp, i) ? on++ : off++;
        if (additive ? on <= off : off <= on)
            continue;
        fprintf(fp, " %c@%s", additive ? '+' : '-', cmd_acl_names[ci]);
        for (size_t i = 0; i < nbits; i++)
            if (row(i, nredis, &acl) != NULL && (acl & (1u << ci))) {
                set_bit(fake, i, additive);
                set_bit(temp, i, !additive);
            }
    }
    for (size_t i = 0; i < nbits; i++) {
        bool on = get_bit(u->cmds, i);
        const char *name = row(i, nredis, &acl);
        size_t nlen;
        if (on == get_bit(fake, i) || name == NULL)
            continue;
        nlen = strlen(name);
        fprintf(fp, " %c%s", on ? '+' : '-', name);
        set_bit(fake, i, on);
        for (size_t k = i + 1; i < nredis && k < nredis; k++) {
            const char *sub = row(k, nredis, &acl);
            if (sub == NULL || strncmp(sub, name, nlen) != 0 || sub[nlen] != '|')
                break;
            set_bit(fake, k, on);
        }
    }
    fclose(fp);
    ASSERT(memcmp(fake, u->cmds, words * sizeof(*fake)) == 0);   /* (bits past nbits: 0 in both) */
    free(fake);
    free(temp);
    return buf;
}

void acl_hex(const uint8_t h[32], char out[65])
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < 32; i++) {
        out[2 * i] = digits[h[i] >> 4];
        out[2 * i + 1] = digits[h[i] & 15];
    }
    out[64] = '\0';
}

void acl_genpass(char *out, size_t chars)
{
    static const char digits[] = "0123456789abcdef";
    uint8_t rnd[512];

    CHECK(chars <= 2 * sizeof(rnd) && RAND_bytes(rnd, (int)((chars + 1) / 2)) == 1);
    for (size_t i = 0; i < chars; i++)
        out[i] = digits[(rnd[i / 2] >> (i % 2 ? 0 : 4)) & 15];
    out[chars] = '\0';
}

int acl_check(const struct conf *cf, char *err, size_t errlen)
{
    for (size_t i = 0; i < cf->npools; i++) {
        struct acl *acl;
        int rc = acl_build(&cf->pools[i], cf->path, &acl, err, errlen);
        if (rc < 0)
            return rc;
        acl_unref(acl);
    }
    return 0;
}

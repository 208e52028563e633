/* test_resp.c -- the request and reply framers, fed every input cut at
 * every byte: framing must not depend on how the socket splits the bytes.
 * Error texts are redis-server 7.0's. */
#include <criterion/criterion.h>
#include <criterion/new/assert.h>
#include <criterion/parameterized.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/base/mbuf.h"
#include "proxy/base/resp.h"
#include "proxy/base/util.h"

/* Frame input (cut once at `cut`) and render the requests as
 * "arg|arg|...;" strings; on a protocol error append "ERR:<text>". */
static void frame(const char *in, size_t n, size_t cut, char *out, size_t outlen)
{
    struct resp_req s = {0};
    size_t pieces[2][2] = {{0, cut}, {cut, n - cut}};
    size_t o = 0;

    resp_req_reset(&s);
    out[0] = '\0';
    for (int k = 0; k < 2; k++) {
        size_t at = pieces[k][0], left = pieces[k][1];
        while (left > 0) {
            size_t used;
            int rc = resp_req_feed(&s, in + at, left, at, &used);
            if (rc < 0) {
                o += (size_t)snprintf(out + o, outlen - o, "ERR:%s", resp_error());
                resp_req_free(&s);
                return;
            }
            at += used;
            left -= used;
            if (rc == 1) {
                for (uint32_t i = 0; i < s.argc; i++) {
                    const char *base = s.is_inline ? s.inl : in;
                    o += (size_t)snprintf(out + o, outlen - o, "%s%.*s", i ? "|" : "",
                                          (int)s.argv[i].len, base + s.argv[i].off);
                }
                o += (size_t)snprintf(out + o, outlen - o, ";");
                /* the request's bytes are [start, at) */
                if (!s.is_inline)
                    cr_assert(eq(u64, s.argv[0].off > s.start, 1));
                resp_req_reset(&s);
            }
        }
    }
    if (!resp_req_idle(&s))
        o += (size_t)snprintf(out + o, outlen - o, "PARTIAL");
    resp_req_free(&s);
}

struct req_case {
    char in[160];
    size_t len;             /* 0: strlen(in) */
    char want[160];
};

ParameterizedTestParameters(resp, requests)
{
    static struct req_case cases[] = {
        {"*1\r\n$4\r\nPING\r\n", 0, "PING;"},
        {"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n", 0, "GET|k;PING;"},
        {"*3\r\n$3\r\nSET\r\n$4\r\na\r\nb\r\n$0\r\n\r\n", 0, "SET|a\r\nb|;"},
        {"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", 0, "PING;"},
        {"PING\r\n", 0, "PING;"},
        {"PING\n", 0, "PING;"},
        {"SET a \"b c\"\r\nGET  a\r\n", 0, "SET|a|b c;GET|a;"},
        {"SET 'it''s'\r\n", 0, "ERR:Protocol error: unbalanced quotes in request"},
        {"ECHO \"\\x41\\n\" 'x\\'y'\r\n", 0, "ECHO|A\n|x'y;"},
        {"\r\n   \r\n\nPING\r\n", 0, "PING;"},
        {"SET a \"b\r\n", 0, "ERR:Protocol error: unbalanced quotes in request"},
        {"SET a \"b\"c\r\n", 0, "ERR:Protocol error: unbalanced quotes in request"},
        {"*1\r\n$4\r\nPING\r\nPING\r\n*1\r\n$4\r\nPING\r\n", 0, "PING;PING;PING;"},
        {"*x\r\n", 0, "ERR:Protocol error: invalid multibulk length"},
        /* redis-server 7.0: up to INT_MAX elements */
        {"*1048577\r\n", 0, "PARTIAL"},
        {"*2147483647\r\n", 0, "PARTIAL"},
        {"*2147483648\r\n", 0, "ERR:Protocol error: invalid multibulk length"},
        {"*1\r\n:1\r\n", 0, "ERR:Protocol error: expected '$', got ':'"},
        {"*1\r\n$-1\r\n", 0, "ERR:Protocol error: invalid bulk length"},
        {"*1\r\n$536870913\r\n", 0, "ERR:Protocol error: invalid bulk length"},
        {"*1\r\n$3x\r\n", 0, "ERR:Protocol error: invalid bulk length"},
        /* redis-server's string2ll: no leading zeros, no "-0" */
        {"*01\r\n$4\r\nPING\r\n", 0, "ERR:Protocol error: invalid multibulk length"},
        {"*-0\r\n", 0, "ERR:Protocol error: invalid multibulk length"},
        {"*1\r\n$04\r\nPING\r\n", 0, "ERR:Protocol error: invalid bulk length"},
        {"*1\r\n$0\r\n\r\n*1\r\n$10\r\n0123456789\r\n", 0, ";0123456789;"},
        {"*1\r\n$3\r\nGE", 0, "PARTIAL"},
        {"*2\r\n$3\r\nGET\r\n$1\r\n\0\r\n", 20, "GET|"},  /* NUL key: checked below */
    };
    return cr_make_param_array(struct req_case, cases, sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct req_case *rc, resp, requests)
{
    size_t n = rc->len ? rc->len : strlen(rc->in);
    char got[512];

    for (size_t cut = 0; cut <= n; cut++) {
        frame(rc->in, n, cut, got, sizeof(got));
        cr_assert(strncmp(got, rc->want, strlen(rc->want)) == 0,
                  "cut=%zu got '%s' want '%s'", cut, got, rc->want);
    }
}

Test(resp, inline_too_big)
{
    static char big[RESP_MAX_INLINE + 10];
    struct resp_req s = {0};
    size_t used;

    memset(big, 'a', sizeof(big));
    resp_req_reset(&s);
    cr_assert(eq(int, resp_req_feed(&s, big, sizeof(big), 0, &used), -1));
    cr_assert(eq(str, (char *)resp_error(), "Protocol error: too big inline request"));
    resp_req_free(&s);
}

Test(resp, huge_bulk_is_refused_from_its_header)
{
    /* A 4 GB bulk is refused before any of it arrives. */
    const char in[] = "*2\r\n$3\r\nSET\r\n$4294967296\r\n";
    struct resp_req s = {0};
    size_t used;

    resp_req_reset(&s);
    cr_assert(eq(int, resp_req_feed(&s, in, sizeof(in) - 1, 0, &used), -1));
    cr_assert(eq(str, (char *)resp_error(), "Protocol error: invalid bulk length"));
    resp_req_free(&s);
}

Test(resp, many_pipelined_requests_byte_at_a_time)
{
    char in[100 * 40];
    size_t n = 0, used, count = 0;
    struct resp_req s = {0};

    for (int i = 0; i < 100; i++)
        n += (size_t)sprintf(in + n, "*3\r\n$3\r\nSET\r\n$%d\r\nk%d\r\n$1\r\nv\r\n",
                             i < 10 ? 2 : 3, i);
    resp_req_reset(&s);
    for (size_t i = 0; i < n; i++) {
        int rc = resp_req_feed(&s, in + i, 1, i, &used);
        cr_assert(rc >= 0);
        cr_assert(eq(sz, used, 1));
        if (rc == 1) {
            char key[8];
            snprintf(key, sizeof(key), "k%zu", count);
            cr_assert(eq(u32, s.argc, 3));
            cr_assert(memcmp(in + s.argv[1].off, key, s.argv[1].len) == 0);
            count++;
            resp_req_reset(&s);
        }
    }
    cr_assert(eq(sz, count, 100));
    resp_req_free(&s);
}

Test(resp, over_a_million_elements)
{
    /* DEL of 1,048,577 keys: more than redis-server 6's limit, within 7's. */
    const uint32_t nkeys = 1048577;
    size_t cap = 32 + (size_t)nkeys * 16, n, used;
    char *in = malloc(cap);
    struct resp_req s = {0};

    cr_assert(not(zero(ptr, in)));
    n = (size_t)sprintf(in, "*%u\r\n$3\r\nDEL\r\n", nkeys + 1);
    for (uint32_t i = 0; i < nkeys; i++)
        n += (size_t)sprintf(in + n, "$7\r\n%07u\r\n", i);
    resp_req_reset(&s);
    cr_assert(eq(int, resp_req_feed(&s, in, n, 0, &used), 1));
    cr_assert(eq(sz, used, n));
    cr_assert(eq(u32, s.argc, nkeys + 1));
    cr_assert(eq(int, memcmp(in + s.argv[nkeys].off, "1048576", 7), 0));
    resp_req_free(&s);
    free(in);
}

Test(resp, announced_count_allocates_nothing)
{
    /* argv grows with the elements that arrived, never from the count a
     * client announced: INT_MAX of them would be 32 GB. */
    const char in[] = "*2147483647\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
                      "$1\r\nd\r\n$1\r\ne\r\n";
    struct resp_req s = {0};
    size_t used;

    resp_req_reset(&s);
    cr_assert(eq(int, resp_req_feed(&s, in, sizeof(in) - 1, 0, &used), 0));
    cr_assert(eq(u32, s.argc, 2147483647));
    cr_assert(eq(u32, s.nargs, 5));
    cr_assert(le(u32, s.argcap, 16));
    resp_req_free(&s);
}

/* ---- replies --------------------------------------------------------------- */

/* Count replies in input cut at `cut`, on a connection of protocol resp3;
 * record each reply's end offset. */
static int count_replies_on(bool resp3, const char *in, size_t n, size_t cut, size_t *ends)
{
    struct resp_rsp s;
    size_t pieces[2][2] = {{0, cut}, {cut, n - cut}}, used;
    int count = 0;

    resp_rsp_init(&s, resp3);
    for (int k = 0; k < 2; k++) {
        size_t at = pieces[k][0], left = pieces[k][1];
        while (left > 0) {
            int rc = resp_rsp_feed(&s, in + at, left, &used);
            if (rc < 0)
                return -1;
            at += used;
            left -= used;
            if (rc == 1) {
                ends[count++] = at;
                resp_rsp_reset(&s);
            }
        }
    }
    return count;
}

static int count_replies(const char *in, size_t n, size_t cut, size_t *ends)
{
    return count_replies_on(false, in, n, cut, ends);
}

Test(resp, replies_split_everywhere)
{
    const char in[] = "+OK\r\n:12\r\n$3\r\nfoo\r\n$-1\r\n*-1\r\n*0\r\n-ERR bad\r\n"
                      "*3\r\n$1\r\na\r\n*2\r\n:1\r\n$0\r\n\r\n$2\r\n\r\n\r\n"
                      "$4\r\n*1\r\n\r\n";
    size_t want[] = {5, 10, 19, 24, 29, 33, 43, 76, 86};
    size_t n = sizeof(in) - 1, ends[16];

    for (size_t cut = 0; cut <= n; cut++) {
        int c = count_replies(in, n, cut, ends);
        cr_assert(eq(int, c, 9), "cut=%zu", cut);
        for (int i = 0; i < 9; i++)
            cr_assert(eq(sz, ends[i], want[i]), "cut=%zu reply %d", cut, i);
    }
}

/* Every RESP3 type redis-server 7 sends, nested, an attribute before a
 * top-level reply and one inside a map (neither counted as an element),
 * a push, an empty map and set, and a null; cut everywhere. */
Test(resp, resp3_replies_split_everywhere)
{
    static const char *const frames[] = {
        "_\r\n",
        ",3.14\r\n",
        ",inf\r\n",
        "#t\r\n",
        "(3492890328409238509324850943850943825024385\r\n",
        "!21\r\nSYNTAX invalid syntax\r\n",
        "=15\r\ntxt:Some string\r\n",
        "%2\r\n+first\r\n:1\r\n$6\r\nsecond\r\n~2\r\n#f\r\n_\r\n",
        /* redis.io's example: an attribute, then the array it is about */
        "|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.19\r\n$1\r\nb\r\n,0.07\r\n*2\r\n:20\r\n:95\r\n",
        "*2\r\n%1\r\n|1\r\n+ttl\r\n:3600\r\n+k\r\n+v\r\n:7\r\n",
        ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n",
        "%0\r\n",
        "~0\r\n",
        "|0\r\n:5\r\n",
        "*3\r\n(1\r\n=5\r\nmkd:x\r\n>1\r\n,-1.5e10\r\n",
    };
    const size_t nf = sizeof(frames) / sizeof(frames[0]);
    char in[1024];
    size_t want[32], n = 0, ends[32];

    for (size_t i = 0; i < nf; i++) {
        n += (size_t)sprintf(in + n, "%s", frames[i]);
        want[i] = n;
    }
    for (size_t cut = 0; cut <= n; cut++) {
        int c = count_replies_on(true, in, n, cut, ends);
        cr_assert(eq(int, c, (int)nf), "cut=%zu", cut);
        for (size_t i = 0; i < nf; i++)
            cr_assert(eq(sz, ends[i], want[i]), "cut=%zu reply %zu", cut, i);
    }
}

/* The top-level type is the value's, not its attribute's; a push says so. */
Test(resp, resp3_reply_type)
{
    struct resp_rsp s;
    size_t used;
    const char attr[] = "|1\r\n+a\r\n:1\r\n%1\r\n+k\r\n+v\r\n";
    const char push[] = ">2\r\n+invalidate\r\n*1\r\n$1\r\nk\r\n";

    resp_rsp_init(&s, true);
    cr_assert(eq(int, resp_rsp_feed(&s, attr, sizeof(attr) - 1, &used), 1));
    cr_assert(eq(sz, used, sizeof(attr) - 1));
    cr_assert(eq(chr, s.type, '%'));
    resp_rsp_reset(&s);
    cr_assert(eq(int, resp_rsp_feed(&s, push, sizeof(push) - 1, &used), 1));
    cr_assert(eq(chr, s.type, '>'));
}

/* A connection that did not say HELLO 3 gets no RESP3 type: each is a
 * protocol error there, at the top or nested, however the bytes are cut,
 * and the same bytes frame on a RESP3 connection. */
Test(resp, resp3_types_refused_on_resp2)
{
    static const char *const frames[] = {
        "_\r\n", ",1.5\r\n", "#t\r\n", "(12\r\n", "!3\r\nERR\r\n", "=7\r\ntxt:abc\r\n",
        "%1\r\n+k\r\n+v\r\n", "~1\r\n+m\r\n", ">1\r\n+p\r\n", "|1\r\n+a\r\n+b\r\n+v\r\n",
        "*2\r\n$1\r\na\r\n_\r\n",
        /* the relay's case: a GET's "$" turned to "!", a blob error */
        "!11\r\nm:k26|60533\r\n",
    };
    size_t ends[4];

    for (size_t i = 0; i < sizeof(frames) / sizeof(frames[0]); i++) {
        size_t n = strlen(frames[i]);
        for (size_t cut = 0; cut <= n; cut++) {
            cr_assert(eq(int, count_replies_on(false, frames[i], n, cut, ends), -1),
                      "%s cut=%zu", frames[i], cut);
            cr_assert(eq(int, count_replies_on(true, frames[i], n, cut, ends), 1),
                      "%s cut=%zu", frames[i], cut);
        }
    }
    cr_assert(eq(int, count_replies_on(false, "~0\r\n", 4, 0, ends), -1));
    cr_assert(strstr(resp_error(), "RESP3 type on a RESP2 connection") != NULL, "%s",
              resp_error());
}

/* A line or a bulk not ended by CRLF (a reply cut and spliced, a byte
 * changed on the way) is a protocol error, not a shifted frame. */
Test(resp, replies_need_crlf)
{
    static const char *const bad[] = {
        "$3\r\nfooX\r\n", "$3\r\nfoo\rX", "$3\r\nfoo\n\n", "$0\r\nX\r\n",
        "+OK\n", ":1\n", "*1\r\n$1\r\nab\r\n",
    };
    size_t ends[4];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t n = strlen(bad[i]);
        for (size_t cut = 0; cut <= n; cut++)
            cr_assert(eq(int, count_replies(bad[i], n, cut, ends), -1), "%s cut=%zu", bad[i], cut);
    }
}

Test(resp, bad_replies)
{
    size_t ends[4];
    cr_assert(eq(int, count_replies_on(true, "?x\r\n", 4, 0, ends), -1));
    cr_assert(eq(int, count_replies_on(true, "$x\r\n", 4, 0, ends), -1));
    cr_assert(eq(int, count_replies_on(true, "*1\r\n@\r\n", 7, 0, ends), -1));
    /* Streamed strings and aggregates ("$?", "*?"): redis-server never
     * sends them. */
    cr_assert(eq(int, count_replies_on(true, "$?\r\n", 4, 0, ends), -1));
    cr_assert(eq(int, count_replies_on(true, "%?\r\n", 4, 0, ends), -1));
    /* 65 arrays (or sets, or attributes) nested in their first elements
     * are deeper than any Redis reply. */
    for (const char *const *h = (const char *const[]){"*2\r\n", "~2\r\n", "|1\r\n", NULL};
         *h != NULL; h++) {
        char deep[65 * 4 + 8];
        size_t n = 0;
        for (int i = 0; i < 65; i++)
            n += (size_t)sprintf(deep + n, "%s", *h);
        cr_assert(eq(int, count_replies_on(true, deep, n, 0, ends), -1), "%s", *h);
    }
}

/* The deepest reply taken: 63 arrays and an attribute in the innermost
 * (the last bit of the attribute mask), then the value it goes with. */
Test(resp, deepest_reply_with_an_attribute)
{
    char in[64 * 4 + 64];
    size_t n = 0, ends[2];

    for (int i = 0; i < RESP_MAX_DEPTH - 1; i++)
        n += (size_t)sprintf(in + n, "*1\r\n");
    n += (size_t)sprintf(in + n, "|1\r\n+a\r\n:1\r\n:5\r\n+next\r\n");
    cr_assert(eq(int, count_replies_on(true, in, n, n / 2, ends), 2));
    cr_assert(eq(sz, ends[0], n - 7));
}

/* A script returning a table that holds itself: redis-server nests "*1"
 * until its Lua stack is full (about 8,000 deep), then an error. Nested
 * as last elements, levels do not add up: 100,000 deep is one reply, and
 * so is the same chain as the first element of a "*2", cut anywhere. */
Test(resp, deep_chain_of_last_elements)
{
    enum { DEEP = 100000 };
    static const char tail[] = "-ERR reached lua stack limit\r\n";
    size_t cap = 2 * DEEP * 4 + 128, n = 0, ends[3];
    char *in = malloc(cap);

    cr_assert(not(zero(ptr, in)));
    n += (size_t)sprintf(in + n, "*2\r\n");
    for (int i = 0; i < DEEP; i++)
        n += (size_t)sprintf(in + n, "*1\r\n");
    n += (size_t)sprintf(in + n, "%s:1\r\n", tail);
    size_t first = n;
    for (int i = 0; i < DEEP; i++)
        n += (size_t)sprintf(in + n, "*1\r\n");
    n += (size_t)sprintf(in + n, "%s+next\r\n", tail);
    for (size_t cut = 0; cut < n; cut += n / 7 + 1) {
        cr_assert(eq(int, count_replies(in, n, cut, ends), 3), "cut at %zu", cut);
        cr_assert(eq(sz, ends[0], first));
        cr_assert(eq(sz, ends[1], n - 7));
    }
    free(in);
}

/* ---- the reply reader ------------------------------------------------------- */

/* A msg of the n bytes at in, cut into slices at cuts[0..ncuts) (each in
 * a chunk of its own, so that nothing joins them), with the rest of every
 * chunk filled with what a reader that ran past its slice would take for
 * more reply. */
static void make_msg(struct msg *g, const char *in, size_t n, const size_t *cuts, size_t ncuts)
{
    size_t from = 0;

    memset(g, 0, sizeof(*g));
    for (size_t k = 0; k <= ncuts; k++) {
        size_t to = k < ncuts ? cuts[k] : n;
        if (to == from && !(k == ncuts && g->n == 0 && n == 0))
            continue;
        struct mbuf *m = mbuf_get();
        for (size_t i = 0; i < MBUF_SIZE; i++)
            m->data[i] = "\r\n:1\r\n"[i % 6];
        memcpy(m->data + 7, in + from, to - from);
        cr_assert(eq(int, msg_append(g, m, 7, (uint32_t)(to - from)), 0));
        mbuf_unref(m);
        from = to;
    }
}

/* Read one whole value and render it: a token per value read, "ERR:..."
 * on an error. Checks what every value must satisfy on the way. */
static void render(struct resp_rd *rd, char *out, size_t outlen)
{
    size_t o = 0;
    struct resp_val v;

    out[0] = '\0';
    do {
        char s[256];
        if (resp_rd_next(rd, &v) < 0) {
            snprintf(out + o, outlen - o, "%sERR:%s", o ? " " : "", rd->err);
            return;
        }
        cr_assert(le(sz, v.end, rd->len));
        cr_assert(lt(sz, v.start, v.end));
        o += (size_t)snprintf(out + o, outlen - o, "%s%c", o ? " " : "", v.type);
        if (v.nil) {
            o += (size_t)snprintf(out + o, outlen - o, "nil");
        } else if (strchr("*~>%|", v.type) != NULL) {
            o += (size_t)snprintf(out + o, outlen - o, "%lld", v.n);
            cr_assert(eq(sz, v.elems, (size_t)v.n * (strchr("%|", v.type) ? 2 : 1)));
        } else if (v.type == ':' || v.type == '#') {
            o += (size_t)snprintf(out + o, outlen - o, "%lld", v.n);
        } else {
            cr_assert(lt(sz, v.len, sizeof(s)));
            cr_assert(eq(sz, resp_rd_copy(rd, &v, s, sizeof(s)), v.len));
            if (v.p != NULL)
                cr_assert(eq(int, memcmp(v.p, s, v.len), 0));
            cr_assert(resp_rd_is(rd, &v, s, v.len, false));
            o += (size_t)snprintf(out + o, outlen - o, "%.*s", (int)v.len, s);
        }
    } while (rd->depth > 0);
    if (!resp_rd_end(rd))
        snprintf(out + o, outlen - o, " MORE");
}

struct rd_case {
    char in[160];
    char want[160];
};

static struct rd_case rd_cases[] = {
    /* RESP2 */
    {"+OK\r\n", "+OK"},
    {"+\r\n", "+"},
    {"-ERR bad thing\r\n", "-ERR bad thing"},
    {":0\r\n", ":0"},
    {":-12\r\n", ":-12"},
    {":9223372036854775807\r\n", ":9223372036854775807"},
    {":-9223372036854775808\r\n", ":-9223372036854775808"},
    {"$5\r\nhello\r\n", "$hello"},
    {"$0\r\n\r\n", "$"},
    {"$4\r\na\r\nb\r\n", "$a\r\nb"},
    {"$-1\r\n", "$nil"},
    {"*-1\r\n", "*nil"},
    {"*0\r\n", "*0"},
    {"*2\r\n$3\r\nfoo\r\n*1\r\n:1\r\n", "*2 $foo *1 :1"},
    {"*3\r\n$1\r\na\r\n$-1\r\n*0\r\n", "*3 $a $nil *0"},
    {"*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\nb\r\n", "*2 $0 *2 $a $b"},
    /* RESP3 */
    {"_\r\n", "_nil"},
    {",3.14\r\n", ",3.14"},
    {",-inf\r\n", ",-inf"},
    {",nan\r\n", ",nan"},
    {",1e-5\r\n", ",1e-5"},
    {"#t\r\n", "#1"},
    {"#f\r\n", "#0"},
    {"(3492890328409238509324850943850943825024385\r\n",
     "(3492890328409238509324850943850943825024385"},
    {"(-1\r\n", "(-1"},
    {"!21\r\nSYNTAX invalid syntax\r\n", "!SYNTAX invalid syntax"},
    {"=15\r\ntxt:Some string\r\n", "=Some string"},
    {"=4\r\nmkd:\r\n", "="},
    {"%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n", "%2 +first :1 +second :2"},
    {"~3\r\n+a\r\n+b\r\n_\r\n", "~3 +a +b _nil"},
    {">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n", ">3 $message $ch $x"},
    {"%0\r\n", "%0"},
    /* Attributes are skipped: the value they annotate is read. */
    {"|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n:5\r\n", ":5"},
    {"*2\r\n|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n", "*2 :1 :2"},
    {"*1\r\n|1\r\n+a\r\n+b\r\n:1\r\n", "*1 :1"},
    {"|0\r\n+x\r\n", "+x"},
    /* Malformed: an error, whatever the cut. */
    {"", "ERR:truncated reply"},
    {"+OK", "ERR:truncated reply"},
    {"+OK\r", "ERR:truncated reply"},
    {"+OK\n", "ERR:line without CRLF in reply"},
    {"\n", "ERR:bad type byte in reply"},
    {"@x\r\n", "ERR:bad type byte in reply"},
    {":\r\n", "ERR:bad integer in reply"},
    {": 1\r\n", "ERR:bad integer in reply"},
    {":+1\r\n", "ERR:bad integer in reply"},
    {":1 \r\n", "ERR:bad integer in reply"},
    {":01\r\n", "ERR:bad integer in reply"},
    {":-0\r\n", "ERR:bad integer in reply"},
    {":9223372036854775808\r\n", "ERR:bad integer in reply"},
    {":-9223372036854775809\r\n", "ERR:bad integer in reply"},
    {"$5\r\nhel\r\n", "ERR:truncated reply"},
    {"$5\r\nhelloXY", "ERR:bulk without CRLF in reply"},
    {"$5\r\nhello\rX", "ERR:bulk without CRLF in reply"},
    {"$-2\r\n", "ERR:bad length in reply"},
    {"$01\r\nx\r\n", "ERR:bad length in reply"},
    {"$+1\r\nx\r\n", "ERR:bad length in reply"},
    {"$\r\n\r\n", "ERR:bad length in reply"},
    {"$1x\r\nx\r\n", "ERR:bad length in reply"},
    {"$1000000000000000000\r\n", "ERR:bad length in reply"},
    {"$999999999999999999\r\n", "ERR:truncated reply"},
    {"$?\r\n;4\r\nHell\r\n;0\r\n", "ERR:bad length in reply"},
    {"*2\r\n:1\r\n", "ERR:truncated reply"},
    {"*2\r\n$1\r\na\r\n", "*2 $a ERR:truncated reply"},
    {"*3\r\n:1\r\n:2\r\n", "ERR:truncated reply"},
    {"*999999999999999999\r\n:1\r\n", "ERR:truncated reply"},
    {"*1\r\n@\r\n", "*1 ERR:bad type byte in reply"},
    {"%-1\r\n", "ERR:bad length in reply"},
    {"~-1\r\n", "ERR:bad length in reply"},
    {"!-1\r\n", "ERR:bad length in reply"},
    {"%1\r\n+a\r\n", "ERR:truncated reply"},
    {"=3\r\ntxt\r\n", "ERR:bad verbatim string in reply"},
    {"=4\r\ntxt;\r\n", "ERR:bad verbatim string in reply"},
    {"_x\r\n", "ERR:bad null in reply"},
    {"#x\r\n", "ERR:bad boolean in reply"},
    {"#tt\r\n", "ERR:bad boolean in reply"},
    {",\r\n", "ERR:bad double in reply"},
    {",1 2\r\n", "ERR:bad double in reply"},
    {"(\r\n", "ERR:bad big number in reply"},
    {"(-\r\n", "ERR:bad big number in reply"},
    {"(12a\r\n", "ERR:bad big number in reply"},
    {"|1\r\n+a\r\n+b\r\n", "ERR:truncated reply"},
    {":1\r\n:2\r\n", ":1 MORE"},
};

ParameterizedTestParameters(resp_rd, values)
{
    return cr_make_param_array(struct rd_case, rd_cases, ARRAY_SIZE(rd_cases));
}

/* Every case read flat (from a heap block of exactly its bytes: ASan sees
 * a read past it), as a msg cut in two at every byte, and as a msg of one
 * byte per slice: the same values, or the same error. */
ParameterizedTest(struct rd_case *rc, resp_rd, values)
{
    size_t n = strlen(rc->in), cuts[160];
    char got[512];
    struct resp_rd rd;
    struct msg g;
    char *flat = malloc(n ? n : 1);

    memcpy(flat, rc->in, n);
    resp_rd_init_flat(&rd, flat, n);
    render(&rd, got, sizeof(got));
    cr_assert(eq(str, got, rc->want), "flat");
    free(flat);
    for (size_t cut = 0; cut <= n; cut++) {
        make_msg(&g, rc->in, n, &cut, 1);
        resp_rd_init(&rd, &g);
        render(&rd, got, sizeof(got));
        cr_assert(eq(str, got, rc->want), "cut=%zu", cut);
        msg_release(&g);
    }
    for (size_t i = 0; i < n; i++)
        cuts[i] = i + 1;
    make_msg(&g, rc->in, n, cuts, n > 0 ? n - 1 : 0);
    resp_rd_init(&rd, &g);
    render(&rd, got, sizeof(got));
    cr_assert(eq(str, got, rc->want), "a byte per slice");
    msg_release(&g);
}

ParameterizedTestParameters(resp_rd, values_truncated)
{
    return cr_make_param_array(struct rd_case, rd_cases, ARRAY_SIZE(rd_cases));
}

/* A strict prefix of a value is never a value: every one of every well-
 * formed case is "truncated", never read past (ASan, and a chunk whose
 * bytes after the slice look like more reply). */
ParameterizedTest(struct rd_case *rc, resp_rd, values_truncated)
{
    size_t n = strlen(rc->in);
    char got[512];
    struct resp_rd rd;
    struct msg g;

    if (strstr(rc->want, "ERR:") != NULL || strstr(rc->want, "MORE") != NULL)
        return;
    for (size_t len = 0; len < n; len++) {
        char *flat = malloc(len ? len : 1);
        memcpy(flat, rc->in, len);
        resp_rd_init_flat(&rd, flat, len);
        render(&rd, got, sizeof(got));
        cr_assert(not(zero(ptr, strstr(got, "ERR:truncated reply"))), "len=%zu: %s", len, got);
        free(flat);
        make_msg(&g, rc->in, len, &len, 0);
        resp_rd_init(&rd, &g);
        render(&rd, got, sizeof(got));
        cr_assert(not(zero(ptr, strstr(got, "ERR:truncated reply"))), "len=%zu: %s", len, got);
        msg_release(&g);
    }
}


Test(resp_rd, nil_is_not_empty)
{
    const char *in[] = {"$-1\r\n", "*-1\r\n", "_\r\n", "$0\r\n\r\n", "*0\r\n"};
    const bool nil[] = {true, true, true, false, false};
    const char type[] = {'$', '*', '_', '$', '*'};

    for (int i = 0; i < 5; i++) {
        struct resp_rd rd;
        struct resp_val v;
        resp_rd_init_flat(&rd, in[i], strlen(in[i]));
        cr_assert(eq(int, resp_rd_next(&rd, &v), 0));
        cr_assert(eq(int, v.nil, nil[i]), "%s", in[i]);
        cr_assert(eq(chr, v.type, type[i]));
        cr_assert(eq(sz, v.len, 0));
        cr_assert(eq(sz, v.elems, 0));
        cr_assert(resp_rd_end(&rd));
    }
}

Test(resp_rd, depth)
{
    char deep[66 * 4 + 8];
    size_t n = 0;
    struct resp_rd rd;
    char got[66 * 4 + 64];

    for (int i = 0; i < RESP_MAX_DEPTH; i++)
        n += (size_t)sprintf(deep + n, "*1\r\n");
    n += (size_t)sprintf(deep + n, ":7\r\n");
    resp_rd_init_flat(&rd, deep, n);
    render(&rd, got, sizeof(got));
    cr_assert(not(zero(ptr, strstr(got, "*1 :7"))), "%s", got);
    cr_assert(zero(ptr, strstr(got, "ERR")), "%s", got);

    n = 0;
    for (int i = 0; i <= RESP_MAX_DEPTH; i++)
        n += (size_t)sprintf(deep + n, "*1\r\n");
    n += (size_t)sprintf(deep + n, ":7\r\n");
    resp_rd_init_flat(&rd, deep, n);
    render(&rd, got, sizeof(got));
    cr_assert(not(zero(ptr, strstr(got, "ERR:reply nested too deep"))), "%s", got);
    /* An error is sticky. */
    struct resp_val v;
    cr_assert(eq(int, resp_rd_next(&rd, &v), -1));
    cr_assert(eq(int, resp_rd_skip(&rd, &v), -1));
    cr_assert(not(resp_rd_end(&rd)));
}

Test(resp_rd, attributes_reported_when_asked)
{
    const char in[] = "*1\r\n|1\r\n+a\r\n+b\r\n:1\r\n";
    struct resp_rd rd;
    char got[128];

    resp_rd_init_flat(&rd, in, sizeof(in) - 1);
    rd.attrs = true;
    render(&rd, got, sizeof(got));
    cr_assert(eq(str, got, "*1 |1 +a +b :1"));
}

/* An MGET reply's elements as byte ranges, whatever the cuts: what the
 * merge of split MGETs forwards. */
Test(resp_rd, skip_gives_each_element)
{
    const char in[] = "*4\r\n$3\r\nfoo\r\n$-1\r\n*2\r\n:1\r\n*1\r\n$0\r\n\r\n:5\r\n";
    const size_t want[][2] = {{4, 13}, {13, 18}, {18, 36}, {36, 40}};
    size_t n = sizeof(in) - 1;

    for (size_t cut = 0; cut <= n; cut++) {
        struct msg g;
        struct resp_rd rd;
        struct resp_val v;
        make_msg(&g, in, n, &cut, 1);
        resp_rd_init(&rd, &g);
        cr_assert(eq(chr, resp_rd_peek(&rd), '*'));
        cr_assert(eq(int, resp_rd_next(&rd, &v), 0));
        cr_assert(eq(i64, v.n, 4));
        cr_assert(eq(sz, v.end, 4));
        for (int e = 0; e < 4; e++) {
            cr_assert(eq(chr, resp_rd_peek(&rd), in[want[e][0]]));
            cr_assert(eq(int, resp_rd_skip(&rd, &v), 0), "cut=%zu: %s", cut, rd.err);
            cr_assert(eq(sz, v.start, want[e][0]), "cut=%zu e=%d", cut, e);
            cr_assert(eq(sz, v.end, want[e][1]), "cut=%zu e=%d", cut, e);
        }
        cr_assert(resp_rd_end(&rd));
        cr_assert(eq(chr, resp_rd_peek(&rd), 0));
        msg_release(&g);
    }
}

/* A string's bytes: a pointer when they lie in one slice, else a copy. */
Test(resp_rd, strings_across_slices)
{
    const char in[] = "$10\r\n0123456789\r\n";
    size_t n = sizeof(in) - 1;

    for (size_t cut = 0; cut <= n; cut++) {
        struct msg g;
        struct resp_rd rd;
        struct resp_val v;
        char buf[16];
        const char *s;
        make_msg(&g, in, n, &cut, 1);
        resp_rd_init(&rd, &g);
        cr_assert(eq(int, resp_rd_next(&rd, &v), 0));
        cr_assert(eq(sz, v.off, 5));
        cr_assert(eq(sz, v.len, 10));
        bool split = cut > 5 && cut < 15;
        cr_assert(eq(int, v.p == NULL, split), "cut=%zu", cut);
        s = resp_rd_str(&rd, &v, buf, sizeof(buf));
        cr_assert(eq(int, memcmp(s, "0123456789", 10), 0));
        cr_assert(eq(int, resp_rd_str(&rd, &v, buf, 9) == NULL, split));
        cr_assert(resp_rd_is(&rd, &v, "0123", 4, true));
        cr_assert(not(resp_rd_is(&rd, &v, "0123", 4, false)));
        cr_assert(not(resp_rd_is(&rd, &v, "01234567890", 11, true)));
        cr_assert(eq(sz, resp_rd_copy(&rd, &v, buf, 3), 3));
        cr_assert(eq(int, memcmp(buf, "012", 3), 0));
        msg_release(&g);
    }
}

Test(resp_rd, head)
{
    struct msg g;
    char text[8];
    size_t none = 0;

    make_msg(&g, "-NOSCRIPT No matching script\r\n", 30, &none, 0);
    cr_assert(eq(chr, resp_rd_head(&g, text, sizeof(text)), '-'));
    cr_assert(eq(str, text, "NOSCRIP"));
    msg_release(&g);
    make_msg(&g, "*2\r\n:1\r\n:2\r\n", 12, &none, 0);
    cr_assert(eq(chr, resp_rd_head(&g, text, sizeof(text)), '*'));
    cr_assert(eq(str, text, "2"));
    msg_release(&g);
    make_msg(&g, "+OK", 3, &none, 0);
    cr_assert(eq(chr, resp_rd_head(&g, text, sizeof(text)), 0));
    cr_assert(eq(str, text, ""));
    msg_release(&g);
    memset(&g, 0, sizeof(g));
    cr_assert(eq(chr, resp_rd_head(&g, NULL, 0), 0));
}

/* An error's code is its first word, whole: at every split of the reply. */
Test(resp_rd, error_is)
{
    static const struct { const char *in; bool want; } cases[] = {
        {"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n", true},
        {"-UNBLOCKED\r\n", true},
        {"-UNBLOCKEDX no\r\n", false},        /* another code that starts alike */
        {"-UNBLOCK client\r\n", false},
        {"+UNBLOCKED\r\n", false},            /* not an error */
        {"-ERR UNBLOCKED\r\n", false},
        {"$9\r\nUNBLOCKED\r\n", false},
    };
    struct msg g;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = strlen(cases[i].in);
        for (size_t cut = 0; cut <= n; cut++) {
            make_msg(&g, cases[i].in, n, &cut, 1);
            cr_assert(eq(int, resp_rd_error_is(&g, "UNBLOCKED"), cases[i].want), "%s cut at %zu",
                      cases[i].in, cut);
            msg_release(&g);
        }
    }
}

/* Header lines, checked against printf for every length of number and both
 * ends of long long. */
Test(resp_header, matches_printf)
{
    const long long values[] = {0, 1, 9, 10, 99, 100, 512, 65536, 1048576, 4294967295LL,
                                -1, -10, 999999999999999999LL, LLONG_MAX, LLONG_MIN};
    const char types[] = {'*', '$', ':'};

    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        for (size_t t = 0; t < sizeof(types); t++) {
            char got[RESP_HEADER_MAX + 8], want[64];
            memset(got, 'x', sizeof(got));
            size_t n = resp_header(got, types[t], values[i]);
            int m = snprintf(want, sizeof(want), "%c%lld\r\n", types[t], values[i]);
            cr_assert(le(sz, n, RESP_HEADER_MAX));
            cr_assert(eq(sz, n, (size_t)m), "%lld", values[i]);
            cr_assert(eq(int, memcmp(got, want, n), 0), "%lld", values[i]);
            cr_assert(eq(chr, got[n], 'x'), "wrote past the header");
        }
    }
}

/* ---- the encoder ------------------------------------------------------------------- */

#include "proxy/base/mbuf.h"

/* A writer of proto into a fresh msg; enc_bytes takes its bytes out. */
struct enc {
    struct msg g;
    struct mbuf *cur;
    struct resp_w w;
};

static void enc_init(struct enc *e, int proto)
{
    memset(e, 0, sizeof(*e));
    e->w = resp_w_on(&e->g, &e->cur, proto);
}

/* The bytes written (malloc'd, NUL-ended), and the writer's state freed. */
static char *enc_bytes(struct enc *e, size_t *len)
{
    char *out = malloc(e->g.len + 1);
    msg_copy(&e->g, 0, e->g.len, out);
    out[e->g.len] = '\0';
    *len = e->g.len;
    msg_release(&e->g);
    if (e->cur != NULL)
        mbuf_unref(e->cur);
    return out;
}

/* Write every kind of value once, under proto. */
static void write_all(struct resp_w *w)
{
    resp_w_array(w, 3);
    resp_w_map(w, 2);
    resp_w_set(w, 4);
    resp_w_push(w, 3);
    resp_w_null(w);
    resp_w_null_array(w);
    resp_w_int(w, -42);
    resp_w_int(w, LLONG_MAX);
    resp_w_bool(w, true);
    resp_w_bool(w, false);
    resp_w_double(w, 1.5);
    resp_w_double(w, -0.1);
    resp_w_double(w, 1.0 / 0.0);
    resp_w_double(w, -1.0 / 0.0);
    resp_w_simple(w, "OK");
    resp_w_error(w, "ERR bad %s %d", "thing", 7);
    resp_w_bulk(w, "a\r\nb", 4);
    resp_w_bulk(w, "", 0);
    resp_w_bulk_str(w, "foo");
    resp_w_bulk_ull(w, 0);
    resp_w_bulk_ull(w, UINT64_MAX);
    resp_w_bulk_header(w, 3);
    resp_w_raw(w, "xyz", 3);
    resp_w_bulk_end(w);
    resp_w_verbatim(w, "txt", "a:b", 3);
    resp_w_verbatim_header(w, "mkd", 2);
    resp_w_raw(w, "hi", 2);
    resp_w_bulk_end(w);
    resp_w_command(w, 2, (const char *const[]){"GET", "k"}, NULL);
    resp_w_command(w, 2, (const char *const[]){"SET", "k\0v"}, (const size_t[]){3, 3});
}

/* write_all's values in proto, compared with want. */
static void every_type(int proto, const char *want, size_t wlen)
{
    struct enc e;
    size_t len;

    enc_init(&e, proto);
    write_all(&e.w);
    char *got = enc_bytes(&e, &len);
    cr_assert(eq(sz, len, wlen));
    cr_assert(eq(int, memcmp(got, want, len), 0), "got %s", got);
    free(got);
}

Test(resp_w, every_type_resp2)
{
    static const char want[] =
        "*3\r\n" "*4\r\n" "*4\r\n" "*3\r\n" "$-1\r\n" "*-1\r\n"
        ":-42\r\n" ":9223372036854775807\r\n" ":1\r\n" ":0\r\n"
        "$3\r\n1.5\r\n" "$20\r\n-0.10000000000000001\r\n" "$3\r\ninf\r\n" "$4\r\n-inf\r\n"
        "+OK\r\n" "-ERR bad thing 7\r\n"
        "$4\r\na\r\nb\r\n" "$0\r\n\r\n" "$3\r\nfoo\r\n" "$1\r\n0\r\n"
        "$20\r\n18446744073709551615\r\n" "$3\r\nxyz\r\n"
        "$3\r\na:b\r\n" "$2\r\nhi\r\n"
        "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n" "*2\r\n$3\r\nSET\r\n$3\r\nk\0v\r\n";

    every_type(RESP2, want, sizeof(want) - 1);
}

Test(resp_w, every_type_resp3)
{
    static const char want[] =
        "*3\r\n" "%2\r\n" "~4\r\n" ">3\r\n" "_\r\n" "_\r\n"
        ":-42\r\n" ":9223372036854775807\r\n" "#t\r\n" "#f\r\n"
        ",1.5\r\n" ",-0.10000000000000001\r\n" ",inf\r\n" ",-inf\r\n"
        "+OK\r\n" "-ERR bad thing 7\r\n"
        "$4\r\na\r\nb\r\n" "$0\r\n\r\n" "$3\r\nfoo\r\n" "$1\r\n0\r\n"
        "$20\r\n18446744073709551615\r\n" "$3\r\nxyz\r\n"
        "=7\r\ntxt:a:b\r\n" "=6\r\nmkd:hi\r\n"
        "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n" "*2\r\n$3\r\nSET\r\n$3\r\nk\0v\r\n";

    every_type(RESP3, want, sizeof(want) - 1);
}

Test(resp_w, nan_is_spelled_out)
{
    struct enc e;
    size_t len;

    enc_init(&e, RESP3);
    resp_w_double(&e.w, 0.0 / 0.0);
    char *got = enc_bytes(&e, &len);
    cr_assert(eq(str, got, ",nan\r\n"));
    free(got);
}

/* An error is one line whatever its text holds, and a long one is cut
 * visibly, still one valid line. */
Test(resp_w, errors_stay_one_line)
{
    struct enc e;
    size_t len;
    char *big = malloc(5000);

    enc_init(&e, RESP2);
    resp_w_error(&e.w, "ERR a\r\nb\nc");
    char *got = enc_bytes(&e, &len);
    cr_assert(eq(str, got, "-ERR a  b c\r\n"));
    free(got);

    memset(big, 'x', 4999);
    big[4999] = '\0';
    enc_init(&e, RESP2);
    resp_w_error(&e.w, "ERR %s", big);
    got = enc_bytes(&e, &len);
    cr_assert(eq(sz, len, 1 + RESP_W_ERROR_MAX + 2));
    cr_assert(eq(int, memcmp(got, "-ERR xxx", 8), 0));
    cr_assert(eq(int, memcmp(got + len - 5, "...\r\n", 5), 0));
    cr_assert(eq(ptr, memchr(got, '\r', len - 2), NULL));
    free(got);

    /* Exactly at the cap: whole, no "...". */
    big[RESP_W_ERROR_MAX - 4] = '\0';
    enc_init(&e, RESP2);
    resp_w_error(&e.w, "ERR %s", big);
    got = enc_bytes(&e, &len);
    cr_assert(eq(sz, len, 1 + RESP_W_ERROR_MAX + 2));
    cr_assert(eq(int, memcmp(got + len - 5, "xxx\r\n", 5), 0));
    free(got);
    free(big);
}

/* Bulks of every length around the short-value limit and the chunk size,
 * and of 1 MB: header, bytes and CRLF exact, across chunks. */
Test(resp_w, long_bulks)
{
    const size_t sizes[] = {0, 1, 511, 512, 513, 4096, MBUF_SIZE - 8, MBUF_SIZE, MBUF_SIZE + 1,
                            3 * MBUF_SIZE + 17, 1024 * 1024};
    char *data = malloc(1024 * 1024);

    for (size_t i = 0; i < 1024 * 1024; i++)
        data[i] = (char)('a' + i % 26);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        for (int proto = RESP2; proto <= RESP3; proto++) {
            struct enc e;
            size_t len, n = sizes[k];
            char hdr[32];
            int hl = snprintf(hdr, sizeof(hdr), "$%zu\r\n", n);

            enc_init(&e, proto);
            resp_w_simple(&e.w, "before");      /* the bulk starts mid-chunk */
            resp_w_bulk(&e.w, data, n);
            resp_w_int(&e.w, 7);
            char *got = enc_bytes(&e, &len);
            cr_assert(eq(sz, len, 9 + (size_t)hl + n + 2 + 4), "size %zu", n);
            cr_assert(eq(int, memcmp(got, "+before\r\n", 9), 0));
            cr_assert(eq(int, memcmp(got + 9, hdr, (size_t)hl), 0), "size %zu", n);
            cr_assert(eq(int, memcmp(got + 9 + hl, data, n), 0), "size %zu", n);
            cr_assert(eq(int, memcmp(got + 9 + hl + n, "\r\n:7\r\n", 6), 0), "size %zu", n);
            free(got);
        }
    }
    free(data);
}

/* Short values written one after another share one slice (one iovec). */
Test(resp_w, short_values_are_contiguous)
{
    struct enc e;
    size_t len;

    enc_init(&e, RESP2);
    resp_w_array(&e.w, 100);
    for (int i = 0; i < 100; i++)
        resp_w_bulk(&e.w, "0123456789abcdef", 16);
    cr_assert(eq(u32, e.g.n, 1));
    free(enc_bytes(&e, &len));
    cr_assert(eq(sz, len, 6 + 100 * 23));
}

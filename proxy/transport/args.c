/* args.c -- the arguments of the request being routed, read where they
 * are: in the client's read chunks (array requests) or its framer's
 * inline buffer, or a kept request's own copies. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proxy/transport/args.h"
#include "proxy/transport/client.h"
#include "proxy/base/util.h"

const char *args_get(struct args *a, uint32_t i, size_t *len)
{
    /* A kept request's arguments are its own: the client's framer has
     * moved on (its argv may be shorter, or freed) and must not be read. */
    if (a->av != NULL) {
        *len = a->avlen[i];
        return a->av[i];
    }
    const struct resp_req *s = &a->c->scan;
    const struct resp_arg *arg = &s->argv[i];
    uint64_t end = arg->off + arg->len;

    *len = arg->len;
    if (s->is_inline)
        return s->inl + arg->off;
    struct mbuf *m = rstream_find(&a->c->in, arg->off);
    if (m != NULL && end <= m->base + m->len)
        return m->data + (arg->off - m->base);
    /* it spans chunks: copy it */
    struct msg g = {0};
    char *copy = xmalloc(arg->len + 1);
    rstream_slice(&a->c->in, arg->off, end, &g);
    msg_copy(&g, 0, arg->len, copy);
    msg_release(&g);
    copy[arg->len] = '\0';
    if (a->ncopies == (int)ARRAY_SIZE(a->copies)) {
        free(a->copies[0]);
        memmove(a->copies, a->copies + 1, sizeof(a->copies) - sizeof(a->copies[0]));
        a->ncopies--;
    }
    a->copies[a->ncopies++] = copy;
    return copy;
}

void args_release(struct args *a)
{
    for (int i = 0; i < a->ncopies; i++)
        free(a->copies[i]);
    a->ncopies = 0;
}

bool args_is(struct args *a, uint32_t i, const char *s)
{
    size_t len;
    const char *p = args_get(a, i, &len);
    return len == strlen(s) && strncasecmp(p, s, len) == 0;
}

bool args_ll(struct args *a, uint32_t i, long long *v)
{
    size_t len, at = 0;
    const char *p = args_get(a, i, &len);
    bool neg = len > 0 && p[0] == '-';
    unsigned long long u = 0;

    /* redis-server's string2ll: "0", or an optional '-' and digits from a
     * non-zero one, in range; no sign '+', no space, no leading zero (strtoll
     * took " 1" and "+1", and made 2^64 - 1 LLONG_MAX). */
    if (len == 1 && p[0] == '0') {
        *v = 0;
        return true;
    }
    at = neg;
    if (len <= at || len - at > 19 || p[at] < '1' || p[at] > '9')
        return false;
    for (; at < len; at++) {
        if (p[at] < '0' || p[at] > '9')
            return false;
        u = u * 10 + (unsigned long long)(p[at] - '0');
    }
    if (u > (neg ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX))
        return false;
    *v = neg ? -(long long)(u - 1) - 1 : (long long)u;   /* (-2^63 too) */
    return true;
}

/* ---- secrets ------------------------------------------------------------------------- */

/* Whether word is one of the n arguments just before i, counting from
 * argument first on. */
static bool follows(struct args *a, uint32_t i, uint32_t first, uint32_t n, const char *word)
{
    for (uint32_t j = i > n ? i - n : 0; j < i; j++)
        if (j >= first && args_is(a, j, word))
            return true;
    return false;
}

/* CONFIG SET's parameters redis-server 7.0 marks SENSITIVE_CONFIG
 * (requirepass, masterauth, masteruser), the TLS key passphrases later
 * versions mark, and Valkey's primaryauth and primaryuser: any whose name
 * says pass or auth, and the replication user. */
static bool sensitive_config(struct args *a, uint32_t i)
{
    size_t len;
    const char *s = args_get(a, i, &len);

    for (size_t k = 0; k + 4 <= len; k++)
        if (!strncasecmp(s + k, "pass", 4) || !strncasecmp(s + k, "auth", 4))
            return true;
    return args_is(a, i, "masteruser") || args_is(a, i, "primaryuser");
}

bool args_redacted(struct args *a, uint32_t i)
{
    if (i == 0 || i >= a->argc)
        return false;
    /* Redis redacts what it parsed as a secret; a request it refuses
     * (AUTH with too many arguments, HELLO without a version) is shown
     * whole there. Here every argument in a secret's place is hidden,
     * whether or not the rest parses: more is hidden, never less. */
    if (args_is(a, 0, "auth"))
        return true;
    if (args_is(a, 0, "hello"))                     /* HELLO [ver] AUTH user pass */
        return follows(a, i, 1, 2, "auth");
    if (args_is(a, 0, "migrate"))                   /* options from the sixth */
        return follows(a, i, 6, 1, "auth") || follows(a, i, 6, 2, "auth2");
    if (args_is(a, 0, "config"))                    /* CONFIG SET name value ... */
        return args_is(a, 1, "set") && i >= 3 && i % 2 == 1 && sensitive_config(a, i - 1);
    if (args_is(a, 0, "acl"))                       /* the user's name and rules */
        return args_is(a, 1, "setuser") && i >= 2;
    return false;
}

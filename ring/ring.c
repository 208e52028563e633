/* ring.c -- build a ring from a server list and look keys up on it.
 *
 * Point rings (ketama, jedis, hash_ring) are two parallel arrays sorted by
 * ring order: the point values, searched by lower_bound, and their owners.
 * Where two servers land on one point only one is kept, the one its origin
 * would pick: twemproxy and hash_ring sort stably and search for the first
 * equal point (the earlier server wins); Jedis puts points into a TreeMap
 * (the later server overwrites). modula keeps the weight-expanded server
 * list in `owners`; random keeps nothing.
 *
 * twemproxy sorts a pool's servers by identity (shorter first, then byte
 * order) when it validates the config, and modula slots and ketama ties
 * follow that order, so those distributions walk the servers in it too;
 * lookups still return the caller's index.
 *
 * The identity strings hashed into points follow each origin exactly:
 *
 *   ketama     "<id>-<i>", id = name, else "host:port" as written, else
 *              "host" when the port is 11211; twemproxy's parser makes an
 *              unnamed unix socket "<path>:" (the ':' is kept)
 *   jedis      "SHARD-<pos>-NODE-<n>" unnamed; "<name>*<n>" (3.x) or
 *              "<name>*<weight><n>" (2.x)
 *   hash_ring  "<id>-<k>", id = name, else "host:port" */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring/ring.h"

#define RING_ID_MAX     256     /* longest identity hashed into points */
#define RING_POINTSTR   (RING_ID_MAX + 48)
#define JEDIS_SIGN      (UINT64_C(1) << 63)
#define RING_WEIGHT_MAX 1000000 /* per server, and in all (modula slots) */
#define JEDIS_TOTAL_MAX 10000   /* jedis: 160 points per unit, so 1.6M points */

struct ring_node {
    char    *label;             /* name, else addr */
    char    *addr;              /* address as written */
    uint32_t weight;
    uint32_t points;            /* points (or weight units) it was given */
    double   share;             /* share of the key space it owns */
};

struct ring {
    atomic_uint       refs;     /* ring_ref's holders */
    struct ring_options opt;
    uint32_t          nservers;
    struct ring_node *nodes;    /* [nservers] */
    size_t            npoints;
    uint64_t         *values;   /* [npoints], sorted (point rings) */
    uint32_t         *owners;   /* [npoints] */
};

/* ---- hash tags ---------------------------------------------------------- */

/* twemproxy: the first open char, then the first close char after it; the
 * inside if it is non-empty, else the whole key. */
static void tag_twemproxy(const char tag[2], const char *k, size_t n,
                          const char **part, size_t *partlen)
{
    const char *open = memchr(k, tag[0], n), *close;

    *part = k;
    *partlen = n;
    if (open == NULL)
        return;
    close = memchr(open + 1, tag[1], (size_t)(k + n - open - 1));
    if (close != NULL && close - open > 1) {
        *part = open + 1;
        *partlen = (size_t)(close - open - 1);
    }
}

/* Length of a Java line terminator starting at p (UTF-8), or 0. Java's '.'
 * matches anything but \n, \r, U+0085, U+2028 and U+2029. */
static size_t java_line_terminator(const unsigned char *p, const unsigned char *end)
{
    if (*p == '\n' || *p == '\r')
        return 1;
    if (*p == 0xc2 && end - p >= 2 && p[1] == 0x85)
        return 2;
    if (*p == 0xe2 && end - p >= 3 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9))
        return 3;
    return 0;
}

/* Jedis: the first match of \{(.+?)\} (with the configured chars), Java
 * semantics: leftmost start, at least one char, the shortest run of
 * non-line-terminators up to a close char. No match: the whole key.
 *
 * One pass, not a rescan from every open char (a key of 160 KB of '{' took
 * seconds that way). When the scan from open stops at a line terminator
 * at p without a match, no open char before p can match either: it would
 * need a close char in [open + 2, p), where there is none, and it would
 * stop at p too. So the next candidate is the first open char at p or
 * after, and the scan goes on from there. When it reaches the end, no
 * later open char can match, for the same reason. */
static void tag_jedis(const char tag[2], const char *k, size_t n,
                      const char **part, size_t *partlen)
{
    const unsigned char *s = (const unsigned char *)k, *end = s + n;
    const unsigned char *open = memchr(s, tag[0], n);

    *part = k;
    *partlen = n;
    while (open != NULL) {
        const unsigned char *p = open + 1;
        for (; p < end; p++) {
            if (java_line_terminator(p, end) != 0)
                break;
            if (*p == (unsigned char)tag[1] && p > open + 1) {
                *part = (const char *)open + 1;
                *partlen = (size_t)(p - open - 1);
                return;
            }
        }
        if (p == end)
            return;
        open = memchr(p, tag[0], (size_t)(end - p));
    }
}

void ring_tag(const struct ring *r, const void *key, size_t len,
              const char **part, size_t *partlen)
{
    if (!r->opt.has_tag) {
        *part = key;
        *partlen = len;
    } else if (r->opt.dist == RING_DIST_JEDIS) {
        tag_jedis(r->opt.tag, key, len, part, partlen);
    } else {
        tag_twemproxy(r->opt.tag, key, len, part, partlen);
    }
}

/* ---- lookup ------------------------------------------------------------- */

uint64_t ring_key_hash(const struct ring *r, const void *key, size_t len)
{
    const char *k;
    size_t n;
    uint64_t h;

    ring_tag(r, key, len, &k, &n);
    switch (r->opt.dist) {
    case RING_DIST_JEDIS:
        h = ring_hash_raw(r->opt.hash, k, n);
        return h ^ JEDIS_SIGN;   /* Java's signed order as unsigned */
    case RING_DIST_HASH_RING:
        n = strnlen(k, n);       /* it hashed a C string */
        break;
    default:
        break;
    }
    return n == 0 ? 0 : ring_hash_raw(r->opt.hash, k, n);
}

uint32_t ring_lookup_hash(const struct ring *r, uint64_t hash)
{
    switch (r->opt.dist) {
    case RING_DIST_MODULA:
        return r->owners[hash % r->npoints];
    case RING_DIST_RANDOM:
        return (uint32_t)((unsigned long)random() % r->nservers);
    default:
        break;
    }
    /* The first point >= hash, without branches on the comparisons: keys'
     * hashes are random, so every branch would be a coin toss the
     * processor guesses wrong half the time (a conditional move instead). */
    const uint64_t *v = r->values;
    size_t n = r->npoints;
    while (n > 1) {
        size_t half = n / 2;
        v = v[half] < hash ? v + half : v;
        n -= half;
    }
    size_t at = (size_t)(v - r->values) + (*v < hash);
    return r->owners[at == r->npoints ? 0 : at];
}

uint32_t ring_lookup(const struct ring *r, const void *key, size_t len)
{
    return ring_lookup_hash(r, ring_key_hash(r, key, len));
}

/* ---- build -------------------------------------------------------------- */

struct build_point {
    uint64_t value;
    uint32_t owner;
    uint32_t seq;               /* insertion order, for tie-breaking */
};

static int point_cmp(const void *a, const void *b)
{
    const struct build_point *x = a, *y = b;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void add_digest_points(struct build_point *pts, size_t *n, uint32_t owner,
                              const char *s, size_t len)
{
    unsigned char d[16];
    ring_md5(s, len, d);
    for (unsigned j = 0; j < 4; j++) {
        const unsigned char *w = d + 4 * j;
        pts[*n].value = (uint32_t)w[0] | (uint32_t)w[1] << 8 |
                        (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
        pts[*n].owner = owner;
        pts[*n].seq = (uint32_t)*n;
        (*n)++;
    }
}

/* twemproxy's point count, in its exact float arithmetic: with weights
 * 1,2,5,7,10 this gives 28,60,160,224,320, not multiples of 32. */
static uint32_t ketama_points(uint32_t weight, uint32_t total, uint32_t n)
{
    float pct = (float)weight / (float)total;
    return (uint32_t)floorf((float)(pct * 160 / 4 * (float)n + 0.0000000001)) * 4;
}

/* hash_ring 0.2.1: floorf(percent * 40.0 * n), where 40.0 is a double. */
static uint32_t hash_ring_replicas(uint32_t weight, uint32_t total, uint32_t n)
{
    float pct = (float)weight / (float)total;
    return (uint32_t)floorf((float)(pct * 40.0 * (float)n));
}

static size_t ketama_id(const struct ring_server *s, char *buf)
{
    const char *colon;

    if (s->name != NULL)
        return (size_t)snprintf(buf, RING_ID_MAX + 2, "%s", s->name);
    if (s->port == 0)
        return (size_t)snprintf(buf, RING_ID_MAX + 2, "%s:", s->addr);
    colon = strrchr(s->addr, ':');
    if (s->port == 11211 && colon != NULL)
        return (size_t)snprintf(buf, RING_ID_MAX + 2, "%.*s",
                                (int)(colon - s->addr), s->addr);
    return (size_t)snprintf(buf, RING_ID_MAX + 2, "%s", s->addr);
}

/* twemproxy's string_compare: shorter first, then bytes. */
static int id_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen)
        return alen < blen ? -1 : 1;
    return memcmp(a, b, alen);
}

/* The order in which the distribution walks the servers: twemproxy's
 * sorted order for ketama and modula, the config's for the others. Fills
 * order[n]; -EINVAL when two servers share a twemproxy identity. */
static int server_order(const struct ring *r, const struct ring_server *sv,
                        uint32_t *order, char *err, size_t errlen)
{
    char a[RING_ID_MAX + 2], b[RING_ID_MAX + 2];
    uint32_t n = r->nservers;

    for (uint32_t i = 0; i < n; i++)
        order[i] = i;
    if (r->opt.dist != RING_DIST_KETAMA && r->opt.dist != RING_DIST_MODULA &&
        r->opt.dist != RING_DIST_RANDOM)
        return 0;
    for (uint32_t i = 1; i < n; i++) {      /* insertion sort: n is small */
        uint32_t cur = order[i], j = i;
        size_t clen = ketama_id(&sv[cur], a);
        while (j > 0) {
            size_t plen = ketama_id(&sv[order[j - 1]], b);
            int c = id_cmp(a, clen, b, plen);
            if (c == 0) {
                snprintf(err, errlen, "servers '%s' and '%s' have the same ring "
                         "identity '%s'", sv[order[j - 1]].addr, sv[cur].addr, a);
                return -EINVAL;
            }
            if (c > 0)
                break;
            order[j] = order[j - 1];
            j--;
        }
        order[j] = cur;
    }
    return 0;
}

static int build_points(struct ring *r, const struct ring_server *sv,
                        const uint32_t *order, char *err, size_t errlen)
{
    uint32_t total = 0, n = r->nservers;
    size_t cap = 0, np = 0;
    struct build_point *pts;
    char id[RING_ID_MAX + 2], str[RING_POINTSTR];

    for (uint32_t i = 0; i < n; i++)
        total += sv[i].weight;
    for (uint32_t i = 0; i < n; i++) {
        switch (r->opt.dist) {
        case RING_DIST_KETAMA:
            r->nodes[i].points = ketama_points(sv[i].weight, total, n);
            break;
        case RING_DIST_HASH_RING:
            r->nodes[i].points = 4 * hash_ring_replicas(sv[i].weight, total, n);
            break;
        default:
            r->nodes[i].points = 160 * sv[i].weight;
            break;
        }
        cap += r->nodes[i].points;
    }
    if (cap == 0) {
        snprintf(err, errlen, "the ring has no points");
        return -EINVAL;
    }
    pts = malloc(cap * sizeof(*pts));
    if (pts == NULL)
        return -ENOMEM;

    for (uint32_t oi = 0; oi < n; oi++) {
        uint32_t i = order[oi];
        const struct ring_server *s = &sv[i];
        size_t idlen;
        int len;

        switch (r->opt.dist) {
        case RING_DIST_KETAMA:
            idlen = ketama_id(s, id);
            for (uint32_t k = 0; k < r->nodes[i].points / 4; k++) {
                len = snprintf(str, sizeof(str), "%.*s-%u", (int)idlen, id, k);
                add_digest_points(pts, &np, i, str, (size_t)len);
            }
            break;
        case RING_DIST_HASH_RING:
            for (uint32_t k = 0; k < r->nodes[i].points / 4; k++) {
                len = snprintf(str, sizeof(str), "%s-%u",
                               s->name != NULL ? s->name : s->addr, k);
                add_digest_points(pts, &np, i, str, (size_t)len);
            }
            break;
        default:                /* jedis */
            for (uint32_t k = 0; k < r->nodes[i].points; k++) {
                if (s->name == NULL)
                    len = snprintf(str, sizeof(str), "SHARD-%u-NODE-%u", i, k);
                else if (r->opt.jedis_version == 2)
                    len = snprintf(str, sizeof(str), "%s*%u%u", s->name, s->weight, k);
                else
                    len = snprintf(str, sizeof(str), "%s*%u", s->name, k);
                pts[np].value = ring_hash_raw(r->opt.hash, str, (size_t)len) ^ JEDIS_SIGN;
                pts[np].owner = i;
                pts[np].seq = (uint32_t)np;
                np++;
            }
            break;
        }
    }

    qsort(pts, np, sizeof(*pts), point_cmp);
    r->values = malloc(np * sizeof(*r->values));
    r->owners = malloc(np * sizeof(*r->owners));
    if (r->values == NULL || r->owners == NULL) {
        free(pts);
        return -ENOMEM;
    }
    /* Collapse equal points to the one the origin's lookup would return. */
    r->npoints = 0;
    for (size_t i = 0; i < np; i++) {
        size_t last = r->npoints;
        if (last > 0 && r->values[last - 1] == pts[i].value) {
            if (r->opt.dist == RING_DIST_JEDIS)
                r->owners[last - 1] = pts[i].owner;
            continue;
        }
        r->values[last] = pts[i].value;
        r->owners[last] = pts[i].owner;
        r->npoints++;
    }
    free(pts);
    return 0;
}

static int build_modula(struct ring *r, const struct ring_server *sv,
                        const uint32_t *order)
{
    size_t total = 0, k = 0;

    for (uint32_t i = 0; i < r->nservers; i++)
        total += sv[i].weight;
    r->owners = malloc(total * sizeof(*r->owners));
    if (r->owners == NULL)
        return -ENOMEM;
    for (uint32_t oi = 0; oi < r->nservers; oi++) {
        uint32_t i = order[oi];
        r->nodes[i].points = sv[i].weight;
        for (uint32_t w = 0; w < sv[i].weight; w++)
            r->owners[k++] = i;
    }
    r->npoints = total;
    return 0;
}

/* The size of ring order's domain: 2^64 for jedis, else 2^32. */
static long double domain(const struct ring *r)
{
    return r->opt.dist == RING_DIST_JEDIS ? 18446744073709551616.0L : 4294967296.0L;
}

/* Number of h in [0, 2^32) with h % m == a. */
static uint64_t residue_count(uint64_t a, uint64_t m)
{
    return (UINT64_C(0xffffffff) - a) / m + 1;
}

static void compute_shares(struct ring *r)
{
    long double d = domain(r);

    for (uint32_t i = 0; i < r->nservers; i++)
        r->nodes[i].share = 0;
    switch (r->opt.dist) {
    case RING_DIST_RANDOM:
        return;
    case RING_DIST_MODULA:
        for (size_t a = 0; a < r->npoints; a++)
            r->nodes[r->owners[a]].share +=
                (double)(residue_count(a, r->npoints) / d);
        return;
    default:
        break;
    }
    for (size_t i = 0; i < r->npoints; i++) {
        /* Point i owns (p[i-1], p[i]]; point 0 also owns the wrap. */
        long double len = i > 0 ? (long double)(r->values[i] - r->values[i - 1])
                                : (long double)r->values[0] + 1 +
                                  (d - 1 - (long double)r->values[r->npoints - 1]);
        r->nodes[r->owners[i]].share += (double)(len / d);
    }
}

/* Free r, held by no one. */
static void ring_destroy(struct ring *r)
{
    for (uint32_t i = 0; r->nodes != NULL && i < r->nservers; i++) {
        free(r->nodes[i].label);
        free(r->nodes[i].addr);
    }
    free(r->nodes);
    free(r->values);
    free(r->owners);
    free(r);
}

struct ring *ring_ref(struct ring *r)
{
    if (r != NULL)
        atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    return r;
}

/* (acq_rel: each holder's release makes its reads happen before the
 * free, and the last holder's acquire sees them all. Not a release and a
 * separate acquire fence: ThreadSanitizer does not follow fences, and a
 * reference is given back per reload, not per request.) */
void ring_unref(struct ring *r)
{
    if (r == NULL || atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
        return;
    ring_destroy(r);
}

/* What ring_create refuses, before it allocates anything: 0 or a
 * negative errno with why in err. */
static int ring_check(const struct ring_options *opt, const struct ring_server *servers,
                      size_t n, char *err, size_t errlen)
{
    uint64_t total = 0;
    int rc;

    if (n == 0 || n > UINT32_MAX / 2) {
        snprintf(err, errlen, "a ring needs at least one server");
        return -EINVAL;
    }
    if ((rc = ring_check_hash(opt->dist, opt->hash, err, errlen)) < 0)
        return rc;
    if (opt->dist == RING_DIST_JEDIS && opt->jedis_version != 2 &&
        opt->jedis_version != 3) {
        snprintf(err, errlen, "jedis_version must be 2 or 3, not %d", opt->jedis_version);
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        const struct ring_server *s = &servers[i];
        if (s->weight == 0 || s->weight > RING_WEIGHT_MAX) {
            snprintf(err, errlen, "server '%s': weight must be 1..%d", s->addr,
                     RING_WEIGHT_MAX);
            return -EINVAL;
        }
        if (strlen(s->addr) > RING_ID_MAX ||
            (s->name != NULL && strlen(s->name) > RING_ID_MAX)) {
            snprintf(err, errlen, "server '%.40s...': name or address longer "
                     "than %d bytes", s->addr, RING_ID_MAX);
            return -EINVAL;
        }
        total += s->weight;
    }
    if (total > RING_WEIGHT_MAX) {
        snprintf(err, errlen, "the servers' weights add up to %llu; the most "
                 "allowed is %d", (unsigned long long)total, RING_WEIGHT_MAX);
        return -EINVAL;
    }
    /* Jedis does not normalise weights: each unit is 160 points. */
    if (opt->dist == RING_DIST_JEDIS && total > JEDIS_TOTAL_MAX) {
        snprintf(err, errlen, "distribution 'jedis' puts 160 points on the ring per "
                 "unit of weight; the total weight %llu is over %d",
                 (unsigned long long)total, JEDIS_TOTAL_MAX);
        return -EINVAL;
    }
    return 0;
}

int ring_create(struct ring **out, const struct ring_options *opt,
                const struct ring_server *servers, size_t n,
                char *err, size_t errlen)
{
    struct ring *r;
    uint32_t *order;
    int rc;

    *out = NULL;
    if ((rc = ring_check(opt, servers, n, err, errlen)) < 0)
        return rc;
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return -ENOMEM;
    atomic_init(&r->refs, 1);
    r->opt = *opt;
    r->nservers = (uint32_t)n;
    r->nodes = calloc(n, sizeof(*r->nodes));
    if (r->nodes == NULL) {
        ring_destroy(r);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        r->nodes[i].weight = servers[i].weight;
        r->nodes[i].addr = strdup(servers[i].addr);
        r->nodes[i].label = strdup(servers[i].name != NULL ? servers[i].name
                                                           : servers[i].addr);
        if (r->nodes[i].addr == NULL || r->nodes[i].label == NULL) {
            ring_destroy(r);
            return -ENOMEM;
        }
    }

    order = malloc(n * sizeof(*order));
    if (order == NULL) {
        ring_destroy(r);
        return -ENOMEM;
    }
    rc = server_order(r, servers, order, err, errlen);
    if (rc == 0) {
        switch (opt->dist) {
        case RING_DIST_MODULA:
            rc = build_modula(r, servers, order);
            break;
        case RING_DIST_RANDOM:
            for (size_t i = 0; i < n; i++)
                r->nodes[i].points = 1;
            break;
        default:
            rc = build_points(r, servers, order, err, errlen);
            break;
        }
    }
    free(order);
    if (rc < 0) {
        if (rc == -ENOMEM)
            snprintf(err, errlen, "out of memory building the ring");
        ring_destroy(r);
        return rc;
    }
    compute_shares(r);
    *out = r;
    return 0;
}

/* ---- facts -------------------------------------------------------------- */

size_t ring_nservers(const struct ring *r) { return r->nservers; }
enum ring_dist ring_distribution(const struct ring *r) { return r->opt.dist; }
enum ring_hash ring_hash_function(const struct ring *r) { return r->opt.hash; }
const char *ring_server_label(const struct ring *r, uint32_t i) { return r->nodes[i].label; }
const char *ring_server_addr(const struct ring *r, uint32_t i) { return r->nodes[i].addr; }
uint32_t ring_server_weight(const struct ring *r, uint32_t i) { return r->nodes[i].weight; }
uint32_t ring_server_points(const struct ring *r, uint32_t i) { return r->nodes[i].points; }
double ring_server_share(const struct ring *r, uint32_t i) { return r->nodes[i].share; }

size_t ring_npoints(const struct ring *r)
{
    return r->opt.dist == RING_DIST_RANDOM ? 0 : r->npoints;
}

uint64_t ring_point(const struct ring *r, size_t i, uint32_t *owner)
{
    if (owner != NULL)
        *owner = r->owners[i];
    return r->values != NULL ? r->values[i] : i;
}

const struct ring_options *ring_options(const struct ring *r)
{
    return &r->opt;
}

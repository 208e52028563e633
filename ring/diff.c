/* diff.c -- which parts of the key space change owner between two rings.
 *
 * For point rings the boundaries of both rings, merged, cut ring order
 * into intervals on which neither owner changes; each interval
 * (b[j-1], b[j]] is owned by whoever owns b[j], and the wrap-around piece
 * (b[last], max] + [0, b[0]] by whoever owns b[0]. Intervals whose old and
 * new owners live at different addresses are the moving arcs; neighbours
 * with the same (from, to) are coalesced. Reload and migration only need
 * "is this position moving, from whom, to whom": a binary search over the
 * arcs.
 *
 * modula has no arcs (owners repeat every total-weight positions), so its
 * shares come from the residue classes modulo lcm(W_old, W_new), and a
 * position's move is found by looking it up in both rings. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ring/ring.h"

#define MODULA_LCM_MAX  (UINT64_C(1) << 26)

static int same_key_hashing(const struct ring *a, const struct ring *b,
                            char *err, size_t errlen)
{
    const struct ring_options *x = ring_options(a), *y = ring_options(b);

    if (x->dist == RING_DIST_RANDOM || y->dist == RING_DIST_RANDOM) {
        snprintf(err, errlen, "distribution 'random' gives keys no owner, "
                 "so there is nothing to diff");
        return -EINVAL;
    }
    if (x->dist != y->dist || x->hash != y->hash || x->has_tag != y->has_tag ||
        (x->has_tag && memcmp(x->tag, y->tag, 2) != 0)) {
        snprintf(err, errlen, "the rings hash keys differently (distribution "
                 "%s/%s, hash %s/%s, hash_tag %s/%s): almost every key would "
                 "move, which a reshard cannot do in place",
                 ring_dist_name(x->dist), ring_dist_name(y->dist),
                 ring_hash_name(x->hash), ring_hash_name(y->hash),
                 x->has_tag ? "set" : "none", y->has_tag ? "set" : "none");
        return -EINVAL;
    }
    return 0;
}

static long double domain_of(const struct ring *r)
{
    return ring_distribution(r) == RING_DIST_JEDIS ? 18446744073709551616.0L
                                                   : 4294967296.0L;
}

static uint64_t max_of(const struct ring *r)
{
    return ring_distribution(r) == RING_DIST_JEDIS ? UINT64_MAX : UINT32_MAX;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int add_arc(struct ring_diff *d, size_t *cap, uint64_t first,
                   uint64_t last, uint32_t from, uint32_t to)
{
    struct ring_arc *prev = d->narcs > 0 ? &d->arcs[d->narcs - 1] : NULL;

    if (prev != NULL && prev->from == from && prev->to == to &&
        prev->last + 1 == first) {
        prev->last = last;
        return 0;
    }
    if (d->narcs == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        struct ring_arc *a = realloc(d->arcs, ncap * sizeof(*a));
        if (a == NULL)
            return -ENOMEM;
        d->arcs = a;
        *cap = ncap;
    }
    d->arcs[d->narcs++] = (struct ring_arc){first, last, from, to};
    return 0;
}

/* Record the piece [first, last] owned by (from, to). */
static int piece(struct ring_diff *d, size_t *cap, uint64_t first, uint64_t last,
                 uint32_t from, uint32_t to)
{
    long double len = (long double)(last - first) + 1;
    size_t nnew = ring_nservers(d->new);

    if (d->map[from] == to)
        return 0;
    d->pairs[from * nnew + to] += (double)(len / domain_of(d->old));
    return add_arc(d, cap, first, last, from, to);
}

static int diff_points(struct ring_diff *d)
{
    size_t na = ring_npoints(d->old), nb = ring_npoints(d->new), n = 0, cap = 0;
    uint64_t *b = malloc((na + nb) * sizeof(*b)), max = max_of(d->old);
    int rc = 0;

    if (b == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < na; i++)
        b[n++] = ring_point(d->old, i, NULL);
    for (size_t i = 0; i < nb; i++)
        b[n++] = ring_point(d->new, i, NULL);
    qsort(b, n, sizeof(*b), cmp_u64);

    /* [0, b[0]], then (b[j-1], b[j]], then (b[last], max]. */
    uint32_t wf = ring_lookup_hash(d->old, b[0]), wt = ring_lookup_hash(d->new, b[0]);
    rc = piece(d, &cap, 0, b[0], wf, wt);
    for (size_t j = 1; rc == 0 && j < n; j++) {
        if (b[j] == b[j - 1])
            continue;
        rc = piece(d, &cap, b[j - 1] + 1, b[j], ring_lookup_hash(d->old, b[j]),
                   ring_lookup_hash(d->new, b[j]));
    }
    if (rc == 0 && b[n - 1] < max)
        rc = piece(d, &cap, b[n - 1] + 1, max, wf, wt);
    free(b);
    return rc;
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
    while (b != 0) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

static int diff_modula(struct ring_diff *d, char *err, size_t errlen)
{
    uint64_t wa = ring_npoints(d->old), wb = ring_npoints(d->new);
    uint64_t l = wa / gcd(wa, wb) * wb;
    size_t nnew = ring_nservers(d->new);

    if (l > MODULA_LCM_MAX) {
        snprintf(err, errlen, "modula total weights %llu and %llu repeat only "
                 "every %llu positions; diff handles up to %llu",
                 (unsigned long long)wa, (unsigned long long)wb,
                 (unsigned long long)l, (unsigned long long)MODULA_LCM_MAX);
        return -E2BIG;
    }
    for (uint64_t a = 0; a < l; a++) {
        uint32_t from = ring_lookup_hash(d->old, a), to = ring_lookup_hash(d->new, a);
        if (d->map[from] != to)
            d->pairs[from * nnew + to] +=
                (double)((long double)((UINT64_C(0xffffffff) - a) / l + 1) / 4294967296.0L);
    }
    return 0;
}

void ring_diff_free(struct ring_diff *d)
{
    if (d == NULL)
        return;
    free(d->arcs);
    free(d->map);
    free(d->pairs);
    free(d);
}

int ring_diff_create(struct ring_diff **out, const struct ring *old,
                     const struct ring *new, char *err, size_t errlen)
{
    size_t nold = ring_nservers(old), nnew = ring_nservers(new);
    struct ring_diff *d;
    int rc;

    *out = NULL;
    if ((rc = same_key_hashing(old, new, err, errlen)) < 0)
        return rc;
    d = calloc(1, sizeof(*d));
    if (d == NULL)
        return -ENOMEM;
    d->old = old;
    d->new = new;
    d->map = malloc(nold * sizeof(*d->map));
    d->pairs = calloc(nold * nnew, sizeof(*d->pairs));
    if (d->map == NULL || d->pairs == NULL) {
        ring_diff_free(d);
        return -ENOMEM;
    }
    for (size_t i = 0; i < nold; i++) {
        d->map[i] = UINT32_MAX;
        for (size_t j = 0; j < nnew; j++)
            if (strcmp(ring_server_addr(old, (uint32_t)i),
                       ring_server_addr(new, (uint32_t)j)) == 0) {
                d->map[i] = (uint32_t)j;
                break;
            }
    }

    rc = ring_distribution(old) == RING_DIST_MODULA ? diff_modula(d, err, errlen)
                                                    : diff_points(d);
    if (rc < 0) {
        if (rc == -ENOMEM)
            snprintf(err, errlen, "out of memory computing the ring diff");
        ring_diff_free(d);
        return rc;
    }
    for (size_t i = 0; i < nold * nnew; i++)
        d->moving += d->pairs[i];
    *out = d;
    return 0;
}

int ring_diff_moving(const struct ring_diff *d, uint64_t hash,
                     uint32_t *from, uint32_t *to)
{
    size_t lo = 0, hi = d->narcs;

    if (ring_distribution(d->old) == RING_DIST_MODULA) {
        uint32_t f = ring_lookup_hash(d->old, hash), t = ring_lookup_hash(d->new, hash);
        if (d->map[f] == t)
            return 0;
        *from = f;
        *to = t;
        return 1;
    }
    while (lo < hi) {           /* first arc whose last >= hash */
        size_t mid = lo + (hi - lo) / 2;
        if (d->arcs[mid].last < hash)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == d->narcs || d->arcs[lo].first > hash)
        return 0;
    *from = d->arcs[lo].from;
    *to = d->arcs[lo].to;
    return 1;
}

double ring_diff_share(const struct ring_diff *d, uint32_t from, uint32_t to)
{
    return d->pairs[(size_t)from * ring_nservers(d->new) + to];
}

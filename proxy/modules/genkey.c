/* genkey.c -- SHARD.GENKEY, SHARD.CHANGETYPE, SHARD.KEYINFO, SHARD.FIXEDKEY:
 * the proxy's commands for generated keys (idgen/ has the layout).
 *
 * GENKEY is the only one that waits: it picks a logical shard L (at random,
 * or the shard of its NEAR key), and runs idgen's allocator script on the
 * backend that owns "$equence{L}" (EVALSHA; after -NOSCRIPT once more as
 * EVAL, which also caches it). The script answers only where the batch
 * starts, {ms, slot}; the hook here turns that into the keys, so a batch of
 * COUNT n is one backend call whatever n is. The backend's clock and state
 * decide everything about uniqueness and order; the proxy only encodes.
 *
 * The others are pure functions of their arguments and the pool's config.
 * Keys with an {LL} tag only live together if the pool hashes by "{}"
 * tags, so GENKEY refuses pools that do not. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "idgen/idgen.h"
#include "proxy/transport/backend.h"
#include "proxy/transport/client.h"
#include "proxy/modules/genkey.h"
#include "proxy/base/text.h"
#include "proxy/base/log.h"
#include "proxy/modules/mig.h"
#include "proxy/core/pool.h"
#include "proxy/transport/loop.h"
#include "proxy/core/route.h"
#include "proxy/base/util.h"
#include "proxy/core/module.h"

#define GENKEY_MAX_COUNT 100000

/* ---- helpers ----------------------------------------------------------------------- */

static int64_t unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


/* ---- choosing a logical shard -----------------------------------------------------
 *
 * The {LL} tags are only 3,844 two-byte strings, and some of twemproxy's
 * hashes spread short keys badly: with its default fnv1a_64, on three
 * equal servers, 95% of the tags land on one server and none on another.
 * Drawing L uniformly would put 95% of the new ids there. So a new id's
 * server is drawn first, by its share of the ring, among the servers that
 * own any logical shard, and then L uniformly among that server's shards.
 * With a hash that spreads the tags well this is L uniform again. Servers
 * ejected by eject_mode rehash get no new ids while they are out. */

struct genkey_shards {
    uint32_t  nservers;
    double   *share;            /* [nservers]: ring share, 0 if it owns no shard */
    uint32_t *first;            /* [nservers + 1]: s owns shard[first[s] .. first[s+1]) */
    uint16_t  shard[IDGEN_SHARDS];
};

static void genkey_pool_free(struct pool *p);

/* Map the logical shards of p's ring to their servers (for GENKEY's choice
 * of shard), the one made before freed; genkey_pool_free releases the map. */
static void genkey_pool_init(struct pool *p)
{
    struct genkey_shards *g;
    uint32_t *owner = xmalloc(IDGEN_SHARDS * sizeof(*owner));
    char seq[13];

    genkey_pool_free(p);
    if (ring_distribution(p->ring) == RING_DIST_RANDOM)
        goto out;               /* nothing has an owner; GENKEY refuses */
    g = xcalloc(1, sizeof(*g));
    g->nservers = p->nservers;
    g->share = xcalloc(p->nservers, sizeof(*g->share));
    g->first = xcalloc(p->nservers + 1, sizeof(*g->first));
    for (uint32_t l = 0; l < IDGEN_SHARDS; l++) {
        genkey_sequence_key(l, seq);
        owner[l] = p->slot[ring_lookup(p->ring, seq, 12)];
        g->first[owner[l] + 1]++;
    }
    for (uint32_t s = 0; s < p->nservers; s++) {
        if (g->first[s + 1] > 0)
            g->share[s] = ring_server_share(p->ring, p->servers[s].ring_idx);
        else if (pool_in_ring(p, s))
            log_notice("pool '%s': server %s owns none of the %d {LL} tags of generated "
                       "keys under hash %s, so SHARD.GENKEY places no ids there (md5, "
                       "murmur or one_at_a_time spread them over every server)",
                       p->conf->name, p->servers[s].label, IDGEN_SHARDS,
                       ring_hash_name(p->conf->hash));
        g->first[s + 1] += g->first[s];
    }
    /* Counting sort: each server's shards in ascending order. */
    uint32_t *next = xmalloc(p->nservers * sizeof(*next));
    memcpy(next, g->first, p->nservers * sizeof(*next));
    for (uint32_t l = 0; l < IDGEN_SHARDS; l++)
        g->shard[next[owner[l]]++] = (uint16_t)l;
    free(next);
    p->shards = g;
out:
    free(owner);
}

uint32_t genkey_sequences_on(const struct pool *p, uint32_t server, const uint16_t **shards)
{
    const struct genkey_shards *g = p->shards;

    if (g == NULL || server >= g->nservers) {
        *shards = NULL;
        return g == NULL ? IDGEN_SHARDS : 0;
    }
    *shards = &g->shard[g->first[server]];
    return g->first[server + 1] - g->first[server];
}

static void genkey_pool_free(struct pool *p)
{
    if (p->shards == NULL)
        return;
    free(p->shards->share);
    free(p->shards->first);
    free(p->shards);
    p->shards = NULL;
}

/* A server's share of new ids: none while it is ejected (eject_mode
 * rehash: pool_held_off), unless every server is. */
static double id_share(const struct pool *p, uint32_t s, bool all_out, uint64_t now)
{
    return all_out || !pool_held_off(p, s, 0, now) ? p->shards->share[s] : 0;
}

static uint32_t random_shard(const struct pool *p)
{
    const struct genkey_shards *g = p->shards;
    double total = 0, u;
    bool all_out = false;
    uint32_t s, last = 0;
    uint64_t now = uv_now(cur_loop->uv);

    for (s = 0; s < g->nservers; s++)
        total += id_share(p, s, false, now);
    if (total == 0) {
        all_out = true;
        for (s = 0; s < g->nservers; s++)
            total += id_share(p, s, true, now);
    }
    u = (double)(loop_random() >> 11) / (double)(1ULL << 53) * total;
    /* The last server with a share takes what rounding leaves over. */
    for (s = 0; s < g->nservers; s++) {
        double share = id_share(p, s, all_out, now);
        if (share == 0)
            continue;
        last = s;
        if (u < share)
            break;
        u -= share;
    }
    s = s < g->nservers ? s : last;
    uint32_t n = g->first[s + 1] - g->first[s];
    return g->shard[g->first[s] + (uint32_t)(loop_random() % n)];
}

/* Test hook: SHARDIS_TEST_CLOCK_SKEW_MS shifts the allocator's clock, to
 * simulate a backend whose clock was stepped. 0 in production. Read once,
 * at start (genkey_init), before any loop runs: configuration, not state. */
static long long clock_skew;

void genkey_init(void)
{
    const char *s = getenv("SHARDIS_TEST_CLOCK_SKEW_MS");

    clock_skew = s != NULL ? strtoll(s, NULL, 10) : 0;
}

/* An argument for an error message: at most 64 bytes of it. */
#define ARG_FMT "%.*s"
#define ARG_VAL(p, len) (int)((len) < 64 ? (len) : 64), (p)

/* The code of a type given as a name (idgen.types, or "default") or a
 * number 0..3843; -1 and an error sent if it is neither. */
static int type_code(struct client *c, struct req *r, const char *s, size_t len)
{
    const struct conf_idgen *ig = &c->pool->conf->idgen;
    char list[512];
    size_t n = 0;

    if (len > 0 && s[0] >= '0' && s[0] <= '9') {
        long v = 0;
        for (size_t i = 0; i < len && v < IDGEN_TYPES; i++)
            v = s[i] >= '0' && s[i] <= '9' ? v * 10 + (s[i] - '0') : IDGEN_TYPES;
        if (v < IDGEN_TYPES)
            return (int)v;
        client_reply_error(c, r, "ERR key type '" ARG_FMT "' is not a number 0..%d",
                           ARG_VAL(s, len), IDGEN_TYPES - 1);
        return -1;
    }
    if (len == 7 && !memcmp(s, "default", 7))
        return IDGEN_TYPE_DEFAULT;
    for (size_t i = 0; i < ig->ntypes; i++)
        if (strlen(ig->types[i].name) == len && !memcmp(ig->types[i].name, s, len))
            return (int)ig->types[i].code;
    list[0] = '\0';
    for (size_t i = 0; i < ig->ntypes && n < sizeof(list) - 80; i++)
        n += (size_t)snprintf(list + n, sizeof(list) - n, "%s, ", ig->types[i].name);
    client_reply_error(c, r, "ERR unknown key type '" ARG_FMT "'; expected a number "
                       "0..%d or one of: %sdefault", ARG_VAL(s, len), IDGEN_TYPES - 1, list);
    return -1;
}

static const char *type_name(const struct conf_pool *pc, uint32_t code)
{
    if (code == IDGEN_TYPE_DEFAULT)
        return "default";
    for (size_t i = 0; i < pc->idgen.ntypes; i++)
        if (pc->idgen.types[i].code == code)
            return pc->idgen.types[i].name;
    return NULL;
}

static enum idgen_format decode(struct client *c, const char *key, size_t len,
                                struct idgen_info *info)
{
    return idgen_decode(key, len, c->pool->conf->idgen.epoch_ms, unix_ms(), info);
}

/* ---- the allocator script on each server ------------------------------------------- */

/* INFO server: the run_id, by which the allocator notices a restarted
 * server. (Its server section is some 1.5 KB: 4 KB hold it.) */
static int run_id_reply(struct backend *b, struct req *r)
{
    char text[4096];
    struct resp_rd rd;
    struct resp_val v;

    b->run_id[0] = '\0';
    resp_rd_init(&rd, &r->rsp);
    if (resp_rd_next(&rd, &v) < 0 || (v.type != RESP_BULK && v.type != RESP_VERBATIM) || v.nil)
        return 0;
    text[resp_rd_copy(&rd, &v, text, sizeof(text) - 1)] = '\0';
    if (text_field(text, "run_id", b->run_id, sizeof(b->run_id)) == NULL)
        b->run_id[0] = '\0';
    return 0;
}

/* SCRIPT LOAD: the allocator's SHA1, for EVALSHA. */
static int script_reply(struct backend *b, struct req *r)
{
    struct resp_rd rd;
    struct resp_val v;

    (void)b;
    resp_rd_init(&rd, &r->rsp);
    if (resp_rd_next(&rd, &v) == 0 && v.type == RESP_BULK && v.len == 40) {
        resp_rd_copy(&rd, &v, cur_loop->idgen_sha, 40);
        cur_loop->idgen_sha[40] = '\0';
    }
    return 0;
}

/* Both may fail harmlessly: GENKEY then sends the script's text (EVAL),
 * and without a run_id the script reads it itself. Only on shardis's own
 * shared connections to a master (pool_own): the sequences are the
 * internal_user's, and dedicated connections never run GENKEY. */
void genkey_connecting(struct backend *b)
{
    if (backend_dedicated(b) || b->replica != 0 || b->as != BACKEND_AS_INTERNAL)
        return;
    backend_queue_own(b, script_reply, true, 3,
                      (const char *const[]){"SCRIPT", "LOAD", idgen_script});
    backend_queue_own(b, run_id_reply, true, 2, (const char *const[]){"INFO", "server"});
}

/* ---- SHARD.GENKEY [type] [COUNT n] [NEAR key] ------------------------------------- */

/* "$equence{LL}": where logical shard L keeps its next free (ms, slot). */
void genkey_sequence_key(uint32_t shard, char out[13])
{
    memcpy(out, "$equence{00}", 13);
    idgen_b62_encode(shard, out + 9, 2);
}

/* Write the allocator call for r into r->out: EVALSHA while the script's
 * SHA1 is known and it has not answered -NOSCRIPT, else EVAL. */
static void genkey_command(struct client *c, struct req *r, const struct backend *b)
{
    const struct conf_idgen *ig = &c->pool->conf->idgen;
    char seq[13], n[16], epoch[24], ahead[24], guard[24], skew[24];
    bool sha = cur_loop->idgen_sha[0] != '\0' && !r->u.genkey.evaled;

    genkey_sequence_key(r->u.genkey.shard, seq);
    snprintf(n, sizeof(n), "%u", r->u.genkey.n);
    snprintf(epoch, sizeof(epoch), "%lld", (long long)ig->epoch_ms);
    snprintf(ahead, sizeof(ahead), "%lld", (long long)ig->max_ahead_ms);
    snprintf(guard, sizeof(guard), "%lld", (long long)ig->restart_guard_ms);
    snprintf(skew, sizeof(skew), "%lld", clock_skew);
    struct resp_w w = client_cmd_w(c, &r->out);
    resp_w_command(&w, 10, (const char *const[]){
        sha ? "EVALSHA" : "EVAL", sha ? cur_loop->idgen_sha : idgen_script, "1", seq,
        n, epoch, ahead, guard, b->run_id, skew}, NULL);
}

/* The allocator answered r: make the keys, or retry as EVAL. */
static int genkey_reply(struct req *r)
{
    struct client *c = r->client;
    char key[IDGEN_KEY_LEN];
    struct idgen_id id;
    long long ms, slot;
    struct resp_rd rd;
    struct resp_val v, vms, vslot;

    resp_rd_init(&rd, &r->rsp);
    if (resp_rd_peek(&rd) == '-') {
        if (resp_rd_error_is(&r->rsp, "NOSCRIPT") && !r->u.genkey.evaled) {
            r->u.genkey.evaled = 1;             /* flushed: send the text */
            msg_release(&r->rsp);
            msg_release(&r->out);               /* (kept for a slow log: not twice) */
            genkey_command(c, r, r->backend);
            backend_send(r->backend, r);
            return 1;
        }
        return 0;                               /* the backend's error, as it is */
    }
    /* Exactly "*2\r\n:<ms>\r\n:<slot>\r\n". */
    if (resp_rd_next(&rd, &v) < 0 || v.type != RESP_ARRAY || v.n != 2 ||
        resp_rd_next(&rd, &vms) < 0 || vms.type != RESP_INTEGER ||
        resp_rd_next(&rd, &vslot) < 0 || vslot.type != RESP_INTEGER || !resp_rd_end(&rd)) {
        msg_release(&r->rsp);
        client_reply_error(c, r, "ERR backend %s sent a malformed allocator reply",
                           c->pool->servers[r->backend->server].label);
        return 0;
    }
    ms = vms.n;
    slot = vslot.n;
    msg_release(&r->rsp);
    id = (struct idgen_id){ms, r->u.genkey.shard, (uint32_t)slot, r->u.genkey.type};
    if (ms < 0 || slot < 0 || slot >= IDGEN_SLOTS ||
        ms + (slot + r->u.genkey.n) / IDGEN_SLOTS > IDGEN_MAX_MS) {
        client_reply_error(c, r, "ERR id time out of range: check idgen.epoch_ms");
        return 0;
    }
    /* Each key goes next to the one before in c's chunk: one iovec for
     * a chunk's worth of keys. */
    struct resp_w w = client_w(c, &r->rsp);
    if (r->u.genkey.array)
        resp_w_array(&w, r->u.genkey.n);
    for (uint32_t i = 0; i < r->u.genkey.n; i++) {
        idgen_encode(&id, key);
        resp_w_bulk(&w, key, sizeof(key));
        idgen_next(&id);
    }
    return 0;
}

void genkey_genkey(struct client *c, struct req *r, struct args *a)
{
    const struct conf_pool *pc = c->pool->conf;
    long long count = 1;
    int type = IDGEN_TYPE_DEFAULT, shard = -1;
    bool array = false;
    uint32_t i = 1;
    size_t len;
    const char *s;

    /* Options come in pairs, so an odd number of arguments starts with
     * the type (even a type named "count"). */
    if (a->argc % 2 == 0) {
        s = args_get(a, i++, &len);
        if ((type = type_code(c, r, s, len)) < 0)
            goto reply;
    }
    for (; i < a->argc; i += 2) {
        size_t vlen;
        const char *v = args_get(a, i + 1, &vlen);
        char num[24], *end;
        struct idgen_info info;

        if (args_is(a, i, "count")) {
            snprintf(num, sizeof(num), "%.*s", (int)(vlen < 23 ? vlen : 23), v);
            count = strtoll(num, &end, 10);
            if (vlen == 0 || vlen > 22 || *end != '\0' || count < 1 || count > GENKEY_MAX_COUNT) {
                client_reply_error(c, r, "ERR COUNT must be an integer from 1 to %d",
                                   GENKEY_MAX_COUNT);
                goto reply;
            }
            array = true;
        } else if (args_is(a, i, "near")) {
            enum idgen_format f = decode(c, v, vlen, &info);
            if (f != IDGEN_FORMAT_SHARDIS && f != IDGEN_FORMAT_FIXED) {
                client_reply_error(c, r, "ERR NEAR key '" ARG_FMT "' is not a generated key",
                                   ARG_VAL(v, vlen));
                goto reply;
            }
            shard = (int)info.shard;
        } else {
            client_reply_error(c, r, "ERR syntax error");
            goto reply;
        }
    }
    if (!pc->has_hash_tag || pc->hash_tag[0] != '{' || pc->hash_tag[1] != '}') {
        client_reply_error(c, r, "ERR SHARD.GENKEY needs hash_tag: \"{}\" in pool '%s' "
                           "(the {shard} of an id is its hash tag)", pc->name);
        goto reply;
    }
    if (c->pool->shards == NULL) {
        client_reply_error(c, r, "ERR SHARD.GENKEY needs a distribution that places keys, "
                           "not random");
        goto reply;
    }

    r->u.genkey.n = (uint32_t)count;
    r->u.genkey.type = (uint16_t)type;
    r->u.genkey.shard = (uint16_t)(shard >= 0 ? (uint32_t)shard : random_shard(c->pool));
    r->u.genkey.array = array;
    r->hook = genkey_reply;

    /* Always the shard's owner on the ring, even if it is ejected (the
     * request then fails fast): a sequence re-created on another server
     * could repeat ids when its owner returns. */
    char seq[13];
    genkey_sequence_key(r->u.genkey.shard, seq);
    uint32_t server = c->pool->slot[ring_lookup(c->pool->ring, seq, 12)];
    /* The sequences are shardis's: clients' connections sign in as a
     * user that cannot touch them (srvuser.c). They are in redis_db,
     * whichever database the client SELECTed. */
    struct backend *b = pool_own(c->pool, server, c->resp3);
    genkey_command(c, r, b);
    mig_key(c, b->server, seq, 12);     /* $equence{LL} moves like any key */
    route_send(c, r, NULL, b);
    return;

reply:
    req_done(r);
}

/* ---- SHARD.CHANGETYPE key type ------------------------------------------------------ */

void genkey_changetype(struct client *c, struct req *r, struct args *a)
{
    struct idgen_info info;
    size_t klen, tlen;
    const char *key, *t;
    int type;

    if (a->argc != 3) {
        client_reply_error(c, r, "ERR wrong number of arguments for 'shard.changetype' command");
        return;
    }
    key = args_get(a, 1, &klen);
    if (decode(c, key, klen, &info) == IDGEN_FORMAT_UNKNOWN) {
        client_reply_error(c, r, "ERR '" ARG_FMT "' is not a generated, shardjs or fixed key",
                           ARG_VAL(key, klen));
        return;
    }
    t = args_get(a, 2, &tlen);
    if ((type = type_code(c, r, t, tlen)) < 0)
        return;
    /* The same bytes but the two type chars: a copy, since key may live in
     * the client's read chunks. */
    char *out = xmalloc(klen);
    memcpy(out, key, klen);
    idgen_b62_encode((uint64_t)type, out + info.type_at, 2);
    struct resp_w w = client_w(c, &r->rsp);
    resp_w_bulk(&w, out, klen);
    free(out);
}

/* ---- SHARD.KEYINFO key -------------------------------------------------------------- */

void genkey_keyinfo(struct client *c, struct req *r, struct args *a)
{
    static const char *const formats[] = {"unknown", "shardis", "shardjs", "fixed"};
    const struct conf_pool *pc = c->pool->conf;
    struct idgen_info info;
    struct resp_w w = client_w(c, &r->rsp);
    char iso[32];
    size_t klen;
    const char *key;
    uint32_t pairs;

    if (a->argc != 2) {
        client_reply_error(c, r, "ERR wrong number of arguments for 'shard.keyinfo' command");
        return;
    }
    key = args_get(a, 1, &klen);
    decode(c, key, klen, &info);
    pairs = info.format == IDGEN_FORMAT_UNKNOWN ? 2 : info.format == IDGEN_FORMAT_SHARDJS ? 7
          : info.format == IDGEN_FORMAT_FIXED ? 6 : 8;
    resp_w_map(&w, pairs);
    resp_w_bulk_str(&w, "format");
    resp_w_bulk_str(&w, formats[info.format]);
    if (info.format == IDGEN_FORMAT_SHARDIS || info.format == IDGEN_FORMAT_SHARDJS) {
        resp_w_bulk_str(&w, "ms");
        resp_w_int(&w, info.ms + pc->idgen.epoch_ms);
        idgen_iso_time(info.ms + pc->idgen.epoch_ms, iso);
        resp_w_bulk_str(&w, "time");
        resp_w_bulk_str(&w, iso);
    }
    if (info.format == IDGEN_FORMAT_FIXED) {
        resp_w_bulk_str(&w, "name");
        resp_w_bulk(&w, key + info.name_at, klen - info.name_at);
    }
    if (info.format == IDGEN_FORMAT_SHARDIS || info.format == IDGEN_FORMAT_FIXED) {
        resp_w_bulk_str(&w, "shard");
        resp_w_int(&w, info.shard);
    }
    if (info.format == IDGEN_FORMAT_SHARDIS || info.format == IDGEN_FORMAT_SHARDJS) {
        resp_w_bulk_str(&w, info.format == IDGEN_FORMAT_SHARDIS ? "slot" : "variant");
        resp_w_int(&w, info.slot);
    }
    if (info.format != IDGEN_FORMAT_UNKNOWN) {
        const char *name = type_name(pc, info.type);
        resp_w_bulk_str(&w, "type");
        resp_w_int(&w, info.type);
        resp_w_bulk_str(&w, "type_name");
        if (name != NULL)
            resp_w_bulk_str(&w, name);
        else
            resp_w_null(&w);
    }
    resp_w_bulk_str(&w, "server");
    if (ring_distribution(c->pool->ring) == RING_DIST_RANDOM)
        resp_w_null(&w);
    else
        resp_w_bulk_str(&w, ring_server_label(c->pool->ring, ring_lookup(c->pool->ring, key, klen)));
}

/* ---- SHARD.FIXEDKEY name [type] ------------------------------------------------------- */

void genkey_fixedkey(struct client *c, struct req *r, struct args *a)
{
    const struct conf_idgen *ig = &c->pool->conf->idgen;
    char out[IDGEN_KEY_LEN + 1 + IDGEN_NAME_MAX];
    size_t nlen, tlen, outlen;
    const char *name, *t = NULL;
    int type;

    if (a->argc != 2 && a->argc != 3) {
        client_reply_error(c, r, "ERR wrong number of arguments for 'shard.fixedkey' command");
        return;
    }
    name = args_get(a, 1, &nlen);
    if (a->argc == 3) {
        t = args_get(a, 2, &tlen);
    } else {
        for (size_t i = 0; i < ig->nfixed && t == NULL; i++)
            if (strlen(ig->fixed[i].name) == nlen && !memcmp(ig->fixed[i].name, name, nlen))
                t = ig->fixed[i].type, tlen = strlen(t);
        if (t == NULL) {
            client_reply_error(c, r, "ERR fixed key '" ARG_FMT "' is not in idgen.fixed: "
                               "give its type", ARG_VAL(name, nlen));
            return;
        }
    }
    if ((type = type_code(c, r, t, tlen)) < 0)
        return;
    if (idgen_fixed_key(name, nlen, (uint32_t)type, out, &outlen) < 0) {
        client_reply_error(c, r, "ERR a fixed key's name is 1 to %d printable ASCII "
                           "characters, without spaces", IDGEN_NAME_MAX);
        return;
    }
    struct resp_w w = client_w(c, &r->rsp);
    resp_w_bulk(&w, out, outlen);
}

/* ---- the module ---------------------------------------------------------------------- */

const struct module genkey_module = {
    .name = "genkey",
    .pool_free = genkey_pool_free,
    .ring_changed = genkey_pool_init,
};

/* own.h -- shardis's own keys on the servers (route.h names them: the ID
 * sequences "$equence{LL}" and what is under "__shardis:"), and how the
 * views of the keyspace a client gets leave them out (own.c): SCAN's
 * pages (scan.c), KEYS, DBSIZE, RANDOMKEY (frag.c) and INFO keyspace
 * (info.c). A client can neither touch nor count them, as if they were
 * not there. */
#ifndef SHARDIS_OWN_H
#define SHARDIS_OWN_H

#include <stdbool.h>
#include <stdint.h>

struct pool;
struct resp_rd;
struct resp_val;
struct resp_w;

/* Whether the bulk string v of rd is one of shardis's own keys. */
bool own_key(const struct resp_rd *rd, const struct resp_val *v);

/* Into w: "EXISTS k ..." of every one of shardis's own keys that may be
 * on server in redis_db, so that its integer reply is how many are: the
 * sequences the ring places there (every one while keys move: they may
 * be on an earlier owner still, or where the ring places none by tag),
 * and each pool's migration record. At most 3,844 + pools names, about
 * 90 us of the server's time with all of them (one DBSIZE is 1 us); a
 * Lua script making the names took 1.3 ms. */
void own_exists(const struct pool *p, uint32_t server, struct resp_w *w);

/* Into w: the request RANDOMKEY is sent as to each server, a read-only
 * script (EVAL_RO) with RANDOMKEY's reply, nil only when the database
 * holds no key but shardis's own: up to 16 RANDOMKEYs, then a SCAN to
 * the first key not shardis's (there are at most a few thousand of
 * those, so the walk is that short however many keys there are). */
void own_randomkey(struct resp_w *w);

#endif

/* genkey.h -- SHARD.GENKEY and the other generated-key commands, and
 * the allocator script they run on the servers (genkey.c). */
#ifndef SHARDIS_GENKEY_H
#define SHARDIS_GENKEY_H

#include <stdint.h>

struct args;
struct backend;
struct client;
struct pool;
struct req;

/* SHARD.GENKEY, SHARD.CHANGETYPE, SHARD.KEYINFO, SHARD.FIXEDKEY (genkey.c).
 * Each replies to r, or (GENKEY) sends it to a backend. */
void genkey_genkey(struct client *c, struct req *r, struct args *a);
void genkey_changetype(struct client *c, struct req *r, struct args *a);
void genkey_keyinfo(struct client *c, struct req *r, struct args *a);
void genkey_fixedkey(struct client *c, struct req *r, struct args *a);
/* The logical shards whose sequence ("$equence{LL}", genkey_sequence_key)
 * the ring places on server: their count, the shards in *shards; or, with
 * *shards NULL, every one (the ring places none by tag: random). */
uint32_t genkey_sequences_on(const struct pool *p, uint32_t server, const uint16_t **shards);
void genkey_sequence_key(uint32_t shard, char out[13]);
/* At start, before any loop runs: read the test hooks. */
void genkey_init(void);
/* A connection to a server is being opened (backend hooks.connecting):
 * on shardis's own shared one to a master, load the allocator script
 * there and learn the server's run_id (the handshake's tail). */
void genkey_connecting(struct backend *b);

struct module;
/* Its module (module.h), listed in process/modules.c: the map of the
 * logical shards of p's ring to their servers (GENKEY's choice of shard),
 * remade whenever the ring changes. */
extern const struct module genkey_module;

#endif

/* pubsub.h -- publish and subscribe across the servers (pubsub.c). */
#ifndef SHARDIS_PUBSUB_H
#define SHARDIS_PUBSUB_H

#include <stdint.h>

struct acl_user;
struct args;
struct backend;
struct client;
struct cmd;
struct pool;
struct req;

/* Publish and subscribe (pubsub.c). pubsub_route takes PUBLISH, SPUBLISH,
 * (P|S)SUBSCRIBE and (P|S)UNSUBSCRIBE, and every command of a client in
 * subscriber mode: 1 if it did. pubsub_frame gets each frame [start, end)
 * read on a subscriber connection; pubsub_failed is told when one fails,
 * pubsub_client_gone when its client closes. */
int pubsub_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
void pubsub_frame(struct backend *b, uint64_t start, uint64_t end);
void pubsub_failed(struct backend *b);
void pubsub_client_gone(struct client *c);
/* c's subscriptions: channels, patterns, shard channels (CLIENT LIST). */
void pubsub_counts(const struct client *c, uint32_t count[3]);
/* The first of c's subscriptions that u may not have (acl_channel_ok, as
 * (P|S)SUBSCRIBE ask it: a pattern must be one of u's own), in words for
 * the log, a string to free; NULL if u may have them all. A reload closes
 * such a client, as redis-server closes its after ACL SETUSER. */
char *pubsub_denied(const struct client *c, const struct acl_user *u);
/* RESET: c leaves every channel, pattern and shard channel, without the
 * confirmations UNSUBSCRIBE would give (as redis-server's RESET). */
void pubsub_reset(struct client *c);

struct module;
/* Its module (module.h), listed in process/modules.c: servers added and
 * gone, the ring changed, a user narrowed, and the requests it takes. */
extern const struct module pubsub_module;

#endif

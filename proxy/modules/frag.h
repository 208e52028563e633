/* frag.h -- commands sent to several servers, replies merged (frag.c). */
#ifndef SHARDIS_FRAG_H
#define SHARDIS_FRAG_H

#include <stdbool.h>

#include "proxy/base/cmd.h"

struct args;
struct backend;
struct client;
struct cmd;
struct req;

/* Multi-key commands split per backend: -2 not a split command, -1
 * handled (split and sent, or an error replied), else the one server that
 * owns every key (forward the request whole). */
int frag_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
/* Send r to every server; its reply merges theirs by the response policy.
 * via: the connection to use for each server, or NULL for c's usual ones;
 * blocking: the fragments may wait as long as they like (no deadline). */
void frag_broadcast(struct client *c, struct req *r, struct args *a, enum cmd_reply reply,
                    struct backend **via, bool blocking);
/* A fragment got its reply: merge once all have. */
void frag_done(struct req *fragment);

/* Whether cmd (multi_shard in Redis's tips) is split per server (frag.c). */
bool frag_splits(const struct cmd *cmd);

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module frag_module;

#endif

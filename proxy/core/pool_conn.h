/* pool_conn.h -- what a pool tells its connections (pool_conn.c): where
 * each server is and how to sign in there (struct backend_server), and
 * which dedicated connections exist: a client's pin, subscriber or
 * one-off, and the spares kept for the next. */
#ifndef SHARDIS_POOL_CONN_H
#define SHARDIS_POOL_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/transport/backend.h"

struct client;
struct pool;

/* Server `server` of p (replica k: its replica in slot k - 1, else its
 * master), as a connection to it needs it: into *sv, good until the
 * pool changes. */
void pool_conn_server_of(const struct pool *p, uint32_t server, uint32_t replica,
                         struct backend_server *sv);

/* The hooks of the pool's (struct backend_hooks): where p keeps its
 * config; b's server; a dedicated connection closed (freed here) or a
 * one-off gone idle (given back, pool_conn_release). (A server that fails
 * and a replica that says -LOADING are pool.c's: pool_backend_failed,
 * pool_shun.) */
const struct conf_pool *const *pool_conn_conf(const struct pool *p);
void pool_conn_server(const struct backend *b, struct backend_server *sv);
void pool_conn_closed(struct backend *b);
void pool_conn_idle(struct backend *b);

/* At start, or where no loop runs: argv on server s, a blocking call
 * (backend_sync: a connection of its own, run to its reply on a loop of
 * its own): the reply's value, or (raw) its bytes; NULL: none. */
char *pool_conn_call(const struct pool *p, uint32_t s, int argc, const char *const *argv,
                     size_t *len);
char *pool_conn_call_raw(const struct pool *p, uint32_t s, int argc, const char *const *argv,
                         size_t *len);

/* Dedicated connections: a client whose commands hold state on a server
 * (MULTI ... EXEC, WATCH, a blocking pop) gets a connection of its own to
 * it while the state lasts (pin.c), in the client's database (a
 * subscriber's in redis_db: channels have none). Released clean (EXEC,
 * DISCARD, the pop answered) it waits as a spare for the next client;
 * released dirty (the client left mid-transaction or mid-pop) it is
 * closed, so no state leaks to anyone and a pop that was waiting takes
 * nothing. The pool owns them (pool.dedicated) and frees them once
 * closed (pool_conn_closed). */
struct backend *pool_conn_acquire(struct pool *p, uint32_t server, struct client *owner,
                                  enum backend_role role);
/* A ONE_OFF for a script that declares no key (pin_keyless): it
 * authenticates as the pool's keyless_user, and fails unless that user is
 * refused a key write (its handshake checks). */
struct backend *pool_conn_acquire_keyless(struct pool *p, uint32_t server,
                                          struct client *owner);
/* A ONE_OFF for an admin command, authenticated as the pool's
 * internal_user (pin_internal). Spares serve only their own kind, in
 * their own database (and only while the pool's creds_gen is the one
 * they were made in). */
struct backend *pool_conn_acquire_internal(struct pool *p, uint32_t server,
                                           struct client *owner);
void pool_conn_release(struct backend *b, bool clean);
/* b, a PIN whose client has moved on to another (pin.c), finishes what
 * was sent on it as a ONE_OFF: given back clean once idle. */
void pool_conn_retire(struct backend *b);
/* Close p's spare dedicated connections to server (UINT32_MAX: to every
 * server), when the proxy is idle or the server leaves. */
void pool_conn_close_spares(struct pool *p, uint32_t server);

#endif

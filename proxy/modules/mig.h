/* mig.h -- moving keys after a ring change (mig.c; its files share mig_int.h). */
#ifndef SHARDIS_MIG_H
#define SHARDIS_MIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ring/ring.h"

struct args;
struct backend;
struct client;
struct pool;
struct req;

/* Keys move after pool p's ring changed from old (with old_slot, its ring
 * index -> server map, and old_text the config it came from) to the ring
 * of new_text: the ring and the map are the migration's from now on. Requests
 * for moving keys MIGRATE them first; a background mover walks every
 * earlier owner. Returns -EBUSY (err says why) when two earlier rings are
 * pending already; the caller then keeps old. */
int mig_start(struct pool *p, struct ring *old, uint32_t *old_slot, const char *old_text,
              const char *new_text, char *err, size_t errlen);
/* Whether the migration can take another ring change now (err says why
 * not); reload.c's can_reshard asks the servers' INFO besides. */
bool mig_can_start(const struct pool *p, char *err, size_t errlen);
void mig_free(struct pool *p);
/* p, a new copy of src for another loop (pool_start_other), src's
 * migration taken up from its record at start: the same earlier rings
 * and epoch, for p's clients' MIGRATEs on touch (loop 0's leads). */
void mig_copy(struct pool *p, const struct pool *src);
void mig_tick(struct pool *p, uint64_t now);
/* server's master moved (a failover, pool_server_move): a walk of it
 * starts over, since a SCAN cursor means nothing on another server. */
void mig_server_moved(struct pool *p, uint32_t server);
/* Sending r to b (its keys' owner), where r has the keys given by
 * mig_key just before: move each key the ring change moved to b's server
 * from every earlier owner first. r waits for that (on c's parked queue,
 * and c's later requests behind it, so they keep their order); a key that
 * cannot be moved answers r -TRYAGAIN and r never reaches b. */
void mig_key(struct client *c, uint32_t to, const char *key, size_t len);
void mig_send(struct client *c, struct req *r, struct backend *b);
/* End of a loop turn: send the MIGRATEs its requests share. */
void mig_flush(struct pool *p);
/* The reply of a blocking command mig.c unblocked (r->unblocked): if the
 * unblocking answered it, it is sent again by the new ring (1: r is not
 * done), or the client is told -TRYAGAIN. */
int mig_unblocked(struct req *r);
/* The CLIENT UNBLOCK aimed at the dedicated connection to server whose
 * CLIENT ID there is id has landed (or failed): what waits to go on that
 * connection may go (gate.c). */
void mig_unblock_landed(struct pool *p, uint32_t server, uint64_t id);
/* A request was told -TRYAGAIN because of a reload (for the status). */
void mig_told_tryagain(struct pool *p);
/* At start, before the loop runs: a migration recorded on p's servers (a
 * proxy stopped while keys moved) is taken up again if its record checks
 * out: the record's config replaces cur_loop->conf and true is returned; the
 * caller then reloads the file (a file that differs is a reload request).
 * A record that does not check out is not followed and stops nothing: it
 * is logged and shown in INFO (pool_server.record_ignored). */
bool mig_recover(struct pool *p);
/* Keep the drain closed (group.c: until every proxy has drained), or not. */
void mig_hold(struct pool *p, bool hold);
/* Whether what was sent before the switch is answered and the record
 * written. */
bool mig_drained(const struct pool *p);

/* SHARD.MIGRATION STATUS | PAUSE | RESUME (local.c dispatches). */
void mig_command(struct client *c, struct req *r, struct args *a);
/* The pool's migration in figures (/metrics), over every loop (a world
 * stop): all 0 when none runs. */
struct mig_progress {
    bool     active, draining;
    uint64_t scanned, moved, moved_on_touch, tryagain;
};
void mig_progress(const struct pool *p, struct mig_progress *out);

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module mig_module;

#endif

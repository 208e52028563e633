/* pin.h -- transactions, WATCH, blocking commands and WAIT on a client's
 * dedicated connection (pin.c). */
#ifndef SHARDIS_PIN_H
#define SHARDIS_PIN_H

#include <stdbool.h>
#include <stdint.h>

#include "proxy/base/cmd.h"

struct args;
struct client;
struct cmd;
struct req;

/* Transactions, WATCH and blocking commands on a dedicated connection
 * (pin.c). pin_route takes MULTI/EXEC/DISCARD/WATCH/UNWATCH, and refuses
 * what cannot be queued in a transaction (cmd NULL: a SHARD.* command):
 * 1 if it did. pin_send sends a keyed command of a transaction, or a
 * blocking one, to server on c's dedicated connection. pin_check gives the
 * connection back once nothing holds it; pin_client_gone when c closes. */
int pin_route(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
void pin_send(struct client *c, struct req *r, struct args *a, uint32_t server, bool blocking);
void pin_check(struct client *c);
/* A script that declares no key, as the pool's keyless_user (see pin.c). */
void pin_keyless(struct client *c, struct req *r, struct args *a, uint32_t server);
/* A command for a server busy with a script (SCRIPT KILL, FUNCTION KILL or
 * STATS): on every server (or the first), over connections of its own. */
/* An admin command where the pool's clients sign in to the servers as a
 * backend_user of their own (see pin.c). */
void pin_internal(struct client *c, struct req *r, struct args *a, enum cmd_reply reply,
                  uint32_t only, bool keyed, bool no_deadline);
void pin_busy(struct client *c, struct req *r, struct args *a, const struct cmd *cmd,
              bool first_only);
/* RESET: c's transaction and WATCH end, as DISCARD would end them. If
 * they are on a server, r goes to c's pin as that DISCARD (or UNWATCH),
 * answered +RESET, and c's later requests wait for it: true. False if
 * nothing was there to end: the caller answers r. */
bool pin_reset(struct client *c, struct req *r);
/* c is to have no pin for next (SUBSCRIBE, a HELLO that changes the
 * protocol): if its pin holds no transaction, WATCH or blocking command of
 * c's any more (an EXEC or DISCARD still on its way), it is retired, and
 * next and what follows wait for what is still on it. False if c keeps it. */
bool pin_let_go(struct client *c, struct req *next);
void pin_client_gone(struct client *c);
/* In MULTI: the place in EXEC's reply of the next command c queues. */
uint32_t pin_tx_place(const struct client *c);

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module pin_module;

#endif

/* keys.h -- where a command's keys are among its arguments: decided in
 * keys.c and nowhere else. Routing, splitting, the ACL key check, the
 * migration's key tracking, hot keys and COMMAND GETKEYS all read what
 * keys_find found (args.keys), so they cannot disagree.
 *
 * keys_find reads the command's key specs (cmd.h) as redis-server's
 * getKeysFromCommandWithSpecs does; where the specs cannot say (SORT's
 * STORE, MIGRATE's KEYS) a written rule does, each redis-server's own
 * getkeys procedure. The arguments are then checked only as far as
 * routing needs: a bad numkeys, an unbalanced XREAD, get redis-server's
 * error here, since there is no server to send them to. */
#ifndef SHARDIS_KEYS_H
#define SHARDIS_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/transport/args.h"

struct cmd;

/* struct keys, where keys_find puts what it found, is plain data the
 * arguments carry (args.keys): it is defined with them, in
 * transport/args.h. */

enum keys_found {
    KEYS_FOUND,     /* k->n >= 1 */
    KEYS_NONE,      /* the command names no key here: it has no key specs, or
                       is a script declaring none (EVAL ... 0, FCALL ... 0) */
    KEYS_BAD,       /* arguments redis-server refuses: err says how */
    KEYS_SERVER_SAYS, /* arguments every server refuses before touching a key, in
                         words that differ by version (XREAD's unbalanced list):
                         send it to any, for its own words */
};

#define KEYS_ERR_MAX 160

/* The keys of cmd (a command or subcommand, arity checked) in a's
 * arguments, into k. KEYS_BAD writes redis-server's error text (without
 * the '-') into err[KEYS_ERR_MAX]. */
enum keys_found keys_find(const struct cmd *cmd, struct args *a, struct keys *k, char *err);

/* keys_find's quick path alone, which reads no argument: true, with k
 * filled, when cmd's keys are at fixed indexes that argc arguments hold;
 * else false (k empty: keys_find must read the arguments). */
bool keys_indexed(const struct cmd *cmd, uint32_t argc, struct keys *k);

/* Whether cmd may name keys at all (a key spec that is not NOT_KEY, or
 * any spec of a pub/sub command: its sharded channels). */
int keys_any(const struct cmd *cmd);

/* The position of cmd's first key when it does not depend on the
 * arguments (an index key spec: GET's 1, BITOP's 2), else 0. */
uint32_t keys_first_fixed(const struct cmd *cmd);

/* How many keys k holds. */
uint32_t keys_count(const struct keys *k);

/* Give back the calling thread's rules, made by keys_find from the
 * command table (each thread keeps its own), as the thread ends. */
void keys_cache_free(void);

#endif

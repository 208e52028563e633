/* module.h -- the one interface through which the core reaches what is
 * built above it (modules/, ops/), and the registry of those modules
 * (module.c).
 *
 * The core (pool.c, route.c, gate.c, acl.c) names no module: each module
 * defines one `const struct module`, the process layer lists them in one
 * table (process/modules.c) and registers it with module_register at
 * start, before any pool exists. Adding a capability adds a module and a
 * line in that table, not edits to the core.
 *
 * Two kinds of entries:
 *   - events every module may follow (a pool's life, its ring and
 *     servers changing, the tick): the core calls each registered
 *     module's hook, in table order (MODULE_EACH);
 *   - roles: what the core needs done that exactly one module does (send
 *     on a client's dedicated connection: pin.c; split a request: frag.c
 *     ...). A module fills the roles it plays in its `roles`; registration
 *     merges them into module_role, which the core calls through. The
 *     core calls a role wherever it needs it, without testing for NULL:
 *     module_register checks that the table plays every role, once.
 * The request path pays an indirect call per role used, as it paid a
 * direct one before: no loop over modules per request (module_route is
 * indexed by route kind).
 *
 * Lifetime: the modules and their roles are static const data; the
 * registry only points at them, for the process's life. */
#ifndef SHARDIS_MODULE_H
#define SHARDIS_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/base/cmd.h"
#include "proxy/core/route.h"

struct acl_user;
struct args;
struct backend;
struct client;
struct msg;
struct pool;
struct req;

/* What one module plays for route.c, gate.c and acl.c (see above). Each
 * names the module that plays it today; its contract is that module's
 * header's. A new role is a field here and its name in module.c's ROLES. */
struct module_roles {
    /* pin.c: connections of a client's own */
    void (*send_pinned)(struct client *c, struct req *r, struct args *a, uint32_t server,
                     bool blocking);
    void (*send_as_own)(struct client *c, struct req *r, struct args *a,
                         enum cmd_reply reply, uint32_t only, bool keyed, bool no_deadline);
    void (*send_keyless)(struct client *c, struct req *r, struct args *a, uint32_t server);
    void (*send_dedicated)(struct client *c, struct req *r, struct args *a, const struct cmd *cmd,
                     bool first_only);
    /* gate.c: c's gate emptied; its pin goes back if nothing holds it */
    void (*gate_emptied)(struct client *c);
    /* frag.c: split per server, and sent to every server */
    bool (*splits)(const struct cmd *cmd);
    int (*split)(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
    void (*broadcast)(struct client *c, struct req *r, struct args *a,
                           enum cmd_reply reply, struct backend **via, bool blocking);
    /* minify.c: hash fields' names mapped */
    bool (*map_fields)(struct client *c, struct req *r, struct args *a,
                         const struct cmd *cmd);
    void (*map_request)(struct args *a, struct msg *g);
    /* mig.c: send r to b while keys move (p->mig set): its keys (a->keys,
     * a may be NULL) moved to b's server first; told: a request was told
     * -TRYAGAIN because of a reload */
    void (*send_moving)(struct client *c, struct req *r, struct args *a, struct backend *b);
    void (*told_tryagain)(struct pool *p);
    /* group.c: the group is changing the ring (route.c db_ok) */
    bool (*ring_changing)(const struct pool *p);
    /* local.c: the commands shardis answers itself */
    bool (*answers_itself)(const char *name);
    int (*answer)(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
    const char *(*shard_command)(size_t i, uint32_t *acl);
    /* monitor.c: c's request a goes to the pool's monitors (p->nmonitors > 0) */
    void (*to_monitors)(struct client *c, struct args *a);
    /* stats.c: CONFIG RESETSTAT of the pool's commandstats */
    void (*reset_stats)(struct pool *p);
    /* track.c: c tracks keys (c->tracking): whether r's count (r->track);
     * c's transaction ended without running on a server (DISCARD, an
     * abort or -TRYAGAIN shardis answers, RESET): its writes never ran */
    void (*track)(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
    void (*tx_unrun)(struct client *c);
};

/* A request of a route kind a module answers whole (module_route). It
 * answers r (or sends it) and ends it; a is released by the caller. */
typedef void module_route_fn(struct client *c, struct req *r, struct args *a,
                             const struct cmd *cmd);

/* A module. Every hook may be NULL. Hooks about a pool are called with
 * cur_loop the pool's loop; none may free the pool. */
struct module {
    const char *name;
    /* The pool got its first ring (pool_set_ring at start, after
     * conf_set): make what the module keeps for every pool. */
    void (*pool_init)(struct pool *p);
    /* pool_free: free what the module keeps for p (its handles closed). */
    void (*pool_free)(struct pool *p);
    /* p->conf is new (pool_set_conf: start, every reload). */
    void (*conf_set)(struct pool *p);
    /* p->ring is new (pool_set_ring), and p->slot. */
    void (*ring_changed)(struct pool *p);
    /* server became active (joined a ring; pool_set_ring), or is not
     * where it is known to be yet (a pool with sentinels: why). */
    void (*server_added)(struct pool *p, uint32_t server);
    void (*server_unresolved)(struct pool *p, uint32_t server, const char *why);
    /* server left every ring and its connections are closed (pool_retire). */
    void (*server_gone)(struct pool *p, uint32_t server);
    /* server's master moved (pool_server_move); why says where. */
    void (*server_moved)(struct pool *p, uint32_t server, const char *why);
    /* The server some keys are routed to may have changed: a new ring
     * (pool_set_ring), an ejection or a return (eject_mode rehash). */
    void (*keys_rerouted)(struct pool *p);
    /* c's user becomes u, whose channels are narrower (a reload,
     * pool_set_acl): why c may no longer stay (allocated: the caller
     * frees it; c is then closed), or NULL. */
    char *(*user_narrowed)(const struct client *c, const struct acl_user *u);
    /* From the proxy's tick, for each pool (after pool_tick). */
    void (*tick)(struct pool *p, uint64_t now);
    /* Before route_request looks at the command's kind, for every request
     * of a known command (and SHARD.*, cmd NULL): 1 if the module took r
     * (answered or sent it: a subscriber's, a transaction's), else 0. In
     * table order; the first that takes r ends the turn. */
    int (*take)(struct client *c, struct req *r, struct args *a, const struct cmd *cmd);
    /* The route kinds (1u << ROUTE_*) whose requests route goes to. */
    uint32_t routes;
    module_route_fn *route;
    /* The roles it plays (NULL: none). */
    const struct module_roles *roles;
};

/* Register the modules table[0 .. n) (the process layer's one table), in
 * the order their hooks are to be called. Once, before any pool starts
 * (a second call replaces the first: unit tests). */
void module_register(const struct module *const *table, size_t n);

/* The registry (module.c): read only through the names below. */
extern const struct module *const *module_list;
extern size_t module_count;
extern struct module_roles module_role;
extern module_route_fn *module_route[ROUTE_KINDS];
/* The modules' take hooks, in table order (route_request): a few. */
#define MODULE_TAKE_MAX 4
extern int (*module_take[MODULE_TAKE_MAX])(struct client *, struct req *, struct args *,
                                          const struct cmd *);
extern size_t module_ntake;

/* Call hook of every module that has it, in table order. */
#define MODULE_EACH(hook, ...)                                                  \
    do {                                                                        \
        for (size_t module_i_ = 0; module_i_ < module_count; module_i_++)       \
            if (module_list[module_i_]->hook != NULL)                           \
                module_list[module_i_]->hook(__VA_ARGS__);                      \
    } while (0)

/* The tick's part for the modules (the proxy's tick, for each pool). */
void module_tick(struct pool *p, uint64_t now);

#endif

/* module.c -- the registry of the modules above the core (module.h): the
 * table the process layer registers, the roles merged from it, and the
 * route kinds' dispatch. */
#include <string.h>

#include "proxy/core/module.h"
#include "proxy/base/util.h"

/* All set by module_register, once at start, before any loop runs; only
 * read after, so loops on threads share them without a lock. */
const struct module *const *module_list;
size_t module_count;
struct module_roles module_role;
module_route_fn *module_route[ROUTE_KINDS];
int (*module_take[MODULE_TAKE_MAX])(struct client *, struct req *, struct args *,
                                   const struct cmd *);
size_t module_ntake;

/* Every role of struct module_roles, once: merged and checked by it. */
#define ROLES(X)                                                                \
    X(send_pinned) X(send_as_own) X(send_keyless) X(send_dedicated) X(gate_emptied) \
    X(splits) X(split) X(broadcast)                                                 \
    X(map_fields) X(map_request)                                                    \
    X(send_moving) X(told_tryagain)                                                 \
    X(ring_changing)                                                                \
    X(answers_itself) X(answer) X(shard_command)                                    \
    X(to_monitors)                                                                  \
    X(reset_stats)                                                                  \
    X(track) X(tx_unrun)

/* Role f of r, if it plays it: one module per role. (CHECK, not ASSERT,
 * here and below: once, at start, and a table that breaks it must not
 * run.) */
#define TAKE_ROLE(f)                                                            \
    if (r->f != NULL) {                                                         \
        CHECK(module_role.f == NULL);                                           \
        module_role.f = r->f;                                                   \
    }
#define CHECK_ROLE(f) CHECK(module_role.f != NULL);

static void take_roles(const struct module_roles *r)
{
    ROLES(TAKE_ROLE)
}

void module_register(const struct module *const *table, size_t n)
{
    memset(&module_role, 0, sizeof(module_role));
    memset(module_route, 0, sizeof(module_route));
    module_ntake = 0;
    module_list = table;
    module_count = n;
    for (size_t i = 0; i < n; i++) {
        const struct module *m = table[i];
        if (m->roles != NULL)
            take_roles(m->roles);
        for (int k = 0; k < ROUTE_KINDS; k++)
            if (m->routes & (1u << k)) {
                CHECK(module_route[k] == NULL && m->route != NULL);
                module_route[k] = m->route;
            }
        if (m->take != NULL) {
            CHECK(module_ntake < ARRAY_SIZE(module_take));
            module_take[module_ntake++] = m->take;
        }
    }
    ROLES(CHECK_ROLE)       /* the core calls each where it needs it */
    CHECK(module_route[ROUTE_LOCAL] != NULL && module_route[ROUTE_SCAN] != NULL &&
          module_route[ROUTE_DEBUG] != NULL && module_route[ROUTE_WAIT] != NULL);
}

void module_tick(struct pool *p, uint64_t now)
{
    MODULE_EACH(tick, p, now);
}

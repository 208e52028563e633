/* module.c -- the registry of the modules above the core (module.h): the
 * table the process layer registers, the roles merged from it, and the
 * route kinds' dispatch. */
#include <string.h>

#include "proxy/core/module.h"
#include "proxy/base/util.h"

const struct module *const *module_list;
size_t module_count;
struct module_roles module_role;
module_route_fn *module_route[ROUTE_KINDS];
int (*module_take[MODULE_TAKE_MAX])(struct client *, struct req *, struct args *,
                                   const struct cmd *);
size_t module_ntake;

/* Role f of r, if it plays it: one module per role. (CHECK, not ASSERT:
 * once, at start, and a table that breaks it must not run.) */
#define ROLE(f)                                                 \
    do {                                                        \
        if (r->f != NULL) {                                     \
            CHECK(module_role.f == NULL);                       \
            module_role.f = r->f;                               \
        }                                                       \
    } while (0)

static void take_roles(const struct module_roles *r)
{
    ROLE(pin_send);
    ROLE(pin_internal);
    ROLE(pin_keyless);
    ROLE(pin_busy);
    ROLE(pin_check);
    ROLE(frag_splits);
    ROLE(frag_route);
    ROLE(frag_broadcast);
    ROLE(minify_route);
    ROLE(minify_request);
    ROLE(mig_send);
    ROLE(mig_told_tryagain);
    ROLE(group_changing);
    ROLE(local_has);
    ROLE(local_exec);
    ROLE(local_shard_command);
    ROLE(monitor_feed);
    ROLE(stats_reset);
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
}

void module_tick(struct pool *p, uint64_t now)
{
    MODULE_EACH(tick, p, now);
}

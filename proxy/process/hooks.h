/* hooks.h -- what the layers above register with the transport (hooks.c):
 * one place that wires them, so the transport calls none of them by name. */
#ifndef SHARDIS_HOOKS_H
#define SHARDIS_HOOKS_H

/* Register every layer's hooks with the transport (client_set_hooks,
 * req_set_release, backend_set_hooks): once, before the first connection
 * is made, client accepted or request sent. proxy_run does, first; so
 * does a unit test's setup that makes any of those itself. */
void hooks_register(void);

#endif

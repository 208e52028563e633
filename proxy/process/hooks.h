/* hooks.h -- what the layers above register with the transport (hooks.c):
 * one place that wires them, so the transport calls none of them by name. */
#ifndef SHARDIS_HOOKS_H
#define SHARDIS_HOOKS_H

/* Register every layer's hooks with the transport (client_set_hooks,
 * req_set_release, backend_set_hooks): before the first client is accepted or request made.
 * proxy_loop_start does; a unit test that makes clients of its own
 * without it calls this. Calling it again changes nothing. */
void hooks_register(void);

#endif

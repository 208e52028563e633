/* proxy.h -- run the proxy for a loaded config until a signal stops it. */
#ifndef SHARDIS_PROXY_H
#define SHARDIS_PROXY_H

#include "conf/conf.h"

/* Start every pool of cf (the caller keeps cf until this returns) and run
 * the event loop. Returns the process exit code. */
int proxy_run(struct conf *cf);

/* Called once the proxy has been idle (no requests) for PROXY_IDLE_MS,
 * after its own pools are trimmed: main.c hands the allocator's caches
 * back to the kernel there. NULL: nothing more to do. */
extern void (*proxy_idle_hook)(void);

#endif

/* proxy.h -- run the proxy for a loaded config until a signal stops it. */
#ifndef SHARDIS_PROXY_H
#define SHARDIS_PROXY_H

#include "conf/conf.h"

/* Start every pool of cf and run the event loop. The proxy takes cf (a
 * reload replaces it) and frees it before returning; a reload reads
 * cf->path again. Returns the process exit code. */
int proxy_run(struct conf *cf);

/* Called once the proxy has been idle (no requests) for PROXY_IDLE_MS,
 * after its own pools are trimmed: main.c hands the allocator's caches
 * back to the kernel there. NULL: nothing more to do. */
extern void (*proxy_idle_hook)(void);

#endif

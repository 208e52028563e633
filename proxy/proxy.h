/* proxy.h -- run the proxy for a loaded config until a signal stops it. */
#ifndef SHARDIS_PROXY_H
#define SHARDIS_PROXY_H

#include "conf/conf.h"

/* Start every pool of cf (the caller keeps cf until this returns) and run
 * the event loop. Returns the process exit code. */
int proxy_run(struct conf *cf);

#endif

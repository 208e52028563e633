/* scan.h -- SCAN over every server with one cursor (scan.c). */
#ifndef SHARDIS_SCAN_H
#define SHARDIS_SCAN_H

struct module;
/* SCAN: one cursor over every server in turn (scan.c): its module answers
 * ROUTE_SCAN (module.h), listed in process/modules.c. */
extern const struct module scan_module;

#endif

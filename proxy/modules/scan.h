/* scan.h -- SCAN over every server with one cursor (scan.c). */
#ifndef SHARDIS_SCAN_H
#define SHARDIS_SCAN_H

struct args;
struct client;
struct req;

/* SCAN: one cursor over every server in turn (scan.c). */
void scan_send(struct client *c, struct req *r, struct args *a);

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module scan_module;

#endif

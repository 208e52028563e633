/* metrics.h -- Prometheus: GET /metrics on a pool's stats_listen, in the
 * text exposition format (metrics.c). */
#ifndef SHARDIS_METRICS_H
#define SHARDIS_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct pool;

/* A pool's HTTP listener and its connections (pool.metrics; NULL without
 * stats_listen). Made by metrics_start; its handles closed by the stop's
 * walk (metrics_close_handle); freed by metrics_free once the loop has
 * run their close callbacks. */
struct metrics;

/* Listen on p's stats_listen. 0, or a negative errno with err set (the
 * start fails, as for listen). */
int metrics_start(struct pool *p, char *err, size_t errlen);
/* From the proxy's tick: close connections idle for METRICS_IDLE_MS. */
void metrics_tick(struct pool *p, uint64_t now);
/* The stop: close h if it is one of p's metrics handles (true then). */
bool metrics_close_handle(struct pool *p, void *h);
void metrics_free(struct pool *p);
/* The exposition text of p (what GET /metrics answers): its copies on
 * every loop added up (totals.h). */
void metrics_write(const struct pool *p, FILE *f);
/* For every family written (hotkeys.c's too): a family's HELP and TYPE
 * lines. (Label values: text_escape, base/text.h.) */
void metrics_head(FILE *f, const char *name, const char *type, const char *help);

struct module;
/* Its module (module.h), listed in process/modules.c. */
extern const struct module metrics_module;

#endif

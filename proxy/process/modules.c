/* modules.c -- the modules shardis runs, in one table: what the core
 * (pool.c, route.c, gate.c, acl.c) reaches above itself, through
 * core/module.h. A new capability is a new module and a line here.
 *
 * The order is the order of the modules' hooks: the group's tick before
 * the migration's (a switch the group agrees on starts the migration it
 * then ticks), the group's server_moved before the migration's, genkey's
 * ring_changed before pubsub's, and pubsub's take before pin's (a
 * subscriber's request is pubsub.c's to judge, even in MULTI). */
#include "proxy/base/util.h"
#include "proxy/core/module.h"
#include "proxy/modules/debug.h"
#include "proxy/modules/frag.h"
#include "proxy/modules/genkey.h"
#include "proxy/modules/group.h"
#include "proxy/modules/mig.h"
#include "proxy/modules/minify.h"
#include "proxy/modules/pin.h"
#include "proxy/modules/pubsub.h"
#include "proxy/modules/scan.h"
#include "proxy/modules/sentinel.h"
#include "proxy/modules/track.h"
#include "proxy/ops/hotkeys.h"
#include "proxy/ops/info.h"
#include "proxy/ops/local.h"
#include "proxy/ops/metrics.h"
#include "proxy/ops/monitor.h"
#include "proxy/ops/slowlog.h"
#include "proxy/ops/stats.h"
#include "proxy/process/modules.h"

static const struct module *const modules[] = {
    &stats_module,
    &group_module,
    &mig_module,
    &genkey_module,
    &minify_module,
    &sentinel_module,
    &info_module,
    &slowlog_module,
    &metrics_module,
    &hotkeys_module,
    &pubsub_module,
    &pin_module,
    &frag_module,
    &scan_module,
    &track_module,
    &debug_module,
    &local_module,
    &monitor_module,
};

void modules_register(void)
{
    module_register(modules, ARRAY_SIZE(modules));
}

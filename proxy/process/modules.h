/* modules.h -- the one table of the modules the core iterates
 * (modules.c; core/module.h says what a module is). */
#ifndef SHARDIS_MODULES_H
#define SHARDIS_MODULES_H

/* Register the table with the core (module_register): at start, before
 * any pool is made (proxy_run; a unit test's setup). */
void modules_register(void);

#endif

/* log.h -- the proxy's log: levels as nutcracker's -v (0 emerg .. 11
 * pverb; shardis uses error 3, warn 4, notice 5, info 6, debug 7),
 * timestamped lines to stderr or the -o file. */
#ifndef SHARDIS_LOG_H
#define SHARDIS_LOG_H

enum {
    LOG_ERROR = 3,
    LOG_WARN = 4,
    LOG_NOTICE = 5,
    LOG_INFO = 6,
    LOG_DEBUG = 7,
};

/* Open the log (NULL: stderr). 0 or -errno. */
int log_init(int level, const char *path);
/* Reopen the file (after logrotate moved it). */
void log_reopen(void);
int log_level(void);
void log_write(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...)  log_write(LOG_ERROR, __VA_ARGS__)
#define log_warn(...)   log_write(LOG_WARN, __VA_ARGS__)
#define log_notice(...) log_write(LOG_NOTICE, __VA_ARGS__)
#define log_info(...)   do { if (log_level() >= LOG_INFO) log_write(LOG_INFO, __VA_ARGS__); } while (0)
#define log_debug(...)  do { if (log_level() >= LOG_DEBUG) log_write(LOG_DEBUG, __VA_ARGS__); } while (0)

#endif

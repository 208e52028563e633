/* log.c -- see log.h. Lines are written whole with one write(2), so a
 * daemon's log stays readable when several processes share a file. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "proxy/base/log.h"

/* Set by log_init, before any loop runs, and only read after: log_reopen
 * dup2s the new file onto fd, so a thread writing meanwhile writes to the
 * old file or the new one, never to a closed or reused descriptor. */
static int level = LOG_NOTICE;
static int fd = STDERR_FILENO;
static const char *file;

int log_init(int lvl, const char *path)
{
    level = lvl;
    file = path;
    if (path == NULL)
        return 0;
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        int rc = -errno;
        fd = STDERR_FILENO;
        return rc;
    }
    return 0;
}

void log_reopen(void)
{
    if (file == NULL)
        return;
    int nfd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (nfd < 0) {
        log_error("cannot reopen log file '%s': %s", file, strerror(errno));
        return;
    }
    dup2(nfd, fd);
    close(nfd);
}

int log_level(void)
{
    return level;
}

void log_write(int lvl, const char *fmt, ...)
{
    static const char tag[] = "   EWNID";
    /* One write per line, so that lines never mix; long enough for the
     * ACL SETUSER a warning asks the operator to run (srvuser.c). */
    char buf[4096];
    struct timeval tv;
    struct tm tm;
    size_t n;
    va_list ap;

    if (lvl > level)
        return;
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    n = strftime(buf, sizeof(buf), "[%Y-%m-%d %H:%M:%S", &tm);
    n += (size_t)snprintf(buf + n, sizeof(buf) - n, ".%03d] %c ", (int)(tv.tv_usec / 1000),
                          lvl < (int)sizeof(tag) - 1 ? tag[lvl] : 'D');
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
    va_end(ap);
    n = m < 0 ? n : n + (size_t)m < sizeof(buf) - 1 ? n + (size_t)m : sizeof(buf) - 2;
    buf[n++] = '\n';
    ssize_t w = write(fd, buf, n);
    (void)w;
}

/*
 * compile/spawn.c: running the C compiler as a child process with a time
 * limit, its output captured.
 *
 * The child gets its own process group so that a timeout kills the
 * driver's own children too (cc1, as, ld, or a wrapper's sleep).
 * posix_spawnp rather than fork: libtensor's thread pool may be running,
 * and glibc's spawn reports a failed exec (ENOENT) to the parent.
 */
#include "compile/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

double tn__cc_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reads what the pipe holds into out (keeping at most cap - 1 bytes);
 * returns false at its end. */
static bool drain(int fd, char *out, size_t cap, size_t *n)
{
    char buf[4096];
    ssize_t r = read(fd, buf, sizeof buf);
    if (r < 0)
        return errno == EINTR || errno == EAGAIN;
    if (r == 0)
        return false;
    size_t keep = cap - 1 - *n < (size_t)r ? cap - 1 - *n : (size_t)r;
    memcpy(out + *n, buf, keep);
    *n += keep;
    return true;
}

/* Waits for pid until deadline; returns 0 with *status, or TN_ETIMEOUT. */
static int reap(pid_t pid, double deadline, int *status)
{
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return tn_set_error(TN_EIO, "waiting for the compiler: %s", strerror(errno));
        if (tn__cc_now() >= deadline)
            return TN_ETIMEOUT;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
}

int tn__spawn(char *const argv[], double timeout, char *out, size_t cap, int *status)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return tn_set_error(TN_EIO, "%s: cannot make a pipe: %s", argv[0], strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_adddup2(&fa, p[1], 2);
    posix_spawnattr_init(&at);
    posix_spawnattr_setpgroup(&at, 0);
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    /* signals the caller may ignore go back to their default */
    static const int sigs[] = {SIGPIPE, SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        sigaddset(&dfl, sigs[i]);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &dfl);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    /* the C locale: plain quotes in the messages, whatever the user's */
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = malloc((n + 2) * sizeof *env);
    if (!env) {
        close(p[0]);
        close(p[1]);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&at);
        return tn_set_error(TN_ENOMEM, "out of memory");
    }
    size_t k = 0;
    env[k++] = "LC_ALL=C";
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "LC_ALL=", 7))
            env[k++] = environ[i];
    env[k] = NULL;
    pid_t pid;
    int err = posix_spawnp(&pid, argv[0], &fa, &at, argv, env);
    free(env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(p[1]);
    if (err) {
        close(p[0]);
        if (err == ENOENT || err == EACCES || err == ENOEXEC)
            return tn_set_error(TN_EIO, "%s: not found", argv[0]);
        return tn_set_error(TN_EIO, "%s: cannot run: %s", argv[0], strerror(err));
    }
    double deadline = tn__cc_now() + timeout;
    n = 0;
    bool open = true;
    while (open) {
        double left = deadline - tn__cc_now();
        if (left <= 0)
            break;
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        int r = poll(&pf, 1, left > 1e6 ? 1000000000 : (int)(left * 1000) + 1);
        if (r > 0)
            open = drain(p[0], out, cap, &n);
        else if (r < 0 && errno != EINTR)
            break;
    }
    close(p[0]);
    out[n] = '\0';
    int rc = reap(pid, open ? tn__cc_now() : deadline, status);
    if (rc == TN_ETIMEOUT) {
        kill(-pid, SIGKILL);
        while (waitpid(pid, status, 0) < 0 && errno == EINTR)
            ;
    }
    return rc;
}

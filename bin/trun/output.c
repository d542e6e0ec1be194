/* bin/trun/output.c: the workers' output: rank-prefixed console lines, the
 * per-rank logs, the last lines kept for the summary, and the summary. */
#include "trun.h"

static void remember(struct worker *w, const char *line, size_t n)
{
    if (w->ntail == TAIL_LINES) {
        free(w->tail[0]);
        memmove(w->tail, w->tail + 1, (TAIL_LINES - 1) * sizeof w->tail[0]);
        w->ntail--;
    }
    char *c = strndup(line, n > 400 ? 400 : n);
    if (c)
        w->tail[w->ntail++] = c;
}

int stdout_errno;

static void emit(struct worker *w, struct stream *s, const char *line, size_t n)
{
    if (s->console) {
        if (opt.no_prefix)
            fprintf(s->console, "%.*s\n", (int)n, line);
        else
            fprintf(s->console, "[%d]:%.*s\n", w->rank, (int)n, line);
        if (fflush(s->console) != 0 && s->console == stdout && !stdout_errno)
            stdout_errno = errno; /* the job goes on; main reports it */
    }
    if (s->log) {
        fwrite(line, 1, n, s->log);
        fputc('\n', s->log);
        fflush(s->log);
    }
    remember(w, line, n);
}

/* Reads what is there; returns false at EOF. */
bool pump(struct worker *w, struct stream *s)
{
    ssize_t r = read(s->fd, s->buf + s->len, sizeof s->buf - s->len);
    if (r < 0 && (errno == EINTR || errno == EAGAIN))
        return true;
    if (r <= 0) {
        if (s->len)
            emit(w, s, s->buf, s->len);
        s->len = 0;
        close(s->fd);
        s->fd = -1;
        return false;
    }
    s->len += (size_t)r;
    size_t start = 0;
    for (size_t i = 0; i < s->len; i++) {
        if (s->buf[i] == '\n') {
            emit(w, s, s->buf + start, i - start);
            start = i + 1;
        }
    }
    if (start == 0 && s->len == sizeof s->buf) { /* a line longer than the buffer */
        emit(w, s, s->buf, s->len);
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
    return true;
}


int mkdirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    return mkdir(path, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* torchrun's: a new folder DIR/ID_XXXXXXXX per run (mkdtemp), so that no
 * run overwrites the logs of the last; -1 (said why) when it cannot. */
int make_run_log_dir(void)
{
    static char dir[PATH_MAX];
    char base[PATH_MAX];
    snprintf(base, sizeof base, "%s", opt.log_dir);
    if (mkdirs(base) < 0) {
        fprintf(stderr, "trun: --log-dir %s: cannot create it: %s\n", opt.log_dir, strerror(errno));
        return -1;
    }
    if (snprintf(dir, sizeof dir, "%s/%s_XXXXXXXX", opt.log_dir, opt.run_id) >= (int)sizeof dir ||
        !mkdtemp(dir)) {
        fprintf(stderr, "trun: --log-dir %s: cannot create a folder in it: %s\n", opt.log_dir,
                strerror(errno));
        return -1;
    }
    opt.run_log_dir = dir;
    return 0;
}

static FILE *open_log(int attempt, int local_rank, const char *name)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    snprintf(dir, sizeof dir, "%s/attempt_%d/%d", opt.run_log_dir, attempt, local_rank);
    if (mkdirs(dir) < 0) {
        fprintf(stderr, "trun: cannot create %s: %s\n", dir, strerror(errno));
        return NULL;
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, "trun: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

void setup_stream(struct stream *s, int fd, int bit, FILE *console, int attempt,
                         int local_rank, const char *name)
{
    s->fd = fd;
    s->len = 0;
    bool to_log = opt.log_dir != NULL; /* files always; the console per -r/-t */
    s->log = to_log ? open_log(attempt, local_rank, name) : NULL;
    bool redirected = (opt.redirects & bit) && !(opt.tee & bit);
    s->console = redirected || !shown_on_console(local_rank) ? NULL : console;
}



/* attempt: the attempt's number in the logs' paths; restarts: those used */
void summary(int first, int attempt, int restarts)
{
    struct worker *w = &workers[first];
    char when[64];
    struct tm tm;
    localtime_r(&w->ended.tv_sec, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(stderr, "trun: %s failed (attempt %d of %d)\n", opt.argv[0], restarts + 1,
            opt.max_restarts + 1);
    fprintf(stderr, "Root Cause (first observed failure):\n");
    fprintf(stderr, "  time      : %s\n", when);
    fprintf(stderr, "  host      : %s\n", hostname);
    fprintf(stderr, "  rank      : %d (local_rank: %d)\n", w->rank, w->local_rank);
    fprintf(stderr, "  pid       : %d\n", (int)w->pid);
    if (WIFSIGNALED(w->status)) {
        int s = WTERMSIG(w->status);
        fprintf(stderr, "  exitcode  : -%d (%s%s)\n", s, signame(s),
                s == SIGKILL ? ": likely the OOM killer or an external kill" : "");
    } else {
        fprintf(stderr, "  exitcode  : %d\n", WEXITSTATUS(w->status));
    }
    if (opt.log_dir) {
        fprintf(stderr, "  logs      : %s/attempt_%d/%d/\n", opt.run_log_dir, attempt,
                w->local_rank);
        /* what PyTorch's @record wrote: {"message": {"message": ...,
         * "extraInfo": {"py_callstack": ...}}} */
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/attempt_%d/%d/error.json", opt.run_log_dir, attempt,
                 w->local_rank);
        json_t *j = json_load_file(path, 0, NULL);
        json_t *m = j ? json_object_get(json_object_get(j, "message"), "message") : NULL;
        if (json_is_string(m))
            fprintf(stderr, "  error     : %s\n", json_string_value(m));
        json_t *cs = j ? json_object_get(
                             json_object_get(json_object_get(j, "message"), "extraInfo"),
                             "py_callstack")
                       : NULL;
        if (json_is_string(cs))
            fprintf(stderr, "  traceback :\n%s\n", json_string_value(cs));
        json_decref(j);
    }
    if (w->ntail) {
        fprintf(stderr, "  last output lines:\n");
        for (int i = 0; i < w->ntail; i++)
            fprintf(stderr, "    %s\n", w->tail[i]);
    }
    int others = 0;
    for (int i = 0; i < opt.nproc; i++)
        if (i != first && failed(workers[i].status) &&
            !(WIFSIGNALED(workers[i].status) &&
              (WTERMSIG(workers[i].status) == SIGTERM || WTERMSIG(workers[i].status) == SIGKILL)))
            others++;
    if (others)
        fprintf(stderr, "  (%d other rank%s failed on their own)\n", others, others > 1 ? "s" : "");
}

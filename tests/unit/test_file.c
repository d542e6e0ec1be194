/*
 * tests/unit/test_file.c: lib/core/file.c, the output files every writer
 * and tool goes through: atomic replacement of regular files, symlinks
 * written through, direct writes elsewhere, modes, and the removal of the
 * temporaries a killed writer leaves.
 */
#include "tn_test.h"
#include "core/internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tn_file.XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static char *in_dir(const char *name)
{
    static char buf[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *slurp(const char *path)
{
    static char buf[256];
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* Entries of the test folder other than . and .. */
static int entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void new_file_gets_umask_mode(void **state)
{
    (void)state;
    mode_t old = umask(027);
    assert_int_equal(tn_write_file(in_dir("a"), "hello", 5, true), TN_OK);
    umask(old);
    struct stat st;
    assert_int_equal(stat(in_dir("a"), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0640);
    assert_string_equal(slurp(in_dir("a")), "hello");
    assert_int_equal(entries(), 1); /* no temporary left */
}

static void replaced_file_keeps_mode(void **state)
{
    (void)state;
    put(in_dir("b"), "old");
    chmod(in_dir("b"), 0604);
    assert_int_equal(tn_write_file(in_dir("b"), "new", 3, false), TN_OK);
    struct stat st;
    stat(in_dir("b"), &st);
    assert_int_equal(st.st_mode & 0777, 0604);
    assert_string_equal(slurp(in_dir("b")), "new");
}

static void symlink_is_written_through(void **state)
{
    (void)state;
    put(in_dir("target"), "old");
    assert_int_equal(symlink("target", in_dir("link")), 0);
    assert_int_equal(tn_write_file(in_dir("link"), "new", 3, true), TN_OK);
    struct stat st;
    assert_int_equal(lstat(in_dir("link"), &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_string_equal(slurp(in_dir("target")), "new");
    /* a dangling link gets its target created */
    assert_int_equal(symlink("later", in_dir("dangling")), 0);
    assert_int_equal(tn_write_file(in_dir("dangling"), "made", 4, true), TN_OK);
    assert_string_equal(slurp(in_dir("later")), "made");
    assert_int_equal(lstat(in_dir("dangling"), &st), 0);
    assert_true(S_ISLNK(st.st_mode));
}

static void abort_leaves_the_old_file(void **state)
{
    (void)state;
    put(in_dir("c"), "kept");
    struct tn_out *o = tn_out_open(in_dir("c"));
    assert_non_null(o);
    fputs("half", tn_out_file(o));
    tn_out_abort(o);
    assert_string_equal(slurp(in_dir("c")), "kept");
    assert_int_equal(entries(), 1);
}

static void folder_and_missing_folder_are_refused(void **state)
{
    (void)state;
    assert_null(tn_out_open(dir));
    assert_non_null(strstr(tn_last_error(), "Is a directory"));
    assert_null(tn_out_open(in_dir("no/such/file")));
    assert_non_null(strstr(tn_last_error(), "no/such/file"));
}

static void fifo_is_written_directly(void **state)
{
    (void)state;
    const char *fifo = in_dir("fifo");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    pid_t pid = fork();
    if (pid == 0) {
        struct tn_out *o = tn_out_open(fifo);
        if (!o)
            _exit(1);
        fputs("through the pipe", tn_out_file(o));
        _exit(tn_out_commit(o, true) == TN_OK ? 0 : 2);
    }
    char *got = slurp(fifo);
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_string_equal(got, "through the pipe");
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode)); /* not replaced by a regular file */
}

static void full_device_fails_on_commit(void **state)
{
    (void)state;
    if (access("/dev/full", W_OK) != 0)
        TN_TEST_SKIP("no writable /dev/full");
    struct tn_out *o = tn_out_open("/dev/full");
    assert_non_null(o);
    for (int i = 0; i < 10000; i++)
        fputs("0123456789", tn_out_file(o));
    assert_int_equal(tn_out_commit(o, false), TN_EIO);
    assert_non_null(strstr(tn_last_error(), "/dev/full"));
    struct stat st;
    assert_int_equal(stat("/dev/full", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
}

static void descriptor_name_writes_at_its_offset(void **state)
{
    (void)state;
    int fd = open(in_dir("log"), O_WRONLY | O_CREAT | O_APPEND, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "first ", 6), 6);
    char name[64];
    snprintf(name, sizeof name, "/dev/fd/%d", fd);
    assert_int_equal(tn_write_file(name, "second", 6, false), TN_OK);
    close(fd);
    assert_string_equal(slurp(in_dir("log")), "first second");
}

/* A temporary whose writer died (nobody holds its lock) and that is a few
 * seconds old goes with the next write; a live writer's stays. */
static void stale_temporaries_are_removed(void **state)
{
    (void)state;
    put(in_dir("d"), "x");
    put(in_dir(".d.tmp-AAAAAA"), "left by a kill");
    put(in_dir(".d.tmp-BBBBBB"), "a live writer");
    put(in_dir(".e.tmp-CCCCCC"), "another target's");
    struct timespec old[2] = {{.tv_sec = time(NULL) - 60}, {.tv_sec = time(NULL) - 60}};
    utimensat(AT_FDCWD, in_dir(".d.tmp-AAAAAA"), old, 0);
    utimensat(AT_FDCWD, in_dir(".d.tmp-BBBBBB"), old, 0);
    utimensat(AT_FDCWD, in_dir(".e.tmp-CCCCCC"), old, 0);
    int live = open(in_dir(".d.tmp-BBBBBB"), O_RDONLY);
    assert_int_equal(flock(live, LOCK_EX), 0);
    assert_int_equal(tn_out_clean(in_dir("d")), 1);
    assert_int_equal(access(in_dir(".d.tmp-AAAAAA"), F_OK), -1);
    assert_int_equal(access(in_dir(".d.tmp-BBBBBB"), F_OK), 0);
    assert_int_equal(access(in_dir(".e.tmp-CCCCCC"), F_OK), 0);
    close(live);
    /* the next write finds it too */
    assert_int_equal(tn_write_file(in_dir("d"), "y", 1, false), TN_OK);
    assert_int_equal(access(in_dir(".d.tmp-BBBBBB"), F_OK), -1);
}

/* A durable write (O_DIRECT where the file system takes it): odd-sized
 * pieces across the staging buffers' edges come out byte for byte, the
 * file cut to its real size, ftell right all along. */
static void direct_write_is_exact(void **state)
{
    (void)state;
    size_t n = ((size_t)17 << 20) + 12345;
    unsigned char *src = malloc(n);
    assert_non_null(src);
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 2654435761u >> 13);
    struct tn_out *o = tn_out_open(in_dir("big"));
    assert_non_null(o);
    int direct = tn__out_direct(o);
    FILE *f = tn_out_file(o);
    size_t at = 0, step = 1;
    while (at < n) {
        size_t k = step < n - at ? step : n - at;
        assert_int_equal(fwrite(src + at, 1, k, f), k);
        at += k;
        assert_int_equal(ftell(f), (long)at);
        step = step * 7 + 3; /* 1, 10, 73, ... up to MiBs */
        if (step > ((size_t)5 << 20))
            step = 4093;
    }
    assert_int_equal(tn_out_commit(o, true), TN_OK);
    struct stat st;
    assert_int_equal(stat(in_dir("big"), &st), 0);
    assert_int_equal((size_t)st.st_size, n);
    FILE *r = fopen(in_dir("big"), "rb");
    unsigned char *back = malloc(n);
    assert_int_equal(fread(back, 1, n, r), n);
    fclose(r);
    assert_memory_equal(back, src, n);
    assert_int_equal(entries(), 1);
    free(back);
    free(src);
    print_message("# direct I/O %s here\n", direct ? "taken" : "refused by the file system");
}

/* A writer killed by SIGTERM mid-write: with tn_out_remove_on_signals its
 * temporary goes and it still dies of the signal; without, the temporary
 * stays (for the next write or tckpt verify). */
static void signal_removes_temporaries(void **state)
{
    (void)state;
    for (int handled = 1; handled >= 0; handled--) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            if (handled)
                tn_out_remove_on_signals();
            struct tn_out *o = tn_out_open(in_dir("sig"));
            struct tn_out *o2 = tn_out_open(in_dir("sig2"));
            if (!o || !o2)
                _exit(3);
            fputs("half a checkpoint", tn_out_file(o));
            fflush(tn_out_file(o));
            (void)!write(p[1], "k", 1);
            for (;;)
                pause();
        }
        char c;
        close(p[1]);
        assert_int_equal(read(p[0], &c, 1), 1);
        close(p[0]);
        assert_int_equal(entries(), 2);
        kill(pid, SIGTERM);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), SIGTERM);
        assert_int_equal(entries(), handled ? 0 : 2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(new_file_gets_umask_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(replaced_file_keeps_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(symlink_is_written_through, setup, teardown),
        cmocka_unit_test_setup_teardown(abort_leaves_the_old_file, setup, teardown),
        cmocka_unit_test_setup_teardown(folder_and_missing_folder_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(fifo_is_written_directly, setup, teardown),
        cmocka_unit_test_setup_teardown(full_device_fails_on_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(descriptor_name_writes_at_its_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(stale_temporaries_are_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(direct_write_is_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(signal_removes_temporaries, setup, teardown),
    };
    return TN_RUN_TESTS(tests);
}

/*
 * test_store_torch: the TCPStore wire protocol against real PyTorch: a
 * PyTorch 2.x client and Debian's 1.13 client (the 1.x numbering) against
 * our server, and our client against PyTorch 2.x's servers (libuv and the
 * classic one). Each case skips when its PyTorch is not installed. Every
 * Python process runs under timeout(1) and is waited for: 600 s, as
 * importing torch takes minutes on a loaded machine (the 120 s limit around
 * it made the test flaky); the scripts give their own work 120 s with
 * alarm() once torch is imported.
 */
#include "tn_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SCRIPTS TN_SRCDIR "/tests/fixtures/dist/"

/* Starts argv with stdout on a pipe; returns the pid. */
static pid_t spawn(char *const argv[], FILE **out)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    *out = fdopen(p[0], "r");
    return pid;
}

static int finish(pid_t pid, FILE *out)
{
    char line[512];
    while (fgets(line, sizeof line, out))
        print_message("python: %s", line);
    fclose(out);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The Python of PyTorch 2.x, or NULL. */
static const char *torch2(void)
{
    static char path[1024];
    FILE *f = popen(TN_SRCDIR "/tests/torch2-python", "r");
    if (!f)
        return NULL;
    bool ok = fgets(path, sizeof path, f) != NULL;
    if (pclose(f) != 0 || !ok)
        return NULL;
    path[strcspn(path, "\n")] = 0;
    return path;
}

static bool have_torch1(void)
{
    return system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
}

static void client_against_us(const char *python, const char *want)
{
    unsetenv("TN_STORE_TOKEN");
    struct tn_store_server_opts o = {.host = "127.0.0.1", .listen_fd = -1};
    struct tn_store_server *srv = tn_store_server_start(&o);
    assert_non_null(srv);
    struct tn_store *s = tn_store_tcp_connect("127.0.0.1", tn_store_server_port(srv), 5000);
    assert_non_null(s);
    assert_int_equal(tn_store_set(s, "from_c", "hello", 5), 0);
    char port[16];
    snprintf(port, sizeof port, "%d", tn_store_server_port(srv));
    char *argv[] = {"timeout", "600", (char *)python, SCRIPTS "store_client.py", port, NULL};
    FILE *out;
    pid_t pid = spawn(argv, &out);
    assert_int_equal(finish(pid, out), 0);
    void *v;
    size_t n;
    assert_int_equal(tn_store_get(s, "from_py", &v, &n), 0);
    assert_string_equal(v, want);
    free(v);
    tn_store_release(s);
    tn_store_server_stop(srv);
}

static void test_torch2_client(void **state)
{
    (void)state;
    const char *py = torch2();
    if (!py)
        TN_TEST_SKIP("PyTorch 2.x is not installed (./bootstrap.sh --with-torch2)");
    client_against_us(py, "torch 2");
}

static void test_torch1_client(void **state)
{
    (void)state;
    if (!have_torch1())
        TN_TEST_SKIP("Debian's PyTorch 1.13 is not installed");
    client_against_us("/usr/bin/python3", "torch 1");
}

static void expect_bytes(void *v, size_t n, const char *want)
{
    assert_int_equal(n, strlen(want));
    assert_memory_equal(v, want, n);
    free(v);
}

static void us_against_server(const char *kind)
{
    const char *py = torch2();
    if (!py)
        TN_TEST_SKIP("PyTorch 2.x is not installed (./bootstrap.sh --with-torch2)");
    unsetenv("TN_STORE_TOKEN");
    char *argv[] = {"timeout", "600", (char *)py, SCRIPTS "store_server.py", (char *)kind, NULL};
    FILE *out;
    pid_t pid = spawn(argv, &out);
    char line[64] = "";
    if (!fgets(line, sizeof line, out)) {
        finish(pid, out);
        fail_msg("the PyTorch server printed no port");
    }
    int port = atoi(line);
    struct tn_store *s = tn_store_tcp_connect("127.0.0.1", port, 20000);
    if (!s) {
        kill(pid, SIGTERM);
        finish(pid, out);
        fail_msg("%s", tn_last_error());
    }
    tn_store_set_timeout(s, 10000);
    void *v, *w;
    size_t n;
    int64_t i;
    assert_int_equal(tn_store_get(s, "from_py", &v, &n), 0);
    expect_bytes(v, n, "py-value");
    assert_int_equal(tn_store_add(s, "cnt", 4, &i), 0);
    assert_int_equal(i, 4);
    assert_int_equal(tn_store_add(s, "cnt", 3, &i), 0);
    assert_int_equal(i, 7);
    assert_int_equal(tn_store_compare_set(s, "cs", "x", 1, "y", 1, &v, &n), 0);
    expect_bytes(v, n, "x");
    assert_int_equal(tn_store_compare_set(s, "cs", "", 0, "y", 1, &v, &n), 0);
    expect_bytes(v, n, "y");
    const char *keys[2] = {"cs", "absent"};
    assert_int_equal(tn_store_check(s, keys, 1), 1);
    assert_int_equal(tn_store_check(s, keys, 2), 0);
    assert_int_equal(tn_store_wait(s, keys, 2, 100), TN_ETIMEOUT);
    assert_non_null(strstr(tn_last_error(), "/absent"));
    /* the connection survived the cancelled wait */
    assert_int_equal(tn_store_get(s, "cs", &v, &n), 0);
    expect_bytes(v, n, "y");
    assert_int_equal(tn_store_delete(s, "cs"), 1);
    assert_int_equal(tn_store_delete(s, "cs"), 0);
    assert_int_equal(tn_store_append(s, "ap", "ab", 2), 0);
    assert_int_equal(tn_store_append(s, "ap", "cd", 2), 0);
    assert_int_equal(tn_store_get(s, "ap", &v, &n), 0);
    expect_bytes(v, n, "abcd");
    const char *mk[2] = {"m1", "m2"};
    const void *mv[2] = {"x", "yy"};
    size_t ml[2] = {1, 2};
    assert_int_equal(tn_store_multi_set(s, mk, 2, mv, ml), 0);
    void *got[2];
    size_t gl[2];
    assert_int_equal(tn_store_multi_get(s, mk, 2, got, gl), 0);
    expect_bytes(got[0], gl[0], "x");
    expect_bytes(got[1], gl[1], "yy");
    if (strcmp(kind, "libuv") == 0) { /* queues are the libuv server's */
        assert_int_equal(tn_store_queue_push(s, "q", "one", 3), 0);
        assert_int_equal(tn_store_queue_push(s, "q", "two", 3), 0);
        assert_int_equal(tn_store_queue_len(s, "q", &i), 0);
        assert_int_equal(i, 2);
        assert_int_equal(tn_store_queue_pop(s, "q", true, &w, &n), 0);
        expect_bytes(w, n, "one");
        assert_int_equal(tn_store_queue_pop(s, "q", false, &w, &n), 0);
        expect_bytes(w, n, "two");
        assert_int_equal(tn_store_queue_pop(s, "q", false, &w, &n), TN_EINDEX);
    }
    assert_int_equal(tn_store_num_keys(s, &i), 0);
    assert_true(i >= 5);
    assert_int_equal(tn_store_set(s, "from_c", "hello", 5), 0);
    assert_int_equal(tn_store_set(s, "done", "", 0), 0);
    tn_store_release(s);
    assert_int_equal(finish(pid, out), 0);
}

static void test_us_against_libuv(void **state)
{
    (void)state;
    us_against_server("libuv");
}

static void test_us_against_classic(void **state)
{
    (void)state;
    us_against_server("classic");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_torch2_client),
        cmocka_unit_test(test_torch1_client),
        cmocka_unit_test(test_us_against_libuv),
        cmocka_unit_test(test_us_against_classic),
    };
    return TN_RUN_TESTS(tests);
}

/*
 * tests/unit/test_compile_cc.c: lib/compile's SHA-256 (FIPS 180-4's
 * vectors and sha256sum), compiling and loading C through the system
 * compiler (tn__cc_load), and the on-disk cache: hits without the
 * compiler, entries that are not whole or not ours rebuilt, cache folders
 * refused, compiler errors, timeouts, two processes on one key, export,
 * listing and clearing.
 */
#include "tn_test.h"

#include "compile/internal.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];   /* the test's folder */
static char cache[96]; /* the cache folder, dir/cache (made by the first load) */
static char calls[96]; /* the log of the counting compiler, dir/calls */
static char countcc[96];

static void put(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tn_cc.XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(cache, sizeof cache, "%s/cache", dir);
    snprintf(calls, sizeof calls, "%s/calls", dir);
    snprintf(countcc, sizeof countcc, "%s/countcc", dir);
    /* cc, with a line in dir/calls per run */
    char script[512];
    snprintf(script, sizeof script, "#!/bin/sh\necho \"$@\" >>'%s'\nexec cc \"$@\"\n", calls);
    put(countcc, script, 0755);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s'; rm -rf '%s'", dir, dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int lines(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0, c;
    while (f && (c = fgetc(f)) != EOF)
        n += c == '\n';
    if (f)
        fclose(f);
    return n;
}

/* Loads "int NAME(void) { return VALUE; }" and checks that it returns it. */
static void *load_fn(const char *name, int value, const char *cc, struct tn__cc_info *info)
{
    char src[160];
    snprintf(src, sizeof src, "int %s(void) { return %d; }\n", name, value);
    struct tn_compile_options o = {.cc = cc, .cache_dir = cache};
    void *h = tn__cc_load(src, strlen(src), &o, info);
    if (!h)
        print_message("# %s\n", tn_last_error());
    assert_non_null(h);
    int (*fn)(void) = (int (*)(void))dlsym(h, name);
    assert_non_null(fn);
    assert_int_equal(fn(), value);
    return h;
}

static bool entry_ok(const struct tn__cc_info *info)
{
    char sub[4096], why[80];
    struct stat st;
    snprintf(sub, sizeof sub, "%s/%.2s", cache, info->key);
    bool ok = tn__cache_entry_ok(sub, info->key, why, sizeof why, &st);
    if (!ok)
        print_message("# entry: %s\n", why);
    return ok;
}

/* ----------------------------------------------------------- SHA-256 */

static void sha256_vectors(void **state)
{
    (void)state;
    static const struct {
        const char *in, *hex;
    } v[] = {
        {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
        {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
         "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
        {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
         "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    };
    char hex[65];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        tn__sha256_hex(v[i].in, strlen(v[i].in), hex);
        assert_string_equal(hex, v[i].hex);
    }
    /* a million 'a', fed in uneven pieces */
    struct tn__sha256 s;
    unsigned char d[32];
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    tn__sha256_init(&s);
    for (size_t off = 0, step = 1; off < 1000000; off += step, step = step * 7 % 1000 + 1)
        tn__sha256_update(&s, a + off, off + step > 1000000 ? 1000000 - off : step);
    tn__sha256_final(&s, d);
    tn__sha256_tohex(d, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(a);
}

/* Every length from 0 to 200 (each padding case) against sha256sum. */
static void sha256_against_sha256sum(void **state)
{
    (void)state;
    if (system("command -v sha256sum >/dev/null 2>&1") != 0)
        TN_TEST_SKIP("sha256sum is not installed");
    unsigned char buf[200];
    for (int i = 0; i < 200; i++)
        buf[i] = (unsigned char)(i * 131 + 7);
    char path[128], cmd[256], theirs[80], ours[65];
    snprintf(path, sizeof path, "%s/data", dir);
    for (size_t n = 0; n <= sizeof buf; n++) {
        FILE *f = fopen(path, "wb");
        fwrite(buf, 1, n, f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "sha256sum '%s'", path);
        FILE *p = popen(cmd, "r");
        assert_non_null(fgets(theirs, sizeof theirs, p));
        pclose(p);
        theirs[64] = '\0';
        tn__sha256_hex(buf, n, ours);
        assert_string_equal(ours, theirs);
    }
}

/* ---------------------------------------------------- compile and load */

static void compiles_then_hits_without_the_compiler(void **state)
{
    (void)state;
    struct tn__cc_info info;
    void *h = load_fn("answer", 42, countcc, &info);
    assert_false(info.hit);
    int ran = lines(calls); /* --version, then the compile */
    assert_int_equal(ran, 2);
    struct stat st;
    assert_int_equal(stat(cache, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    assert_true(entry_ok(&info));
    assert_non_null(strstr(info.so_path, info.key));
    assert_int_equal(access(info.c_path, R_OK), 0);
    /* the same source again: found, nothing run */
    struct tn__cc_info again;
    void *h2 = load_fn("answer", 42, countcc, &again);
    assert_true(again.hit);
    assert_true(again.cc_s == 0);
    assert_string_equal(again.key, info.key);
    assert_int_equal(lines(calls), ran);
    /* another source is another key */
    struct tn__cc_info other;
    void *h3 = load_fn("answer", 43, countcc, &other);
    assert_false(other.hit);
    assert_string_not_equal(other.key, info.key);
    dlclose(h);
    dlclose(h2);
    dlclose(h3);
}

/* Code as the code generator writes it: the C headers it may include,
 * libm, restrict pointers and simd loops; the library needs libm itself. */
static void generated_style_code_loads(void **state)
{
    (void)state;
    const char *src = "#include <math.h>\n#include <stdbool.h>\n#include <stdint.h>\n#include <string.h>\n"
                      "void k(const float *restrict a, float *restrict out, int64_t n) {\n"
                      "#pragma omp simd\n"
                      "    for (int64_t i = 0; i < n; i++) out[i] = expf(a[i]) + tanhf(a[i]);\n}\n";
    struct tn__cc_info info;
    struct tn_compile_options o = {.cache_dir = cache};
    void *h = tn__cc_load(src, strlen(src), &o, &info);
    if (!h)
        print_message("# %s\n", tn_last_error());
    assert_non_null(h);
    void (*k)(const float *, float *, int64_t) = (void (*)(const float *, float *, int64_t))dlsym(h, "k");
    assert_non_null(k);
    float a[19], out[19];
    for (int i = 0; i < 19; i++)
        a[i] = (float)i / 7.0f - 1.0f;
    k(a, out, 19);
    for (int i = 0; i < 19; i++)
        assert_true(fabsf(out[i] - (expf(a[i]) + tanhf(a[i]))) <= 1e-5f * fabsf(out[i]) + 1e-6f);
    dlclose(h);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "readelf -d '%s' | grep -q 'NEEDED.*libm'", info.so_path);
    if (system("command -v readelf >/dev/null 2>&1") == 0)
        assert_int_equal(system(cmd), 0);
}

/* A file of the entry spoilt by spoil(path) is rebuilt on the next load. */
static void expect_rebuilt(const char *name, int value, const char *ext, void (*spoil)(const char *))
{
    struct tn__cc_info info;
    dlclose(load_fn(name, value, "cc", &info));
    char path[4200];
    snprintf(path, sizeof path, "%.*s.%s", (int)(strlen(info.so_path) - 3), info.so_path, ext);
    spoil(path);
    assert_false(entry_ok(&info));
    struct tn__cc_info again;
    dlclose(load_fn(name, value, "cc", &again));
    assert_false(again.hit);
    assert_true(entry_ok(&again));
    struct stat st;
    assert_int_equal(stat(again.so_path, &st), 0);
    assert_int_equal(st.st_mode & 022, 0);
}

static void truncate_half(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
}

static void other_key(const char *path)
{
    char text[4096];
    FILE *f = fopen(path, "r");
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *k = strstr(text, "\"key\": \"");
    assert_non_null(k);
    k[8] = k[8] == '0' ? '1' : '0';
    f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static void group_writable(const char *path) { assert_int_equal(chmod(path, 0775), 0); }
/* someone else's file (as root; otherwise one anyone can write) */
static void foreign(const char *path)
{
    if (geteuid() == 0)
        assert_int_equal(chown(path, 65534, 65534), 0);
    else
        assert_int_equal(chmod(path, 0666), 0);
}

static void removed(const char *path) { assert_int_equal(unlink(path), 0); }

static void flipped_byte(const char *path)
{
    FILE *f = fopen(path, "r+b");
    fseek(f, 100, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 100, SEEK_SET);
    fputc(c ^ 1, f);
    fclose(f);
}

static void broken_entries_are_rebuilt(void **state)
{
    (void)state;
    expect_rebuilt("t1", 1, "so", truncate_half);
    expect_rebuilt("t2", 2, "json", other_key);
    expect_rebuilt("t3", 3, "so", group_writable);
    expect_rebuilt("t4", 4, "json", removed);
    expect_rebuilt("t5", 5, "so", flipped_byte);
    expect_rebuilt("t6", 6, "json", truncate_half);
    expect_rebuilt("t7", 7, "c", removed);
    expect_rebuilt("t8", 8, "so", foreign);
    expect_rebuilt("t9", 9, "json", foreign);
}

/* An entry rebuilt while this process still holds the old library open
 * is loaded as the new file, not handed back as the old object. */
static void rebuilt_while_loaded_is_loaded_anew(void **state)
{
    (void)state;
    struct tn__cc_info info, again;
    void *h = load_fn("held", 7, "cc", &info);
    char moved[4200];
    snprintf(moved, sizeof moved, "%s.old", info.so_path);
    assert_int_equal(rename(info.so_path, moved), 0); /* the loaded file stays whole */
    put(info.so_path, "not a library", 0600);
    void *h2 = load_fn("held", 7, "cc", &again);
    assert_false(again.hit);
    assert_ptr_not_equal(h, h2);
    assert_true(entry_ok(&again));
    /* and a hit now gives the new object too */
    struct tn__cc_info third;
    void *h3 = load_fn("held", 7, "cc", &third);
    assert_true(third.hit);
    assert_ptr_equal(h3, h2);
    dlclose(h3);
    dlclose(h2);
    dlclose(h);
}

/* ------------------------------------------------------------ refusals */

static void expect_refused(const char *why)
{
    struct tn__cc_info info;
    const char *src = "int r(void) { return 1; }";
    struct tn_compile_options o = {.cc = "cc", .cache_dir = cache};
    assert_null(tn__cc_load(src, strlen(src), &o, &info));
    const char *msg = tn_last_error();
    print_message("# %s\n", msg);
    assert_non_null(strstr(msg, cache));
    assert_non_null(strstr(msg, "cache folder refused"));
    assert_non_null(strstr(msg, why));
    assert_null(strchr(msg, '\n'));
}

static void foreign_folders_are_refused(void **state)
{
    (void)state;
    assert_int_equal(mkdir(cache, 0700), 0);
    assert_int_equal(chmod(cache, 0777), 0);
    expect_refused("writable by others (mode 0777)");
    assert_int_equal(chmod(cache, 0770), 0);
    expect_refused("writable by others (mode 0770)");
    assert_int_equal(chmod(cache, 0500), 0);
    expect_refused("not writable by us (mode 0500)");
    assert_int_equal(tn_compile_cache_list(cache, NULL, NULL), 0); /* listing only reads */
    assert_true(tn_compile_cache_clear(cache) < 0);
    assert_int_equal(chmod(cache, 0700), 0);
    if (geteuid() == 0) {
        assert_int_equal(chown(cache, 65534, 65534), 0);
        expect_refused("owned by uid 65534, not by us (uid 0)");
        assert_true(tn_compile_cache_list(cache, NULL, NULL) < 0);
    }
    /* a subfolder of an entry that others can write */
    assert_int_equal(rmdir(cache), 0);
    struct tn__cc_info info;
    dlclose(load_fn("sub", 1, "cc", &info));
    char sub[200];
    snprintf(sub, sizeof sub, "%s/%.2s", cache, info.key);
    assert_int_equal(chmod(sub, 0777), 0);
    const char *src = "int sub(void) { return 1; }\n";
    struct tn_compile_options o = {.cc = "cc", .cache_dir = cache};
    assert_null(tn__cc_load(src, strlen(src), &o, &info));
    assert_non_null(strstr(tn_last_error(), "writable by others"));
}

/* --------------------------------------------------- compiler failures */

static void expect_error(const char *cc, double timeout, const char *src, const char *want1, const char *want2)
{
    struct tn__cc_info info;
    struct tn_compile_options o = {.cc = cc, .cache_dir = cache, .cc_timeout = timeout};
    assert_null(tn__cc_load(src, strlen(src), &o, &info));
    const char *msg = tn_last_error();
    print_message("# %s\n", msg);
    assert_non_null(strstr(msg, want1));
    assert_non_null(strstr(msg, want2));
    assert_null(strchr(msg, '\n'));
}

static void compiler_errors_are_reported(void **state)
{
    (void)state;
    expect_error("cc", 0, "int f(void) { return undeclared_x; }\n", "cc failed: ", "'undeclared_x' undeclared");
    expect_error("no-such-compiler-tn", 0, "int f(void) { return 1; }\n", "no-such-compiler-tn: not found", "");
    /* CC with arguments, split on spaces; a bad one is the compiler's error */
    struct tn__cc_info info;
    struct tn_compile_options o = {.cc = "cc -DVALUE=5", .cache_dir = cache};
    const char *src = "int v(void) { return VALUE; }\n";
    void *h = tn__cc_load(src, strlen(src), &o, &info);
    assert_non_null(h);
    assert_int_equal(((int (*)(void))dlsym(h, "v"))(), 5);
    dlclose(h);
    expect_error("cc --no-such-flag-tn", 0, src, "cc failed: ", "no-such-flag-tn");
    /* nothing half-made is left: one library (v's), no temporary */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test \"$(find '%s' -name '*.so' -o -name '.*tmp*' | wc -l)\" = 1", cache);
    assert_int_equal(system(cmd), 0);
}

static void slow_compiler_times_out(void **state)
{
    (void)state;
    char slow[128];
    snprintf(slow, sizeof slow, "%s/slowcc", dir);
    char script[512], pidfile[128];
    snprintf(pidfile, sizeof pidfile, "%s/sleep.pid", dir);
    snprintf(script, sizeof script,
             "#!/bin/sh\nif [ \"$1\" = --version ]; then echo slowcc 1.0; exit 0; fi\n"
             "sleep 60 & echo $! >'%s'; wait\n", pidfile);
    put(slow, script, 0755);
    char want[160];
    snprintf(want, sizeof want, "%s: timed out after 1 s", slow);
    expect_error(slow, 1, "int f(void) { return 1; }\n", want, "");
    /* its child (the sleep) was killed with it: gone, or a zombie until
     * init reaps it */
    FILE *f = fopen(pidfile, "r");
    assert_non_null(f);
    int sleeper = 0;
    assert_int_equal(fscanf(f, "%d", &sleeper), 1);
    fclose(f);
    char stat_path[64], line[256];
    snprintf(stat_path, sizeof stat_path, "/proc/%d/stat", sleeper);
    bool alive = false;
    for (int i = 0; i < 200; i++) {
        FILE *s = fopen(stat_path, "r");
        alive = s && fgets(line, sizeof line, s) && !strstr(line, ") Z ");
        if (s)
            fclose(s);
        if (!alive)
            break;
        usleep(10000);
    }
    assert_false(alive);
}

/* ------------------------------------------------ two processes, one key */

static void two_processes_compile_one_key(void **state)
{
    (void)state;
    /* a compiler that waits (up to 10 s) until both compiles have begun,
     * so that neither can find the other's entry */
    char barrier[128], script[512];
    snprintf(barrier, sizeof barrier, "%s/barriercc", dir);
    snprintf(script, sizeof script,
             "#!/bin/sh\n[ \"$1\" = --version ] && exec cc \"$@\"\ntouch '%s/started.'$$\nn=0\n"
             "while [ $(ls '%s' | grep -c '^started') -lt 2 ] && [ $n -lt 500 ]; do sleep 0.02; n=$((n+1)); done\n"
             "exec cc \"$@\"\n", dir, dir);
    put(barrier, script, 0755);
    int go[2];
    assert_int_equal(pipe(go), 0);
    char src[128];
    snprintf(src, sizeof src, "int both(void) { return %d; }\n", (int)getpid());
    pid_t pid[2];
    for (int i = 0; i < 2; i++) {
        if ((pid[i] = fork()) == 0) {
            close(go[1]);
            char c;
            (void)!read(go[0], &c, 1); /* both start when the pipe closes */
            struct tn__cc_info info;
            struct tn_compile_options o = {.cc = barrier, .cache_dir = cache};
            void *h = tn__cc_load(src, strlen(src), &o, &info);
            if (!h)
                fprintf(stderr, "# child: %s\n", tn_last_error());
            int (*fn)(void) = h ? (int (*)(void))dlsym(h, "both") : NULL;
            _exit(fn && fn() == (int)getppid() && !info.hit ? 0 : 1);
        }
    }
    close(go[0]);
    close(go[1]);
    for (int i = 0; i < 2; i++) {
        int st;
        assert_int_equal(waitpid(pid[i], &st, 0), pid[i]);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    char cmd[200];
    snprintf(cmd, sizeof cmd, "test $(ls '%s' | grep -c '^started') = 2", dir);
    assert_int_equal(system(cmd), 0);
    struct tn__cc_info info;
    struct tn_compile_options o = {.cc = barrier, .cache_dir = cache};
    void *h = tn__cc_load(src, strlen(src), &o, &info);
    assert_non_null(h);
    assert_true(info.hit);
    assert_true(entry_ok(&info));
    dlclose(h);
}

/* Threads of one process: two sources, each loaded by two threads at once. */
struct job {
    int value;
    bool ok;
};

static void *thread_load(void *arg)
{
    struct job *j = arg;
    char src[96];
    snprintf(src, sizeof src, "int th(void) { return %d; }\n", j->value);
    struct tn__cc_info info;
    struct tn_compile_options o = {.cc = "cc", .cache_dir = cache};
    void *h = tn__cc_load(src, strlen(src), &o, &info);
    int (*fn)(void) = h ? (int (*)(void))dlsym(h, "th") : NULL;
    j->ok = fn && fn() == j->value;
    if (h)
        dlclose(h);
    return NULL;
}

static void threads_compile_side_by_side(void **state)
{
    (void)state;
    pthread_t t[4];
    struct job jobs[4] = {{11, false}, {11, false}, {12, false}, {12, false}};
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, thread_load, &jobs[i]), 0);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_true(jobs[i].ok);
    }
    assert_int_equal(tn_compile_cache_list(cache, NULL, NULL), 2);
}

/* ------------------------------------------------- export, list, clear */

static void export_copies_the_entry(void **state)
{
    (void)state;
    struct tn__cc_info info;
    dlclose(load_fn("exported", 9, "cc", &info));
    char out[128], path[200];
    snprintf(out, sizeof out, "%s/out/deeper", dir);
    assert_int_equal(tn__cc_export(&info, out), 0);
    snprintf(path, sizeof path, "%s/kernel.so", out);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    assert_int_equal(((int (*)(void))dlsym(h, "exported"))(), 9);
    dlclose(h);
    snprintf(path, sizeof path, "%s/manifest.json", out);
    json_t *m = json_load_file(path, 0, NULL);
    assert_non_null(m);
    assert_string_equal(json_string_value(json_object_get(m, "key")), info.key);
    json_decref(m);
    snprintf(path, sizeof path, "%s/kernel.c", out);
    assert_int_equal(access(path, R_OK), 0);
}

struct seen {
    int n, valid;
    char why[80];
    char last[65];
};

static int count_entry(const struct tn_compile_cache_entry *e, void *ctx)
{
    struct seen *s = ctx;
    assert_true(strcmp(s->last, e->key) < 0); /* key order */
    memcpy(s->last, e->key, 65);
    s->n++;
    s->valid += e->valid;
    if (!e->valid)
        memcpy(s->why, e->why, sizeof s->why);
    assert_true(e->bytes > 0);
    assert_true(e->mtime > 0 || !e->valid);
    return 0;
}

static void list_and_clear(void **state)
{
    (void)state;
    struct seen s = {0};
    assert_int_equal(tn_compile_cache_list(cache, count_entry, &s), 0); /* no folder yet */
    struct tn__cc_info a, b, c;
    dlclose(load_fn("la", 1, "cc", &a));
    dlclose(load_fn("lb", 2, "cc", &b));
    dlclose(load_fn("lc", 3, "cc", &c));
    truncate_half(b.so_path);
    assert_int_equal(tn_compile_cache_list(cache, count_entry, &s), 3);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.valid, 2);
    assert_string_equal(s.why, "library's size differs from the manifest's");
    char stray[200];
    snprintf(stray, sizeof stray, "%s/%.2s/.%s.so.tmp-ABCDEF", cache, a.key, a.key);
    put(stray, "", 0600);
    assert_int_equal(tn_compile_cache_clear(cache), 3);
    assert_int_equal(access(stray, F_OK), -1);
    assert_int_equal(access(a.so_path, F_OK), -1);
    memset(&s, 0, sizeof s);
    assert_int_equal(tn_compile_cache_list(cache, count_entry, &s), 0);
}

static void cache_dir_resolution(void **state)
{
    (void)state;
    char buf[4096];
    setenv("TN_COMPILE_CACHE", "/x/tn", 1);
    setenv("XDG_CACHE_HOME", "/x/xdg", 1);
    setenv("HOME", "/x/home", 1);
    assert_int_equal(tn_compile_cache_dir("/over", buf, sizeof buf), 0);
    assert_string_equal(buf, "/over");
    assert_int_equal(tn_compile_cache_dir(NULL, buf, sizeof buf), 0);
    assert_string_equal(buf, "/x/tn");
    unsetenv("TN_COMPILE_CACHE");
    assert_int_equal(tn_compile_cache_dir(NULL, buf, sizeof buf), 0);
    assert_string_equal(buf, "/x/xdg/tensorkit");
    setenv("XDG_CACHE_HOME", "relative", 1); /* ignored, as the XDG spec says */
    assert_int_equal(tn_compile_cache_dir(NULL, buf, sizeof buf), 0);
    assert_string_equal(buf, "/x/home/.cache/tensorkit");
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    assert_true(tn_compile_cache_dir(NULL, buf, sizeof buf) < 0);
    assert_true(tn_compile_cache_dir("/over", buf, 3) < 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sha256_vectors),
        cmocka_unit_test_setup_teardown(sha256_against_sha256sum, setup, teardown),
        cmocka_unit_test_setup_teardown(compiles_then_hits_without_the_compiler, setup, teardown),
        cmocka_unit_test_setup_teardown(generated_style_code_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(broken_entries_are_rebuilt, setup, teardown),
        cmocka_unit_test_setup_teardown(rebuilt_while_loaded_is_loaded_anew, setup, teardown),
        cmocka_unit_test_setup_teardown(foreign_folders_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(compiler_errors_are_reported, setup, teardown),
        cmocka_unit_test_setup_teardown(slow_compiler_times_out, setup, teardown),
        cmocka_unit_test_setup_teardown(two_processes_compile_one_key, setup, teardown),
        cmocka_unit_test_setup_teardown(threads_compile_side_by_side, setup, teardown),
        cmocka_unit_test_setup_teardown(export_copies_the_entry, setup, teardown),
        cmocka_unit_test_setup_teardown(list_and_clear, setup, teardown),
        cmocka_unit_test(cache_dir_resolution),
    };
    return TN_RUN_TESTS(tests);
}

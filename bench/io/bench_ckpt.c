/*
 * bench_ckpt: checkpoint save, load and listing against PyTorch in the same
 * run, as issue 6 states the figures.
 *
 * A state_dict of 200 float32 tensors (TN_BENCH_CKPT_MIB MiB in all,
 * default 1024) is saved with tn_save and loaded mapped (every page
 * touched) and copied.  Baselines timed in the same run: torch.load and
 * torch.save in PyTorch 2.x (python3) and 1.13 (/usr/bin/python3) where
 * importable, and the disk-cache bandwidth: read() of the same file into a
 * buffer, and memcpy.  Every save, ours and torch's, writes a new file (the
 * old one is removed untimed first), best of 3.  Then `tckpt ls` of a
 * 20,000-tensor checkpoint (the real binary, a process per run) against a
 * Python script listing it through torch.load.
 *
 * Disk: at most the checkpoint and one saved copy (~2 GiB at the default),
 * all under one temporary folder removed at the end.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tensor/tensor.h>

#include "../bench.h"

/* Runs a Python script (argv[1] = arg) under `python`, which prints one
 * time in seconds; -1 when it fails (no such Python, no torch). */
static double python_time(const char *python, const char *script, const char *arg)
{
    if (tn_bench_quick())
        return -1; /* no baseline in the quick mode */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s -c '%s' '%s' 2>/dev/null", python, script, arg);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    double t = -1;
    if (fscanf(p, "%lf", &t) != 1)
        t = -1;
    if (pclose(p) != 0)
        return -1;
    return t;
}

static const char py_load[] =
    "import sys,time,torch\n"
    "b=9e9\n"
    "for r in range(3):\n"
    " t=time.perf_counter();d=torch.load(sys.argv[1]);b=min(b,time.perf_counter()-t);del d\n"
    "print(b)";

static const char py_save[] =
    "import sys,os,time,torch\n"
    "d=torch.load(sys.argv[1]);o=sys.argv[1]+\".torch\";b=9e9\n"
    "for r in range(3):\n"
    " os.path.exists(o) and os.unlink(o)\n"
    " t=time.perf_counter();torch.save(d,o);b=min(b,time.perf_counter()-t)\n"
    "os.unlink(o);print(b)";

static const char py_ls[] =
    "import sys,time\n"
    "t=time.perf_counter();import torch\n"
    "d=torch.load(sys.argv[1])\n"
    "for k,v in d.items(): print(k,v.dtype,tuple(v.shape),v.numel()*v.element_size(),file=sys.stderr)\n"
    "print(time.perf_counter()-t)";

static double touch_sum;
static int touch(const char *path, struct tn_tensor *t, void *ctx)
{
    (void)path, (void)ctx;
    const float *f = tn_data(t);
    int64_t n = tn_numel(t);
    for (int64_t i = 0; i < n; i += 1024) /* one read per page */
        touch_sum += f[i];
    return 0;
}

/* read() of the whole file into buf: what "disk-cache bandwidth" means. */
static int read_all(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    size_t got = 0;
    ssize_t n;
    while (got < cap && (n = read(fd, buf + got, cap - got)) > 0)
        got += (size_t)n;
    close(fd);
    return 0;
}

static void ratio_line(const char *what, double theirs, double ours, const char *unit)
{
    if (theirs > 0)
        printf("  %-34s %.3f s: tensorkit %.2fx %s\n", what, theirs, theirs / ours, unit);
    else
        printf("  %-34s not available (no such Python or no torch in it)\n", what);
}

int main(void)
{
    const char *env = getenv("TN_BENCH_CKPT_MIB");
    size_t mib = env ? (size_t)atol(env) : (size_t)tn_bench_size(1024, 2);
    int64_t per = (int64_t)(mib << 20) / 200 / 4;
    char dir[] = "/tmp/bench_ckpt.XXXXXX";
    if (!mkdtemp(dir))
        return 2;
    char path[256], small[256], saved[256];
    snprintf(path, sizeof path, "%s/sd.pt", dir);
    snprintf(saved, sizeof saved, "%s/saved.pt", dir);
    snprintf(small, sizeof small, "%s/many.pt", dir);
    struct tn_value *sd = tn_value_odict();
    for (int i = 0; i < 200; i++) {
        struct tn_tensor *t = tn_rand(TN_SHAPE(per), TN_FLOAT32, NULL);
        char name[64];
        snprintf(name, sizeof name, "layers.%d.weight", i);
        tn_value_set(sd, tn_value_str(name), tn_value_tensor(t));
        tn_release(t);
    }
    size_t bytes = (size_t)per * 4 * 200;
    int status = 0;
    double t_memcpy, t_read, t_save, t_save_nf, t_map, t_copy;
    if (tn_save(path, sd, NULL) < 0) {
        fprintf(stderr, "%s\n", tn_last_error());
        return 2;
    }
    t_save = 1e30;
    for (int r = 0; r < 3; r++) {
        unlink(saved); /* untimed: both sides write a new file */
        double t0 = tn_bench_now();
        if (tn_save(saved, sd, NULL) < 0) {
            fprintf(stderr, "%s\n", tn_last_error());
            return 2;
        }
        double dt = tn_bench_now() - t0;
        t_save = dt < t_save ? dt : t_save;
    }
    t_save_nf = 1e30;
    struct tn_save_options nf = {.no_fsync = true};
    for (int r = 0; r < 3; r++) {
        unlink(saved);
        double t0 = tn_bench_now();
        if (tn_save(saved, sd, &nf) < 0) {
            fprintf(stderr, "%s\n", tn_last_error());
            return 2;
        }
        double dt = tn_bench_now() - t0;
        t_save_nf = dt < t_save_nf ? dt : t_save_nf;
    }
    unlink(saved);
    tn_value_release(sd);
    {
        char *a = malloc(bytes + 4096), *b = malloc(bytes + 4096);
        if (!a || !b)
            return 2;
        memset(a, 1, bytes);
        memset(b, 2, bytes);
        TN_BENCH_BEST(3, t_memcpy, memcpy(b, a, bytes));
        TN_BENCH_BEST(3, t_read, read_all(path, a, bytes + 4096));
        free(a);
        free(b);
    }
    struct tn_load_options mapped = {0}, copied = {.no_mmap = true};
    TN_BENCH_BEST(3, t_map, {
        struct tn_value *v = tn_load(path, &mapped);
        tn_value_walk_tensors(v, touch, NULL);
        tn_value_release(v);
    });
    TN_BENCH_BEST(3, t_copy, {
        struct tn_value *v = tn_load(path, &copied);
        tn_value_release(v);
    });
    printf("state_dict of 200 float32 tensors, %zu MiB (%.2f GB)\n", mib, bytes / 1e9);
    printf("  tn_load mapped, every page touched  %.3f s\n", t_map);
    printf("  tn_load copied into memory          %.3f s = %.2f GB/s: %.2fx read() of the file "
           "(%.2f GB/s), %.2fx memcpy (%.2f GB/s)\n",
           t_copy, bytes / t_copy / 1e9, t_read / t_copy, bytes / t_read / 1e9, t_memcpy / t_copy,
           bytes / t_memcpy / 1e9);
    double l2 = python_time("python3", py_load, path);
    double l1 = python_time("/usr/bin/python3", py_load, path);
    printf(" loading, mapped (aim: 20x faster):\n");
    ratio_line("torch.load, PyTorch 2.x", l2, t_map, "faster");
    ratio_line("torch.load, PyTorch 1.13", l1, t_map, "faster");
    printf(" loading, copied:\n");
    ratio_line("torch.load, PyTorch 2.x", l2, t_copy, "faster");
    ratio_line("torch.load, PyTorch 1.13", l1, t_copy, "faster");
    printf(" saving to a new file, tn_save %.3f s = %.2f GB/s, fsync'd and renamed "
           "(aim: at least as fast):\n", t_save, bytes / t_save / 1e9);
    double s2 = python_time("python3", py_save, path);
    double s1 = python_time("/usr/bin/python3", py_save, path);
    ratio_line("torch.save, PyTorch 2.x", s2, t_save, "its speed");
    ratio_line("torch.save, PyTorch 1.13", s1, t_save, "its speed");
    printf(" saving with no_fsync (atomic against a process crash only, as torch.save is "
           "not even that), %.3f s = %.2f GB/s:\n", t_save_nf, bytes / t_save_nf / 1e9);
    ratio_line("torch.save, PyTorch 2.x", s2, t_save_nf, "its speed");
    ratio_line("torch.save, PyTorch 1.13", s1, t_save_nf, "its speed");
    unlink(path);

    int ntensors = (int)tn_bench_size(20000, 200);
    struct tn_value *many = tn_value_odict();
    struct tn_tensor *z = tn_zeros(TN_SHAPE(4), TN_FLOAT32);
    for (int i = 0; i < ntensors; i++) {
        char name[64];
        snprintf(name, sizeof name, "layer.%d.weight", i);
        struct tn_tensor *c = tn_clone(z);
        tn_value_set(many, tn_value_str(name), tn_value_tensor(c));
        tn_release(c);
    }
    tn_release(z);
    if (tn_save(small, many, NULL) < 0) {
        fprintf(stderr, "%s\n", tn_last_error());
        status = 2;
    }
    tn_value_release(many);
    /* The installed-layout binary when libtool built one (its wrapper
     * script would add a shell's start-up to every run). */
    const char *tckpt = access("bin/tckpt/.libs/tckpt", X_OK) == 0 ? "bin/tckpt/.libs/tckpt"
                                                                   : "bin/tckpt/tckpt";
    if (access(".libs", F_OK) == 0)
        setenv("LD_LIBRARY_PATH", ".libs", 1);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s ls '%s' >/dev/null", tckpt, small);
    double t_ls, t_lsload;
    int bad = 0;
    TN_BENCH_BEST(5, t_ls, bad |= system(cmd));
    TN_BENCH_BEST(5, t_lsload, {
        struct tn_value *v = tn_load(small, NULL);
        tn_value_release(v);
    });
    if (bad) {
        printf("tckpt ls failed: %s\n", cmd);
        status = 1;
    }
    printf("`tckpt ls` of %d tensors: %.3f s, a process per run (aim: under 0.1 s; "
           "tn_load alone %.3f s)\n", ntensors, t_ls, t_lsload);
    ratio_line("torch.load + listing, PyTorch 2.x", python_time("python3", py_ls, small), t_ls,
               "faster");
    ratio_line("torch.load + listing, PyTorch 1.13",
               python_time("/usr/bin/python3", py_ls, small), t_ls, "faster");
    char rm[512];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0)
        status = 1;
    return status;
}

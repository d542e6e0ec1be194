/*
 * bench_ckpt: checkpoint save and load against PyTorch in the same run.
 * A state_dict of 200 float32 tensors (TN_BENCH_CKPT_MIB MiB in all,
 * default 256; the figure uses 1024) is saved with tn_save and
 * loaded mapped and copied; the same file is loaded and saved by torch
 * (python3, PyTorch 2.x, when importable); memcpy of the same bytes is the
 * bandwidth baseline.  Then a 20,000-tensor checkpoint is listed by
 * tn_load against a Python listing through torch.load.  Prints ratios.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tensor/tensor.h>

#include "../bench.h"

static double python_time(const char *script, const char *arg)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "python3 -c '%s' '%s' 2>/dev/null", script, arg);
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

int main(void)
{
    const char *env = getenv("TN_BENCH_CKPT_MIB");
    size_t mib = env ? (size_t)atol(env) : 256;
    int64_t per = (int64_t)(mib << 20) / 200 / 4;
    char dir[] = "/tmp/bench_ckpt.XXXXXX";
    if (!mkdtemp(dir))
        return 2;
    char path[256], small[256];
    snprintf(path, sizeof path, "%s/sd.pt", dir);
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
    char *a = malloc(bytes), *b = malloc(bytes);
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    double t_memcpy, t_save, t_map, t_copy;
    TN_BENCH_BEST(3, t_memcpy, memcpy(b, a, bytes));
    free(a);
    free(b);
    TN_BENCH_BEST(3, t_save, if (tn_save(path, sd, NULL) < 0) { fprintf(stderr, "%s\n", tn_last_error()); return 2; });
    struct tn_load_options mapped = {0}, copied = {.no_mmap = true};
    TN_BENCH_BEST(3, t_map, { struct tn_value *v = tn_load(path, &mapped); tn_value_walk_tensors(v, touch, NULL); tn_value_release(v); });
    TN_BENCH_BEST(3, t_copy, { struct tn_value *v = tn_load(path, &copied); tn_value_release(v); });
    printf("state_dict of 200 float32 tensors, %zu MiB; memcpy %.2f GB/s\n", mib,
           bytes / t_memcpy / 1e9);
    printf("tn_save: %.3f s (%.2f GB/s)\n", t_save, bytes / t_save / 1e9);
    printf("tn_load mapped (pages touched): %.3f s; copied: %.3f s = %.2fx memcpy bandwidth\n",
           t_map, t_copy, t_memcpy / t_copy);
    double py_load = python_time("import sys,time,torch\nt=time.perf_counter();torch.load(sys.argv[1]);print(time.perf_counter()-t)", path);
    double py_save = python_time("import sys,time,torch\nd=torch.load(sys.argv[1]);t=time.perf_counter();torch.save(d,sys.argv[1]+\".2\");print(time.perf_counter()-t)", path);
    if (py_load > 0)
        printf("torch.load (2.x): %.3f s: tensorkit mapped is %.1fx faster, copied %.1fx\n", py_load,
               py_load / t_map, py_load / t_copy);
    else
        printf("torch.load: python3 with torch not available, no ratio\n");
    if (py_save > 0)
        printf("torch.save (2.x): %.3f s: tn_save is %.2fx its speed\n", py_save, py_save / t_save);
    tn_value_release(sd);

    struct tn_value *many = tn_value_odict();
    struct tn_tensor *z = tn_zeros(TN_SHAPE(4), TN_FLOAT32);
    for (int i = 0; i < 20000; i++) {
        char name[64];
        snprintf(name, sizeof name, "layer.%d.weight", i);
        struct tn_tensor *c = tn_clone(z);
        tn_value_set(many, tn_value_str(name), tn_value_tensor(c));
        tn_release(c);
    }
    tn_release(z);
    tn_save(small, many, NULL);
    tn_value_release(many);
    double t_ls;
    TN_BENCH_BEST(3, t_ls, { struct tn_value *v = tn_load(small, NULL); tn_value_release(v); });
    double py_ls = python_time("import sys,time,torch\nt=time.perf_counter();d=torch.load(sys.argv[1]);[(k,v.dtype,tuple(v.shape)) for k,v in d.items()];print(time.perf_counter()-t)", small);
    printf("listing 20,000 tensors: %.3f s", t_ls);
    if (py_ls > 0)
        printf("; torch.load + listing %.3f s: %.0fx faster", py_ls, py_ls / t_ls);
    printf("\n");
    char rm[512];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    return system(rm) != 0;
}

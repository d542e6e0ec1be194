/*
 * bin/tcompile/tcompile.h: what tcompile's files share.
 */
#ifndef TCOMPILE_H
#define TCOMPILE_H

#include <jansson.h>
#include <stdbool.h>

#include <tensor/compile.h>
#include <tensor/graph.h>
#include <tensor/io.h>

#define TC_MAX_INPUTS 256

struct tc_opts {
    bool json, dot, time;
    bool interpret, eager, strict, explain, missing, weights_file;
    int repeat, recompile_limit;
    const char *weights, *output, *grads, *cache_dir, *header, *name;
    const char *inputs[TC_MAX_INPUTS];
    int ninputs;
    /* train */
    const char *data, *eval, *optimizer, *save, *resume;
    double lr;
    long long batch_size, epochs, steps, save_every, seed;
    bool log_loss, given_seed; /* given_seed: run seeds the default generator */
    /* train's optimizer options, PyTorch's constructor arguments; the
     * given_* flags tell an option given from its default */
    double momentum, dampening, beta1, beta2, eps, weight_decay;
    bool nesterov, given_momentum, given_dampening, given_betas, given_eps, given_weight_decay;
    int profile; /* enum tc_profile_format */
    const char *batch; /* run --batch FILE: one run per line */
};
extern struct tc_opts tc;

/* profile.c: tcompile run --profile */
enum tc_profile_format { TC_PROFILE_OFF = 0, TC_PROFILE_AUTO, TC_PROFILE_TABLE, TC_PROFILE_JSON };
struct tc_profile {
    const struct tn_graph *g;
    char **name, **kind; /* per step, from its first call (NULL: never ran) */
    double *cur, *best;  /* seconds per step: this run's, the fastest run's */
    int n, cap;
    double wall_s;       /* the fastest run's */
    int runs;
    bool oom;
};
int tc_profile_init(struct tc_profile *p, const struct tn_graph *g);
void tc_profile_free(struct tc_profile *p);
/* tn_compile_options.step_done over a struct tc_profile */
void tc_profile_step_done(void *ctx, int step, const char *name, const char *kind,
                          double seconds);
void tc_profile_start(struct tc_profile *p);
void tc_profile_stop(struct tc_profile *p, double wall_s);
/* the table (stderr a terminal, or --profile=table) or one JSON line, on stderr */
int tc_profile_print(const struct tc_profile *p);

_Noreturn void tc_usage_error(const char *fmt, const char *arg);
/* Prints tn_last_error() and returns 2. */
int tc_fail(void);

/* The problems tn_graph_check reports, kept to print as text or JSON. */
struct tc_problems {
    char **node, **msg;
    int n, cap;
};
void tc_problems_add(struct tc_problems *p, const char *node, const char *msg);
/* A tn_graph_problem_fn over a struct tc_problems. */
void tc_problems_add_cb(const char *node, const char *msg, void *ctx);
void tc_problems_print(const struct tc_problems *p, const struct tn_graph *g, bool json);
void tc_problems_free(struct tc_problems *p);
/* Prints o as one line of JSON (its keys in order) and releases it. */
void tc_json_print(json_t *o);

/* run.c, shared with package.c */
struct tn_value *tc_load_inputs(const struct tn_graph *g);
/* a dict of tensors written to path o (printed when o is NULL) */
int tc_write_tensors(const struct tn_value *out, const char *o);
double tc_now(void);
struct tn_compile_options tc_compile_options(void);

int tc_show(const char *path); /* show.c */
/* check --missing over n graphs: 0 nothing missing, 1 some, 2 an error. */
int tc_missing(char *const *paths, int n); /* missing.c */
int tc_run(const char *path);  /* run.c */
int tc_compile(const char *path); /* run.c: tcompile compile */
int tc_build(const char *path);   /* run.c: tcompile build */
/* run.c: tcompile run of a library tcompile build made (package.c) */
int tc_run_package(const char *path);
bool tc_is_package(const char *path);
int tc_cache(const char *action);
int tc_grad(const char *path);    /* grad.c: tcompile grad */
int tc_train(const char *path);   /* train.c: tcompile train */  /* cache.c: ls, stats or clear */

#endif

/*
 * bin/tckpt/tckpt.h: what tckpt's subcommands share: the options, the
 * one-line errors, inputs read through libtensor's tn_io_file, the list
 * of tensors with their names, JSON and progress bars.
 */
#ifndef TCKPT_H
#define TCKPT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <tensor/core.h>
#include <tensor/io.h>

/* Options, each a bit in `given` so a subcommand can refuse what does not
 * apply to it. */
enum {
    O_JSON = 1 << 0, O_OUTPUT = 1 << 1, O_TO = 1 << 2, O_DTYPE = 1 << 3, O_LAYOUT = 1 << 4,
    O_TORCH1 = 1 << 5, O_ATOL = 1 << 6, O_RTOL = 1 << 7, O_ONLY_TENSORS = 1 << 8,
    O_PREFIX = 1 << 9, O_KEYS = 1 << 10, O_SHARDS = 1 << 11,
};

struct tckpt_opts {
    unsigned given;
    bool json, torch1, only_tensors;
    const char *output, *to, *prefix, *keys;
    enum tn_dtype dtype;
    enum tn_ckpt_layout layout;
    double atol, rtol;
    int shards; /* convert to a DCP folder: as this many ranks (0: not given) */
};
extern struct tckpt_opts opt;

_Noreturn void usage_error(const char *fmt, const char *arg);
/* An input or output failure: the library's message names the file. */
_Noreturn void die_input(void);
/* "1 tensor", "2 tensors": the noun with an s unless n is 1. */
const char *plural(size_t n, const char *noun, char *buf, size_t cap);

/* One input file, read once. */
struct input {
    const char *path;
    struct tn_io_file *f;
    const char *format;
    struct tn_value *v;    /* the content */
    struct tn_value *meta; /* safetensors' __metadata__, or NULL */
};
/* Opens (tn_io_file_open) and loads; 0, or -1 with tn_last_error() set. */
int input_open(struct input *in, const char *path);
int input_load(struct input *in);
void input_load_or_die(struct input *in, const char *path);
void input_free(struct input *in);

/* Every tensor with its path, in order. */
struct entry {
    char *name;
    struct tn_tensor *t;
};
struct entries {
    struct entry *e;
    size_t n, cap;
    size_t *sorted; /* indices by name, built by find() on first use */
};
/* A tn_value_walk_tensors callback appending to a struct entries. */
int collect(const char *path, struct tn_tensor *t, void *ctx);
void collect_or_die(const struct tn_value *v, struct entries *l);
void entries_free(struct entries *l);
/* The first tensor named `name`, or NULL. */
const struct entry *find(struct entries *l, const char *name);

void json_string_out(FILE *f, const char *s);
void json_number_out(double x);
/* A value as JSON: scalars, strings, containers (dict keys as strings),
 * tensors as {"tensor": {"dtype":..., "shape":...}}. */
void json_value_out(const struct tn_value *v);
/* A non-tensor leaf as Python's repr writes it ("torch.float16", "1e-08",
 * "'adam'", "device(type='cpu')"), into buf. */
const char *value_repr(const struct tn_value *v, char *buf, size_t cap);

/* Progress bars on stderr for large work, only on a terminal. */
struct progress {
    const char *what;
    uint64_t total;
    double next;
    bool on, drawn;
};
void progress_draw(uint64_t done, void *ctx);
void progress_end(struct progress *p);
bool progress_wanted(uint64_t total);

int cmd_ls(char **files, int n);
int cmd_verify(char **files, int n);
int cmd_show(const char *path, const char *key);
int cmd_get(const char *path, const char *key);
int cmd_convert(const char *in, const char *out);
int cmd_diff(const char *a, const char *b);
int tckpt_scan_main(int argc, char **argv); /* scan.c */

#endif

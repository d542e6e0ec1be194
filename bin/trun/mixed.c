/* bin/trun/mixed.c: a torchrun node in a trun c10d job.
 *
 * torchrun's c10d rendezvous keeps its state, a pickled Python object, in
 * the store under "torch.rendezvous.<run id>" (compare-and-set rounds, as
 * PyTorch 2.x writes them); trun's rendezvous keeps its own keys under
 * "rdzv/<run id>/". The two do not form one world: without this, a torchrun
 * node and a trun node each waited for the other until the join timeout.
 * While a dynamic job's rendezvous store is up, a thread of each trun
 * watches for torchrun's key (torchrun writes it as soon as it joins, as
 * host or as client); when it comes, trun says why on stderr and exits 1,
 * and first replaces the state with one that torchrun cannot load, whose
 * error is trun's message: a pickle of int("trun: ..."), so torchrun ends
 * with "ValueError: invalid literal for int() with base 10: 'trun: ...'".
 * A trun that hosts the store keeps it up a few seconds more, for torchrun
 * to read that state. */
#include "trun.h"

#include <pthread.h>

/* How long a hosting trun keeps the store up for torchrun to read trun's
 * answer (torchrun reads its state about once a second). */
#define LINGER_MS 5000

static bool hosting;

/* buf = base64(in[0..n)); buf holds 4 * ((n + 2) / 3) + 1 bytes. */
static void base64(const unsigned char *in, size_t n, char *buf)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        buf[o++] = abc[v >> 18 & 63];
        buf[o++] = abc[v >> 12 & 63];
        buf[o++] = i + 1 < n ? abc[v >> 6 & 63] : '=';
        buf[o++] = i + 2 < n ? abc[v & 63] : '=';
    }
    buf[o] = 0;
}

/* The state trun leaves for torchrun: base64 of the protocol-0 pickle of
 * builtins.int(MESSAGE) (MESSAGE: printable ASCII, no backslash). */
static char *answer(void)
{
    char pickle[600];
    int n = snprintf(pickle, sizeof pickle,
                     "cbuiltins\nint\n(Vtrun: a trun node is in this c10d job (run id %.128s): "
                     "trun's rendezvous is not torchrun's, so they cannot form one world; "
                     "launch every node with torchrun, or every node with trun\ntR.",
                     opt.run_id);
    for (char *p = pickle; *p; p++)
        if (*p == '\\' || (unsigned char)*p > 126)
            *p = '?';
    char *b = malloc(4 * (((size_t)n + 2) / 3) + 1);
    if (b)
        base64((const unsigned char *)pickle, (size_t)n, b);
    return b;
}

static void *watch(void *arg)
{
    struct tn_store *s = arg;
    char key[160];
    snprintf(key, sizeof key, "torch.rendezvous.%s", opt.run_id);
    const char *keys[1] = {key};
    for (int64_t start = now_ms();;) {
        /* often while nodes join, then now and then */
        struct timespec ts = {0, (now_ms() - start < 30000 ? 200 : 2000) * 1000000L};
        nanosleep(&ts, NULL);
        int r = tn_store_check(s, keys, 1);
        if (r < 0)
            return NULL; /* the store is gone: the job is ending */
        if (r == 0)
            continue;
        char *a = answer();
        if (a)
            tn_store_set(s, key, a, strlen(a));
        free(a);
        fprintf(stderr, "trun: a torchrun node is in this c10d job: the store holds torchrun's "
                        "rendezvous state (%s); trun's rendezvous is not torchrun's, so they "
                        "cannot form one world: launch every node with trun, or every node "
                        "with torchrun\n", key);
        fflush(stdout);
        if (hosting) {
            struct timespec l = {LINGER_MS / 1000, 0};
            nanosleep(&l, NULL);
        }
        _exit(1);
    }
}

void torchrun_watch(bool host)
{
    hosting = host;
    struct tn_store *s = tn_store_tcp_connect(opt.master_addr, opt.master_port, 5000);
    if (!s)
        return; /* the rendezvous itself says what is wrong with the store */
    tn_store_set_timeout(s, 5000);
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, watch, s) != 0)
        tn_store_release(s);
    pthread_attr_destroy(&at);
}

/*
 * lib/dist/init.c: tn_dist_init, the rendezvous of init_process_group:
 * env://, tcp:// and file:// URLs, torchrun's environment (and Slurm's and
 * Open MPI's), the launcher's store when TORCHELASTIC_USE_AGENT_STORE says
 * so, and a join barrier that says how many ranks arrived when it times out.
 */
#include "dist/internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

/* The non-negative decimal int s spells (at most 2^30; s is the user's,
 * from the environment or a URL); -1 when s is NULL, empty or not one. */
static int parse_int(const char *s)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > 1 << 30)
        return -1;
    return (int)v;
}

/* The value of the first variable of names (NULL-terminated) that is set and
 * non-empty, or NULL. */
static const char *env_first(const char *const *names)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v)
            return v;
    }
    return NULL;
}

/* Whether the query string q (the user's URL) has name=...; its value is
 * copied into out[cap], NUL-terminated and cut to fit. */
static bool query_param(const char *q, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    while (q && *q) {
        const char *amp = strchr(q, '&');
        size_t len = amp ? (size_t)(amp - q) : strlen(q);
        if (len > nl && strncmp(q, name, nl) == 0 && q[nl] == '=') {
            size_t vl = len - nl - 1;
            if (vl >= cap)
                vl = cap - 1;
            memcpy(out, q + nl + 1, vl);
            out[vl] = 0;
            return true;
        }
        q = amp ? amp + 1 : NULL;
    }
    return false;
}

/* TN_EINVAL in PyTorch's words for the env:// variable var that is missing. */
static int env_error(const char *var)
{
    return tn_set_error(TN_EINVAL,
                        "Error initializing torch.distributed using env:// rendezvous: "
                        "environment variable %s expected, but not set",
                        var);
}

/* Every rank adds itself to a counter; the last sets a flag all wait for. */
static int join(struct tn_store *s, int world_size, int64_t timeout_ms)
{
    int64_t n;
    int rc = tn_store_add(s, "tn_init/joined", 1, &n);
    if (rc < 0)
        return rc;
    if (n == world_size) {
        rc = tn_store_set(s, "tn_init/all", "1", 1);
        if (rc < 0)
            return rc;
    }
    const char *keys[1] = {"tn_init/all"};
    rc = tn_store_wait(s, keys, 1, timeout_ms);
    if (rc == TN_ETIMEOUT) {
        int64_t now = 0;
        tn_store_add(s, "tn_init/joined", 0, &now);
        return tn_set_error(TN_ETIMEOUT,
                            "Timed out after %" PRId64 " seconds waiting for clients. "
                            "%" PRId64 "/%d clients joined.",
                            timeout_ms / 1000, now, world_size);
    }
    return rc;
}

/* Contract in tensor/dist.h: the rendezvous.  The URL and the environment
 * are the user's (parsed with bounds: a bad port, rank or size is
 * TN_EINVAL naming the URL); rank 0 of a tcp:// or env://
 * rendezvous may host the server.  Fills *out (the caller's; store and
 * server owned through it, released by tn_dist_finish).  0, or an error
 * with *out cleared (TN_ETIMEOUT with how many ranks joined). */
int tn_dist_init(const char *url, int rank, int world_size, int64_t timeout_ms,
                 struct tn_dist_info *out)
{
    memset(out, 0, sizeof *out);
    if (!url || !*url)
        url = "env://";
    if (timeout_ms < 0)
        timeout_ms = 30 * 60 * 1000; /* default_pg_timeout */
    char host[256] = "", path[4096] = "", tmp[32];
    int port = -1;
    const char *q = strchr(url, '?');
    struct tn_store *base = NULL;
    bool agent = false;

    if (strncmp(url, "env://", 6) == 0) {
        static const char *const rk[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
                                          "PMI_RANK", NULL};
        static const char *const ws[] = {"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE",
                                          "PMI_SIZE", NULL};
        if (rank < 0) {
            const char *v = env_first(rk);
            if (!v)
                return env_error("RANK");
            rank = parse_int(v);
        }
        if (world_size < 0) {
            const char *v = env_first(ws);
            if (!v)
                return env_error("WORLD_SIZE");
            world_size = parse_int(v);
        }
        const char *a = getenv("MASTER_ADDR"), *p = getenv("MASTER_PORT");
        if (!a || !*a)
            return env_error("MASTER_ADDR");
        if (!p || !*p)
            return env_error("MASTER_PORT");
        snprintf(host, sizeof host, "%s", a);
        port = parse_int(p);
        const char *u = getenv("TORCHELASTIC_USE_AGENT_STORE");
        agent = u && strcmp(u, "True") == 0;
    } else if (strncmp(url, "tcp://", 6) == 0) {
        const char *h = url + 6;
        const char *colon = strrchr(h, ':');
        if (!colon || (q && colon > q))
            return tn_set_error(TN_EINVAL, "%s: the tcp:// URL needs host:port", url);
        size_t hl = (size_t)(colon - h);
        if (hl >= sizeof host)
            return tn_set_error(TN_EINVAL, "%s: the host name is too long", url);
        memcpy(host, h, hl);
        host[hl] = 0;
        if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') { /* [::1] */
            memmove(host, host + 1, hl - 2);
            host[hl - 2] = 0;
        }
        char ps[16];
        size_t pl = q ? (size_t)(q - colon - 1) : strlen(colon + 1);
        if (pl >= sizeof ps)
            return tn_set_error(TN_EINVAL, "%s: bad port", url);
        memcpy(ps, colon + 1, pl);
        ps[pl] = 0;
        port = parse_int(ps);
    } else if (strncmp(url, "file://", 7) == 0) {
        size_t pl = q ? (size_t)(q - url - 7) : strlen(url + 7);
        if (pl == 0 || pl >= sizeof path)
            return tn_set_error(TN_EINVAL, "%s: the file:// URL needs a path", url);
        memcpy(path, url + 7, pl);
        path[pl] = 0;
    } else {
        return tn_set_error(TN_EINVAL, "%s: no rendezvous handler for this URL scheme (env://, "
                                       "tcp://, file://)", url);
    }
    if (q && rank < 0 && query_param(q + 1, "rank", tmp, sizeof tmp))
        rank = parse_int(tmp);
    if (q && world_size < 0 && query_param(q + 1, "world_size", tmp, sizeof tmp))
        world_size = parse_int(tmp);
    if (rank < 0)
        return tn_set_error(TN_EINVAL, "%s: rank parameter missing", url);
    if (world_size < 1)
        return tn_set_error(TN_EINVAL, "%s: world size parameter missing", url);
    if (rank >= world_size)
        return tn_set_error(TN_EINVAL, "%s: rank %d is not below the world size %d", url, rank,
                            world_size);

    if (path[0]) {
        base = tn_store_file_new(path, world_size);
        if (!base)
            return tn_last_status();
    } else {
        if (port < 1 || port > 65535)
            return tn_set_error(TN_EINVAL, "%s: bad port %d", url, port);
        if (rank == 0 && !agent) {
            struct tn_store_server_opts o = {.port = port, .listen_fd = -1};
            out->server = tn_store_server_start(&o);
            if (!out->server)
                return tn_error_prefix("rank 0 cannot host the store on port %d", port);
        }
        base = tn_store_tcp_connect(host, port, timeout_ms);
        if (!base) {
            tn_store_server_stop(out->server);
            out->server = NULL;
            return tn_last_status();
        }
        if (agent) {
            const char *rc = getenv("TORCHELASTIC_RESTART_COUNT");
            char pre[64];
            snprintf(pre, sizeof pre, "/worker/attempt_%d", rc ? parse_int(rc) : 0);
            struct tn_store *p = tn_store_prefix_new(pre, base);
            tn_store_release(base);
            base = p;
            if (!base)
                goto fail;
        }
    }
    tn_store_set_timeout(base, timeout_ms);
    out->store = tn_store_prefix_new("default_pg", base);
    tn_store_release(base);
    base = NULL;
    if (!out->store)
        goto fail;
    out->rank = rank;
    out->world_size = world_size;
    if (join(out->store, world_size, timeout_ms) < 0)
        goto fail;
    return 0;
fail:;
    int st = tn_last_status();
    tn_dist_finish(out);
    return st < 0 ? st : TN_ERUNTIME;
}

/* Drops info's store reference, stops a server this rank hosted and clears
 * info.  NULL: no-op. */
void tn_dist_finish(struct tn_dist_info *info)
{
    if (!info)
        return;
    tn_store_release(info->store);
    tn_store_server_stop(info->server);
    memset(info, 0, sizeof *info);
}

/*
 * dispatch/plugin.c: custom operators from a plugin .so that tgen --plugin
 * generated. The library is trusted code (it runs in the process); the
 * path is the caller's.
 */
#include <config.h>

#include <dlfcn.h>

#include <tensor/dispatch.h>

/* Contract in tensor/dispatch.h: dlopens path (trusted code) and runs its
 * tn_plugin_init; the library stays loaded. 0, or TN_EIO/TN_EFORMAT/the
 * init's error prefixed with path. */
int tn_library_load(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return tn_set_error(TN_EIO, "%s", dlerror());
    int (*init)(void);
    *(void **)&init = dlsym(h, "tn_plugin_init");
    if (!init) {
        dlclose(h);
        return tn_set_error(TN_EFORMAT, "%s: no tn_plugin_init (not built from tgen --plugin "
                            "output?)", path);
    }
    int rc = init();
    /* never closed: its ops stay registered for the life of the process */
    return rc < 0 ? tn_error_prefix("%s", path) : TN_OK;
}

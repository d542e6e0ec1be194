/*
 * lib/aoti/standin.c: the whole of libtorch.so, libtorch_cpu.so and
 * libc10.so as tensorkit installs them in its own library folder: no code,
 * a soname a package's library asks for and a dependency on
 * libtensor-aoti, where the dynamic linker then finds every aoti_torch_*
 * function.  tcompile loads them by path before the package's library,
 * so they never stand in for the real libtorch elsewhere.
 */
#include <stdint.h>

/* One reference keeps the dependency through the linker's --as-needed. */
int32_t aoti_torch_device_type_cpu(void);
__attribute__((used)) static int32_t (*const tn__aoti_needs)(void) = aoti_torch_device_type_cpu;

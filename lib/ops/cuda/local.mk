# The CUDA backend: its own shared object, built with nvcc when configure
# found the CUDA Toolkit, installed beside libtensor and loaded on first use.
EXTRA_DIST += lib/ops/cuda/backend.cu
if HAVE_CUDA
tnbackenddir = $(pkglibdir)
TN_CUDA_SO = lib/ops/cuda/libtensor-cuda.so
TN_CUDA_SRC = $(srcdir)/lib/ops/cuda/backend.cu

$(TN_CUDA_SO): $(TN_CUDA_SRC) $(srcdir)/lib/include/tensor/core.h $(srcdir)/lib/core/internal.h
	@$(MKDIR_P) lib/ops/cuda
	$(AM_V_GEN)$(NVCC) -O2 -std=c++17 -shared -Xcompiler -fPIC -I$(srcdir)/lib/include \
		-I$(srcdir)/lib -I$(top_builddir) -o $@ $(TN_CUDA_SRC) -L$(CUDA_LIBDIR) -Xlinker -rpath=$(CUDA_LIBDIR) -lcudart

all-local: $(TN_CUDA_SO)
install-exec-local: $(TN_CUDA_SO)
	$(MKDIR_P) $(DESTDIR)$(tnbackenddir)
	$(INSTALL_PROGRAM) $(TN_CUDA_SO) $(DESTDIR)$(tnbackenddir)/libtensor-cuda.so
uninstall-local:
	rm -f $(DESTDIR)$(tnbackenddir)/libtensor-cuda.so
CLEANFILES += $(TN_CUDA_SO)
endif

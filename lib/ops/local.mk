# Kernels: device-independent halves (meta functions, decompositions) in
# lib/ops, CPU kernels in lib/ops/cpu.
noinst_HEADERS += lib/ops/internal.h lib/ops/nn_internal.h lib/ops/index_internal.h \
	lib/ops/attention_internal.h lib/ops/cpu/vmath.h lib/ops/cpu/attention_kernel.h lib/ops/cpu/kernel.h \
	lib/ops/cpu/nn_conv.h lib/ops/fft_internal.h lib/ops/fft_exec.h lib/ops/fft_lines.h lib/ops/fft_half.h \
	lib/ops/svd_internal.h lib/ops/lu_internal.h lib/ops/cholesky_internal.h
libtensor_la_SOURCES += \
	lib/ops/binary.c \
	lib/ops/linalg.c \
	lib/ops/unary.c \
	lib/ops/reduce.c \
	lib/ops/softmax.c \
	lib/ops/sort.c \
	lib/ops/nn.c \
	lib/ops/nn_act.c \
	lib/ops/nn_loss.c \
	lib/ops/shape.c \
	lib/ops/diag.c \
	lib/ops/compare.c \
	lib/ops/movement.c \
	lib/ops/split.c \
	lib/ops/pad.c \
	lib/ops/index.c \
	lib/ops/index_reduce.c \
	lib/ops/conv.c \
	lib/ops/linear_cross_entropy.c \
	lib/ops/fill.c \
	lib/ops/layout.c \
	lib/ops/attention.c \
	lib/ops/attention_math.c \
	lib/ops/fft.c \
	lib/ops/fft_plan.c \
	lib/ops/fft_avx2.c \
	lib/ops/complex_view.c \
	lib/ops/svd.c \
	lib/ops/lu.c \
	lib/ops/solve.c \
	lib/ops/pinv.c \
	lib/ops/cholesky.c \
	lib/ops/distance.c \
	lib/ops/diff.c \
	lib/ops/bucketize.c \
	lib/ops/quantile.c \
	lib/ops/median.c \
	lib/ops/aminmax.c \
	lib/ops/meshgrid.c \
	lib/ops/take_along_dim.c \
	lib/ops/isin.c \
	lib/ops/kron.c \
	lib/ops/compose.c \
	lib/ops/trapezoid.c \
	lib/ops/cov.c \
	lib/ops/vander.c \
	lib/ops/pairs.c \
	lib/ops/histogram.c \
	lib/ops/cpu/bincount.c \
	lib/ops/cpu/binary.c \
	lib/ops/cpu/linalg.c \
	lib/ops/cpu/sgemm_avx2.c \
	lib/ops/cpu/sgemm_skinny.c \
	lib/ops/cpu/blas.c \
	lib/ops/cpu/unary.c \
	lib/ops/cpu/reduce.c \
	lib/ops/cpu/softmax.c \
	lib/ops/cpu/backward.c \
	lib/ops/cpu/sort.c \
	lib/ops/cpu/bucketize.c \
	lib/ops/cpu/unique.c \
	lib/ops/cpu/order.c \
	lib/ops/cpu/shape.c \
	lib/ops/cpu/movement.c \
	lib/ops/cpu/index.c \
	lib/ops/cpu/nn_loss.c \
	lib/ops/cpu/nn_norm.c \
	lib/ops/cpu/nn_conv.c \
	lib/ops/cpu/nn_conv_dw.c \
	lib/ops/cpu/nn_conv_pw.c \
	lib/ops/cpu/nn_conv_wino.c \
	lib/ops/cpu/conv3d.c \
	lib/ops/cpu/nn_pool.c \
	lib/ops/cpu/nn_unpool.c \
	lib/ops/cpu/nn_embedding_bag.c \
	lib/ops/cpu/nn_grid_sample.c \
	lib/ops/cpu/nn_grid_sample3d.c \
	lib/ops/cpu/nn_grid_sample16.c \
	lib/ops/cpu/nn_dropout.c \
	lib/ops/cpu/nn_upsample.c \
	lib/ops/cpu/attention.c \
	lib/ops/cpu/pad.c \
	lib/ops/cpu/svd.c \
	lib/ops/cpu/lu.c \
	lib/ops/cpu/cholesky.c \
	lib/ops/cpu/histc.c

# The operator API that tgen generates from schemas/native_functions.yaml
# into the build tree (never committed, not distributed: every build makes
# it again from the YAML): the installed tensor/ops.h (the typed entry
# points, exactly what libtensor exports), the private ops/ops_gen.h
# (redispatch entries, kernel and meta prototypes, the op table), the op
# table with its trampolines and structured engines, and the Autograd kernels.
nodist_tensorinclude_HEADERS = lib/include/tensor/ops.h
nodist_libtensor_la_SOURCES = lib/ops/ops_gen.c

TN_OPS_GEN = lib/include/tensor/ops.h lib/ops/ops_gen.h lib/ops/ops_gen.c \
	lib/autograd/autograd_gen.c
BUILT_SOURCES += $(TN_OPS_GEN)
CLEANFILES += $(TN_OPS_GEN) lib/ops/ops-gen.stamp

# One tgen run writes them all; the stamp stands for the set.
# The ops a hand-written kernel calls below a key (tn__redispatch_*): the
# Autograd kernels' own get theirs without being named here.
TN_REDISPATCH = cat,adaptive_avg_pool2d,sort.values_stable
lib/ops/ops-gen.stamp: $(srcdir)/schemas/native_functions.yaml \
		$(srcdir)/schemas/derivatives.yaml bin/tgen/tgen$(EXEEXT)
	@$(MKDIR_P) lib/include/tensor lib/ops lib/autograd
	$(AM_V_GEN)bin/tgen/tgen$(EXEEXT) --header lib/include/tensor/ops.h \
		--private-header lib/ops/ops_gen.h --private-include ops/ops_gen.h \
		--source lib/ops/ops_gen.c --derivatives $(srcdir)/schemas/derivatives.yaml \
		--autograd lib/autograd/autograd_gen.c --redispatch $(TN_REDISPATCH) \
		$(srcdir)/schemas/native_functions.yaml && touch $@
$(TN_OPS_GEN): lib/ops/ops-gen.stamp
	@test -f $@ || rm -f lib/ops/ops-gen.stamp
	@test -f $@ || $(MAKE) $(AM_MAKEFLAGS) lib/ops/ops-gen.stamp

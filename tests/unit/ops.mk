# Unit tests of the dispatcher and the operators (lib/dispatch, lib/ops).
UNIT_TESTS += tests/unit/test_ops_binary
tests_unit_test_ops_binary_SOURCES = tests/unit/test_ops_binary.c tests/unit/ops_cases.h
tests_unit_test_ops_binary_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_binary_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_binary_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_linalg
tests_unit_test_ops_linalg_SOURCES = tests/unit/test_ops_linalg.c tests/unit/ops_cases.h
tests_unit_test_ops_linalg_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_linalg_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_linalg_LDFLAGS = $(TN_UNIT_LINK)

# A host for plugins (tests/cli/tgen.bats): linked against the shared
# libtensor, whose tn_ symbols the plugin resolves when it is loaded.
check_PROGRAMS += tests/unit/ops_plugin_host
tests_unit_ops_plugin_host_SOURCES = tests/unit/ops_plugin_host.c
tests_unit_ops_plugin_host_LDADD = $(TN_LIB)

UNIT_TESTS += tests/unit/test_ops_unary
tests_unit_test_ops_unary_SOURCES = tests/unit/test_ops_unary.c tests/unit/ops_cases.h
tests_unit_test_ops_unary_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_unary_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_unary_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_reduce
tests_unit_test_ops_reduce_SOURCES = tests/unit/test_ops_reduce.c tests/unit/ops_cases.h
tests_unit_test_ops_reduce_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_reduce_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_reduce_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_softmax
tests_unit_test_ops_softmax_SOURCES = tests/unit/test_ops_softmax.c tests/unit/ops_cases.h
tests_unit_test_ops_softmax_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_softmax_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_softmax_LDFLAGS = $(TN_UNIT_LINK)


UNIT_TESTS += tests/unit/test_ops_ternary
tests_unit_test_ops_ternary_SOURCES = tests/unit/test_ops_ternary.c tests/unit/ops_cases.h
tests_unit_test_ops_ternary_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_ternary_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_ternary_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_sort
tests_unit_test_ops_sort_SOURCES = tests/unit/test_ops_sort.c tests/unit/ops_cases.h
tests_unit_test_ops_sort_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_sort_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_sort_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_loss
tests_unit_test_ops_loss_SOURCES = tests/unit/test_ops_loss.c tests/unit/ops_cases.h
tests_unit_test_ops_loss_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_loss_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_loss_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_embedding
tests_unit_test_ops_embedding_SOURCES = tests/unit/test_ops_embedding.c tests/unit/ops_cases.h
tests_unit_test_ops_embedding_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_embedding_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_embedding_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_norm
tests_unit_test_ops_norm_SOURCES = tests/unit/test_ops_norm.c tests/unit/ops_cases.h
tests_unit_test_ops_norm_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_norm_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_norm_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_dropout
tests_unit_test_ops_dropout_SOURCES = tests/unit/test_ops_dropout.c tests/unit/ops_cases.h
tests_unit_test_ops_dropout_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_dropout_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_dropout_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_upsample
tests_unit_test_ops_upsample_SOURCES = tests/unit/test_ops_upsample.c tests/unit/ops_cases.h
tests_unit_test_ops_upsample_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_upsample_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_upsample_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_conv
tests_unit_test_ops_conv_SOURCES = tests/unit/test_ops_conv.c tests/unit/ops_cases.h
tests_unit_test_ops_conv_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_conv_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_conv_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_pool
tests_unit_test_ops_pool_SOURCES = tests/unit/test_ops_pool.c tests/unit/ops_cases.h
tests_unit_test_ops_pool_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_pool_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_pool_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_misc
tests_unit_test_ops_misc_SOURCES = tests/unit/test_ops_misc.c tests/unit/ops_cases.h
tests_unit_test_ops_misc_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_misc_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_misc_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_shape
tests_unit_test_ops_shape_SOURCES = tests/unit/test_ops_shape.c tests/unit/ops_cases.h
tests_unit_test_ops_shape_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_shape_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_shape_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_compare
tests_unit_test_ops_compare_SOURCES = tests/unit/test_ops_compare.c tests/unit/ops_cases.h
tests_unit_test_ops_compare_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_compare_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_compare_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_movement
tests_unit_test_ops_movement_SOURCES = tests/unit/test_ops_movement.c tests/unit/ops_cases.h
tests_unit_test_ops_movement_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_movement_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_movement_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_split
tests_unit_test_ops_split_SOURCES = tests/unit/test_ops_split.c tests/unit/ops_cases.h
tests_unit_test_ops_split_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_split_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_split_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_pad
tests_unit_test_ops_pad_SOURCES = tests/unit/test_ops_pad.c tests/unit/ops_cases.h
tests_unit_test_ops_pad_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_pad_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_pad_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_index
tests_unit_test_ops_index_SOURCES = tests/unit/test_ops_index.c tests/unit/ops_cases.h
tests_unit_test_ops_index_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_index_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_index_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_opdb
tests_unit_test_ops_opdb_SOURCES = tests/unit/test_ops_opdb.c tests/unit/ops_cases.h
tests_unit_test_ops_opdb_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_opdb_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_opdb_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_zoo
tests_unit_test_ops_zoo_SOURCES = tests/unit/test_ops_zoo.c tests/unit/ops_cases.h
tests_unit_test_ops_zoo_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_zoo_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_zoo_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_ops_search
tests_unit_test_ops_search_SOURCES = tests/unit/test_ops_search.c tests/unit/ops_cases.h
tests_unit_test_ops_search_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_search_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_search_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_ops_order
tests_unit_test_ops_order_SOURCES = tests/unit/test_ops_order.c tests/unit/ops_cases.h
tests_unit_test_ops_order_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_order_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_order_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_ops_misc2
tests_unit_test_ops_misc2_SOURCES = tests/unit/test_ops_misc2.c tests/unit/ops_cases.h
tests_unit_test_ops_misc2_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_misc2_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_misc2_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_ops_compose
tests_unit_test_ops_compose_SOURCES = tests/unit/test_ops_compose.c tests/unit/ops_cases.h
tests_unit_test_ops_compose_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_compose_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_compose_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_ops_pairs
tests_unit_test_ops_pairs_SOURCES = tests/unit/test_ops_pairs.c tests/unit/ops_cases.h
tests_unit_test_ops_pairs_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_pairs_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_pairs_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_sdpa
tests_unit_test_ops_sdpa_SOURCES = tests/unit/test_ops_sdpa.c tests/unit/ops_cases.h
tests_unit_test_ops_sdpa_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_sdpa_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_sdpa_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_dispatch_boxed
tests_unit_test_dispatch_boxed_SOURCES = tests/unit/test_dispatch_boxed.c
tests_unit_test_dispatch_boxed_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_dispatch_boxed_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_dispatch_boxed_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_blas
tests_unit_test_blas_SOURCES = tests/unit/test_blas.c
tests_unit_test_blas_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_blas_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_blas_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_ops_conv_paths
tests_unit_test_ops_conv_paths_SOURCES = tests/unit/test_ops_conv_paths.c tests/unit/ops_cases.h
tests_unit_test_ops_conv_paths_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_conv_paths_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_conv_paths_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_ops_conv3d
tests_unit_test_ops_conv3d_SOURCES = tests/unit/test_ops_conv3d.c tests/unit/ops_cases.h
tests_unit_test_ops_conv3d_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_conv3d_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_conv3d_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_strides
tests_unit_test_ops_strides_SOURCES = tests/unit/test_ops_strides.c tests/unit/ops_cases.h
tests_unit_test_ops_strides_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_strides_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_strides_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_svd
tests_unit_test_ops_svd_SOURCES = tests/unit/test_ops_svd.c
tests_unit_test_ops_svd_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_svd_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_svd_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_ops_lapack
tests_unit_test_ops_lapack_SOURCES = tests/unit/test_ops_lapack.c tests/unit/ops_cases.h
tests_unit_test_ops_lapack_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_lapack_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_lapack_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_ops_fft
tests_unit_test_ops_fft_SOURCES = tests/unit/test_ops_fft.c tests/unit/ops_cases.h
tests_unit_test_ops_fft_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_fft_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_fft_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_ops_grid3d
tests_unit_test_ops_grid3d_SOURCES = tests/unit/test_ops_grid3d.c tests/unit/ops_cases.h
tests_unit_test_ops_grid3d_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_grid3d_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_grid3d_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_autograd_edges
tests_unit_test_autograd_edges_SOURCES = tests/unit/test_autograd_edges.c
tests_unit_test_autograd_edges_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_autograd_edges_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_autograd_edges_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_ops_grid16
tests_unit_test_ops_grid16_SOURCES = tests/unit/test_ops_grid16.c tests/unit/ops_cases.h
tests_unit_test_ops_grid16_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_grid16_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_grid16_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_complex
tests_unit_test_ops_complex_SOURCES = tests/unit/test_ops_complex.c tests/unit/ops_cases.h
tests_unit_test_ops_complex_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_complex_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_complex_LDFLAGS = $(TN_UNIT_LINK)

UNIT_TESTS += tests/unit/test_ops_complex_view
tests_unit_test_ops_complex_view_SOURCES = tests/unit/test_ops_complex_view.c tests/unit/ops_cases.h
tests_unit_test_ops_complex_view_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_ops_complex_view_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_ops_complex_view_LDFLAGS = $(TN_UNIT_LINK)

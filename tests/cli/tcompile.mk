# Bats tests of tcompile.
CLI_TESTS += tests/cli/tcompile.bats
CLI_TESTS += tests/cli/tcompile_index.bats
CLI_TESTS += tests/cli/tcompile_misc.bats
CLI_TESTS += tests/cli/tcompile_nanmax.bats
CLI_TESTS += tests/cli/tcompile_se.bats
CLI_TESTS += tests/cli/tcompile_layout.bats
CLI_TESTS += tests/cli/tcompile_fft.bats
CLI_TESTS += tests/cli/tcompile_attn.bats
CLI_TESTS += tests/cli/tcompile_bmm.bats
CLI_TESTS += tests/cli/tcompile_factory.bats
CLI_TESTS += tests/cli/tcompile_bntrain.bats
CLI_TESTS += tests/cli/tcompile_user.bats
CLI_TESTS += tests/cli/tcompile_compile.bats
CLI_TESTS += tests/cli/tcompile_inplace.bats
CLI_TESTS += tests/cli/tcompile_missing.bats
# tcompile run --profile (issue 27)
CLI_TESTS += tests/cli/tcompile_profile.bats
# PyTorch AOTInductor packages through libtensor-aoti (lib/aoti).
CLI_TESTS += tests/cli/tcompile_aoti.bats
# bench/compile/compile.py in its quick form: outputs compared, rows.
CLI_TESTS += tests/cli/tcompile_bench.bats
CLI_TESTS += tests/cli/tcompile_cache.bats
# AOT autograd and compiled training (issue 17).
CLI_TESTS += tests/cli/tcompile_train_grad.bats
CLI_TESTS += tests/cli/tcompile_train.bats
CLI_TESTS += tests/cli/tcompile_train_data.bats
CLI_TESTS += tests/cli/tcompile_train_eager.bats
# Fills a compile cache for tcompile_cache.bats (libtensor linked
# statically, for tn__cc_load).
check_PROGRAMS += tests/cli/tcompile/cache_fill
tests_cli_tcompile_cache_fill_SOURCES = tests/cli/tcompile/cache_fill.c
tests_cli_tcompile_cache_fill_LDADD = $(TN_LIB)
tests_cli_tcompile_cache_fill_LDFLAGS = -static
CLI_TESTS += tests/cli/tcompile_build.bats
# Runs a library tcompile build made through its C API, with dlopen (linked
# to the shared libtensor the library itself links).
check_PROGRAMS += tests/cli/tcompile/model_main
tests_cli_tcompile_model_main_SOURCES = tests/cli/tcompile/model_main.c
tests_cli_tcompile_model_main_LDADD = $(TN_LIB)
CLI_TESTS += tests/cli/tcompile_item.bats
# reads `tcompile show --json` with PyTorch 2.x's deserializer (tcompile_item.bats)
EXTRA_DIST += tests/cli/tcompile/torch_load.py
CLI_TESTS += tests/cli/tcompile_complex.bats

# Bats tests of tcompile.
CLI_TESTS += tests/cli/tcompile.bats
CLI_TESTS += tests/cli/tcompile_index.bats
CLI_TESTS += tests/cli/tcompile_misc.bats
CLI_TESTS += tests/cli/tcompile_user.bats
CLI_TESTS += tests/cli/tcompile_compile.bats
# bench/compile/compile.py in its quick form: outputs compared, rows.
CLI_TESTS += tests/cli/tcompile_bench.bats

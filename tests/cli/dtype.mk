# Live oracle checks of lib/core's dtypes.
CLI_TESTS += tests/cli/core_dtype.bats

# Live oracle checks of lib/core/random.c.
CLI_TESTS += tests/cli/core_random.bats

# Live oracle checks of lib/core/print.c.
CLI_TESTS += tests/cli/core_print.bats

# Live oracle checks of lib/core/view.c, factory.c and copy.c.
CLI_TESTS += tests/cli/core_fixtures.bats

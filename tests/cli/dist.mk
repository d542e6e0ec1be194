# Bats tests of trun (and through it, lib/dist against real PyTorch).
CLI_TESTS += tests/cli/trun.bats
EXTRA_DIST += tests/cli/trun/allreduce.py

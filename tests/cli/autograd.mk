# Bats tests of autograd (tgen --derivatives, the live PyTorch 2.x check).
CLI_TESTS += tests/cli/autograd.bats

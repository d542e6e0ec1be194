# The training demo against PyTorch (same losses, loadable checkpoint).
CLI_TESTS += tests/cli/nn_train.bats

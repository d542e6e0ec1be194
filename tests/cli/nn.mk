# The training demo against PyTorch (same losses, loadable checkpoint).
CLI_TESTS += tests/cli/nn_train.bats
# The conv net of bench/nn/convnet.sh against PyTorch (the first losses).
CLI_TESTS += tests/cli/nn_convnet.bats
check_PROGRAMS += tests/cli/nn/convnet_losses
tests_cli_nn_convnet_losses_SOURCES = tests/cli/nn/convnet_losses.c bench/nn/convnet.h
tests_cli_nn_convnet_losses_LDADD = $(TN_LIB)
# nn and optim state_dicts saved by tensorkit, opened by PyTorch 1.13 and 2.x.
CLI_TESTS += tests/cli/nn_state.bats

# lib/nn and lib/optim against PyTorch: state_dicts PyTorch opens.
CLI_TESTS += tests/cli/nn_state.bats

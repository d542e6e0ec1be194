# Bats tests of tckpt.

# Bats tests of ttest.

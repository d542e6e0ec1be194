# Bats tests of ttest.
CLI_TESTS += tests/cli/ttest.bats tests/cli/ttest_proc.bats tests/cli/ttest_tap.bats \
	tests/cli/ttest_select.bats tests/cli/ttest_out.bats tests/cli/ttest_pytest.bats \
	tests/cli/ttest_shard.bats
EXTRA_DIST += tests/cli/ttest-helper.bash tests/cli/ttest-junit.xsd

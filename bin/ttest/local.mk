# ttest: the sharded test runner.

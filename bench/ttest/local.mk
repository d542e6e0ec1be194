# ttest benchmarks: scheduling against the lower bound, bats and Automake;
# overhead per test against prove and bats.
TN_BENCH_SH += bench/ttest/ttest_bench.sh
bench: bin/ttest/ttest$(EXEEXT)

# ttest benchmarks.

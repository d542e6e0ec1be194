# Training benchmarks (issue 5's figures): the digits MLP against PyTorch.
TN_BENCH_SH += bench/nn/train.sh

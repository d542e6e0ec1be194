# Training benchmarks (issue 5's figures): the digits MLP and a small conv
# net against PyTorch.
TN_BENCH_BIN += bench/nn/bench_convnet
bench_nn_bench_convnet_SOURCES = bench/nn/bench_convnet.c bench/bench.h bench/nn/convnet.h
bench_nn_bench_convnet_LDADD = $(TN_LIB)
TN_BENCH_SH += bench/nn/train.sh bench/nn/convnet.sh

// bench/compile/aoti_loader.cpp: the C++ baseline of bench/compile/aoti.py:
// a package run by libtorch's own AOTIModelPackageLoader, without Python.
// Usage: aoti_loader PACKAGE REPEAT SIZES... (each input's sizes as
// "4,16"; random float32 values). Prints the fastest of REPEAT runs, in
// seconds. aoti.py builds it against the wheel's headers and libraries.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char **argv)
{
    if (argc < 3) {
        std::fprintf(stderr, "usage: aoti_loader PACKAGE REPEAT SIZES...\n");
        return 2;
    }
    c10::InferenceMode guard;
    torch::inductor::AOTIModelPackageLoader loader(argv[1]);
    std::vector<at::Tensor> inputs;
    for (int i = 3; i < argc; i++) {
        std::vector<int64_t> sizes;
        std::stringstream ss(argv[i]);
        for (std::string d; std::getline(ss, d, ',');)
            sizes.push_back(std::stoll(d));
        inputs.push_back(at::randn(sizes));
    }
    double best = 1e30;
    for (int r = 0, n = std::atoi(argv[2]); r < n; r++) {
        auto t = std::chrono::steady_clock::now();
        auto out = loader.run(inputs);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
        best = s < best ? s : best;
    }
    std::printf("%.9f\n", best);
    return 0;
}

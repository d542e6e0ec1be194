"""Models of bench/compile/compile.py (issue 16's figures), as torch2graph.py
factories: each returns (module in eval mode, example inputs as a tuple),
random weights from a fixed seed.

block: the pre-norm transformer encoder block of tests/fixtures/graph_models.py
       (Block) at width 256, 4 heads, batch 8, sequence 128;
mlp:   graph_models.MLP unchanged (6 -> 16 -> 16 -> 4, relu, tanh,
       log_softmax) at batch 16384, so that one call is long enough to time;
cnn:   graph_models.CNN unchanged (conv, batch norm, max and average pooling,
       linear on 3x8x8 images) at batch 32, with batch norm statistics that
       are not the defaults, as the fixture sets them;
chain: the memory-bound chain, no matmul: h = gelu(x + bias);
       y = layer_norm(h + residual) over the last dim, x and residual
       [4096, 4096] float32 (16M elements), bias, weight and bias of the norm
       [4096].
"""
import os
import sys

import torch
from torch import nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "fixtures"))
import graph_models  # noqa: E402

CHAIN = 4096


class Chain(nn.Module):
    def __init__(self, n=CHAIN):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n) * 0.1)
        self.norm = nn.LayerNorm(n)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x, residual):
        h = F.gelu(x + self.bias)
        return self.norm(h + residual)


def block():
    torch.manual_seed(0)
    m = graph_models.Block(width=256, heads=4).eval()
    torch.manual_seed(1)
    return m, (torch.randn(8, 128, 256),)


def mlp():
    torch.manual_seed(0)
    m = graph_models.MLP().eval()
    torch.manual_seed(1)
    return m, (torch.randn(16384, 6),)


def cnn():
    m, _ = graph_models.cnn()  # the fixture's weights and statistics
    torch.manual_seed(1)
    return m, (torch.randn(32, 3, 8, 8),)


def chain():
    torch.manual_seed(0)
    m = Chain().eval()
    torch.manual_seed(1)
    return m, (torch.randn(CHAIN, CHAIN), torch.randn(CHAIN, CHAIN))


MODELS = {"block": block, "mlp": mlp, "cnn": cnn, "chain": chain}

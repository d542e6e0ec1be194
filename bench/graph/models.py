"""Models of bench/graph/graph.sh, as torch2graph.py factories.

chain: 1,667 blocks of relu(x * w + b) on a small tensor: 5,001 nodes
       once exported (the start-up figure);
block: the transformer encoder block of tests/fixtures/graph_models.py at
       batch 8, sequence 128, width 256 (8 heads).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tests", "fixtures"))
import graph_models  # noqa: E402


class Chain(torch.nn.Module):
    def __init__(self, n=1667):
        super().__init__()
        self.n = n

    def forward(self, x):
        for _ in range(self.n):
            x = torch.relu(x * 1.0001 + 0.01)
        return x


def chain():
    return Chain().eval(), (torch.randn(4, 8),)


def block():
    torch.manual_seed(0)
    m = graph_models.Block(width=256, heads=8).eval()
    return m, (torch.randn(8, 128, 256),)

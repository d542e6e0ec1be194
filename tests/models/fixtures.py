#!/usr/bin/env python3
"""fixtures.py: small graphs of what the model zoo (tests/models/zoo.bats,
issue 23) found missing, exported by PyTorch 2.x (torch.export.export, no
run_decompositions) with share/tools/torch2graph.py, for
tests/models/fixtures.bats, which runs without PyTorch. Writes under
tests/fixtures/graph/torch2/:
  zoo_views     swapaxes, swapdims, reshape_as, view_as, expand_as and
                type_as, which the training IR keeps as written (timm's LeViT
                and MaxViT, Hugging Face RoBERTa and Gemma), and an in-place
                add through a swapaxes view; gradients of the parameter

    python3 tests/models/fixtures.py
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "share", "tools"))
import torch2graph  # noqa: E402

OUT = os.path.join(HERE, "..", "fixtures", "graph", "torch2")


class Views(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3, 4))

    def forward(self, x, y, i):
        a = (x * self.w).swapaxes(0, 1)
        t = x.clone()
        t.swapaxes(0, 1).add_(1.5)  # written back through the view
        return (a.reshape_as(y),
                x.swapdims(-1, 0).view_as(a) * 2,
                self.w[:1].expand_as(x) + x,
                i.type_as(x) * self.w,
                x.type_as(y) * self.w,  # the same dtype: self itself
                t)


def main():
    torch.manual_seed(0)
    torch2graph.write(Views(), (torch.randn(3, 4), torch.randn(2, 6),
                                torch.arange(12).reshape(3, 4)),
                      os.path.join(OUT, "zoo_views"), grads=True)


if __name__ == "__main__":
    main()

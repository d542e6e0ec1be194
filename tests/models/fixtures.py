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
  zoo_ops       adaptive_avg_pool1d (Hugging Face Swin's pooler), lgamma
                (its gradient, digamma), scatter_reduce.two (each reduction,
                with and without self) and scatter.reduce (issue 25);
                pow.Scalar and div.Tensor_mode with a number for other, as
                timm's XCiT and EdgeNeXt position encodings export them
  zoo_frozen    a parameter with requires_grad false (Pegasus's sinusoidal
                positions): it gets no gradient, the other one does
  zoo_alias     views an extern step (a library kernel) returns, view_as and
                reshape_as (contiguous, so kept as views), read after later steps that could take their base's
                buffer (MaxViT, LeViT); an output that is such a view of an
                input (it must be a copy of its own)
  zoo_bn_tokens batch norm over tokens (transpose, flatten) at batch 1, as
                XCiT has it, a regression test only: PyTorch's CPU kernels
                get XCiT's batch 1 wrong (1.13 and 2.x), so the expected
                output is the first sample of a batch-2 run (eval mode:
                samples are independent); at these small sizes PyTorch's
                batch-1 output agrees with it (1.8e-7)
  zoo_expand_view  backward through a reshape that is a view of an
                expanded tensor (Falcon's multi-query key and value)

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


class Ops(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(2, 5, 7) * 3 + 0.25)

    def forward(self, x, idx, src):
        outs = [torch.nn.functional.adaptive_avg_pool1d(self.w, 3),
                torch.nn.functional.adaptive_avg_pool1d(self.w[0], 1),
                torch.lgamma(self.w)]
        for r in ("sum", "prod", "mean", "amax", "amin"):
            for inc in (True, False):
                outs.append(x.scatter_reduce(1, idx, src, r, include_self=inc))
        outs.append(x.scatter(1, idx, src, reduce="multiply"))
        t = torch.arange(8, dtype=torch.float32)
        outs += [10000 ** (2 * (t // 2) / 8), 2.0 ** self.w, 3 ** idx,
                 torch.div(idx, 2, rounding_mode="trunc"), x // -1.5]
        return tuple(outs)


class Frozen(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # frozen first: the gradients after it keep their names
        self.pos = torch.nn.Parameter(torch.randn(3, 4), requires_grad=False)
        self.w = torch.nn.Parameter(torch.randn(3, 4))

    def forward(self, x):
        return (x * self.w + self.pos).tanh() * self.pos


class Alias(torch.nn.Module):
    def forward(self, x, y):
        d = (x * 2).view_as(x)          # a view of a buffer of ours
        u = (y + 1).reshape_as(y.t())   # and another
        z = torch.mm(x.exp() - 1, x + 3)  # buffers that could reuse theirs
        w = (torch.mm(z, z.sin()).sum(0) + y.sum(1)).tanh()
        return d * w, u * w, x.view_as(d), y.reshape_as(y.t())


class BNTokens(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 8)
        self.bn = torch.nn.BatchNorm1d(8)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-1, 1)

    def forward(self, x):
        t = self.bn(self.proj(x).transpose(1, 2)).transpose(1, 2)
        return t.flatten(1) * 2


class ExpandView(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(2, 1, 4, 6))

    def forward(self, x):
        k = (self.w * 2).expand(2, 3, 4, 6)  # one head shared by three
        return k.reshape(2, 3, 4, 2, 3) * x, k.reshape(6, 24).sum(0)


def bn_tokens():
    m = BNTokens().eval()
    x2 = torch.randn(2, 5, 4)
    prefix = os.path.join(OUT, "zoo_bn_tokens")
    torch2graph.write(m, (x2[:1].clone(),), prefix)
    with torch.no_grad():
        want = m(x2)[:1].clone()
    expected = torch.load(prefix + "_expected.pt")
    torch.save({k: want for k in expected}, prefix + "_expected.pt")


def main():
    torch.manual_seed(0)
    torch2graph.write(Views(), (torch.randn(3, 4), torch.randn(2, 6),
                                torch.arange(12).reshape(3, 4)),
                      os.path.join(OUT, "zoo_views"), grads=True)
    torch2graph.write(Ops(), (torch.randn(3, 5), torch.randint(0, 5, (3, 6)), torch.randn(3, 6)),
                      os.path.join(OUT, "zoo_ops"), grads=True)
    torch2graph.write(Frozen(), (torch.randn(3, 4),), os.path.join(OUT, "zoo_frozen"),
                      grads=True)
    torch2graph.write(ExpandView(), (torch.randn(2, 3, 4, 2, 3),),
                      os.path.join(OUT, "zoo_expand_view"), grads=True)
    torch2graph.write(Alias(), (torch.randn(6, 6), torch.randn(6, 5)),
                      os.path.join(OUT, "zoo_alias"))
    bn_tokens()


if __name__ == "__main__":
    main()

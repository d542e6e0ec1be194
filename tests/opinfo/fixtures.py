#!/usr/bin/env python3
"""fixtures.py: graphs of the defects tests/opinfo/sweep.py found (issue 25),
exported by PyTorch 2.x with share/tools/torch2graph.py, for the tests that
run without PyTorch (tests/opinfo/opinfo.bats). Writes under
tests/fixtures/graph/torch2/:
  opinfo_values   inf and NaN float constants (clamp, add), addcmul, div
                  trunc and logit of bfloat16, mT, masked_fill broadcasting
                  self to the mask's shape, gather with an empty uint8 index
  opinfo_logit    logit(p, eps=0.25) with p inside and outside [eps, 1-eps]:
                  its gradient (0 outside)
  opinfo_dropout  dropout in training mode of float32, float64 and
                  bfloat16, one after another, as PyTorch draws them after
                  torch.manual_seed(42) (what OpInfo's wrapper_set_seed
                  does; tcompile run --seed 42)

    python3 tests/opinfo/fixtures.py
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "share", "tools"))
import torch2graph  # noqa: E402

OUT = os.path.join(HERE, "..", "fixtures", "graph", "torch2")
bf = torch.bfloat16


class Values(torch.nn.Module):
    def forward(self, x, a, b, c, n, d, m, e):
        return (torch.clamp(x, min=float("-inf"), max=float("nan")),
                torch.add(x, float("inf")),
                torch.addcmul(a, b, c),          # bfloat16, rounded once
                torch.div(n, d, rounding_mode="trunc"),
                torch.logit(a.abs() / 4, eps=0.0625),
                x.reshape(2, 3).mT,
                torch.masked_fill(x[:3], m, 2.5),
                torch.gather(x, 0, e))


class Logit(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.p = torch.nn.Parameter(torch.tensor([0.05, 0.2, 0.3, 0.5, 0.74, 0.8, 0.95]))

    def forward(self, s):
        return torch.logit(self.p * s, eps=0.25)


class Dropouts(torch.nn.Module):
    def forward(self, x, y, z):
        f = torch.nn.functional.dropout
        return f(x.exp(), 0.5, True), f(y, 0.2, True), f(z * 2, 0.3, True)


def main():
    torch.manual_seed(0)
    x = torch.randn(6)
    # issue 25's examples first: addcmul -3.515625 + -1.4609375 * -2.21875,
    # -3.890625 / -0.216796875 truncated
    a = torch.cat([torch.tensor([-3.515625]), torch.randn(63)]).to(bf)
    b = torch.cat([torch.tensor([-1.4609375]), torch.randn(63)]).to(bf)
    c = torch.cat([torch.tensor([-2.21875]), torch.randn(63)]).to(bf)
    n = torch.cat([torch.tensor([-3.890625]), torch.randn(63) * 9]).to(bf)
    d = torch.cat([torch.tensor([-0.216796875]), torch.randn(63)]).to(bf)
    m = torch.rand(4, 3) > 0.5
    e = torch.empty(0, dtype=torch.uint8)
    torch2graph.write(Values(), (x, a, b, c, n, d, m, e), os.path.join(OUT, "opinfo_values"))
    torch2graph.write(Logit(), (torch.ones(1),), os.path.join(OUT, "opinfo_logit"), grads=True)
    ins = (torch.randn(5, 7), torch.randn(4, 6, dtype=torch.float64), torch.randn(3, 9).to(bf))
    prefix = os.path.join(OUT, "opinfo_dropout")
    torch2graph.write(Dropouts(), ins, prefix)
    expected = torch.load(prefix + "_expected.pt")
    torch.manual_seed(42)
    with torch.no_grad():
        torch.save(dict(zip(expected, Dropouts()(*ins))), prefix + "_expected.pt")


if __name__ == "__main__":
    main()

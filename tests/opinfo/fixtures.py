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
  opinfo_bf16     bfloat16 where PyTorch's kernels round at given steps:
                  nll_loss's cascade sum in bfloat16 (4-D input, mean and
                  sum), linear of a vector with a bias (one addmm, one
                  rounding), batch_norm in training (the mean, the sum of
                  squares and the invstd rounded to bfloat16)
  opinfo_norm     float64 gradients of norm(p=3) (pow's 1/3 exponent kept
                  at float64), of linalg.vector_norm(ord=0) (zero) and of
                  ord +-inf with ties and NaNs (PyTorch's own rule)
  opinfo_refused  what tensorkit refused: broadcast_to (torch.masked's
                  ops), einsum with a subscript repeated in one operand,
                  take (negative indices), kl_div (both targets), batch
                  norm of an empty input (a copy), int64 conv2d and conv1d
                  (groups, stride, dilation)
  opinfo_dynamic  data-dependent sizes (masked_select, nonzero, nonzero
                  as_tuple, which exports nonzero_numpy): the
                  SymBool checks export writes (_operator.ge/le into
                  _assert_scalar)

    python3 tests/opinfo/fixtures.py [NAME...]
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


class Bf16(torch.nn.Module):
    def forward(self, x, t, v, w, b, cw, y):
        f = torch.nn.functional
        return (f.nll_loss(x, t), f.nll_loss(x, t, reduction="sum"),
                f.cross_entropy(f.linear(v, w, b), torch.tensor(6), cw, reduction="sum"),
                f.linear(v, w, b),
                f.batch_norm(y, None, None, training=True, eps=0.5))


class Norms(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.p = torch.nn.Parameter(torch.randn(5, 5, dtype=torch.float64))
        nan = torch.zeros(5, 5, dtype=torch.float64)
        nan[0, 0] = nan[1, 1] = float("nan")
        self.register_buffer("nan", nan)

    def forward(self, s):
        return (torch.norm(self.p * s, 3, 1),
                torch.linalg.vector_norm(self.p * s, 0, 1),
                torch.pow((self.p * s).abs(), 1 / 3),
                # ord inf with ties and a NaN (PyTorch's rule: NaNs count
                # among the maxima, their sgn is 0)
                torch.linalg.vector_norm(self.p * s + self.nan, float("inf"), 1),
                torch.linalg.vector_norm(self.p * s + self.nan, float("inf")),
                torch.linalg.vector_norm(self.p.round() * s, -float("inf"), 0))


class Refused(torch.nn.Module):
    def forward(self, x, y, i, s, t, e, ix, iw, ib):
        f = torch.nn.functional
        return (f.conv2d(ix, iw, ib, groups=2, padding=1, stride=(2, 1)),
                f.conv1d(ix[:, :, 0], iw[:, :, 0], groups=2, dilation=2),
                torch.broadcast_to(x, (2, 3, 4)), torch.einsum("iji->j", y),
                torch.einsum("ii", y[:, 0]), torch.take(x, i),
                f.kl_div(s, t, reduction="batchmean"), f.kl_div(s, t.log(), log_target=True),
                f.batch_norm(e, None, None, training=True))


class Dynamic(torch.nn.Module):
    def forward(self, x, m):
        return (torch.masked_select(x, m), torch.nonzero(m), torch.masked_select(x.t(), m.t()),
                *torch.nonzero(m, as_tuple=True))


def dynamic_inputs():
    torch.manual_seed(0)
    x = torch.randn(3, 4)
    return x, x > 0


def refused_inputs():
    torch.manual_seed(0)
    return (torch.randn(3, 1), torch.randn(3, 4, 3), torch.tensor([[0, -1], [2, -3]]),
            torch.randn(3, 5).log_softmax(1), torch.rand(3, 5), torch.randn(0),
            torch.randint(-9, 9, (2, 4, 6, 6)), torch.randint(-9, 9, (6, 2, 3, 3)),
            torch.randint(-9, 9, (6,)))


def bf16_samples():
    """The op_db samples that found the defects, made again (torch.manual_seed(0)
    as sweep.py does; op_db's own samples kept out of this file's needs)."""
    torch.manual_seed(0)
    x = (torch.rand(2, 3, 2, 2) * 18 - 9).to(bf)
    t = torch.tensor([[[2, 0], [1, 0]], [[0, 0], [2, 2]]])
    v = torch.randn(8).to(bf)
    w = torch.randn(8, 8).to(bf)
    b = (torch.rand(8) * 18 - 9).to(bf)
    cw = (torch.rand(8) * 2).to(bf)
    y = (torch.rand(3, 2, 3, 4) * 18 - 9).to(bf)
    return x, t, v, w, b, cw, y


def main():
    want = set(sys.argv[1:])
    if want:  # only the graphs named: the others stay as committed
        if "opinfo_bf16" in want:
            torch2graph.write(Bf16(), bf16_samples(), os.path.join(OUT, "opinfo_bf16"))
        if "opinfo_refused" in want:
            torch2graph.write(Refused(), refused_inputs(), os.path.join(OUT, "opinfo_refused"))
        if "opinfo_dynamic" in want:
            torch2graph.write(Dynamic(), dynamic_inputs(), os.path.join(OUT, "opinfo_dynamic"))
        if "opinfo_norm" in want:
            torch2graph.write(Norms(), (torch.ones(1, dtype=torch.float64),),
                              os.path.join(OUT, "opinfo_norm"), grads=True)
        return
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
    torch2graph.write(Bf16(), bf16_samples(), os.path.join(OUT, "opinfo_bf16"))
    torch2graph.write(Norms(), (torch.ones(1, dtype=torch.float64),),
                      os.path.join(OUT, "opinfo_norm"), grads=True)
    torch2graph.write(Refused(), refused_inputs(), os.path.join(OUT, "opinfo_refused"))
    torch2graph.write(Dynamic(), dynamic_inputs(), os.path.join(OUT, "opinfo_dynamic"))


if __name__ == "__main__":
    main()

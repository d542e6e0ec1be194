#!/usr/bin/env python3
"""sweep.py: PyTorch's OpInfo database (op_db) as tensorkit's oracle.

    python3 sweep.py --tcompile PATH [--ops NAME,...] [--quick] [--batch N]
                     [--jobs N] [--xfail FILE] [--update] [--json FILE]
                     [--dtypes NAME,...]

For every OpInfo of torch.testing._internal.common_methods_invocations.op_db
(or those named by --ops, or the quick subset), every dtype of float32,
float64, int64, bool and bfloat16 (or of those --dtypes names, complex64
and complex128 among them) that the OpInfo supports on the CPU, and
every sample it gives (torch.manual_seed(0) before each OpInfo and dtype, so
the samples are the same from run to run on one PyTorch), a module calling
the op on the sample's tensors is exported with torch.export.export (as a
user would: no run_decompositions) and run with `tcompile run --interpret`;
its outputs are compared as PyTorch's own tests compare them
(torch.testing.assert_close's tolerances for the dtype, NaN equal to NaN,
exact for integers and bool; for sort and argsort without stable=True, and topk,
indices that order equal elements otherwise pass when they select the
same values, as PyTorch's own tests allow). For float32 and float64 samples of ops with
autograd, the sample's floating tensors also become parameters and
`tcompile run --grads` must give PyTorch's d(sum of the outputs)/d(each).
Up to --batch samples (64) of one OpInfo, dtype and mode run in one
`tcompile run --batch` process, each sample in a child of its own there (a
crash ends only its sample); a sample a batch gives no result for runs
again in a process of its own. OpInfos are swept by --jobs worker
processes (one per CPU), each taking the next OpInfo when done; the summary
splits the time per sample compared into its steps (making the samples,
PyTorch's own run, torch.export, writing files, tcompile, comparing).

Each sample ends in one of
  pass      tensorkit gives PyTorch's values
  wrong     tensorkit ran and gave other values (or shapes, or dtypes)
  refused   tensorkit refused the graph or failed at run time (its message)
  crash     tcompile died of a signal or ran past the time limit, or the
            harness itself failed (its message)
  skip      PyTorch itself cannot export or run the sample (not counted)

The expected-failure list (--xfail, default expected-failures.txt next to
this script) holds one line per failing sample:
  KEY<TAB>STATUS<TAB>REASON
with KEY = OPINFO|DTYPE|fwd-or-grad|SAMPLE-NUMBER. The sweep exits 1 when a
sample fails that the list does not hold (a regression), or when a sample
the list holds now passes (the list must be shortened: it only shrinks),
0 when the two agree, 2 on a usage error. --update rewrites the list from
this run (only for the OpInfos swept). Exit 77 (Automake's skip) when
op_db cannot be imported.

Each OpInfo is classed by the targets of the graphs its samples export
(issue 25's done-when): "core" when every target is an overload of PyTorch's
core ATen op set (torch.Tag.core), the plumbing aside (Python's operators
on sizes, sym_size and the like, the _assert_scalar checks export writes),
else "other" (lift_fresh_copy, how a torch.tensor() constant exports, is
not core). The summary gives, per class, the OpInfos swept, those passing
every sample, those whose failures are all listed and those with a failure
the list does not hold, and the samples by status. --json writes
{"results": {KEY: [STATUS, MESSAGE]}, "targets": {OPINFO: [TARGET, ...]},
"classes": {OPINFO: CLASS}}; --results also reads the older form (the
results alone; its OpInfos are then "unclassified").
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64,
          "bool": torch.bool, "bfloat16": torch.bfloat16}
# what --dtypes may name: the swept ones and the complex ones, whose
# samples (complex tensors) are swept only when they are asked for
SWEEPABLE = dict(DTYPES, complex64=torch.complex64, complex128=torch.complex128)


def swept_dtypes(a):
    """The dtypes to sweep: --dtypes's (main checked the names), or DTYPES."""
    return {n: SWEEPABLE[n] for n in a.dtypes.split(",")} if a.dtypes else DTYPES
HERE = os.path.dirname(os.path.abspath(__file__))

# the quick subset `make check` runs: ops from each family the fixes touch
# (the first QUICK_SAMPLES samples of each dtype)
QUICK = ["div", "addcmul", "addcdiv", "lerp", "logit", "masked_fill", "gather", "mT", "mH",
         "log_softmax", "where", "sum", "diagonal", "argsort", "nn.functional.conv3d",
         "nn.functional.conv_transpose3d", "nn.functional.embedding_bag",
         "nn.functional.linear_cross_entropy", "nn.functional.avg_pool1d", "topk"]
QUICK_SAMPLES = 3

# OpInfos whose outputs are uninitialized memory (PyTorch's own tests
# compare only their shapes, dtypes and strides): values are not compared
UNINITIALIZED = {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided",
                 "empty_permuted"}


# OpInfos that draw random numbers (dropout, multi_head_attention_forward
# in training, ...) call their function through wrapper_set_seed, which
# runs torch.manual_seed(SEEDED) first: tcompile run --seed does the same,
# and libtensor's generator draws what PyTorch's CPU generator draws
SEEDED = 42


# OpInfos that sort or select, and which of their outputs holds the
# indices: with stable=False the order of equal elements is unspecified
# (topk has no stable order at all: which of equal elements it picks and in
# what order is not specified), and PyTorch's own tests
# (test_sort_and_select) compare the values those indices select, so a tie
# ordered otherwise is not a wrong value
UNSTABLE = {"argsort": 0, "sort": 1, "topk": 1}

# OpInfos whose outputs are defined only up to the signs of singular
# vectors (LAPACK's choice differs from build to build): their outputs go
# through the sample's output_process_fn_grad (|U|, |Vh|, U @ Vh and S), as
# PyTorch's own tests compare them, in the module that is exported
SIGN_FREE = {"svd", "linalg.svd"}


def tie_order(op, sample, at, got, want):
    """None when output `at` of an unstable sort's sample differs from
    PyTorch's only in the order of equal elements; else a reason (or False
    when the rule does not apply)."""
    if UNSTABLE.get(op.name) != at or not isinstance(sample.input, torch.Tensor):
        return False
    args, kw = sample.args, sample.kwargs
    topk = op.name == "topk"
    dim = kw.get("dim", args[1 if topk else 0] if len(args) > (1 if topk else 0) else -1)
    if not topk and kw.get("stable", args[2] if len(args) > 2 else False):
        return False
    x = sample.input
    if x.dim() == 0 or got.shape != want.shape or got.dtype != want.dtype:
        return False
    if topk:  # k distinct indices along dim
        s = torch.sort(got, dim).values
        if s.size(dim) > 1 and bool((s.narrow(dim, 1, s.size(dim) - 1) ==
                                     s.narrow(dim, 0, s.size(dim) - 1)).any()):
            return "an index chosen twice along dim %d" % dim
    elif not torch.equal(torch.sort(got, dim).values, torch.sort(want, dim).values):
        return "indices that are not a permutation along dim %d" % dim
    why = close(x.gather(dim, got), x.gather(dim, want))
    return why and "the values the indices select differ: " + why


# where a sample's time goes: making the samples (OpInfo's sample_inputs),
# PyTorch's own run (and backward), torch.export, writing the graph and
# tensors, tcompile, comparing its results
PHASES = ("samples", "reference", "export", "write", "tcompile", "compare")


# graph plumbing, not an operator of the OpInfo: Python's operators on
# symbolic sizes (_operator.ge, ...), the size queries and the runtime
# assertions export writes around data-dependent sizes
PLUMBING = {"sym_size", "sym_numel", "sym_stride", "sym_storage_offset", "_assert_scalar",
            "_assert_async", "_assert_tensor_metadata", "sym_constrain_range",
            "sym_constrain_range_for_size", "_functional_sym_constrain_range",
            "_functional_sym_constrain_range_for_size"}


def core_target(target):
    """True when a graph node's target is an overload of the core ATen op
    set (torch.Tag.core), None when it is plumbing, else False."""
    if not target.startswith("torch.ops."):
        return None  # _operator.getitem, _operator.le, math.*, torch.sym_*
    f = target.split(".")
    if len(f) != 5 or f[2] != "aten":
        return False
    if f[3] in PLUMBING:
        return None
    try:
        return torch.Tag.core in getattr(getattr(torch.ops.aten, f[3]), f[4]).tags
    except AttributeError:
        return False


def op_class(targets):
    """An OpInfo's class from the targets of its exported graphs: "core"
    when every one (plumbing aside) is a core ATen overload, else "other"
    (also when no sample exported)."""
    ops = [t for t in targets if core_target(t) is not None]
    return "core" if ops and all(core_target(t) for t in ops) else "other"


def seeded(op):
    code = getattr(op.op, "__code__", None)
    return code is not None and "wrapper_set_seed" in code.co_names


def opinfo_key(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def load_op_db():
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


class Call(torch.nn.Module):
    """Calls op on the sample with its tensors replaced by forward's
    arguments (or, for gradients, by the module's parameters)."""

    def __init__(self, op, spec, leaves, params=(), mask=None, post=None):
        super().__init__()
        self.op, self.spec, self.leaves, self.mask, self.post = op, spec, leaves, mask, post
        self.tensor_at = [i for i, x in enumerate(leaves) if isinstance(x, torch.Tensor)]
        self.params = torch.nn.ParameterList(params)

    def call(self, tensors):
        from torch.utils._pytree import tree_unflatten
        leaves = list(self.leaves)
        for i, t in zip(self.tensor_at, tensors):
            leaves[i] = t
        inp, args, kwargs = tree_unflatten(leaves, self.spec)
        return self.op(inp, *args, **kwargs)

    def forward(self, *tensors):
        if self.mask is not None:
            # parameters where the mask says, forward's arguments elsewhere
            it_p, it_r = iter(self.params), iter(tensors)
            tensors = [next(it_p) if p else next(it_r) for p in self.mask]
        out = self.call(tensors)
        return tensor_outputs(self.post(out) if self.post else out)


def tensor_outputs(out):
    from torch.utils._pytree import tree_flatten
    leaves, _ = tree_flatten(out)
    return tuple(x for x in leaves if isinstance(x, torch.Tensor))


def export(module, inputs):
    from torch._export.serde.serialize import serialize
    ep = torch.export.export(module, tuple(inputs))
    doc = json.loads(serialize(ep).exported_program)
    for node in doc["graph_module"]["graph"]["nodes"]:
        node.get("metadata", {}).pop("stack_trace", None)
    weights = dict(ep.state_dict)
    for k, v in ep.constants.items():
        if isinstance(v, torch.Tensor):
            weights[k] = v
    return ep, doc, weights


def first_line(text):
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line[:300]
    return "(no message)"


def close(actual, expected, grad=False):
    """None when actual matches expected as assert_close compares, else why."""
    if actual.shape != expected.shape:
        return "shape %s, PyTorch %s" % (list(actual.shape), list(expected.shape))
    if actual.dtype != expected.dtype:
        return "dtype %s, PyTorch %s" % (actual.dtype, expected.dtype)
    kw = {}
    if grad and expected.dtype == torch.float32:
        # a gradient is a sum of products: PyTorch's gradcheck-free tests
        # compare those at float32 with looser tolerances
        kw = {"atol": 1e-4, "rtol": 1e-4}
    try:
        torch.testing.assert_close(actual, expected, equal_nan=True, check_stride=False, **kw)
    except AssertionError as e:
        lines = [l.strip() for l in str(e).splitlines() if l.strip()]
        return "; ".join(lines[:4])[:300]
    return None


def strides_differ(actual, expected):
    """Whether the strides differ as check_significant_strides finds them
    (dimensions of size 1, and empty tensors, ignored)."""
    if expected.layout != torch.strided or expected.numel() == 0:
        return False
    return any(n != 1 and a != b for n, a, b in
               zip(expected.shape, actual.stride(), expected.stride()))


class Sweep:
    def __init__(self, a):
        self.a = a
        self.results = {}  # key -> (status, message)
        self.targets = {}  # OpInfo key -> the targets of its exported graphs
        self.strides = [0, []]  # forward results whose strides were compared; those differing
        self.timing = time.time()
        self.processes = 0  # tcompile processes started
        self.fallbacks = 0  # samples a batch gave no result for, run again alone
        self.run_time = 0.0  # seconds in tcompile processes (and reading their outputs)
        # seconds of each step, for the split of a sample's time
        self.times = dict.fromkeys(PHASES, 0.0)
        self.mark = time.perf_counter()
        self.saved = time.time()  # when --json was last written

    def save(self, last):
        """--json rewritten when the last write (time.time() then) is 30 s
        old; when it was written."""
        if not self.a.json or self.a.results or time.time() - last < 30:
            return last
        write_json(self.a.json, self)
        return time.time()

    def lap(self, phase):
        """The time since the last lap (or since one() began) goes to phase."""
        now = time.perf_counter()
        self.times[phase] += now - self.mark
        self.mark = now

    def write_run(self, d, doc, weights, inputs, names, grads, seed=None):
        """The sample's files in d; the arguments of its `tcompile run`."""
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "g.json"), "w") as f:
            json.dump(doc, f)
        torch.save({k: v.detach().contiguous().clone() for k, v in weights.items()},
                   os.path.join(d, "w.pt"))
        torch.save({n: t.detach() for n, t in zip(names, inputs)}, os.path.join(d, "i.pt"))
        args = ["--interpret", os.path.join(d, "g.json"), "-o", os.path.join(d, "o.pt")]
        if weights:
            args += ["-w", os.path.join(d, "w.pt")]
        if names:
            args += ["-i", os.path.join(d, "i.pt")]
        if grads:
            args += ["--grads", os.path.join(d, "gr.pt")]
        if seed is not None:
            args += ["--seed", str(seed)]
        for f in ("o.pt", "gr.pt"):
            if os.path.exists(os.path.join(d, f)):
                os.unlink(os.path.join(d, f))
        return args

    @staticmethod
    def ended(d, grads, how, stderr_line):
        """A run's (status, message, (outputs, gradients)) from how it ended:
        ("exit", N) or ("signal", N)."""
        if how[0] == "signal":
            return "crash", "signal %d: %s" % (how[1], stderr_line), None
        if how[1] != 0:
            # the graph's file name is the harness's, not the op's
            return "refused", stderr_line.replace(os.path.join(d, "g.json") + ": ", ""), None
        try:
            out = torch.load(os.path.join(d, "o.pt"))
            gr = torch.load(os.path.join(d, "gr.pt")) if grads else None
        except Exception as e:  # the harness's own failure: never quiet
            return "crash", "harness: %s: %s" % (type(e).__name__, first_line(str(e))), None
        return None, None, (out, gr)

    def run_one(self, d, args, grads):
        """One sample, one process."""
        cmd = [self.a.tcompile, "run"] + args
        self.processes += 1
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.a.timeout)
        except subprocess.TimeoutExpired:
            return "crash", "timed out after %ss" % self.a.timeout, None
        how = ("signal", -p.returncode) if p.returncode < 0 else ("exit", p.returncode)
        return self.ended(d, grads, how, first_line(p.stderr))

    def run_batch(self, runs):
        """Several samples in one `tcompile run --batch` (runs: [(d, args,
        grads)]): each in a child of its own there, so one that crashes ends
        only itself. A sample the batch gives no line for (it died, or ran
        past the time limit, or this tcompile has no --batch) runs again in
        a process of its own. The results, in the order of runs."""
        if len(runs) <= 1 or self.a.batch <= 1:  # (none: every sample skipped)
            return [self.run_one(*r) for r in runs]
        lines = os.path.join(os.path.dirname(runs[0][0]), "batch.txt")
        with open(lines, "w") as f:
            for d, args, _ in runs:
                f.write("\t".join(args) + "\n")
        self.processes += 1
        p = subprocess.Popen([self.a.tcompile, "run", "--batch", lines], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        try:
            out, _ = p.communicate(timeout=self.a.timeout * len(runs))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)  # its children too
            out, _ = p.communicate()
        got = {}
        for line in out.splitlines():
            f = line.split("\t", 2)
            if len(f) == 3 and f[0].isdigit() and f[1].split(" ")[0] in ("exit", "signal"):
                how, n = f[1].split(" ")
                got[int(f[0]) - 1] = ((how, int(n)), f[2].strip()[:300] or "(no message)")
        res = []
        for i, (d, args, grads) in enumerate(runs):
            if i in got:
                res.append(self.ended(d, grads, *got[i]))
            else:
                self.fallbacks += 1
                res.append(self.run_one(d, args, grads))
        return res

    def one(self, d, op, sample, dtype, grad):
        from torch.utils._pytree import tree_flatten
        self.mark = time.perf_counter()
        leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
        tensors = [x for x in leaves if isinstance(x, torch.Tensor)]
        if any((t.is_complex() and not dtype.is_complex) or t.device.type != "cpu" or
               t.layout != torch.strided for t in tensors):
            return "skip", "complex or sparse (COO, CSR, ...) tensor in the sample"
        if not tensors:
            return "skip", "no tensor in the sample"
        tensors = [t.detach().clone() if t.is_contiguous() else t.detach() for t in tensors]
        post = sample.output_process_fn_grad if op.name in SIGN_FREE else None
        m = Call(op, spec, leaves, post=post)
        if grad:
            mask = [t.is_floating_point() for t in tensors]
            if not any(mask):
                return "skip", "no floating input"
            params = [torch.nn.Parameter(t.clone()) for t, p in zip(tensors, mask) if p]
            m = Call(op, spec, leaves, params, mask, post)
            inputs = [t for t, p in zip(tensors, mask) if not p]
        else:
            inputs = tensors
        try:
            with torch.no_grad() if not grad else torch.enable_grad():
                expected = m(*inputs)
        except Exception as e:
            return "skip", "PyTorch cannot run it: %s" % first_line(str(e))
        if not expected:
            return "skip", "no tensor output"
        # complex outputs (the FFTs: complex64, complex128) are compared
        # like real ones; .pt carries both
        if grad:
            diff = [t for t in expected if t.requires_grad and t.is_floating_point()]
            if not diff:
                return "skip", "no differentiable output"
            try:
                loss = sum(t.sum() for t in diff)
                loss.backward()
            except Exception as e:
                return "skip", "PyTorch cannot differentiate it: %s" % first_line(str(e))
        self.lap("reference")
        try:
            ep, doc, weights = export(m, inputs)
        except Exception as e:
            self.lap("export")
            return "skip", "torch.export refuses it: %s" % first_line(str(e))
        self.lap("export")
        self.targets.setdefault(opinfo_key(op), set()).update(
            n["target"] for n in doc["graph_module"]["graph"]["nodes"])
        names = [s.arg.name for s in ep.graph_signature.input_specs
                 if s.kind == torch.export.graph_signature.InputKind.USER_INPUT]
        outs = list(ep.graph_signature.user_outputs)
        if grad and len(outs) != len(expected):
            return "skip", "outputs differ from the export's"
        args = self.write_run(d, doc, weights, inputs, names, grad,
                              SEEDED if seeded(op) else None)
        self.lap("write")

        def finish(got):
            out, gr = got
            for i, (name, e) in enumerate(zip(outs, expected)):
                if name is None or name not in out:
                    if name in names:  # the graph returns an input as it is
                        continue
                    return "wrong", "output %d (%s) missing" % (i, name)
                if op.name in UNINITIALIZED:
                    e = torch.zeros_like(e, memory_format=torch.contiguous_format)
                    out[name] = torch.zeros_like(out[name])
                why = close(out[name], e.detach())
                if why and not grad:
                    ties = tie_order(op, sample, i, out[name], e.detach())
                    why = why if ties is False else ties
                if why:
                    return "wrong", "output %d: %s" % (i, why)
                if not grad:  # counted, not failed: the strides PyTorch gives its result
                    self.strides[0] += 1
                    if strides_differ(out[name], e):
                        self.strides[1].append("%s %s output %d: strides %s, PyTorch's %s" % (
                            opinfo_key(op), str(dtype).replace("torch.", ""), i,
                            list(out[name].stride()), list(e.stride())))
            if grad:
                want = {}
                sig = ep.graph_signature
                for ph, fqn in sig.inputs_to_parameters.items():
                    p = dict(m.named_parameters())[fqn]
                    if p.grad is not None:
                        want[fqn] = p.grad
                for fqn, g in want.items():
                    if fqn not in gr:
                        return "wrong", "gradient of %s missing" % fqn
                    why = close(gr[fqn], g, grad=True)
                    if why:
                        return "wrong", "gradient of %s: %s" % (fqn, why)
            return "pass", ""

        return "run", (d, args, grad), finish

    def sweep_op(self, op, d):
        key0 = opinfo_key(op)
        for dname, dtype in swept_dtypes(self.a).items():
            if dtype not in op.supported_dtypes("cpu"):
                continue
            for grad in (False, True):
                if grad and (dname not in ("float32", "float64") or not op.supports_autograd):
                    continue
                torch.manual_seed(0)
                self.mark = time.perf_counter()
                try:
                    samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))
                    self.lap("samples")
                except Exception as e:
                    self.results["%s|%s|%s|*" % (key0, dname, "grad" if grad else "fwd")] = (
                        "skip", "no samples: %s" % first_line(str(e)))
                    continue
                todo = list(enumerate(samples[:self.a.max_samples]))
                for at in range(0, len(todo), max(self.a.batch, 1)):
                    self.batch(d, op, dtype, "%s|%s|%s|" % (key0, dname, "grad" if grad else "fwd"),
                               todo[at:at + max(self.a.batch, 1)], grad)

    def batch(self, d, op, dtype, prefix, todo, grad):
        """Samples todo ([(number, sample)]) of one OpInfo, dtype and mode:
        exported one by one, run by one `tcompile run --batch`, compared one
        by one."""
        def harness(e):  # the harness's own failure: never quiet
            return "crash", "harness: %s: %s" % (type(e).__name__, first_line(str(e)))
        runs, done = [], {}
        for i, s in todo:
            try:
                r = self.one(os.path.join(d, str(i)), op, s, dtype, grad)
            except Exception as e:
                r = harness(e)
            if r[0] == "run":
                runs.append((i, r))
            else:
                done[i] = r
        t0 = time.time()
        ran = self.run_batch([r[1] for _, r in runs])
        self.run_time += time.time() - t0
        self.times["tcompile"] += time.time() - t0
        self.mark = time.perf_counter()
        for (i, r), (status, msg, got) in zip(runs, ran):
            if status:
                done[i] = (status, msg)
                continue
            try:
                done[i] = r[2](got)
            except Exception as e:
                done[i] = harness(e)
        self.lap("compare")
        for i, _ in todo:
            self.results[prefix + str(i)] = done[i]
            if self.a.verbose:
                print("%s%d %s %s" % (prefix, i, done[i][0], done[i][1]), file=sys.stderr)

# --jobs: OpInfos swept by worker processes, each taking the next OpInfo
# when it is done with one (their costs differ by 1000x, so no fixed
# slices). Spawned, not forked: a fork of a process that has run torch can
# hang in its thread pools; each worker imports op_db once.
WORKER_OPS = {}


def worker_init():
    torch.set_num_threads(1)
    WORKER_OPS.update((opinfo_key(o), o) for o in load_op_db())


def worker_sweep(a, key):
    """One OpInfo swept in a worker: what the parent merges."""
    sw = Sweep(a)
    with tempfile.TemporaryDirectory(prefix="tn-opinfo-") as d:
        sw.sweep_op(WORKER_OPS[key], d)
    return (sw.results, sw.processes, sw.fallbacks, sw.run_time, sw.times, sw.strides,
            sw.targets)


def write_json(path, sw, classes=None):
    """The results so far as --json writes them (classes: every OpInfo
    swept's by its targets, unless given), replacing the file at once: a
    long sweep rewrites it after an OpInfo (at most every 30 s), so a sweep
    cut short leaves the OpInfos it finished."""
    if classes is None:
        classes = {o: op_class(sw.targets.get(o, ())) for o in {k.split("|")[0]
                                                                 for k in sw.results}}
    with open(path + ".tmp", "w") as f:
        json.dump({"results": {k: list(v) for k, v in sorted(sw.results.items())},
                   "targets": {k: sorted(v) for k, v in sorted(sw.targets.items())},
                   "classes": dict(sorted(classes.items()))}, f, indent=0)
    os.replace(path + ".tmp", path)


def sweep_all(sw, ops, jobs):
    """ops swept into sw: in this process, or by `jobs` worker processes
    (--json rewritten as they end)."""
    say = sw.a.verbose or len(ops) > 50  # a long sweep says where it is
    if jobs <= 1 or len(ops) <= 1:
        with tempfile.TemporaryDirectory(prefix="tn-opinfo-") as d:
            for i, op in enumerate(ops):
                if say:
                    print("sweep.py: [%d/%d] %s" % (i + 1, len(ops), opinfo_key(op)),
                          file=sys.stderr, flush=True)
                sw.sweep_op(op, d)
                sw.saved = sw.save(sw.saved)
        return
    import concurrent.futures as cf
    import multiprocessing as mp
    with cf.ProcessPoolExecutor(min(jobs, len(ops)), mp_context=mp.get_context("spawn"),
                                initializer=worker_init) as ex:
        todo = {ex.submit(worker_sweep, sw.a, opinfo_key(op)): opinfo_key(op) for op in ops}
        for n, f in enumerate(cf.as_completed(todo)):
            key = todo[f]
            try:
                (results, processes, fallbacks, run_time, times, strides,
                 targets) = f.result()
            except Exception as e:  # the worker died: never quiet
                sw.results[key + "|*|*|*"] = ("crash", "harness: worker: %s: %s" % (
                    type(e).__name__, first_line(str(e))))
                continue
            sw.results.update(results)
            for k, v in targets.items():
                sw.targets.setdefault(k, set()).update(v)
            sw.processes += processes
            sw.fallbacks += fallbacks
            sw.run_time += run_time
            for k, v in times.items():
                sw.times[k] += v
            sw.strides[0] += strides[0]
            sw.strides[1] += strides[1]
            sw.saved = sw.save(sw.saved)
            if say:
                print("sweep.py: [%d/%d] %s" % (n + 1, len(ops), key), file=sys.stderr, flush=True)


def read_xfail(path):
    xf = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.startswith("#") or not line.strip():
                    continue
                key, status, reason = (line.rstrip("\n").split("\t") + ["", ""])[:3]
                xf[key] = (status, reason)
    return xf


def counts(results, prefix=""):
    """The summary's lines for results: OpInfos, and samples per mode."""
    c = {}
    for key, (st, _) in results.items():
        mode = key.split("|")[2]
        c.setdefault(mode, {}).setdefault(st, 0)
        c[mode][st] += 1
    ops_ran = {k.split("|")[0] for k, (st, _) in results.items() if st != "skip"}
    ops_all = {k.split("|")[0] for k in results}
    ops_pass = {o for o in ops_ran
                if all(st in ("pass", "skip") for k, (st, _) in results.items()
                       if k.split("|")[0] == o)}
    lines = ["%s%d OpInfos swept, %d with samples that export, %d pass every sample" %
             (prefix, len(ops_all), len(ops_ran), len(ops_pass))]
    for mode in ("fwd", "grad"):
        m = c.get(mode, {})
        n = sum(v for k, v in m.items() if k != "skip")
        lines.append("%s%s: %d samples: %d pass, %d wrong, %d refused, %d crash (%d skipped: "
                     "PyTorch cannot export or run them)" %
                     (prefix, "forward" if mode == "fwd" else "gradients", n, m.get("pass", 0),
                      m.get("wrong", 0), m.get("refused", 0), m.get("crash", 0),
                      m.get("skip", 0)))
    return lines


def summary(results, classes=None, xf=None):
    """The whole sweep's lines, then, when the OpInfos' classes are known
    ({OpInfo key: "core" or "other"}), each class's: OpInfos whose every
    sample passes, OpInfos whose failures are all in the list xf, OpInfos
    with a failure the list does not hold, and its samples."""
    lines = counts(results)
    if classes is None:
        return lines
    by = {}
    for key, v in results.items():
        by.setdefault(classes.get(key.split("|")[0], "unclassified"), {})[key] = v
    for cls in ("core", "other", "unclassified"):
        res = by.get(cls)
        if not res:
            continue
        fails = {}
        for key, (st, _) in res.items():
            if st in ("wrong", "refused", "crash"):
                fails.setdefault(key.split("|")[0], []).append(key)
        ran = {k.split("|")[0] for k, (st, _) in res.items() if st != "skip"}
        listed = {o for o, keys in fails.items() if all(k in xf for k in keys)}
        lines.append("%s OpInfos (%s): %d swept, %d pass every sample, %d with listed failures "
                     "only, %d with unlisted failures" % (
                         cls, "every target a core ATen overload" if cls == "core" else
                         "a target outside core ATen" if cls == "other" else
                         "no targets recorded", len(ran), len(ran) - len(fails), len(listed),
                         len(fails) - len(listed)))
        lines += counts(res, "  %s " % cls)[1:]
    return lines


def read_results(path):
    """An earlier run's --json: {"results": {KEY: [STATUS, MESSAGE]},
    "targets": {OPINFO: [TARGET, ...]}}, or the older form (the results
    alone, no targets)."""
    with open(path) as f:
        doc = json.load(f)
    if isinstance(doc.get("results"), dict):
        return doc["results"], doc.get("targets", {})
    return doc, {}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tcompile", required=True)
    p.add_argument("--ops", help="comma-separated OpInfo names (name or name.variant)")
    p.add_argument("--quick", action="store_true", help="the subset make check runs")
    p.add_argument("--max-samples", type=int, help="the first N samples of each dtype")
    p.add_argument("--xfail", default=os.path.join(HERE, "expected-failures.txt"))
    p.add_argument("--update", action="store_true", help="rewrite the expected-failure list")
    p.add_argument("--json", help="write every sample's result here (as OpInfos end)")
    p.add_argument("--timeout", type=int, default=60, help="seconds a sample may run")
    p.add_argument("--batch", type=int, default=64, metavar="N",
                   help="run up to N samples in one `tcompile run --batch` process "
                        "(1: a process per sample)")
    p.add_argument("--shard", default="0/1", help="K/N: the K-th of N slices of op_db")
    p.add_argument("-j", "--jobs", type=int, default=0, metavar="N",
                   help="sweep OpInfos in N worker processes (default: one per CPU, "
                        "1 with --quick; 1: in this process)")
    p.add_argument("--results", nargs="+", metavar="JSON",
                   help="take the results of earlier runs' --json instead of sweeping "
                        "(with --ops, only those OpInfos are swept again)")
    p.add_argument("--dtypes", help="comma-separated dtypes to sweep instead of %s (also: "
                   "complex64, complex128)" % ",".join(DTYPES))
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args()
    if a.dtypes:
        bad = [n for n in a.dtypes.split(",") if n not in SWEEPABLE]
        if bad:
            print("sweep.py: --dtypes: %s is not one of %s" % (bad[0], ",".join(SWEEPABLE)),
                  file=sys.stderr)
            return 2
    try:
        op_db = load_op_db()
    except Exception as e:
        print("sweep.py: skipped: PyTorch's op_db cannot be imported (%s)" % first_line(str(e)))
        return 77
    if int(torch.__version__.split(".")[0]) < 2:
        print("sweep.py: skipped: torch.export needs PyTorch 2.x (this is %s)" % torch.__version__)
        return 77
    want = None
    if a.ops:
        want = set(a.ops.split(","))
    elif a.quick:
        want = set(QUICK)
        a.max_samples = a.max_samples or QUICK_SAMPLES
    a.max_samples = a.max_samples or 1 << 30
    ops = [o for o in op_db if want is None or o.name in want or opinfo_key(o) in want]
    k, n = (int(x) for x in a.shard.split("/"))
    ops = [o for i, o in enumerate(ops) if i % n == k]
    if not ops and not a.results:
        print("sweep.py: no OpInfo named %s" % a.ops, file=sys.stderr)
        return 2
    sw = Sweep(a)
    if a.results:
        for path in a.results:
            results, targets = read_results(path)
            sw.results.update({k: tuple(v) for k, v in results.items()})
            sw.targets.update((k, set(v)) for k, v in targets.items())
        if not a.ops:
            ops = []
        for op in ops:  # swept again: their old results go
            for key in [k for k in sw.results if k.split("|")[0] == opinfo_key(op)]:
                del sw.results[key]
            sw.targets.pop(opinfo_key(op), None)
    torch.set_num_threads(1)
    # (the quick subset in one process: a worker's import of op_db costs
    # more than its few samples)
    jobs = a.jobs or (1 if a.quick else len(os.sched_getaffinity(0)))
    sweep_all(sw, ops, jobs)
    res = sw.results
    if a.results:
        seen = {k.split("|")[0] for k in res}
        ops = [o for o in op_db if opinfo_key(o) in seen]
    swept = {opinfo_key(o) for o in ops}
    xf = read_xfail(a.xfail)
    classes = {o: op_class(sw.targets.get(o, ())) for o in {k.split("|")[0] for k in res}
               if o in sw.targets or not a.results}
    for line in summary(res, classes, xf):
        print(line)
    print("sweep.py: %d tcompile processes (%d samples run again alone), %.1f s in all, "
          "%.1f s running tcompile" % (sw.processes, sw.fallbacks, time.time() - sw.timing,
                                       sw.run_time))
    ran = sum(1 for v in res.values() if v[0] != "skip")
    total = sum(sw.times.values())
    if ops and ran and total:
        print("sweep.py: %d OpInfos by %d process%s, %.1f s wall; per sample compared (%d): %s; "
              "%.1f ms in all" % (len(ops), min(jobs, len(ops)), "es" if jobs > 1 else "",
                                  time.time() - sw.timing, ran,
                                  ", ".join("%s %.1f ms (%.0f%%)" % (
                                      k, 1000 * v / ran, 100 * v / total if total else 0)
                                      for k, v in sw.times.items()), 1000 * total / ran))
    if sw.strides[0]:
        print("sweep.py: strides of %d forward results compared, %d differ from PyTorch's" %
              (sw.strides[0], len(sw.strides[1])))
        for line in sw.strides[1][:20]:
            print("  " + line)
    if a.json:
        write_json(a.json, sw, classes)
    mine = {k: v for k, v in xf.items() if k.split("|")[0] in swept}
    failing = {k: v for k, v in res.items() if v[0] in ("wrong", "refused", "crash")}
    if a.update:
        # the OpInfos not swept keep their lines; a listed sample that still
        # fails as listed keeps its reason (often PyTorch's, written by hand)
        keep = {k: v for k, v in xf.items() if k.split("|")[0] not in swept}
        keep.update((k, xf[k] if xf.get(k, ("",))[0] == v[0] else v)
                    for k, v in failing.items())
        with open(a.xfail, "w") as f:
            f.write("# tests/opinfo/sweep.py's expected failures: OPINFO|DTYPE|MODE|SAMPLE"
                    "\tSTATUS\tREASON (tensorkit's message, or the values that differ).\n"
                    "# Only shrinks: a listed sample that passes fails the sweep. Written for the\n"
                    "# whole of op_db from a full sweep's shards (make check-opinfo OPINFO_FLAGS=\n"
                    "# '--results S0.json S1.json ... --update'); '--ops NAME,... --update'\n"
                    "# rewrites the lines of the OpInfos named.\n")
            for key in sorted(keep):
                st, msg = keep[key]
                f.write("%s\t%s\t%s\n" % (key, st, msg.replace("\t", " ").replace("\n", " ")))
        print("sweep.py: %s: %d expected failures" % (a.xfail, len(keep)))
        return 0
    bad = 0
    for key in sorted(failing):
        if key not in mine:
            print("NEW FAILURE %s: %s: %s" % (key, failing[key][0], failing[key][1]))
            bad += 1
    for key in sorted(mine):
        st = res.get(key, ("absent", ""))[0]
        if st == "pass":
            print("NOW PASSES (remove it from %s) %s" % (os.path.basename(a.xfail), key))
            bad += 1
    print("sweep.py: %d samples compared, %d listed as expected failures, %d disagree" %
          (sum(1 for v in res.values() if v[0] != "skip"), len(mine), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

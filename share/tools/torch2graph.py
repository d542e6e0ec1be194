#!/usr/bin/env python3
"""torch2graph.py: export a PyTorch nn.Module to tensorkit's JSON graph.

    python3 torch2graph.py FILE.py:FACTORY -o PREFIX [--dynamic-batch] [--pt2]

FACTORY() returns (module, example_inputs): a module and a tuple of tensors.
Writes
  PREFIX.json           the graph: torch.export's serialized ExportedProgram
  PREFIX.pt             its weights: parameters and buffers by the names the
                        graph's signature gives them (a torch.save'd dict)
  PREFIX_inputs.pt      the example inputs, by placeholder name
  PREFIX_expected.pt    the module's outputs on them, by output name
  PREFIX.pt2            with --pt2 (PyTorch 2.x): torch.export.save's archive
With --grads, also PREFIX_grads.pt: d(sum of the outputs)/d(each parameter),
keyed like the weights (what `tcompile run --grad` computes).

On PyTorch 2.x the module goes through torch.export.export and torch's own
serializer. On 1.13 (no torch.export) it is traced with torch.fx's
symbolic_trace and written in the same format by the converter below, which
maps the modules and functions it knows to the ATen ops torch.export names
(linear, conv2d, batch_norm, layer_norm, embedding, cat, stack, ...); anything else is
refused with its name. --dynamic-batch makes dimension 0 of every input a
symbol (torch.export.Dim on 2.x; on 1.13 sizes that follow the batch are
found by tracing shapes at two batch sizes).

Runs with the user's own PyTorch; needs nothing from tensorkit.
"""
import argparse
import importlib.util
import json
import operator
import os
import sys

import torch

TORCH2 = hasattr(torch, "export") and hasattr(torch.export, "export")

# torch.export's ScalarType numbers (torch/_export/serde/schema.py)
SCALAR_TYPES = {
    torch.uint8: 1, torch.int8: 2, torch.int16: 3, torch.int32: 4, torch.int64: 5,
    torch.float16: 6, torch.float32: 7, torch.float64: 8, torch.complex64: 10,
    torch.bool: 12, torch.bfloat16: 13,
}


def load_factory(spec):
    path, _, name = spec.rpartition(":")
    if not path:
        raise SystemExit("torch2graph: SPEC must be FILE.py:FACTORY")
    mod_spec = importlib.util.spec_from_file_location("torch2graph_user", path)
    mod = importlib.util.module_from_spec(mod_spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    mod_spec.loader.exec_module(mod)
    return getattr(mod, name)


def flat_outputs(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flat_outputs(o)]
    raise SystemExit("torch2graph: outputs must be tensors or tuples of tensors")


# ------------------------------------------------------------ PyTorch 2.x

def graph_doc(ep):
    """The graph JSON of ExportedProgram ep: its serialized program, with
    no stack traces (they name the user's files; the .pt2 keeps torch's
    own)."""
    from torch._export.serde.serialize import serialize
    doc = json.loads(serialize(ep).exported_program)
    for node in doc["graph_module"]["graph"]["nodes"]:
        node.get("metadata", {}).pop("stack_trace", None)
    return doc


def export2(module, inputs, dynamic_batch):
    dyn = None
    if dynamic_batch:
        batch = torch.export.Dim("batch")
        dyn = tuple({0: batch} for _ in inputs)
    ep = torch.export.export(module, inputs, dynamic_shapes=dyn)
    doc = graph_doc(ep)
    sig = ep.graph_signature
    weights = dict(ep.state_dict)
    for k, v in ep.constants.items():
        if isinstance(v, torch.Tensor):
            weights[k] = v
    return doc, weights, list(sig.user_inputs), list(sig.user_outputs), ep


# ------------------------------------------------------------ PyTorch 1.13

def meta(t, exprs=None):
    sizes = []
    for d, s in enumerate(t.shape):
        e = exprs[d] if exprs else None
        sizes.append({"as_expr": {"expr_str": e, "hint": {"as_int": int(s)}}} if e
                     else {"as_int": int(s)})
    strides = [{"as_int": int(s)} for s in torch.empty(t.shape).stride()]
    return {"dtype": SCALAR_TYPES[t.dtype], "sizes": sizes, "requires_grad": False,
            "device": {"type": "cpu", "index": None}, "strides": strides,
            "storage_offset": {"as_int": 0}, "layout": 7}


class FxConverter:
    """torch.fx GraphModule -> ExportedProgram JSON, for PyTorch 1.13."""

    FUNCS = {
        torch.relu: "relu.default", torch.tanh: "tanh.default", torch.sigmoid: "sigmoid.default",
        torch.nn.functional.relu: "relu.default", torch.nn.functional.gelu: "gelu.default",
        torch.softmax: "softmax.int", torch.log_softmax: "log_softmax.int",
        torch.nn.functional.softmax: "softmax.int",
        torch.nn.functional.log_softmax: "log_softmax.int",
        torch.matmul: "matmul.default", torch.flatten: "flatten.using_ints",
        torch.nn.functional.max_pool2d: "max_pool2d.default",
        torch.nn.functional.avg_pool2d: "avg_pool2d.default",
        operator.add: "add.Tensor", operator.mul: "mul.Tensor", operator.sub: "sub.Tensor",
        operator.truediv: "div.Tensor", torch.add: "add.Tensor", torch.mul: "mul.Tensor",
        torch.cat: "cat.default", torch.stack: "stack.default",
    }
    METHODS = {
        "transpose": "transpose.int", "reshape": "reshape.default", "view": "view.default",
        "split": "split.Tensor", "unflatten": "unflatten.int", "flatten": "flatten.using_ints",
        "mean": "mean.dim", "permute": "permute.default", "relu": "relu.default",
        "softmax": "softmax.int", "contiguous": "clone.default", "sum": "sum.dim_IntList",
    }

    def __init__(self, gm, inputs, exprs):
        self.gm, self.inputs, self.exprs = gm, inputs, exprs
        self.nodes, self.tensor_values, self.names = [], {}, {}
        self.in_specs, self.graph_inputs, self.weights = [], [], {}
        self.lifted = {}

    def value(self, name, t, exprs=None):
        self.tensor_values[name] = meta(t, exprs)

    def ref(self, a):
        if isinstance(a, torch.fx.Node):
            return self.names[a]
        raise TypeError(a)

    def arg(self, a):
        if isinstance(a, torch.fx.Node):
            return {"as_tensor": {"name": self.ref(a)}}
        if a is None:
            return {"as_none": True}
        if isinstance(a, bool):
            return {"as_bool": a}
        if isinstance(a, int):
            return {"as_int": a}
        if isinstance(a, float):
            return {"as_float": a}
        if isinstance(a, str):
            return {"as_string": a}
        if isinstance(a, (list, tuple)) and all(isinstance(x, torch.fx.Node) for x in a):
            return {"as_tensors": [{"name": self.ref(x)} for x in a]}
        if isinstance(a, (list, tuple)) and all(isinstance(x, int) for x in a):
            return {"as_ints": list(a)}
        raise SystemExit("torch2graph: an argument we cannot write: %r" % (a,))

    def lift(self, qualname, tensor, is_param):
        """A parameter or buffer becomes a graph input, as torch.export lifts them."""
        if qualname in self.lifted:
            return self.lifted[qualname]
        name = ("p_" if is_param else "b_") + qualname.replace(".", "_")
        self.lifted[qualname] = name
        self.value(name, tensor)
        self.graph_inputs.append(name)
        spec = ({"parameter": {"arg": {"name": name}, "parameter_name": qualname}} if is_param
                else {"buffer": {"arg": {"name": name}, "buffer_name": qualname,
                                 "persistent": True}})
        self.in_specs.append(spec)
        self.weights[qualname] = tensor.detach()
        return name

    def weight(self, mod_name, attr):
        qual = mod_name + "." + attr
        t = getattr(self.gm.get_submodule(mod_name), attr)
        if t is None:
            return None
        return self.lift(qual, t, isinstance(t, torch.nn.Parameter))

    def emit(self, fx_node, target, named, outputs=None):
        schema = getattr(torch.ops.aten, target.split(".")[0]).__getattr__(target.split(".")[1])
        names = [a.name for a in schema._schema.arguments]
        ins = []
        for k, v in named:
            if k not in names:
                raise SystemExit("torch2graph: %s has no argument %s" % (target, k))
            ins.append({"name": k, "arg": v if isinstance(v, dict) and len(v) == 1 and
                        next(iter(v)).startswith("as_") else self.arg(v),
                        "kind": 1})
        name = fx_node.name
        if outputs is None:
            self.names[fx_node] = name
            self.value(name, fx_node.meta["tensor_meta"], self.exprs.get(name))
            outputs = [{"as_tensor": {"name": name}}]
        self.nodes.append({"target": "torch.ops.aten." + target, "inputs": ins,
                           "outputs": outputs, "metadata": {}, "name": name})

    def positional(self, target, args, kwargs):
        schema = getattr(torch.ops.aten, target.split(".")[0]).__getattr__(target.split(".")[1])
        names = [a.name for a in schema._schema.arguments]
        named = list(zip(names, args))
        aliases = {"input": "self", "dim": "dim"}
        for k, v in kwargs.items():
            # None takes the schema's default; return_indices=False is the
            # overload without indices
            if v is None or (k == "return_indices" and v is False):
                continue
            k = k if k in names else aliases.get(k, k)
            named.append((k, v))
        return named

    def module_call(self, n):
        m = self.gm.get_submodule(n.target)
        x = n.args[0]
        w = lambda a: {"as_tensor": {"name": self.weight(n.target, a)}} \
            if getattr(m, a) is not None else {"as_none": True}
        nn = torch.nn
        if isinstance(m, nn.Linear):
            return self.emit(n, "linear.default", [("input", x), ("weight", w("weight")),
                                                   ("bias", w("bias"))])
        if isinstance(m, nn.Conv2d):
            return self.emit(n, "conv2d.default", [
                ("input", x), ("weight", w("weight")), ("bias", w("bias")),
                ("stride", list(m.stride)), ("padding", list(m.padding)),
                ("dilation", list(m.dilation)), ("groups", m.groups)])
        if isinstance(m, nn.BatchNorm2d):
            if m.training:
                raise SystemExit("torch2graph: %s is in training mode (call .eval())" % n.target)
            return self.emit(n, "batch_norm.default", [
                ("input", x), ("weight", w("weight")), ("bias", w("bias")),
                ("running_mean", w("running_mean")), ("running_var", w("running_var")),
                ("training", False), ("momentum", float(m.momentum)), ("eps", float(m.eps)),
                ("cudnn_enabled", True)])
        if isinstance(m, nn.LayerNorm):
            return self.emit(n, "layer_norm.default", [
                ("input", x), ("normalized_shape", list(m.normalized_shape)),
                ("weight", w("weight")), ("bias", w("bias")), ("eps", float(m.eps)),
                ("cudnn_enable", False)])
        if isinstance(m, nn.Embedding):
            return self.emit(n, "embedding.default", [
                ("weight", w("weight")), ("indices", x),
                ("padding_idx", -1 if m.padding_idx is None else m.padding_idx)])
        if isinstance(m, (nn.ReLU, nn.GELU, nn.Tanh)):
            t = {nn.ReLU: "relu.default", nn.GELU: "gelu.default", nn.Tanh: "tanh.default"}
            return self.emit(n, t[type(m)], [("self", x)])
        if isinstance(m, nn.Dropout):
            return self.emit(n, "dropout.default", [("input", x), ("p", float(m.p)),
                                                    ("train", False)])
        raise SystemExit("torch2graph: module %s (%s) is not supported on PyTorch 1.13"
                         % (n.target, type(m).__name__))

    def convert(self):
        graph = self.gm.graph
        users_of_split = {}
        for n in graph.nodes:
            if n.op == "placeholder":
                self.names[n] = n.name
                self.value(n.name, n.meta["tensor_meta"], self.exprs.get(n.name))
                self.user_inputs.append(n.name)
            elif n.op == "get_attr":
                t = self.gm
                for part in n.target.split("."):
                    t = getattr(t, part)
                mod, _, attr = n.target.rpartition(".")
                self.names[n] = self.lift(n.target, t, isinstance(t, torch.nn.Parameter))
            elif n.op == "call_module":
                self.module_call(n)
            elif n.op == "call_function" and n.target is operator.getitem:
                src, i = n.args
                if src not in users_of_split:
                    raise SystemExit("torch2graph: getitem of %s is not supported" % src.name)
                self.names[n] = n.name
                self.value(n.name, n.meta["tensor_meta"], self.exprs.get(n.name))
                users_of_split[src][i] = {"name": n.name}
            elif n.op in ("call_function", "call_method"):
                table = self.FUNCS if n.op == "call_function" else self.METHODS
                target = table.get(n.target)
                if target is None:
                    raise SystemExit("torch2graph: %s %s is not supported on PyTorch 1.13"
                                     % (n.op, getattr(n.target, "__name__", n.target)))
                args = list(n.args)
                if target in ("mean.dim", "sum.dim_IntList") and len(args) > 1 and \
                        isinstance(args[1], int):
                    args[1] = [args[1]]
                if target in ("reshape.default", "view.default", "permute.default") and \
                        len(args) > 2:
                    args = [args[0], list(args[1:])]
                named = self.positional(target, args, n.kwargs)
                if target == "split.Tensor":
                    count = len(n.meta["tensor_meta"])
                    users_of_split[n] = [None] * count
                    outs = {"as_tensors": users_of_split[n]}
                    self.emit(n, target, named, outputs=[outs])
                else:
                    self.emit(n, target, named)
            elif n.op == "output":
                outs = flat_outputs_fx(n.args[0])
                self.outputs = [self.names[o] for o in outs]
        for n, items in users_of_split.items():
            for k, it in enumerate(items):
                if it is None:  # an unused piece still needs a name
                    items[k] = {"name": "%s_unused_%d" % (n.name, k)}
        return self.document()

    def document(self):
        in_specs = [{"user_input": {"arg": {"as_tensor": {"name": u}}}} for u in self.user_inputs]
        # torch.export puts the lifted weights first
        graph_inputs = self.graph_inputs + self.user_inputs
        in_specs = self.in_specs + in_specs
        symbols = sorted({e for ex in self.exprs.values() for e in ex if e and e.isidentifier()})
        return {
            "graph_module": {
                "graph": {
                    "inputs": [{"as_tensor": {"name": n}} for n in graph_inputs],
                    "outputs": [{"as_tensor": {"name": n}} for n in self.outputs],
                    "nodes": self.nodes, "tensor_values": self.tensor_values,
                    "sym_int_values": {}, "sym_bool_values": {}, "is_single_tensor_return": False,
                    "custom_obj_values": {}, "sym_float_values": {},
                },
                "signature": {
                    "input_specs": in_specs,
                    "output_specs": [{"user_output": {"arg": {"as_tensor": {"name": n}}}}
                                     for n in self.outputs],
                },
                "module_call_graph": [], "metadata": {},
            },
            "opset_version": {"aten": 10},
            "range_constraints": {s: {"min_val": 2, "max_val": None} for s in symbols},
            "schema_version": {"major": 8, "minor": 17},
            "verifiers": [], "torch_version": torch.__version__,
        }


def flat_outputs_fx(a):
    if isinstance(a, torch.fx.Node):
        return [a]
    return [x for y in a for x in flat_outputs_fx(y)]


def fx_shapes(gm, inputs):
    from torch.fx.passes.shape_prop import ShapeProp
    ShapeProp(gm).propagate(*inputs)
    out = {}
    for n in gm.graph.nodes:
        tm = n.meta.get("tensor_meta")
        if tm is not None and hasattr(tm, "shape"):
            out[n.name] = tuple(tm.shape)
    return out


def batch_exprs(gm, inputs):
    """Sizes that follow the batch: a*s0 + c, from shapes at two batch sizes."""
    b = inputs[0].shape[0]
    grown = tuple(torch.cat([t, t[:1]]) for t in inputs)
    s1, s2 = fx_shapes(gm, grown), fx_shapes(gm, inputs)
    exprs = {}
    for name, shape in s2.items():
        e = []
        for d, (x1, x2) in enumerate(zip(s1[name], shape)):
            a = x1 - x2
            c = x2 - a * b
            if a == 0:
                e.append(None)
            else:
                t = "s0" if a == 1 else "%d*s0" % a
                e.append(t if c == 0 else "%s + %d" % (t, c))
        exprs[name] = e
    return exprs


def export1(module, inputs, dynamic_batch):
    gm = torch.fx.symbolic_trace(module)
    exprs = batch_exprs(gm, inputs) if dynamic_batch else {}
    fx_shapes(gm, inputs)  # leaves tensor_meta at the example's sizes
    conv = FxConverter(gm, inputs, exprs)
    conv.user_inputs = []
    doc = conv.convert()
    return doc, conv.weights, conv.user_inputs, conv.outputs, None


# ------------------------------------------------------------ main

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("spec", help="FILE.py:FACTORY returning (module, example inputs)")
    p.add_argument("-o", "--output", required=True, help="the prefix of the files written")
    p.add_argument("--dynamic-batch", action="store_true",
                   help="make dimension 0 of every input symbolic")
    p.add_argument("--pt2", action="store_true", help="also write PREFIX.pt2 (PyTorch 2.x)")
    p.add_argument("--grads", action="store_true",
                   help="also write PREFIX_grads.pt: d(sum of outputs)/d(parameters)")
    p.add_argument("--fx", action="store_true", help="use the torch.fx path on 2.x too")
    a = p.parse_args(argv)
    module, inputs = load_factory(a.spec)()
    inputs = tuple(inputs)
    write(module, inputs, a.output, dynamic_batch=a.dynamic_batch, pt2=a.pt2, grads=a.grads,
          fx=a.fx)


def write(module, inputs, prefix, dynamic_batch=False, pt2=False, grads=False, fx=False):
    """Exports module on inputs to prefix.json, .pt, _inputs.pt, _expected.pt."""
    module = module.eval()
    if TORCH2 and not fx:
        doc, weights, in_names, out_names, ep = export2(module, inputs, dynamic_batch)
    else:
        doc, weights, in_names, out_names, ep = export1(module, inputs, dynamic_batch)
    with torch.no_grad():
        outs = flat_outputs(module(*inputs))
    d = os.path.dirname(prefix)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(prefix + ".json", "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    torch.save({k: v.detach().clone() for k, v in weights.items()}, prefix + ".pt")
    torch.save(dict(zip(in_names, inputs)), prefix + "_inputs.pt")
    torch.save(dict(zip(out_names, outs)), prefix + "_expected.pt")
    if pt2:
        if ep is None:
            raise SystemExit("torch2graph: --pt2 needs PyTorch 2.x")
        torch.export.save(ep, prefix + ".pt2")
    if grads:
        # a tied parameter (GPT-2's lm_head and wte) under the name the
        # graph's signature lifts it by, which may not be the first one
        params = dict(module.named_parameters(remove_duplicate=False))
        if ep is not None:
            used = {n.name for n in ep.graph.nodes if n.op == "placeholder" and n.users}
            lifted = {fqn for ph, fqn in ep.graph_signature.inputs_to_parameters.items()
                      if ph in used}
            params = {k: v for k, v in params.items() if k in lifted}
        module.zero_grad()
        loss = sum(o.sum() for o in flat_outputs(module(*inputs)))
        loss.backward()
        torch.save({k: v.grad.detach().clone() for k, v in params.items()
                    if v.grad is not None}, prefix + "_grads.pt")


if __name__ == "__main__":
    main()

"""tests/cli/tcompile_item.bats's helper: reads a graph that
`tcompile show --json` wrote with PyTorch 2.x's own deserializer
(torch._export.serde.serialize.deserialize, what torch.export.load runs on a
.pt2's model JSON), with the weights of WEIGHTS (by the signature's names),
runs its graph module on INPUTS (by placeholder name) and saves its outputs by the
signature's output names to OUT, for tckpt diff against PyTorch's.

    python torch_load.py GRAPH.json WEIGHTS.pt INPUTS.pt OUT.pt
"""
import json
import sys

import torch
from torch._export.serde.serialize import (SerializedArtifact, deserialize,
                                           serialize_torch_artifact)


def doc_specs(doc):
    return json.loads(doc)["graph_module"]["signature"]["input_specs"]


def main():
    graph, weights, inputs, out = sys.argv[1:5]
    with open(graph, "rb") as f:
        doc = f.read()
    w = torch.load(weights)
    # the verifier wants the parameters as nn.Parameter
    for spec in doc_specs(doc):
        if "parameter" in spec and spec["parameter"]["parameter_name"] in w:
            name = spec["parameter"]["parameter_name"]
            w[name] = torch.nn.Parameter(w[name], requires_grad=False)
    art = SerializedArtifact(doc, serialize_torch_artifact(w), serialize_torch_artifact({}),
                             serialize_torch_artifact(((), {})))
    ep = deserialize(art)
    x = torch.load(inputs)
    # the lifted graph's placeholders in the signature's order: a weight by
    # its target, a user input by its name
    args = []
    for spec in ep.graph_signature.input_specs:
        name = spec.target if spec.target is not None else spec.arg.name
        args.append(w[name] if spec.target is not None else x[name])
    with torch.no_grad():
        outs = torch.fx.Interpreter(ep.graph_module).run(*args)
    if isinstance(outs, torch.Tensor):
        outs = (outs,)
    names = [spec.arg.name for spec in ep.graph_signature.output_specs]
    torch.save(dict(zip(names, outs)), out)


main()

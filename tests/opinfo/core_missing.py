"""Lists the overloads of PyTorch 2.x's core ATen op set (torch.Tag.core on
torch.ops.aten.*.overload) that libtensor cannot run from a graph (no
dispatcher operator, graph builtin or factory: tn_graph_functional_op gives
NULL), with the counts. Usage (python3 with PyTorch 2.x):
    python3 tests/opinfo/core_missing.py [path/to/libtensor.so]
default .libs/libtensor.so of the build tree. Exit 0."""
import ctypes
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
lib = ctypes.CDLL(sys.argv[1] if len(sys.argv) > 1 else
                  os.path.join(here, "..", "..", ".libs", "libtensor.so"))
lib.tn_graph_functional_op.restype = ctypes.c_void_p
lib.tn_graph_functional_op.argtypes = [ctypes.c_char_p]
core, missing = [], []
for name in dir(torch.ops.aten):
    pk = getattr(torch.ops.aten, name, None)
    if not isinstance(pk, torch._ops.OpOverloadPacket):
        continue
    for ov in pk.overloads():
        if torch.Tag.core in getattr(pk, ov).tags:
            t = "aten.%s.%s" % (name, ov)
            core.append(t)
            if not lib.tn_graph_functional_op(("torch.ops." + t).encode()):
                missing.append(t)
print("torch %s: %d core overloads, %d undeclared" % (torch.__version__, len(core), len(missing)))
for t in missing:
    print(t)

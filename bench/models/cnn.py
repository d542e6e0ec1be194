"""bench/models/cnn.sh's models: torchvision CNNs at their real size (batch
1, 3 x 224 x 224, 1000 classes, random weights), exported with
share/tools/torch2graph.py, and PyTorch eager's time on them.

    cnn.py export OUT NAME...    writes OUT/NAME.json, .pt, _inputs.pt, _expected.pt
    cnn.py eager THREADS REPEAT NAME...   prints "NAME MS" (the fastest run)
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "share", "tools"))


def make(name):
    import torchvision
    torch.manual_seed(27)
    m = getattr(torchvision.models, name)(weights=None).eval()
    return m, (torch.randn(1, 3, 224, 224),)


def main(argv):
    if argv[0] == "export":
        import torch2graph
        torch.set_num_threads(1)
        for name in argv[2:]:
            m, x = make(name)
            torch2graph.write(m, x, os.path.join(argv[1], name))
        return 0
    torch.set_num_threads(int(argv[1]))
    for name in argv[3:]:
        m, x = make(name)
        best = 1e30
        with torch.no_grad():
            m(*x)
            for _ in range(int(argv[2])):
                t0 = time.perf_counter()
                m(*x)
                best = min(best, time.perf_counter() - t0)
        print(name, "%.3f" % (best * 1e3))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

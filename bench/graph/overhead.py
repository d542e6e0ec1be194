"""bench/graph/overhead.sh's model: relu(x * 2 + 1) on a 2048 x 4096 float32
input (32 MiB), so that the compute is small next to reading and writing
32 MiB."""
import torch


class Affine(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x * 2.0 + 1.0)


def affine():
    torch.manual_seed(0)
    return Affine().eval(), (torch.randn(2048, 4096),)

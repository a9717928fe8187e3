#!/usr/bin/python3
"""make_golden_conv_nmse.py — PyTorch float32's per-op error, for tests/test_conv_nmse.c.

For every distinct convolution shape of the ConvNet and of the CIFAR ResNet18 (at a small
batch), inputs x, w and dy are drawn from torch.Generator().manual_seed(index) with
uniform_ (x and dy in [-1, 1), w in +-1/sqrt(fan_in), PyTorch's default init bound), in
that order: common/rng.h's rng_fill_uniform draws the same floats, so the C test rebuilds
the inputs instead of reading them.  For each shape this writes one line with PyTorch
float32's normalised mean squared error against float64 on those inputs,

    NMSE(a) = sum((a - ref)^2) / sum(ref^2),   ref = the op computed by torch in float64,

for the forward (y), the input gradient (dx) and the weight gradient (dw), and sum(ref^2)
of each, which the C test compares with its own float64 to prove the inputs are the same.

Run with Debian's python3 (torch 1.13 CPU), on one thread, with OpenBLAS and oneDNN left to
pick their kernels for the machine (OPENBLAS_CORETYPE unset):
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 tests/golden/make_golden_conv_nmse.py
It writes conv_nmse.txt next to itself (committed; rerun only to regenerate it).  The
committed file was made on an AMD EPYC (Zen 3, AVX2: oneDNN's avx2 direct kernels).
"""
import os
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))

# name, n, c, h, w, k, r(=s), pad, stride
SHAPES = [
    ("convnet.conv1", 8, 1, 28, 28, 16, 5, 2, 1),
    ("convnet.conv2", 8, 16, 14, 14, 32, 5, 2, 1),
    ("resnet18.conv1", 2, 3, 32, 32, 64, 3, 1, 1),
    ("resnet18.layer1", 2, 64, 32, 32, 64, 3, 1, 1),
    ("resnet18.layer2.0.conv1", 2, 64, 32, 32, 128, 3, 1, 2),
    ("resnet18.layer2.conv", 2, 128, 16, 16, 128, 3, 1, 1),
    ("resnet18.layer2.0.downsample", 2, 64, 32, 32, 128, 1, 0, 2),
    ("resnet18.layer3.0.conv1", 2, 128, 16, 16, 256, 3, 1, 2),
    ("resnet18.layer3.conv", 2, 256, 8, 8, 256, 3, 1, 1),
    ("resnet18.layer3.0.downsample", 2, 128, 16, 16, 256, 1, 0, 2),
    ("resnet18.layer4.0.conv1", 2, 256, 8, 8, 512, 3, 1, 2),
    ("resnet18.layer4.conv", 2, 512, 4, 4, 512, 3, 1, 1),
    ("resnet18.layer4.0.downsample", 2, 256, 8, 8, 512, 1, 0, 2),
]


def conv_all(x, w, dy, pad, stride):
    x = x.clone().requires_grad_(True)
    w = w.clone().requires_grad_(True)
    y = F.conv2d(x, w, None, stride=stride, padding=pad)
    y.backward(dy)
    return y.detach(), x.grad.detach(), w.grad.detach()


def main():
    torch.set_num_threads(1)
    lines = ["# name n c h w k r pad stride seed  sumsq64_y sumsq64_dx sumsq64_dw  "
             "nmse32_y nmse32_dx nmse32_dw",
             "# torch %s, %s; made by make_golden_conv_nmse.py" %
             (torch.__version__, torch.backends.cpu.get_cpu_capability()
              if hasattr(torch.backends, "cpu") else "cpu")]
    for seed, (name, n, c, h, wd, k, r, pad, stride) in enumerate(SHAPES):
        g = torch.Generator()
        g.manual_seed(seed)
        bound = 1.0 / (c * r * r) ** 0.5
        x = torch.empty(n, c, h, wd).uniform_(-1.0, 1.0, generator=g)
        w = torch.empty(k, c, r, r).uniform_(-bound, bound, generator=g)
        p = (h + 2 * pad - r) // stride + 1
        q = (wd + 2 * pad - r) // stride + 1
        dy = torch.empty(n, k, p, q).uniform_(-1.0, 1.0, generator=g)
        ref = conv_all(x.double(), w.double(), dy.double(), pad, stride)
        got = conv_all(x, w, dy, pad, stride)
        sumsq = [float((t * t).sum()) for t in ref]
        nmse = [float(((a.double() - t) ** 2).sum()) / s for a, t, s in zip(got, ref, sumsq)]
        lines.append("%s %d %d %d %d %d %d %d %d %d  %.17g %.17g %.17g  %.6e %.6e %.6e" %
                     (name, n, c, h, wd, k, r, pad, stride, seed, *sumsq, *nmse))
        print(lines[-1], file=sys.stderr)
    with open(os.path.join(HERE, "conv_nmse.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

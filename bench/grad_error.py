#!/usr/bin/python3
"""grad_error.py — the float64 reference for bench/bench_grad_error.c (scripts/grad-error).

One ResNet18 (the distributed-training example's, width 64, tests/golden/
make_golden_resnet18.py's module) at torch.manual_seed(0), one batch of BATCH CIFAR-shaped
images (torch.randn, labels torch.randint, generator seed 1), one train-mode step of the mean
cross-entropy.  Writes into OUT_DIR:
  init.safetensors    the float32 state_dict (`ddpprof train --init` loads it)
  expect.safetensors  input (BATCH,3,32,32) F32, labels (BATCH) I64, and grad.<param>: the
                      gradient computed in float64 (the model and batch cast to double),
                      rounded to F32 (2^-24 relative, far below the errors measured)
and prints PyTorch float32's global relative error against it,
  ||g32 - g64|| / ||g64||   over every trainable parameter together.

usage: /usr/bin/python3 bench/grad_error.py OUT_DIR [BATCH]   (default batch 32)
"""
import copy
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "golden"))
from make_golden_resnet18 import Block, ResNet, save_safetensors  # noqa: E402


def grads(model, x, y):
    model.train()
    loss = nn.CrossEntropyLoss()(model(x), y)
    loss.backward()
    return {name: p.grad.detach().clone() for name, p in model.named_parameters()}


def main():
    out_dir = sys.argv[1]
    batch = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    torch.manual_seed(0)
    model = ResNet(Block)
    save_safetensors(os.path.join(out_dir, "init.safetensors"), model.state_dict())
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)
    g64 = grads(copy.deepcopy(model).double(), x.double(), y)
    g32 = grads(model, x, y)
    num = sum(float(((g32[k].double() - g64[k]) ** 2).sum()) for k in g64)
    den = sum(float((g64[k] ** 2).sum()) for k in g64)
    out = {"input": x, "labels": y}
    for k, v in g64.items():
        out["grad." + k] = v.float()
    save_safetensors(os.path.join(out_dir, "expect.safetensors"), out)
    print("pytorch %s float32 (%d threads): global relative error %.3e" %
          (torch.__version__, torch.get_num_threads(), (num / den) ** 0.5))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Golden per-layer counts for ddpprof's meta.csv (layer.K.*, param.I.*), from PyTorch's
own modules and the shapes they produce.

Run with Debian's python3-torch (PyTorch 1.13, CPU): /usr/bin/python3 make_golden_layers.py
Writes, next to this script, layers_convnet_b8.csv and layers_resnet18_w4_b8.csv: the seed's
ConvNet and the example's ResNet18 at width 4 (make_golden_convnet.py's and
make_golden_resnet18.py's classes, imported), one training step of a batch of 8.

Rows (kind,name,type,value1,value2):
  module,NAME,TYPE,,         every leaf module in the order its forward ran (forward hooks),
                             TYPE as ddpprof names it (conv, batchnorm, relu, maxpool,
                             avgpool, linear)
  flops,NAME,TYPE,FWD,BWD    conv and linear: the FLOPs of one forward and one backward,
                             counted here from the shapes PyTorch produced -- forward
                             2*N*K*C*R*S*P*Q (+ N*K*P*Q with a bias), backward the weight
                             gradient's 2*N*K*C*R*S*P*Q, the input gradient's as much again
                             only where PyTorch computes one (the input requires grad: not
                             for the first layer), + N*K*P*Q for a bias; linear the same with
                             R=S=P=Q=1 -- (torch.utils.flop_counter is not in 1.13)
  param,NAME,,BYTES,         model.named_parameters() in order: fp32 bytes
"""
import csv
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_golden_convnet import ConvNet  # noqa: E402
from make_golden_resnet18 import Block, ResNet  # noqa: E402

TYPES = {nn.Conv2d: "conv", nn.BatchNorm2d: "batchnorm", nn.ReLU: "relu",
         nn.MaxPool2d: "maxpool", nn.AdaptiveAvgPool2d: "avgpool", nn.Linear: "linear"}
BATCH = 8


def count(model, shape, path):
    rows, names = [], {m: n for n, m in model.named_modules()}

    def hook(mod, inp, out):
        name, x = names[mod], inp[0]
        kind = TYPES[type(mod)]
        rows.append(["module", name, kind, "", ""])
        if kind == "conv":
            n, c = x.shape[0], x.shape[1]
            k, p, q = out.shape[1], out.shape[2], out.shape[3]
            r, s = mod.kernel_size
            mac = n * k * c * r * s * p * q
            bias = n * k * p * q if mod.bias is not None else 0
        elif kind == "linear":
            n, c, k = x.shape[0], x.shape[1], out.shape[1]
            mac = n * k * c
            bias = n * k if mod.bias is not None else 0
        else:
            return
        dx = 2 * mac if x.requires_grad else 0
        rows.append(["flops", name, kind, 2 * mac + bias, dx + 2 * mac + bias])

    for mod in model.modules():
        if type(mod) in TYPES:
            mod.register_forward_hook(hook)
    model.train()
    x = torch.randn(BATCH, *shape)
    model(x).sum().backward()
    for name, p in model.named_parameters():
        rows.append(["param", name, "", p.numel() * 4, ""])
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["kind", "name", "type", "value1", "value2"])
        w.writerows(rows)


def main():
    torch.manual_seed(0)
    count(ConvNet(), (1, 28, 28), os.path.join(HERE, "layers_convnet_b8.csv"))
    count(ResNet(Block, width=4), (3, 32, 32), os.path.join(HERE, "layers_resnet18_w4_b8.csv"))


if __name__ == "__main__":
    main()

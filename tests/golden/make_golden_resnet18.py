#!/usr/bin/python3
"""Golden files for ResNet18: the distributed-training example's network (seed 002) in PyTorch.

Run with Debian's python3-torch (PyTorch 1.13, CPU): /usr/bin/python3 make_golden_resnet18.py
Writes, next to this script:
  resnet18_state_dict.txt       the example's module at its own width (64): one line per
                                state_dict entry, "name dim0xdim1..." ("-" for a scalar), then
                                "parameters 11173962" (sum of numel over model.parameters())
  resnet18_w2_init.safetensors  the same module with every channel count divided by 32
                                (width 2: 2, 4, 8, 16 channels), state_dict at
                                torch.manual_seed(0) (what `ddpprof train --init` loads)
  resnet18_w2_expect.safetensors  a random batch and what PyTorch computes from it:
    input (4,3,32,32) F32, labels (4) I64
    logits (4,10), loss () : train-mode forward of the initial model
    grad.<param>           : gradients of the mean cross-entropy
    running.<buffer>       : BatchNorm running statistics after that forward
    eval_logits (4,10)     : eval-mode forward after it (running statistics)
The width-2 module is the example's code with 64 replaced by the width: the same layers,
names and forward.  The safetensors files are written by hand (struct + json): 1.13 has no
safetensors module.
"""
import json
import os
import struct

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


class Block(nn.Module):  # the example's block, verbatim
    def __init__(self, in_channels, out_channels, stride=1):
        super().__init__()
        self.residual_function = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1,
                      bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels)
        )
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(out_channels)
            )

    def forward(self, x):
        out = self.residual_function(x) + self.shortcut(x)
        return nn.ReLU(inplace=True)(out)


class ResNet(nn.Module):  # the example's network; width=64 is verbatim
    def __init__(self, block, num_classes=10, width=64):
        super().__init__()
        w = width
        self.conv1 = nn.Sequential(
            nn.Conv2d(3, w, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(w),
            nn.ReLU(inplace=True))
        self.conv2 = self.make_layer(block, w, w, 2, 1)
        self.conv3 = self.make_layer(block, w, 2 * w, 2, 2)
        self.conv4 = self.make_layer(block, 2 * w, 4 * w, 2, 2)
        self.conv5 = self.make_layer(block, 4 * w, 8 * w, 2, 2)
        self.avg_pool = nn.AdaptiveAvgPool2d((1, 1))
        self.dense_layer = nn.Linear(8 * w, num_classes)

    def make_layer(self, block, in_channels, out_channels, num_blocks, stride):
        strides = [stride] + [1] * (num_blocks - 1)
        layers = []
        for stride in strides:
            layers.append(block(in_channels, out_channels, stride))
            in_channels = out_channels
        return nn.Sequential(*layers)

    def forward(self, x):
        out = self.conv1(x)
        out = self.conv2(out)
        out = self.conv3(out)
        out = self.conv4(out)
        out = self.conv5(out)
        out = self.avg_pool(out)
        out = out.view(out.size(0), -1)
        out = self.dense_layer(out)
        return out


DTYPES = {torch.float32: "F32", torch.int64: "I64"}


def save_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        data = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    torch.manual_seed(0)
    full = ResNet(Block)
    with open(os.path.join(HERE, "resnet18_state_dict.txt"), "w") as f:
        for name, t in full.state_dict().items():
            f.write("%s %s\n" % (name, "x".join(str(d) for d in t.shape) or "-"))
        f.write("parameters %d\n" % sum(p.numel() for p in full.parameters()))

    torch.manual_seed(0)
    model = ResNet(Block, width=2)
    save_safetensors(os.path.join(HERE, "resnet18_w2_init.safetensors"), model.state_dict())

    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 3, 32, 32, generator=g)
    y = torch.randint(0, 10, (4,), generator=g)
    crit = nn.CrossEntropyLoss()
    out = {"input": x, "labels": y}
    model.train()
    logits = model(x)
    loss = crit(logits, y)
    loss.backward()
    out["logits"] = logits
    out["loss"] = loss
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.clone()
    for name, b in model.named_buffers():
        out["running." + name] = b.clone()
    model.eval()
    with torch.no_grad():
        out["eval_logits"] = model(x)
    save_safetensors(os.path.join(HERE, "resnet18_w2_expect.safetensors"), out)


if __name__ == "__main__":
    main()

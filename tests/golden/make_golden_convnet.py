#!/usr/bin/python3
"""Golden files for the ConvNet: PyTorch's forward, backward and SGD steps.

Run with Debian's python3-torch (PyTorch 1.13, CPU): /usr/bin/python3 make_golden_convnet.py
Writes, next to this script:
  convnet_init.safetensors    the seed's ConvNet state_dict at torch.manual_seed(0)
                              (what `ddpprof train --init` loads)
  convnet_expect.safetensors  a random batch and what PyTorch computes from it:
    input (8,1,28,28) F32, labels (8) I64
    logits (8,10), loss () : train-mode forward of the initial model
    grad.<param>           : gradients of the mean cross-entropy
    running.<buffer>       : BatchNorm running statistics after that forward
    step2.<param>          : parameters after 2 SGD steps (lr 0.05, momentum 0.9,
                             weight decay 1e-3) on the same batch
    eval_logits (8,10)     : eval-mode forward after those steps
The safetensors files are written by hand (struct + json): 1.13 has no safetensors module.
"""
import json
import os
import struct

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))


class ConvNet(nn.Module):  # the seed's model, verbatim
    def __init__(self, num_classes=10):
        super(ConvNet, self).__init__()
        self.layer1 = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=5, stride=1, padding=2),
            nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(kernel_size=2, stride=2))
        self.layer2 = nn.Sequential(
            nn.Conv2d(16, 32, kernel_size=5, stride=1, padding=2),
            nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(kernel_size=2, stride=2))
        self.fc = nn.Linear(7 * 7 * 32, num_classes)

    def forward(self, x):
        out = self.layer1(x)
        out = self.layer2(out)
        out = out.reshape(out.size(0), -1)
        return self.fc(out)


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
    model = ConvNet()
    save_safetensors(os.path.join(HERE, "convnet_init.safetensors"), model.state_dict())

    g = torch.Generator().manual_seed(1)
    x = torch.rand(8, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (8,), generator=g)
    crit = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)

    out = {"input": x, "labels": y}
    model.train()
    logits = model(x)
    loss = crit(logits, y)
    opt.zero_grad()
    loss.backward()
    out["logits"] = logits
    out["loss"] = loss
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.clone()
    for name, b in model.named_buffers():
        out["running." + name] = b.clone()
    opt.step()
    logits = model(x)
    loss = crit(logits, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    for name, p in model.named_parameters():
        out["step2." + name] = p.detach().clone()
    model.eval()
    with torch.no_grad():
        out["eval_logits"] = model(x)
    save_safetensors(os.path.join(HERE, "convnet_expect.safetensors"), out)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Golden values for Adam: torch.optim.Adam's first two steps, bias correction included.

Run with Debian's python3-torch (PyTorch 1.13, CPU): /usr/bin/python3 make_golden_adam.py
Writes adam_expect.safetensors next to this script.  For each case C:
  C.param0 (n)              the parameter before the first step
  C.grad1, C.grad2 (n)      the gradient given to step 1 and to step 2
  C.step1.param, C.step1.exp_avg, C.step1.exp_avg_sq, C.step1.step ()   after step 1
  C.step2.param, C.step2.exp_avg, C.step2.exp_avg_sq, C.step2.step ()   after step 2
Cases (n = 1000; gradients of magnitudes from 1e-9 to 10, so eps matters for some):
  default  Adam(lr=1e-3), PyTorch's defaults (betas (0.9, 0.999), eps 1e-8, no weight decay)
  wd       Adam(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)
"""
import json
import os
import struct

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = {
    "default": dict(lr=1e-3),
    "wd": dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1),
}


def save_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous()
        data = t.numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
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


def grads(g, n):
    mag = torch.pow(10.0, torch.rand(n, generator=g) * 10.0 - 9.0)
    sign = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0)
    return (mag * sign).float()


def main():
    g = torch.Generator().manual_seed(2)
    out = {}
    n = 1000
    for case, kw in CASES.items():
        p = torch.nn.Parameter(torch.rand(n, generator=g) * 2 - 1)
        g1, g2 = grads(g, n), grads(g, n)
        out[case + ".param0"] = p.detach().clone()
        out[case + ".grad1"] = g1
        out[case + ".grad2"] = g2
        opt = torch.optim.Adam([p], **kw)
        for k, grad in ((1, g1), (2, g2)):
            p.grad = grad.clone()
            opt.step()
            st = opt.state[p]
            out["%s.step%d.param" % (case, k)] = p.detach().clone()
            out["%s.step%d.exp_avg" % (case, k)] = st["exp_avg"].clone()
            out["%s.step%d.exp_avg_sq" % (case, k)] = st["exp_avg_sq"].clone()
            step = torch.as_tensor(st["step"]).float().reshape(())
            out["%s.step%d.step" % (case, k)] = step.clone()  # 'step' changes in place
    save_safetensors(os.path.join(HERE, "adam_expect.safetensors"), out)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""make_golden_ddp_step.py — float64 golden for tests/test_ddp_equivalence.c: the first SGD
step of the ConvNet on its first global batch, computed by PyTorch in float64.

Run with Debian's python3-torch (PyTorch 1.13, CPU): /usr/bin/python3 make_golden_ddp_step.py
It reads Fashion-MNIST from Debian's dataset-fashion-mnist and writes, next to itself,
ddp_step1_init.safetensors, the ConvNet's state_dict at torch.manual_seed(INIT_SEED) (the
seed's model, as make_golden_convnet.py; INIT_SEED below), and ddp_step1_expect.safetensors:
  momentum.<param>   the SGD momentum buffer after step 1 (= grad + weight_decay * param:
                     PyTorch's buffer on its first step), float64 rounded to F32
  loss ()            step 1's loss, F32 (float64 rounded)
  metadata: the run it describes (init seed, sampler seed, limit, global batch, lr,
            momentum, weight decay) and the decision margins of step 1's forward (below)

The test's runs: `ddpprof train --limit 24 --seed 3 --lr 0.01 --momentum 0.9 --weight-decay
1e-4 --init ddp_step1_init.safetensors`, one step of global batch 24 (1 rank x 24, 2 x 12,
3 x 8): DistributedSampler order torch.randperm(24) seeded 3 + epoch 0, the pixels / 255,
SyncBatchNorm over the global batch (= BatchNorm in train mode here).

Why step 1 is exact on any processor: the fp32 kernels (AVX2, AVX-512, oneDNN, own loops)
differ from float64, and runs of different batch splits from each other, by rounding.  A
ReLU or max-pool decision flips only where its margin is that small; the script computes
every margin of step 1's forward
in float64 (the smallest |ReLU input| and the smallest nonzero gap between a pool window's
two largest values; exact ties are broken by the same first-index rule in both) and takes
the first initialisation seed whose margins exceed RELU_MARGIN_MIN and POOL_MARGIN_MIN and
SAFETY_MIN times the change PyTorch's own fp32 forward makes to them.  Later steps have no such guarantee:
results/rounding_20261207 shows margins of 1e-7 by step 5 of the test's 10-step run.
"""
import gzip
import json
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

from make_golden_convnet import ConvNet, save_safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = "/usr/share/datasets/fashion-mnist"
SEED, LIMIT, BATCH = 3, 24, 24
LR, MOMENTUM, WD = 0.01, 0.9, 1e-4
# The margins the first step's decisions must have.  Between two fp32 runs of one machine
# that split the batch differently (the test's comparison of N ranks with one process) the
# activations differ only through the batch-norm statistics' summation order, ~1e-7; from
# float64 they differ by up to 1.5e-6 (layer1) and 7e-6 (layer2: PyTorch fp32 measured,
# max over every value).  24 images have 113k ReLU inputs and 113k pool windows, whose
# smallest gap in float64 is 1e-8 to 3e-6 for 199 initialisations: the script takes the
# first with a ReLU margin of 1e-5 and a pool margin of 3e-6 (30x the split's rounding).
# And PyTorch's fp32 forward must change no margin by more than a tenth of it (SAFETY_MIN).
RELU_MARGIN_MIN, POOL_MARGIN_MIN, SAFETY_MIN = 1e-5, 3e-6, 10.0


def load_st(path):
    with open(path, "rb") as f:
        buf = f.read()
    n = struct.unpack("<Q", buf[:8])[0]
    hdr = json.loads(buf[8:8 + n])
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        dt = {"F32": np.float32, "I64": np.int64}[v["dtype"]]
        out[k] = torch.from_numpy(
            np.frombuffer(buf[8 + n + a:8 + n + b], dtype=dt).reshape(v["shape"]).copy())
    return out


def save_st(path, tensors, meta):
    header, blobs, off = {"__metadata__": meta}, [], 0
    for k, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[k] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def idx(path):
    with gzip.open(path) as f:
        data = f.read()
    nd = struct.unpack(">I", data[:4])[0] & 0xff
    dims = struct.unpack(">" + "I" * nd, data[4:4 + 4 * nd])
    return np.frombuffer(data[4 + 4 * nd:], dtype=np.uint8).reshape(dims)


def safety(X, init):
    """the smallest ratio, over every pool window's non-winning candidate and every ReLU
    input, of its float64 margin to the change PyTorch's fp32 forward makes to that margin:
    how many times another fp32 implementation's rounding would have to exceed PyTorch's to
    flip a decision"""
    g = torch.Generator()
    g.manual_seed(SEED + 0)
    sel = torch.randperm(LIMIT, generator=g)[:BATCH].numpy()
    acts = {}
    for dt in (torch.float64, torch.float32):
        out = torch.from_numpy(X[sel].astype(np.float64) / 255.0).reshape(-1, 1, 28, 28).to(dt)
        p = {k: v.to(dt) for k, v in init.items()}
        acts[dt] = []
        for l in ("layer1", "layer2"):
            c = F.conv2d(out, p[l + ".0.weight"], p[l + ".0.bias"], padding=2)
            b = F.batch_norm(c, None, None, p[l + ".1.weight"], p[l + ".1.bias"], training=True,
                             eps=1e-5)
            n, ch, h, w = b.shape
            win = b.reshape(n, ch, h // 2, 2, w // 2, 2).permute(0, 1, 2, 4, 3, 5)
            pooled = F.max_pool2d(b, 2)
            acts[dt].append((win.reshape(n, ch, h // 2, w // 2, 4).double(), pooled.double()))
            out = F.relu(pooled)
    worst = float("inf")
    for (w64, p64), (w32, p32) in zip(acts[torch.float64], acts[torch.float32]):
        arg = w64.argmax(-1, keepdim=True)
        gap64, gap32 = w64.gather(-1, arg) - w64, w32.gather(-1, arg) - w32
        m = gap64 > 0
        worst = min(worst, float((gap64[m] / (gap64[m] - gap32[m]).abs().clamp(min=1e-30)).min()),
                    float((p64.abs() / (p64 - p32).abs().clamp(min=1e-30)).min()))
    return worst


def step1(X, Y, init):
    """step 1 from init on the first global batch: (loss, params with .grad, relu margin,
    pool margin)"""
    g = torch.Generator()
    g.manual_seed(SEED + 0)
    sel = torch.randperm(LIMIT, generator=g)[:BATCH].numpy()
    x = torch.from_numpy(X[sel].astype(np.float64) / 255.0).reshape(-1, 1, 28, 28)
    y = torch.from_numpy(Y[sel].astype(np.int64))
    p = {k: v.double().requires_grad_(True) for k, v in init.items()
         if "running" not in k and "num_batches" not in k}
    relu_min, gap_min = float("inf"), float("inf")
    out = x
    for l in ("layer1", "layer2"):
        c = F.conv2d(out, p[l + ".0.weight"], p[l + ".0.bias"], padding=2)
        b = F.batch_norm(c, None, None, p[l + ".1.weight"], p[l + ".1.bias"], training=True,
                         eps=1e-5)
        n, ch, h, w = b.shape
        win = b.detach().reshape(n, ch, h // 2, 2, w // 2, 2).permute(0, 1, 2, 4, 3, 5)
        top2 = torch.topk(win.reshape(n, ch, h // 2, w // 2, 4), 2, dim=-1).values
        gap = top2[..., 0] - top2[..., 1]
        gap_min = min(gap_min, float(gap[gap > 0].min()))
        pooled = F.max_pool2d(b, 2)
        relu_min = min(relu_min, float(pooled.detach().abs().min()))
        out = F.relu(pooled)
    logits = F.linear(out.reshape(out.shape[0], -1), p["fc.weight"], p["fc.bias"])
    loss = F.cross_entropy(logits, y)
    loss.backward()
    return loss, p, relu_min, gap_min


def main():
    X = idx(DATA + "/train-images-idx3-ubyte.gz")[:LIMIT]
    Y = idx(DATA + "/train-labels-idx1-ubyte.gz")[:LIMIT]
    for init_seed in range(1, 200):
        torch.manual_seed(init_seed)
        init = ConvNet().state_dict()
        loss, p, relu_min, gap_min = step1(X, Y, init)
        print("init seed %d: step 1 loss %.9f; margins: smallest |ReLU input| %.3g, smallest "
              "pool gap %.3g" % (init_seed, loss.item(), relu_min, gap_min))
        if relu_min >= RELU_MARGIN_MIN and gap_min >= POOL_MARGIN_MIN:
            ratio = safety(X, init)
            print("  PyTorch fp32 changes no margin by more than 1/%.1f of it" % ratio)
            if ratio >= SAFETY_MIN:
                break
    else:
        raise SystemExit("no initialisation seed under 200 with the margins asked")
    save_safetensors(os.path.join(HERE, "ddp_step1_init.safetensors"), init)
    expect = {"loss": loss.detach().reshape(())}
    for k, t in p.items():  # SGD's first step: buf = d_p = grad + weight_decay * param
        expect["momentum." + k] = t.grad + WD * t.detach()
    meta = {"init_seed": str(init_seed), "seed": str(SEED), "limit": str(LIMIT), "global_batch": str(BATCH), "lr": str(LR),
            "momentum": str(MOMENTUM), "weight_decay": str(WD),
            "relu_margin": "%.3g" % relu_min, "pool_margin": "%.3g" % gap_min,
            "fp32_safety": "%.1f" % ratio,
            "torch": torch.__version__}
    save_st(os.path.join(HERE, "ddp_step1_expect.safetensors"), expect, meta)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""analyse.py REF_CKPT OTHER_CKPT --seed S --limit L --batch B --step K

Two ConvNet checkpoints saved at the end of step K-1 of runs that should be equal (one
process at batch B against N ranks at B/N, or two summation orders of one process).  In
float64, from each: step K's forward (train mode, batch statistics of the global batch of
B), its decisions (each max-pool window's argmax, each ReLU's sign) and the margins that
decide them, and the gradient of every parameter.  Prints where the two disagree.
"""
import argparse, gzip, json, struct, sys
import numpy as np
import torch
import torch.nn.functional as F

def load_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        base = 8 + n
        f.seek(0); buf = f.read()
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__": continue
        a, b = v["data_offsets"]
        dt = {"F32": np.float32, "I64": np.int64}[v["dtype"]]
        out[k] = torch.from_numpy(np.frombuffer(buf[base + a: base + b], dtype=dt).reshape(v["shape"]).copy())
    return out

def idx(path):
    with gzip.open(path) as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4]); nd = magic & 0xff
    dims = struct.unpack(">" + "I" * nd, data[4:4 + 4 * nd])
    return np.frombuffer(data[4 + 4 * nd:], dtype=np.uint8).reshape(dims)

def forward(w, x, y):
    """float64 train-mode forward and backward; returns (loss, grads, decisions)"""
    p = {k: v.double().clone().requires_grad_(True) for k, v in w.items()
         if not k.startswith("optimizer.") and "running" not in k and "num_batches" not in k}
    dec = {}
    out = x
    for l in ("layer1", "layer2"):
        c = F.conv2d(out, p[l + ".0.weight"], p[l + ".0.bias"], padding=2)
        b = F.batch_norm(c, None, None, p[l + ".1.weight"], p[l + ".1.bias"], training=True, eps=1e-5)
        # the pool runs on the BN output (ddpprof's order; same values as PyTorch's ReLU first)
        n, ch, h, wd = b.shape
        win = b.detach().reshape(n, ch, h // 2, 2, wd // 2, 2).permute(0, 1, 2, 4, 3, 5).reshape(n, ch, h // 2, wd // 2, 4)
        top2 = torch.topk(win, 2, dim=-1)
        dec[l + ".pool_arg"] = win.argmax(-1)
        dec[l + ".pool_gap"] = (top2.values[..., 0] - top2.values[..., 1])
        pooled = F.max_pool2d(b, 2)
        dec[l + ".relu_in"] = pooled.detach()
        out = F.relu(pooled)
    logits = F.linear(out.reshape(out.shape[0], -1), p["fc.weight"], p["fc.bias"])
    loss = F.cross_entropy(logits, y)
    loss.backward()
    return loss.item(), {k: v.grad for k, v in p.items()}, dec

def compact(o, wa, wb, x, y):
    wd = sorted(((float((wa[k].double() - wb[k].double()).abs().max() / wa[k].double().abs().max()), k)
                 for k in wa if not k.startswith("optimizer.") and wa[k].dtype == torch.float32 and "running" not in k), reverse=True)
    la, ga, da = forward(wa, x, y)
    lb, gb, db = forward(wb, x, y)
    fl = []
    for l in ("layer1", "layer2"):
        npool = int((da[l + ".pool_arg"] != db[l + ".pool_arg"]).sum())
        nrelu = int(((da[l + ".relu_in"] > 0) != (db[l + ".relu_in"] > 0)).sum())
        gap = da[l + ".pool_gap"]
        gnz = float(gap[gap > 0].min())
        rmin = float(da[l + ".relu_in"].abs().min())
        fl.append("%s pool %d (min gap %.1e) relu %d (min |x| %.1e)" % (l, npool, gnz, nrelu, rmin))
    gd = max(((float((ga[k] - gb[k]).abs().max() / ga[k].abs().max()), k) for k in ga if not k.endswith("0.bias")))
    print("step %2d: weights before: worst %.1e (%s), next %.1e (%s) | flips: %s | grad worst %.1e (%s)" %
          (o.step, wd[0][0], wd[0][1], wd[1][0], wd[1][1], ", ".join(fl), gd[0], gd[1]))

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a"); ap.add_argument("b")
    ap.add_argument("--seed", type=int, required=True); ap.add_argument("--limit", type=int, required=True)
    ap.add_argument("--batch", type=int, required=True); ap.add_argument("--step", type=int, required=True)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--compact", action="store_true")
    o = ap.parse_args()
    X = idx(o.data + "/train-images-idx3-ubyte.gz")[:o.limit]
    Y = idx(o.data + "/train-labels-idx1-ubyte.gz")[:o.limit]
    g = torch.Generator(); g.manual_seed(o.seed + 0)  # DistributedSampler: seed + epoch, epoch 0
    perm = torch.randperm(o.limit, generator=g)
    sel = perm[(o.step - 1) * o.batch: o.step * o.batch].numpy()
    x = torch.from_numpy(X[sel].astype(np.float64) / 255.0).reshape(-1, 1, 28, 28)
    y = torch.from_numpy(Y[sel].astype(np.int64))
    wa, wb = load_st(o.a), load_st(o.b)
    print("weights at the end of step %d: max |a-b|/max|a| per tensor:" % (o.step - 1))
    for k in wa:
        if k.startswith("optimizer.") or wa[k].dtype != torch.float32: continue
        d = (wa[k].double() - wb[k].double()).abs().max() / wa[k].double().abs().max()
        print("  %-24s %.2e" % (k, d))
    if o.compact:
        return compact(o, wa, wb, x, y)
    la, ga, da = forward(wa, x, y)
    lb, gb, db = forward(wb, x, y)
    print("step %d loss (float64): %.9f vs %.9f, rel %.2e" % (o.step, la, lb, abs(la - lb) / la))
    for l in ("layer1", "layer2"):
        flip = (da[l + ".pool_arg"] != db[l + ".pool_arg"])
        gap = da[l + ".pool_gap"] / da[l + ".relu_in"].abs().clamp(min=1e-30)
        print("%s max-pool: %d windows, %d argmax differ; smallest relative gap (top1-top2)/|top1| %.2e" %
              (l, flip.numel(), int(flip.sum()), float(gap.min())))
        for i in flip.nonzero().tolist()[:5]:
            i = tuple(i)
            print("   window (sample %d, channel %d, %d,%d): gap a %.3e, b %.3e, value %.4f" %
                  (i[0], i[1], i[2], i[3], float(da[l + ".pool_gap"][i]), float(db[l + ".pool_gap"][i]),
                   float(da[l + ".relu_in"][i])))
        ra, rb = da[l + ".relu_in"] > 0, db[l + ".relu_in"] > 0
        sflip = ra != rb
        v = da[l + ".relu_in"].abs()
        print("%s ReLU: %d inputs, %d signs differ; smallest |input| %.2e" %
              (l, v.numel(), int(sflip.sum()), float(v.min())))
        for i in sflip.nonzero().tolist()[:5]:
            i = tuple(i)
            print("   input (sample %d, channel %d, %d,%d): a %.3e, b %.3e" %
                  (*i, float(da[l + ".relu_in"][i]), float(db[l + ".relu_in"][i])))
    print("step %d gradients, max |a-b| / max |a| per parameter:" % o.step)
    for k in ga:
        d = (ga[k] - gb[k]).abs().max() / ga[k].abs().max()
        print("  %-24s %.2e" % (k, d))

main()

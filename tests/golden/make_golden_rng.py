#!/usr/bin/python3
"""make_golden_rng.py — golden files from the real PyTorch for tests/test_sampler.c and
tests/test_safetensors.c.

Run with Debian's python3 (torch 1.13, no safetensors package):
    /usr/bin/python3 tests/golden/make_golden_rng.py
It writes, next to itself:
  randperm.txt              torch.randperm(n, generator=torch.Generator().manual_seed(seed))
                            for several (seed, n), and t.uniform_(lo, hi) draws
  randperm_60000_seed0.u16  torch.randperm(60000) with seed 0 as little-endian uint16
  sampler.txt               list(DistributedSampler(...)) for several configurations
  tiny.safetensors          a safetensors file written by hand with struct + json, laid out
                            as the reference implementation does
The outputs are committed; rerun only to regenerate them.
"""
import json
import os
import struct
import sys

import torch
from torch.utils.data import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


def randperm(seed, n):
    g = torch.Generator()
    g.manual_seed(seed)
    return torch.randperm(n, generator=g).tolist()


def write_randperm():
    lines = ["# torch %s: randperm SEED N : permutation" % torch.__version__,
             "# uniform SEED LO HI COUNT : t.uniform_(LO, HI) float32 values as %a hex floats"]
    cases = [(0, 1), (0, 2), (0, 3), (0, 10), (1, 1), (1, 2), (1, 3), (1, 10),
             (42, 10), (42, 1000), (7, 1000), (123456789, 257), (2**32 + 5, 20), (0, 0)]
    for seed, n in cases:
        lines.append("randperm %d %d : %s" % (seed, n, " ".join(map(str, randperm(seed, n)))))
    for seed, lo, hi, count in [(0, 0.0, 1.0, 8), (3, -0.125, 0.125, 700),
                                (11, -1.0 / 3.0, 1.0 / 3.0, 16)]:
        g = torch.Generator()
        g.manual_seed(seed)
        t = torch.empty(count, dtype=torch.float32).uniform_(lo, hi, generator=g)
        lo32 = struct.unpack("<f", struct.pack("<f", lo))[0]
        hi32 = struct.unpack("<f", struct.pack("<f", hi))[0]
        lines.append("uniform %d %s %s %d : %s" % (seed, lo32.hex(), hi32.hex(), count,
                                                    " ".join(float(v).hex() for v in t.tolist())))
    with open(os.path.join(HERE, "randperm.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    perm = randperm(0, 60000)
    with open(os.path.join(HERE, "randperm_60000_seed0.u16"), "wb") as f:
        f.write(struct.pack("<%dH" % len(perm), *perm))


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def write_sampler():
    lines = ["# torch %s: sampler N REPLICAS RANK SHUFFLE SEED EPOCH DROP_LAST : indices"
             % torch.__version__]
    cases = []
    for n in (1, 2, 3, 4, 5, 7, 10, 11):
        for world in (1, 2, 3, 4):
            for shuffle in (1, 0):
                for drop_last in (0, 1):
                    cases.append((n, world, shuffle, 0, 0, drop_last))
    cases += [(10, 2, 1, 0, 1, 0), (10, 2, 1, 0, 5, 0), (10, 3, 1, 17, 2, 0),
              (10, 3, 1, 17, 2, 1), (1000, 4, 1, 1234, 3, 0), (1001, 4, 1, 1234, 3, 1),
              (1001, 4, 1, 1234, 3, 0), (2, 5, 1, 0, 0, 0), (3, 8, 1, 9, 1, 0),
              (3, 8, 0, 0, 0, 0), (37, 6, 1, 2**33, 4, 0)]
    for n, world, shuffle, seed, epoch, drop_last in cases:
        for rank in range(world):
            s = DistributedSampler(Sized(n), num_replicas=world, rank=rank,
                                   shuffle=bool(shuffle), seed=seed, drop_last=bool(drop_last))
            s.set_epoch(epoch)
            idx = list(iter(s))
            assert len(idx) == len(s)
            lines.append("sampler %d %d %d %d %d %d %d : %s" % (
                n, world, rank, shuffle, seed, epoch, drop_last, " ".join(map(str, idx))))
    with open(os.path.join(HERE, "sampler.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


# position in the reference implementation's Dtype enum: it writes larger first
DTYPE_ORDER = {"U8": 1, "F16": 7, "BF16": 8, "I32": 9, "F32": 11, "I64": 13}


def write_tiny_safetensors():
    tensors = {
        "conv1.weight": ("F32", torch.arange(24, dtype=torch.float32).reshape(2, 3, 2, 2) / 8 - 1),
        "fc.bias": ("F32", torch.tensor([0.5, -2.25, 3e-8], dtype=torch.float32)),
        "bn.num_batches_tracked": ("I64", torch.tensor(-7, dtype=torch.int64)),
        "half": ("F16", torch.tensor([1.0, -0.333251953125, 65504.0, 6e-8], dtype=torch.float16)),
        "brain": ("BF16", torch.tensor([[1.0, -3.140625], [1e30, 0.0078125]],
                                       dtype=torch.bfloat16)),
        "ints": ("I32", torch.tensor([[-2147483648, 0, 2147483647]], dtype=torch.int32)),
        "bytes": ("U8", torch.tensor([0, 1, 127, 128, 255], dtype=torch.uint8)),
        "empty": ("F32", torch.zeros(0, 4, dtype=torch.float32)),
    }
    metadata = {"format": "pt", "note": "tab\there \"quoted\" caf\u00e9"}

    def raw(dtype, t):
        if dtype == "BF16":
            t = t.view(torch.int16)
        return t.contiguous().numpy().tobytes()

    order = sorted(tensors, key=lambda k: (-DTYPE_ORDER[tensors[k][0]], k))
    header = {"__metadata__": dict(sorted(metadata.items()))}
    data = b""
    for name in order:
        dtype, t = tensors[name]
        b = raw(dtype, t)
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(os.path.join(HERE, "tiny.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def main():
    if not torch.__version__.startswith("1.13"):
        print("warning: golden files were made with torch 1.13, this is %s" % torch.__version__,
              file=sys.stderr)
    write_randperm()
    write_sampler()
    write_tiny_safetensors()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# compare_runs.py DIR_A DIR_B (sweep.sh): max relative loss difference over the steps (and at which step), and
# max |a-b|/max|a| over the checkpoint's float tensors (optimizer state left out)
import sys, csv, json, struct
import numpy as np
def losses(d):
    return [float(r["loss"]) for r in csv.DictReader(open(d + "/metrics.csv"))]
def st(path):
    b = open(path, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8+n])
    return {k: np.frombuffer(b[8+n+v["data_offsets"][0]:8+n+v["data_offsets"][1]], dtype=np.float32)
            for k, v in h.items() if k != "__metadata__" and v["dtype"] == "F32" and not k.startswith("optimizer.")}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
d = [abs(x - y) / abs(x) for x, y in zip(a, b)]
first = next((i + 1 for i, v in enumerate(d) if v > 1e-6), 0)
wa, wb = st(sys.argv[1] + "/checkpoint.safetensors"), st(sys.argv[2] + "/checkpoint.safetensors")
w = max(float(np.abs(wa[k].astype(np.float64) - wb[k]).max() / np.abs(wa[k]).max()) for k in wa)
print("%.2e %d %.2e %.2e" % (max(d), first, w, d[-1]))

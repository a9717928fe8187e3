#!/usr/bin/python3
"""make_corpus.py — write the seed corpora of the fuzz targets (fuzz/corpus/NAME/).

    python3 fuzz/make_corpus.py BUILD/ddpprof

Every seed is small (a few KB at most) and valid, or valid but for one thing, so that the
fuzzers start from inputs the parsers accept and mutate from there.  The run directory
and trace seeds come from a real 2-rank run of the ddpprof binary given (2 steps, CPU);
the PyTorch profiler seeds are a small Kineto trace written here, a legacy array, and the
gzip fixtures of tests/fixtures/pytorch.  Run it again after a format changes; the
corpora are then committed as they are (their times differ from run to run, nothing
depends on them).
"""
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gz(data):
    return gzip.compress(data, mtime=0)


# ---- IDX: images, "\n--labels--\n", labels ----
def idx_images(n, rows, cols):
    pixels = bytes((i * 37 + 11) % 256 for i in range(n * rows * cols))
    return struct.pack(">IIII", 0x803, n, rows, cols) + pixels


def idx_labels(labels):
    return struct.pack(">II", 0x801, len(labels)) + bytes(labels)


def corpus_idx():
    sep = b"\n--labels--\n"
    put("idx", "plain", idx_images(3, 4, 5) + sep + idx_labels([0, 9, 3]))
    put("idx", "gzip", gz(idx_images(3, 4, 5)) + sep + gz(idx_labels([1, 2, 7])))
    put("idx", "mixed", idx_images(2, 28, 28) + sep + gz(idx_labels([5, 5])))
    put("idx", "count-mismatch", idx_images(2, 2, 2) + sep + idx_labels([1, 2, 3]))
    put("idx", "truncated", idx_images(2, 3, 3)[:-4] + sep + idx_labels([1, 2]))
    put("idx", "labels-as-images", idx_labels([1, 2, 3]))


# ---- CIFAR-10 binary ----
def cifar_record(label, seed):
    return bytes([label]) + bytes((i * seed + 3) % 256 for i in range(3072))


def corpus_cifar():
    put("cifar", "one", cifar_record(3, 7))
    put("cifar", "two", cifar_record(0, 5) + cifar_record(9, 11))
    put("cifar", "bad-label", cifar_record(10, 3))
    put("cifar", "cut", cifar_record(1, 3)[:-100])


# ---- safetensors ----
DTYPES = {"F32": ("<f", 4), "F16": ("<e", 2), "BF16": (None, 2), "I64": ("<q", 8),
          "I32": ("<i", 4), "U8": ("<B", 1)}


def bf16(v):
    return struct.pack("<f", v)[2:]


def pack(dtype, values):
    fmt, size = DTYPES[dtype]
    if dtype == "BF16":
        return b"".join(bf16(v) for v in values)
    return b"".join(struct.pack(fmt, v) for v in values)


def safetensors(tensors, metadata=None, pad=True):
    """tensors: [(name, dtype, shape, values)] in data order"""
    header, data = {}, b""
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, values in tensors:
        raw = pack(dtype, values)
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def corpus_safetensors():
    put("safetensors", "f32-i64", safetensors(
        [("w", "F32", [2, 3], [0.5, -1, 2, 3, 4.25, -0.125]), ("n", "I64", [], [7])],
        {"format": "pt"}))
    put("safetensors", "halves", safetensors(
        [("h", "F16", [3], [1, -2, 65504]), ("b", "BF16", [2, 1], [0.5, 3e38])]))
    put("safetensors", "ints", safetensors(
        [("a", "I32", [2, 2], [1, -1, 2, -2]), ("u", "U8", [5], [0, 1, 2, 254, 255])]))
    put("safetensors", "misaligned", safetensors(
        [("u", "U8", [1], [9]), ("f", "F32", [2], [1.5, 2.5])]))
    put("safetensors", "empty-header", struct.pack("<Q", 2) + b"{}")
    put("safetensors", "zero-size", safetensors([("z", "F32", [0, 4], [])]))
    put("safetensors", "escapes", safetensors(
        [("na\u00efve/\"q\"\\t", "F32", [1], [1.0])], {"k\n": "v\u20ac"}))
    shutil.copy(os.path.join(SRC, "tests", "golden", "tiny.safetensors"),
                os.path.join(HERE, "corpus", "safetensors", "golden-tiny"))


# ---- checkpoints of fuzz_checkpoint.c's tiny model ----
def checkpoint(optimizer="sgd", amp=0, **meta_over):
    w = [0.1, -0.2, 0.3, -0.4, 0.5, -0.6]
    b = [0.01, 0.02, 0.03]
    tensors = [("layer.weight", "F32", [2, 3], w), ("layer.bias", "F32", [3], b),
               ("bn.running_mean", "F32", [3], [0.0, 0.5, 1.0]),
               ("bn.num_batches_tracked", "I64", [], [12])]
    if optimizer == "sgd":
        tensors += [("optimizer.layer.weight.momentum_buffer", "F32", [2, 3], w),
                    ("optimizer.layer.bias.momentum_buffer", "F32", [3], b)]
    elif optimizer == "adam":
        for name, shape, v in (("layer.weight", [2, 3], w), ("layer.bias", [3], b)):
            tensors += [("optimizer.%s.exp_avg" % name, "F32", shape, v),
                        ("optimizer.%s.exp_avg_sq" % name, "F32", shape, [x * x for x in v]),
                        ("optimizer.%s.step" % name, "F32", [], [4.0])]
    meta = {"epoch": "2", "step": "4", "model": "tiny", "format": "ddpprof-checkpoint-1",
            "scaler.enabled": str(amp), "scaler.scale": "65536" if amp else "1",
            "scaler.growth_factor": "2", "scaler.backoff_factor": "0.5",
            "scaler.growth_interval": "2000", "scaler.growth_tracker": "4"}
    if optimizer:
        meta["optimizer"] = optimizer
    meta.update(meta_over)
    return safetensors(tensors, meta)


def corpus_checkpoint():
    put("checkpoint", "sgd", checkpoint("sgd"))
    put("checkpoint", "sgd-amp", checkpoint("sgd", 1))
    put("checkpoint", "adam", checkpoint("adam"))
    put("checkpoint", "adam-amp", checkpoint("adam", 1, **{"scaler.scale": "0.125"}))
    put("checkpoint", "state-dict", checkpoint(None))
    put("checkpoint", "epoch-huge", checkpoint("sgd", epoch="99999999999999999999"))
    put("checkpoint", "scale-nan", checkpoint("sgd", 1, **{"scaler.scale": "nan"}))


# ---- a real run: run_dir and trace_csv ----
def corpus_run(ddpprof):
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "run")
        subprocess.run([ddpprof, "train", "--cpu", "2", "--mode", "ddp", "--epochs", "1",
                        "--limit", "256", "--test-limit", "64", "--batch-size", "64",
                        "--quiet", "--out", run], check=True)

        def read(name):
            with open(os.path.join(run, name), "rb") as f:
                return f.read()
        meta, metrics = read("meta.csv"), read("metrics.csv")
        r0, r1 = read("rank0.trace.csv"), read("rank1.trace.csv")
    put("run_dir", "ddp-2ranks", meta + b"\n--metrics--\n" + metrics + b"\n--rank0--\n" + r0 +
        b"\n--rank1--\n" + r1)
    put("run_dir", "no-metrics", meta + b"\n--metrics--\n")
    put("run_dir", "rank0-only", meta.replace(b"world_size,2", b"world_size,1") +
        b"\n--metrics--\n" + metrics + b"\n--rank0--\n" + r0)
    put("trace_csv", "rank0", r0)
    lines = r0.split(b"\n")
    quoted = lines[0] + b"\r\n" + lines[1] + b"\r\n\r\n" + \
        lines[2].replace(b",forward,range", b',"fwd, ""quoted""\nname",range') + b"\n" + lines[3]
    put("trace_csv", "quoted-crlf-cut", quoted)
    put("trace_csv", "header-only", lines[0] + b"\n")


# ---- PyTorch profiler traces ----
def kineto_events(steps=2, nccl="ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)"):
    ev, corr = [], 1
    for k in range(steps):
        t = 1000000 + k * 10000
        ev.append({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d" % (5 + k),
                   "pid": 1, "tid": 1, "ts": t, "dur": 9000})
        ev.append({"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#x",
                   "pid": 1, "tid": 1, "ts": t + 10, "dur": 500})
        ev.append({"ph": "X", "cat": "user_annotation",
                   "name": "DistributedDataParallel.forward", "pid": 1, "tid": 1,
                   "ts": t + 600, "dur": 2000})
        ev.append({"ph": "X", "cat": "cpu_op",
                   "name": "autograd::engine::evaluate_function: AddmmBackward0", "pid": 1,
                   "tid": 2, "ts": t + 3000, "dur": 3000})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1,
                   "tid": 2, "ts": t + 4000, "dur": 50,
                   "args": {"Collective name": "allreduce", "In msg nelems": 1000,
                            "dtype": "Float", "Group size": 2}})
        ev.append({"ph": "X", "cat": "cpu_op", "name": "nccl:all_reduce", "pid": 1, "tid": 2,
                   "ts": t + 4005, "dur": 40})
        ev.append({"ph": "X", "cat": "user_annotation", "name": "Optimizer.step#SGD.step",
                   "pid": 1, "tid": 1, "ts": t + 8000, "dur": 500})
        for j, (launch, ks, ke) in enumerate(((t + 700, t + 800, t + 2500),
                                              (t + 3100, t + 3200, t + 5900),
                                              (t + 4010, t + 4100, t + 6000))):
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                       "tid": 1 if j == 0 else 2, "ts": launch, "dur": 5,
                       "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": "gemm_%d" % j if j < 2 else nccl,
                       "pid": 0, "tid": 7 if j < 2 else 20, "ts": ks, "dur": ke - ks,
                       "args": {"stream": 7 if j < 2 else 20, "correlation": corr}})
            corr += 1
        ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": "nccl:all_reduce",
                   "pid": 0, "tid": 20, "ts": t + 4100, "dur": 1900})
    return ev


def corpus_ptjson():
    kineto = {"schemaVersion": 1,
              "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2},
              "baseTimeNanoseconds": 1700000000000000000, "traceEvents": kineto_events()}
    text = json.dumps(kineto, indent=0).encode()
    put("ptjson", "kineto", text)
    put("ptjson", "kineto-cut", text[: len(text) * 2 // 3])
    put("ptjson", "kineto.gz", gz(text))
    legacy = [e for e in kineto_events(2) if e["pid"] == 1]
    put("ptjson", "legacy", json.dumps(legacy).encode())
    put("ptjson", "unicode-escapes", json.dumps(
        {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a\u00e9\\u0041\"b", "pid": 1,
                          "tid": 1, "ts": 1.5e0, "dur": 2}]}).encode())
    fx = os.path.join(SRC, "tests", "fixtures", "pytorch", "legacy-gloo-2ranks")
    for name in sorted(os.listdir(fx))[:1]:
        shutil.copy(os.path.join(fx, name), os.path.join(HERE, "corpus", "ptjson", "legacy-gloo.gz"))


# ---- the store's wire protocol ----
def request(op, key=b"", value=b""):
    return struct.pack("<BHI", op, len(key), len(value)) + key + value


def reply(status, data=b""):
    return struct.pack("<BI", status, len(data)) + data


def corpus_store_wire():
    # the handshake (store_wire.h): rank, world, the client's nonce and its MAC
    hello = request(1, b"", struct.pack("<II", 1, 2) + bytes(range(32)) + bytes(range(32, 64)))
    put("store_wire", "session", hello + request(2, b"shm/name", b"/ddpprof-123") +
        request(3, b"shm/name") + request(4, b"barrier/0", struct.pack("<q", 1)) +
        request(5, b"barrier/0") + request(6))
    put("store_wire", "add-counter", hello + request(2, b"c", b"-42") +
        request(4, b"c", struct.pack("<q", -3)))
    put("store_wire", "partial", hello + request(2, b"key", b"value")[:-2])
    put("store_wire", "replies", reply(0) + reply(0, b"value") + reply(0, struct.pack("<q", 5)) +
        reply(1, b"store: unknown request 9"))
    put("store_wire", "huge-length", struct.pack("<BHI", 2, 3, 0xFFFFFFF0) + b"abc")
    # the server's challenge (magic, mode 1: a job secret, its nonce), then its proof
    put("store_wire", "handshake", reply(0, b"ddpstor1" + b"\x01" + bytes(range(7, 39))) +
        reply(0, bytes(range(100, 132))) + reply(1, b"store: refused: this process does not "
                                                   b"have rank 0's job secret"))
    put("store_wire", "old-hello", request(1, b"", struct.pack("<II", 1, 2)) +
        reply(0, b"ddpstor1" + b"\x03" + bytes(32)))


# ---- the command line: arguments separated by NUL ----
def corpus_cli():
    def args(*a):
        return b"\0".join(x.encode() for x in a)
    put("cli", "main", args("--cpu", "2", "--epochs", "1", "--limit", "256", "--mode", "both"))
    put("cli", "train", args("--cpu", "2", "--mode", "ddp", "--amp", "bf16", "--lr", "0.01",
                             "--normalize", "0.1307,0.3081", "--bucket-cap-mb", "0.5"))
    put("cli", "resnet", args("--model", "resnet18", "--resnet-width", "8", "--dataset",
                              "synthetic", "--optimizer", "adam", "--drop-last",
                              "--lr-scale-by-world", "--save-every-epoch"))
    put("cli", "gpus", args("--gpu", "0,0,1", "--timeout", "2.5", "--master-port", "29500",
                            "--master-addr", "10.0.0.1", "--trace", "nvtx"))
    put("cli", "strings", args("--out", "/tmp/run dir", "--resume", "ck.safetensors", "--init",
                               "w.safetensors", "--data", "d", "--quiet", "--no-shuffle",
                               "--no-sync-bn", "--seed", "7", "--threads", "1"))
    put("cli", "scaler", args("--loss-scale-init", "1e-30", "--loss-scale-growth", "1e6",
                              "--loss-scale-backoff", "1e-6", "--loss-scale-interval", "1",
                              "--momentum", "0.9", "--weight-decay", "5e-4"))
    put("cli", "bad", args("--epochs", "0x10", "-e"))
    put("cli", "help", args("-h"))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus.py BUILD/ddpprof")
    corpus_idx()
    corpus_cifar()
    corpus_safetensors()
    corpus_checkpoint()
    corpus_run(os.path.abspath(sys.argv[1]))
    corpus_ptjson()
    corpus_store_wire()
    corpus_cli()


if __name__ == "__main__":
    main()

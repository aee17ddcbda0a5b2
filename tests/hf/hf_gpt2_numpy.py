#!/usr/bin/env python3
"""An independent GPT-2 forward pass over a Hugging Face GPT-2 safetensors file, in NumPy (float64).

It follows the conventions of Hugging Face's GPT2LMHeadModel (modeling_gpt2.py): Conv1D weights
stored (in, out) and applied as x @ W + b; c_attn's output split into q, k, v in that order; heads
of d_model / n_head columns; a causal softmax scaled by 1/sqrt(head size); "gelu_new" (tanh);
LayerNorm with eps 1e-5; an LM head tied to wte. It shares no code with Strata, so agreement
between its loss and `strata eval` on the same file shows that the file means the same model to
both. (transformers itself is not packaged for Debian 12, so the suite cannot import it.)

  hf_gpt2_numpy.py make-weights OUT n_layer n_head d_model vocab n_positions seed
  hf_gpt2_numpy.py make-tokens OUT count vocab seed [version]
                                                          (an llm.c .bin token file; version 1 is
                                                           uint16, 2 uint32, default the narrowest)
  hf_gpt2_numpy.py check-names FILE n_layer vocab d_model   (exactly HF's names and shapes)
  hf_gpt2_numpy.py loss FILE TOKENS n_head seq_len          (mean cross-entropy, strata eval's windows)
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "BF16": None, "F16": np.float16}


def read_safetensors(path):
    data = open(path, "rb").read()
    (header_size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_size])
    body = data[8 + header_size:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = body[begin:end]
        if entry["dtype"] == "BF16":
            values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            values = np.frombuffer(raw, dtype=np.dtype(DTYPES[entry["dtype"]]).newbyteorder("<"))
        tensors[name] = values.reshape(entry["shape"]).astype(np.float64)
    return tensors, header.get("__metadata__", {})


def to_bf16_bits(values):  # round to nearest even, as torch does
    bits = np.ascontiguousarray(values, dtype="<f4").view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")


ENCODERS = {"F32": lambda a: np.ascontiguousarray(a, dtype="<f4"), "F16": lambda a: np.ascontiguousarray(a, dtype="<f2"),
            "BF16": to_bf16_bits}


def write_safetensors(path, tensors, metadata, dtype="F32"):
    """Writes the tensors in the given order; returns the payload's size in bytes."""
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, array in tensors.items():
        blob = ENCODERS[dtype](array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))
    return offset


def hf_names(n_layer, vocab, d_model):
    c = d_model
    shapes = {"wte.weight": (vocab, c), "wpe.weight": None, "ln_f.weight": (c,), "ln_f.bias": (c,)}
    for i in range(n_layer):
        p = f"h.{i}."
        shapes.update({p + "ln_1.weight": (c,), p + "ln_1.bias": (c,),
                       p + "attn.c_attn.weight": (c, 3 * c), p + "attn.c_attn.bias": (3 * c,),
                       p + "attn.c_proj.weight": (c, c), p + "attn.c_proj.bias": (c,),
                       p + "ln_2.weight": (c,), p + "ln_2.bias": (c,),
                       p + "mlp.c_fc.weight": (c, 4 * c), p + "mlp.c_fc.bias": (4 * c,),
                       p + "mlp.c_proj.weight": (4 * c, c), p + "mlp.c_proj.bias": (c,)})
    return shapes


def make_weights(out, n_layer, n_head, d_model, vocab, n_positions, seed):
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in hf_names(n_layer, vocab, d_model).items():
        shape = shape or (n_positions, d_model)
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            tensors[name] = 1.0 + 0.1 * rng.standard_normal(shape)
        else:  # larger than GPT-2's init, so that every tensor matters to the loss
            tensors[name] = 0.2 * rng.standard_normal(shape)
    # Older Hugging Face exports carry the causal mask as a buffer; a loader must ignore it.
    for i in range(n_layer):
        tensors[f"h.{i}.attn.bias"] = np.tril(np.ones((n_positions, n_positions)))[None, None]
    write_safetensors(out, tensors, {"format": "pt"})


def write_tokens(out, tokens, version=0):
    """An llm.c token file: version 1 (uint16) when every id fits, else version 2 (uint32), as
    Strata's write_token_file chooses; version 1 or 2 forces that layout."""
    tokens = np.asarray(tokens)
    version = version or (1 if tokens.size == 0 or int(tokens.max()) < 65536 else 2)
    assert version in (1, 2), f"token file version {version}: only 1 (uint16) and 2 (uint32) exist"
    assert version == 2 or tokens.size == 0 or int(tokens.max()) < 65536, "ids over 65535 need version 2 (uint32)"
    header = np.zeros(256, dtype="<i4")
    header[:3] = [20240520, version, tokens.size]
    with open(out, "wb") as f:
        f.write(header.tobytes() + tokens.astype("<u2" if version == 1 else "<u4").tobytes())


def make_tokens(out, count, vocab, seed, version=0):
    tokens = np.random.default_rng(seed).integers(0, vocab, size=count, dtype=np.uint16 if vocab <= 65536 else np.uint32)
    write_tokens(out, tokens, version)


def read_tokens(path):
    data = open(path, "rb").read()
    header = np.frombuffer(data[:1024], dtype="<i4")
    assert header[0] == 20240520, f"{path}: not an llm.c token file"
    assert header[1] in (1, 2), f"{path}: unsupported token file version {header[1]}"
    dtype = "<u2" if header[1] == 1 else "<u4"
    expected = 1024 + int(header[2]) * np.dtype(dtype).itemsize
    assert len(data) == expected, f"{path}: expected {expected} bytes, the file has {len(data)}"
    return np.frombuffer(data[1024:], dtype=dtype).astype(np.int64)


def layer_norm(x, weight, bias):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + 1e-5) * weight + bias


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def logits_of(t, tokens, n_head):
    batch, seq_len = tokens.shape
    x = t["wte.weight"][tokens] + t["wpe.weight"][:seq_len]
    d_model = x.shape[-1]
    head = d_model // n_head
    causal = np.tril(np.ones((seq_len, seq_len), dtype=bool))
    i = 0
    while f"h.{i}.ln_1.weight" in t:
        p = f"h.{i}."
        h = layer_norm(x, t[p + "ln_1.weight"], t[p + "ln_1.bias"])
        qkv = h @ t[p + "attn.c_attn.weight"] + t[p + "attn.c_attn.bias"]
        q, k, v = (a.reshape(batch, seq_len, n_head, head).transpose(0, 2, 1, 3) for a in np.split(qkv, 3, axis=-1))
        scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head)
        scores = np.where(causal, scores, -np.inf)
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attention = scores / scores.sum(-1, keepdims=True)
        y = (attention @ v).transpose(0, 2, 1, 3).reshape(batch, seq_len, d_model)
        x = x + y @ t[p + "attn.c_proj.weight"] + t[p + "attn.c_proj.bias"]
        h = layer_norm(x, t[p + "ln_2.weight"], t[p + "ln_2.bias"])
        x = x + gelu_new(h @ t[p + "mlp.c_fc.weight"] + t[p + "mlp.c_fc.bias"]) @ t[p + "mlp.c_proj.weight"] \
            + t[p + "mlp.c_proj.bias"]
        i += 1
    x = layer_norm(x, t["ln_f.weight"], t["ln_f.bias"])
    return x @ t["wte.weight"].T


def window_loss(path, tokens_path, n_head, seq_len):
    tensors, _ = read_safetensors(path)
    tensors = {name.removeprefix("transformer."): value for name, value in tensors.items()}
    tokens = read_tokens(tokens_path)
    windows = len(tokens) // (seq_len + 1)
    rows = tokens[: windows * (seq_len + 1)].reshape(windows, seq_len + 1)
    logits = logits_of(tensors, rows[:, :-1], n_head)
    peak = logits.max(-1, keepdims=True)
    log_z = np.log(np.exp(logits - peak).sum(-1)) + peak[..., 0]
    picked = np.take_along_axis(logits, rows[:, 1:, None], -1)[..., 0]
    return float((log_z - picked).mean())


def greedy(path, n_head, prompt, count):
    """The greedy continuation of `prompt` (comma-separated ids): each new token the argmax of a
    full forward pass over everything so far (no cache), with the margin to the runner-up."""
    tensors, _ = read_safetensors(path)
    tensors = {name.removeprefix("transformer."): value for name, value in tensors.items()}
    tokens = [int(i) for i in prompt.split(",")]
    margins = []
    for _ in range(count):
        logits = logits_of(tensors, np.array([tokens]), n_head)[0, -1]
        top2 = np.sort(logits)[-2:]
        margins.append(top2[1] - top2[0])
        tokens.append(int(np.argmax(logits)))
    return tokens[-count:], min(margins)


def check_names(path, n_layer, vocab, d_model):
    tensors, metadata = read_safetensors(path)
    expected = hf_names(n_layer, vocab, d_model)
    assert metadata.get("format") == "pt", f"metadata {metadata}: from_pretrained needs format = pt"
    assert set(tensors) == set(expected), f"names differ: {sorted(set(tensors) ^ set(expected))}"
    for name, shape in expected.items():
        if shape is not None:
            assert tensors[name].shape == shape, f"{name}: {tensors[name].shape}, HF expects {shape}"
    print(f"{path}: {len(tensors)} tensors, HF GPT-2 names and shapes")


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "make-weights":
        make_weights(args[0], *map(int, args[1:]))
    elif command == "make-tokens":
        make_tokens(args[0], *map(int, args[1:]))
    elif command == "check-names":
        check_names(args[0], *map(int, args[1:]))
    elif command == "loss":
        print("%.9f" % window_loss(args[0], args[1], int(args[2]), int(args[3])))
    elif command == "greedy":  # WEIGHTS N_HEAD PROMPT_IDS COUNT -> the new ids, then the smallest margin
        ids, margin = greedy(args[0], int(args[1]), args[2], int(args[3]))
        print(" ".join(map(str, ids)))
        print("%.6g" % margin)
    else:
        sys.exit(f"unknown command {command}")

#!/usr/bin/env python3
"""Hugging Face model directories for the interop tests, written as the hub ships them.

  hf_directory.py split FILE DIR ARCH SHARDS DTYPE [field=value ...]
      DIR/config.json (ARCH's architectures and model_type, and each field=value, parsed as JSON,
      so true, 1e-5 and 64 keep their types) and FILE's tensors in SHARDS files: one is
      model.safetensors; more are model-0000N-of-0000M.safetensors with model.safetensors.index.json
      (metadata.total_size and weight_map), tensors dealt round-robin in name order. DTYPE F32,
      BF16 (round to nearest even, as torch does) or F16 (NumPy's float16, round to nearest even).
  hf_directory.py join DIR OUT
      every tensor of DIR's weights, at the values the directory holds, in one F32 file: what the
      NumPy references read.
  hf_directory.py check DIR REFERENCE DTYPE [--min-shards N] [--files NAME=PATH,...]
      DIR (what `strata export --hf` wrote) against the layout `transformers` reads: config.json an
      object whose architectures is one known class agreeing with model_type and whose torch_dtype
      matches DTYPE; one model.safetensors, or shards named model-0000k-of-0000N.safetensors, each
      header's metadata format "pt", with model.safetensors.index.json whose weight_map names every
      tensor's shard and nothing else and whose metadata.total_size is the shards' tensor bytes.
      Every tensor of REFERENCE (a Strata save) is there with its shape and, for F32, its exact
      values; for BF16 the round-to-nearest-even of them. --min-shards: the fewest shards expected;
      --files: files that must be there, byte for byte copies of PATH.
"""
import json
import os
import struct
import sys

import numpy as np

from hf_gpt2_numpy import ENCODERS, read_safetensors, write_safetensors

ARCHITECTURES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                 "mistral": "MistralForCausalLM", "gemma": "GemmaForCausalLM"}


def split(file, directory, arch, shards, dtype, fields):
    tensors, _ = read_safetensors(file)
    os.makedirs(directory, exist_ok=True)
    config = {"architectures": [ARCHITECTURES[arch]], "model_type": arch}
    for field in fields:
        key, value = field.split("=", 1)
        config[key] = json.loads(value)
    with open(os.path.join(directory, "config.json"), "w") as out:
        json.dump(config, out, indent=2)
    names = sorted(tensors)
    if shards == 1:
        write_safetensors(os.path.join(directory, "model.safetensors"), tensors, {"format": "pt"}, dtype)
        return
    weight_map, total = {}, 0
    for s in range(shards):
        shard = "model-%05d-of-%05d.safetensors" % (s + 1, shards)
        part = {name: tensors[name] for name in names[s::shards]}
        total += write_safetensors(os.path.join(directory, shard), part, {"format": "pt"}, dtype)
        weight_map.update({name: shard for name in part})
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as out:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, out, indent=2)


def join(directory, out):
    index = os.path.join(directory, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    tensors = {}
    for name in files:
        tensors.update(read_safetensors(os.path.join(directory, name))[0])
    write_safetensors(out, tensors, {})


TORCH_DTYPES = {"F32": "float32", "BF16": "bfloat16"}


def header_of(path):
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(size))


def check(directory, reference, dtype, options):
    def fail(message):
        sys.exit(f"FAIL: {directory}: {message}")

    config = json.load(open(os.path.join(directory, "config.json")))
    if not isinstance(config, dict):
        fail("config.json is not an object")
    known = {v: k for k, v in ARCHITECTURES.items()}
    architectures = config.get("architectures")
    if not (isinstance(architectures, list) and len(architectures) == 1 and architectures[0] in known):
        fail(f"config.json: architectures {architectures!r} is not one known class")
    if config.get("model_type") != known[architectures[0]]:
        fail(f"config.json: model_type {config.get('model_type')!r} disagrees with {architectures[0]}")
    if config.get("torch_dtype") != TORCH_DTYPES[dtype]:
        fail(f"config.json: torch_dtype {config.get('torch_dtype')!r}, expected {TORCH_DTYPES[dtype]}")
    index_path = os.path.join(directory, "model.safetensors.index.json")
    if os.path.exists(index_path):
        index = json.load(open(index_path))
        weight_map, total = index["weight_map"], index["metadata"]["total_size"]
        files = sorted(set(weight_map.values()))
        count = len(files)
        expected = ["model-%05d-of-%05d.safetensors" % (k + 1, count) for k in range(count)]
        if files != expected:
            fail(f"shard names {files}, expected {expected}")
        if os.path.exists(os.path.join(directory, "model.safetensors")):
            fail("holds model.safetensors beside a sharded index")
    else:
        files, weight_map, total = ["model.safetensors"], None, None
    if len(files) < int(options.get("min-shards", 1)):
        fail(f"{len(files)} shards, expected at least {options['min-shards']}")
    found, tensor_bytes = {}, 0
    for name in files:
        header = header_of(os.path.join(directory, name))
        if header.get("__metadata__", {}).get("format") != "pt":
            fail(f"{name}: metadata format is not \"pt\"")
        for tensor, entry in header.items():
            if tensor == "__metadata__":
                continue
            if entry["dtype"] != dtype:
                fail(f"{name}: {tensor} is {entry['dtype']}, expected {dtype}")
            if tensor in found:
                fail(f"{tensor} is in {found[tensor]} and {name}")
            found[tensor] = name
            tensor_bytes += entry["data_offsets"][1] - entry["data_offsets"][0]
    if weight_map is not None:
        if weight_map != found:
            fail("the index's weight_map is not where the tensors are")
        if total != tensor_bytes:
            fail(f"metadata.total_size {total}, the shards hold {tensor_bytes} bytes of tensors")
    exported = {}
    for name in files:
        exported.update(read_safetensors(os.path.join(directory, name))[0])
    expected, _ = read_safetensors(reference)
    if set(expected) != set(exported):
        fail(f"tensors differ from {reference}: missing {sorted(set(expected) - set(exported))}, "
             f"extra {sorted(set(exported) - set(expected))}")
    for tensor, values in expected.items():
        want = values.astype(np.float32)
        if dtype == "BF16":
            want = (ENCODERS["BF16"](want).astype(np.uint32) << 16).view(np.float32)
        got = exported[tensor].astype(np.float32)
        if got.shape != want.shape:
            fail(f"{tensor}: shape {got.shape}, expected {want.shape}")
        if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
            fail(f"{tensor}: values differ from {reference} ({dtype})")
    for spec in filter(None, options.get("files", "").split(",")):
        name, source = spec.split("=", 1)
        path = os.path.join(directory, name)
        if not os.path.exists(path) or open(path, "rb").read() != open(source, "rb").read():
            fail(f"{name} is not a copy of {source}")
    print(f"ok: {directory}: {len(files)} file(s), {len(found)} tensors, {tensor_bytes} bytes of {dtype}, "
          f"as {reference} holds them")


def main(argv):
    if len(argv) >= 6 and argv[0] == "split" and argv[5] in ("F32", "BF16", "F16"):
        split(argv[1], argv[2], argv[3], int(argv[4]), argv[5], argv[6:])
    elif len(argv) == 3 and argv[0] == "join":
        join(argv[1], argv[2])
    elif len(argv) >= 4 and argv[0] == "check" and argv[3] in TORCH_DTYPES:
        options = dict(zip(argv[4::2], argv[5::2]))
        check(argv[1], argv[2], argv[3], {k.removeprefix("--"): v for k, v in options.items()})
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])

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
"""
import json
import os
import sys

import numpy as np

from hf_gpt2_numpy import read_safetensors, write_safetensors

ARCHITECTURES = {"gpt2": "GPT2LMHeadModel", "llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}


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


def main(argv):
    if len(argv) >= 6 and argv[0] == "split" and argv[5] in ("F32", "BF16", "F16"):
        split(argv[1], argv[2], argv[3], int(argv[4]), argv[5], argv[6:])
    elif len(argv) == 3 and argv[0] == "join":
        join(argv[1], argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])

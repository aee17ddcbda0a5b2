#!/usr/bin/env python3
"""Damages a safetensors file in place, as the CLI fault scripts need.

  safetensors_edit.py FILE TENSOR ELEMENT set VALUE   write an f32 value (the file's checksums kept:
                                                     the edit is then a corruption they catch)
  safetensors_edit.py FILE TENSOR ELEMENT flip BIT    flip one bit (0-31) of an f32 element
  safetensors_edit.py FILE strip                     drop Strata's checksums (a file from elsewhere)
  safetensors_edit.py SAVE_DIR legacy                make a save's trainer.json a strata-checkpoint-1 one,
                                                     which lists no files (a save from before the list)
"""
import json
import struct
import sys


def read(path):
    data = open(path, "rb").read()
    n = int.from_bytes(data[:8], "little")
    return json.loads(data[8:8 + n]), data[8 + n:]


def write(path, header, body):
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    open(path, "wb").write(len(text).to_bytes(8, "little") + text + body)


def main(argv):
    path = argv[1]
    if argv[2] == "legacy":
        trainer = json.load(open(path + "/trainer.json"))
        trainer["format"] = "strata-checkpoint-1"
        trainer.pop("files", None)
        json.dump(trainer, open(path + "/trainer.json", "w"), indent=2)
        return
    header, body = read(path)
    if argv[2] == "strip":
        header.get("__metadata__", {}).pop("strata_xxh3_64", None)
        write(path, header, body)
        return
    name, element, action, argument = argv[2], int(argv[3]), argv[4], argv[5]
    entry = header[name]
    assert entry["dtype"] == "F32", entry
    at = entry["data_offsets"][0] + 4 * element
    body = bytearray(body)
    if action == "set":
        body[at:at + 4] = struct.pack("<f", float(argument))
    else:
        bits = struct.unpack("<I", body[at:at + 4])[0] ^ (1 << int(argument))
        body[at:at + 4] = struct.pack("<I", bits)
    write(path, header, bytes(body))


main(sys.argv)

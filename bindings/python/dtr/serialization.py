"""dtr.save / dtr.load (torch.save / torch.load) for tensors and nested containers
of them: state dicts, optimizer state dicts, checkpoints holding both with an
epoch number.

Format: a safetensors file (eager/serialize.h). Every tensor of `obj` is one
entry, named by its path in the structure (the keys of a state dict as they
are: dtr.save(model.state_dict(), p) is an ordinary safetensors file that any
safetensors reader loads). The structure itself is JSON in the "__metadata__"
entry "dtr.structure", next to "format": "dtr". A structure node is one of
    {"T": name}                      a tensor (the same tensor saved twice is
                                     stored once, and loads as one tensor)
    {"D": [[key, node], ...], "C": "dict" | "OrderedDict"}
    {"L": [node, ...]}  {"U": [node, ...]}      a list, a tuple
    {"V": value}                     None, a bool, int, float (inf and nan too)
                                     or str
Dict keys may be str, int, float, bool or None. The file is written next to
the destination and renamed into place, so a failed save leaves no partial file.
"""
import collections
import json
import math
import os
import tempfile

from . import Tensor, _C, device as _device

__all__ = ["save", "load"]

_FORMAT_KEY, _STRUCTURE_KEY = "format", "dtr.structure"


class _Writer:
    def __init__(self):
        self.tensors = {}     # name -> tensor, in order
        self.by_id = {}       # id(tensor) -> name

    def name_for(self, t, path):
        if id(t) in self.by_id:
            return self.by_id[id(t)]
        base = ".".join(path) if path else "tensor"
        name, k = base, 1
        while name in self.tensors:
            name, k = f"{base}#{k}", k + 1
        self.tensors[name] = t.detach()
        self.by_id[id(t)] = name
        return name

    def encode(self, obj, path):
        if isinstance(obj, Tensor):
            return {"T": self.name_for(obj, path)}
        if obj is None or isinstance(obj, (bool, int, str)):
            return {"V": obj}
        if isinstance(obj, float):
            return {"V": obj if math.isfinite(obj) else repr(obj), "F": True}
        if isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                if not (k is None or isinstance(k, (str, int, float, bool))):
                    raise TypeError(f"save: the dict at {'.'.join(path) or 'the top'} has a key of type "
                                    f"{type(k).__name__}; keys must be str, int, float, bool or None")
                items.append([k, self.encode(v, path + [str(k)])])
            return {"D": items, "C": "OrderedDict" if isinstance(obj, collections.OrderedDict) else "dict"}
        if isinstance(obj, list):
            return {"L": [self.encode(v, path + [str(i)]) for i, v in enumerate(obj)]}
        if isinstance(obj, tuple):
            return {"U": [self.encode(v, path + [str(i)]) for i, v in enumerate(obj)]}
        hint = ("; save its state_dict() (a whole module is pickled by torch.save, which dtr does "
                "not do)" if hasattr(obj, "state_dict") else "")
        raise TypeError(f"save: cannot save an object of type {type(obj).__name__} (at "
                        f"{'.'.join(path) or 'the top'}); dtr.save takes tensors, numbers, strings, "
                        f"None, and dicts, lists and tuples of them{hint}")


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True):
    """torch.save: writes `obj` (a Tensor, or dicts / lists / tuples nesting tensors,
    numbers, strings, bools and None) to `f`, a path (str or path-like) or a writable
    binary file object. Tensors are saved detached, with their dtype and shape.
    TypeError for anything else in `obj` (naming where), ValueError when the file
    cannot be written."""
    w = _Writer()
    structure = w.encode(obj, [])
    metadata = {_FORMAT_KEY: "dtr", _STRUCTURE_KEY: json.dumps(structure, separators=(",", ":"))}
    if hasattr(f, "write"):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "obj.safetensors")
            _C.save_file(w.tensors, path, metadata)
            with open(path, "rb") as src:
                f.write(src.read())
        return
    _C.save_file(w.tensors, os.fspath(f), metadata)


def _check_magic(path):
    """ValueError naming torch.save's formats for a zip or pickle file; a file that
    looks like safetensors (a header length that fits, then "{") goes on to the reader,
    which names any other problem."""
    with open(path, "rb") as fh:
        head = fh.read(9)
    size = os.path.getsize(path)
    if len(head) == 9 and head[8:9] == b"{" and 8 + int.from_bytes(head[:8], "little") <= size:
        return
    if head.startswith(b"PK\x03\x04"):
        raise ValueError(f"load: {path} is a zip archive (a file written by torch.save?), not a file "
                         "written by dtr.save; dtr.load reads dtr.save and safetensors files")
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        raise ValueError(f"load: {path} is a pickle (a legacy torch.save file?), not a file written "
                         "by dtr.save; dtr.load reads dtr.save and safetensors files")


def _mover(map_location):
    if map_location is None:
        return lambda t: t
    if callable(map_location):
        return lambda t: map_location(t, "cpu")
    if isinstance(map_location, dict):
        return lambda t: t.to(_device(map_location.get(str(t.device), str(t.device))))
    if isinstance(map_location, (str, _device)):
        dev = _device(map_location) if isinstance(map_location, str) else map_location
        return lambda t: t.to(dev)
    raise TypeError(f"load: map_location must be None, a str, a dtr.device, a dict or a callable, "
                    f"got {type(map_location).__name__}")


def _decode(node, tensors, where):
    if "T" in node:
        if node["T"] not in tensors:
            raise ValueError(f"load: {where}: the structure names tensor '{node['T']}', which the "
                             "file does not hold")
        return tensors[node["T"]]
    if "V" in node:
        v = node["V"]
        return float(v) if node.get("F") else v
    if "D" in node:
        cls = collections.OrderedDict if node.get("C") == "OrderedDict" else dict
        return cls((k, _decode(v, tensors, where)) for k, v in node["D"])
    if "L" in node:
        return [_decode(v, tensors, where) for v in node["L"]]
    if "U" in node:
        return tuple(_decode(v, tensors, where) for v in node["U"])
    raise ValueError(f"load: {where}: malformed structure entry {node!r}")


def load(f, map_location=None, pickle_module=None, *, weights_only=False, mmap=None, **kwargs):
    """torch.load: what dtr.save wrote to `f` (a path or a readable binary file object),
    with the same nesting, dict types and key types. A plain safetensors file (no dtr
    structure) loads as a dict of name → tensor in file order. `map_location` moves the
    tensors: None (where they were saved: the cpu), "cpu" or a device, a dict mapping
    device strings, or a callable(tensor, "cpu"). ValueError naming the file for a
    missing file, a zip or pickle file (torch.save's own formats), or any malformed
    safetensors content."""
    if hasattr(f, "read"):
        data = f.read()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "obj.safetensors")
            with open(path, "wb") as dst:
                dst.write(data)
            return load(path, map_location)
    path = os.fspath(f)
    if not os.path.isfile(path):
        raise ValueError(f"load: {path}: no such file")
    _check_magic(path)
    items, metadata = _C._load_file_with_metadata(path)
    move = _mover(map_location)
    tensors = {k: move(t) for k, t in items}
    if _STRUCTURE_KEY not in metadata:
        return dict(tensors)
    try:
        structure = json.loads(metadata[_STRUCTURE_KEY])
    except json.JSONDecodeError as e:
        raise ValueError(f"load: {path}: the dtr structure is not valid JSON ({e})") from None
    return _decode(structure, tensors, path)


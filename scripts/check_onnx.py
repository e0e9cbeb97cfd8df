#!/usr/bin/env python3
"""Check ONNX files exported by workbook against an independent runtime (onnxruntime).

Usage: check_onnx.py DIR [--tol 1e-4]

DIR/manifest.json lists cases written by the Rust test `crates/workbook/tests/export.rs`:
  [{"name": ..., "model": "gcn2.onnx", "inputs": "graph_cora.safetensors",
    "expected": "gcn2__cora.safetensors"}, ...]
Each inputs file holds x (float32 [N, F]) and edge_index (int64 [2, E]), and edge_weight
(float32 [E]) for models exported with an edge_weight input; each expected file holds the
reference outputs (Rust's, or PyG's for the option matrix of crates/workbook/tests/pyg_matrix.rs)
under the ONNX output names (logits, and attention_* when exported).
Every output of every case is compared; the script prints one line per case and exits 1 if
any difference exceeds the tolerance, or if a predicted class differs.
Needs: pip install onnxruntime numpy safetensors
"""
import argparse
import json
import os
import sys

import numpy as np
import onnxruntime as ort
from safetensors.numpy import load_file


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--tol", type=float, default=1e-4)
    args = parser.parse_args()
    with open(os.path.join(args.dir, "manifest.json")) as f:
        cases = json.load(f)
    if not cases:
        print("check_onnx: manifest is empty", file=sys.stderr)
        return 1
    failures = 0
    sessions = {}
    for case in cases:
        path = os.path.join(args.dir, case["model"])
        if path not in sessions:
            opts = ort.SessionOptions()
            opts.log_severity_level = 3
            sessions[path] = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        sess = sessions[path]
        inputs = load_file(os.path.join(args.dir, case["inputs"]))
        expected = load_file(os.path.join(args.dir, case["expected"]))
        feeds = {"x": inputs["x"].astype(np.float32), "edge_index": inputs["edge_index"].astype(np.int64)}
        wanted = {i.name for i in sess.get_inputs()}
        if "edge_weight" in wanted:
            if "edge_weight" not in inputs:
                print(f"FAIL {case['name']}: the model takes edge_weight but the inputs have none")
                failures += 1
                continue
            feeds["edge_weight"] = inputs["edge_weight"].astype(np.float32)
        names = [o.name for o in sess.get_outputs()]
        got = dict(zip(names, sess.run(names, feeds)))
        worst = {}
        ok = True
        for name, want in expected.items():
            if name not in got:
                print(f"FAIL {case['name']}: output {name} missing from the ONNX model")
                ok = False
                continue
            have = got[name]
            if have.shape != want.shape:
                print(f"FAIL {case['name']}: {name} has shape {have.shape}, Rust gave {want.shape}")
                ok = False
                continue
            if want.dtype.kind in "iu":
                diff = float(np.abs(have.astype(np.int64) - want.astype(np.int64)).max(initial=0))
            else:
                diff = float(np.abs(have - want).max(initial=0.0))
            worst[name] = diff
            if not diff <= args.tol:
                ok = False
        agree = float((got["logits"].argmax(1) == expected["logits"].argmax(1)).mean())
        if agree != 1.0:
            ok = False
        n, e = feeds["x"].shape[0], feeds["edge_index"].shape[1]
        detail = ", ".join(f"{k} max|diff| {v:.2e}" for k, v in worst.items())
        print(f"{'ok  ' if ok else 'FAIL'} {case['name']}: {n} nodes, {e} edges: {detail}; predictions agree {agree:.4f}")
        failures += 0 if ok else 1
    print(f"check_onnx: onnxruntime {ort.__version__}, {len(cases)} case(s), {failures} failure(s), tolerance {args.tol}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Samples nvidia-smi's per-process GPU memory until killed; keeps each process's peak with its
command line, rewriting OUT (JSON: [{"pid", "cmd", "peak_mib"}]) after every sample.

    python3 scripts/gpu/gpu_mem.py gpu_mem.json &   # ... run things ...   kill %1

What nvidia-smi counts is everything the process holds on the GPU: its CUDA context (some
hundreds of MiB), the framework's cached pool and live tensors. That counts ours and PyTorch's
the same way, unlike torch.cuda.max_memory_allocated (live tensors only)."""
import json, os, subprocess, sys, time

out, peaks = sys.argv[1], {}
while True:
    q = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                        "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
    for line in q.strip().splitlines():
        try:
            pid, mib = (int(v) for v in line.split(","))
        except ValueError:
            continue
        if pid not in peaks:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode().strip()
            except OSError:
                cmd = "?"
            peaks[pid] = {"pid": pid, "cmd": cmd, "peak_mib": 0}
        peaks[pid]["peak_mib"] = max(peaks[pid]["peak_mib"], mib)
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(list(peaks.values()), f, indent=1)
    os.replace(tmp, out)
    time.sleep(0.02)

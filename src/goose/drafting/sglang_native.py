"""SGLang's own NGRAM matcher, compiled here: the C++ of sglang 0.5.23 (kernels/jit/csrc/ngram_corpus/: the trie,
the result builder, the corpus; plain C++20 and threads, no CUDA) with goose's C shim (sglang_ngram_shim.cpp)
in place of SGLang's tvm-ffi binding, built once with the system's C++ compiler into goose's cache and called
through ctypes. SGLang compiles the same files at run time (its load_jit).

The sources come from the sglang wheel, never installed: `python -m goose.drafting.sglang_native fetch` (run by
`make install`) downloads it without dependencies and keeps only these files, checked against the digest below;
an installed sglang of this version is used as well. Where they or a compiler are missing, `library()` says so in
one line and method=sglang-ngram is unavailable (method.drafter.impl=python, goose's reimplementation, is not).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from goose.drafting.sglang_layout import parents_from_mask
from goose.errors import MissingLibrary
from goose.paths import cache_root

VERSION = "0.5.23"
FILES = ("ngram.cpp", "ngram.h", "param.h", "queue.h", "result.cpp", "result.h", "suffix_automaton.cpp",
         "suffix_automaton.h", "trie.cpp", "trie.h")
SOURCES_SHA256 = "a310631f0ecec05b2c9d272c0a8b3440e38af7eee5b709f2bcebe4e7f5513c4e"  # FILES of sglang 0.5.23
IN_PACKAGE = Path("kernels", "jit", "csrc", "ngram_corpus")
SHIM = Path(__file__).with_name("sglang_ngram_shim.cpp")
WHEEL = ("--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--platform",
         "manylinux_2_34_x86_64")
FLAGS = ("-O2", "-std=c++20", "-fPIC", "-shared", "-pthread")
FETCH = "python -m goose.drafting.sglang_native fetch (or `make install`), or run with method.drafter.impl=python"


def fetched_dir() -> Path:
    return cache_root() / f"sglang-{VERSION}" / "ngram_corpus"


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for name in sorted(FILES):
        h.update(name.encode() + b"\0" + (folder / name).read_bytes() + b"\0")
    return h.hexdigest()


def _matching(folder: Path) -> bool:
    return all((folder / f).is_file() for f in FILES) and digest(folder) == SOURCES_SHA256


def sources() -> Path | None:
    """The folder of sglang 0.5.23's matcher sources: fetched into goose's cache, or an installed sglang's."""
    if _matching(fetched_dir()):
        return fetched_dir()
    spec = importlib.util.find_spec("sglang")  # the package's location only: nothing of sglang is imported
    if spec is not None and spec.submodule_search_locations:
        for root in spec.submodule_search_locations:
            if _matching(Path(root) / IN_PACKAGE):
                return Path(root) / IN_PACKAGE
    return None


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")


def build(src: Path, cxx: str) -> Path:
    """The shared library for these sources, this shim and this compiler: built once, then reused."""
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    key = hashlib.sha256("\0".join([SOURCES_SHA256, SHIM.read_text(), cxx, *version, *FLAGS]).encode()).hexdigest()
    out = cache_root() / f"sglang-{VERSION}" / f"build-{key[:12]}" / "libgoose_sglang_ngram.so"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"[goose] compiling SGLang {VERSION}'s n-gram matcher once into {out.parent} (about 20 s)",
          file=sys.stderr, flush=True)
    with tempfile.NamedTemporaryFile(dir=out.parent, suffix=".so", delete=False) as tmp:
        pass
    cpp = [str(src / f) for f in FILES if f.endswith(".cpp")]
    done = subprocess.run([cxx, *FLAGS, f"-I{src}", *cpp, str(SHIM), "-o", tmp.name], capture_output=True, text=True)
    if done.returncode != 0:
        os.unlink(tmp.name)
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise MissingLibrary(f"sglang-ngram: SGLang's n-gram matcher did not compile with {cxx} ({last}); "
                             "run with method.drafter.impl=python (goose's reimplementation) instead.")
    os.replace(tmp.name, out)  # atomic: two runs building at once both end with a whole library
    return out


_LIB: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """SGLang's compiled matcher, or MissingLibrary saying in one line why not and what to do."""
    global _LIB
    if _LIB is not None:
        return _LIB
    src = sources()
    if src is None:
        raise MissingLibrary(f"sglang-ngram needs the C++ sources of SGLang {VERSION}'s n-gram matcher, not found "
                             f"here (looked in {fetched_dir()} and an installed sglang): {FETCH}.")
    cxx = _compiler()
    if cxx is None:
        raise MissingLibrary("sglang-ngram compiles SGLang's n-gram matcher and finds no C++ compiler (c++, g++ "
                             "or $CXX); install one, or run with method.drafter.impl=python.")
    lib = ctypes.CDLL(str(build(src, cxx)))
    size, i32p, err = ctypes.c_size_t, ctypes.POINTER(ctypes.c_int32), ctypes.c_char_p
    lib.goose_sgl_ngram_new.argtypes = [size] * 5 + [ctypes.c_int, size, ctypes.POINTER(ctypes.c_void_p), err, size]
    lib.goose_sgl_ngram_free.argtypes = [ctypes.c_void_p]
    lib.goose_sgl_ngram_insert.argtypes = [ctypes.c_void_p, i32p, size, err, size]
    lib.goose_sgl_ngram_match.argtypes = [ctypes.c_void_p, ctypes.c_int64, i32p, size, size, i32p,
                                          ctypes.POINTER(ctypes.c_uint8), size, err, size]
    lib.goose_sgl_ngram_erase.argtypes = [ctypes.c_void_p, ctypes.c_int64]
    lib.goose_sgl_ngram_reset.argtypes = [ctypes.c_void_p]
    _LIB = lib
    return lib


def _ints(values) -> ctypes.Array:
    return (ctypes.c_int32 * len(values))(*values)


class NativeCorpus:
    """SGLang's `Ngram` object (no external corpora), with the calls of goose.drafting.sglang_trie.PyCorpus."""

    def __init__(self, draft_token_num: int, match_type: str, min_bfs_breadth: int, max_bfs_breadth: int,
                 max_trie_depth: int, capacity: int):
        self.lib, self.size = library(), draft_token_num
        self.err = ctypes.create_string_buffer(512)
        self.handle = ctypes.c_void_p()
        self._check(self.lib.goose_sgl_ngram_new(capacity, max_trie_depth, min_bfs_breadth, max_bfs_breadth,
                                                 draft_token_num, int(match_type == "PROB"), 0,
                                                 ctypes.byref(self.handle), self.err, len(self.err)))
        self.tokens = (ctypes.c_int32 * draft_token_num)()
        self.mask = (ctypes.c_uint8 * (draft_token_num * draft_token_num))()

    def _check(self, rc: int) -> int:
        if rc < 0:
            raise RuntimeError(f"SGLang's n-gram matcher: {self.err.value.decode(errors='replace')}")
        return rc

    def insert(self, tokens: list[int]) -> None:
        self._check(self.lib.goose_sgl_ngram_insert(self.handle, _ints(tokens), len(tokens), self.err, len(self.err)))

    def match(self, state_id: int, tail: list[int], total_len: int) -> tuple[list[int], list[int]]:
        n = self._check(self.lib.goose_sgl_ngram_match(self.handle, state_id, _ints(tail), len(tail), total_len,
                                                       self.tokens, self.mask, self.size, self.err, len(self.err)))
        return list(self.tokens[:n]), parents_from_mask(list(self.mask[: n * n]), n)

    def erase(self, state_id: int) -> None:
        self.lib.goose_sgl_ngram_erase(self.handle, state_id)

    def reset(self) -> None:
        self.lib.goose_sgl_ngram_reset(self.handle)

    def __del__(self) -> None:
        if getattr(self, "handle", None) and self.handle.value:
            self.lib.goose_sgl_ngram_free(self.handle)
            self.handle = ctypes.c_void_p()


def fetch() -> Path:
    """sglang's wheel without its dependencies, into a temporary folder; the matcher's sources kept in the cache."""
    if _matching(fetched_dir()):
        return fetched_dir()
    with tempfile.TemporaryDirectory() as tmp:
        # The one wheel of the release whatever this Python and platform: only its C++ sources are kept.
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", *WHEEL, f"sglang=={VERSION}",
                        "-d", tmp], check=True)
        wheel = next(Path(tmp).glob("sglang-*.whl"))
        staged = fetched_dir().with_name("ngram_corpus.partial")
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        with zipfile.ZipFile(wheel) as z:
            for name in FILES:
                (staged / name).write_bytes(z.read(f"sglang/{IN_PACKAGE.as_posix()}/{name}"))
    if digest(staged) != SOURCES_SHA256:
        raise SystemExit(f"error: sglang {VERSION}'s wheel holds other matcher sources than goose was checked against")
    shutil.rmtree(fetched_dir(), ignore_errors=True)
    staged.rename(fetched_dir())
    return fetched_dir()


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m goose.drafting.sglang_native",
                                 description=f"Fetch SGLang {VERSION}'s n-gram matcher sources and compile them once.")
    ap.add_argument("command", choices=["fetch"], help="download the wheel (no dependencies), keep the sources, build")
    return ap.parse_args(argv)


if __name__ == "__main__":
    parse()
    print(f"[goose] SGLang {VERSION}'s n-gram matcher sources: {fetch()}")
    print(f"[goose] compiled: {library()._name}")

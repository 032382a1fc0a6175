"""REST's datastore: a suffix array over a tokenized corpus (`Datastore`), and building one, once, with the target
model's tokenizer (the offline default is also built on first use: `method=rest` with none built yet):

    python -m goose.baselines.rest_datastore build --model smollm2-135m               # offline default: stdlib sources
    python -m goose.baselines.rest_datastore build --model smollm2-135m --corpus DIR  # a local folder of text/code
    python -m goose.baselines.rest_datastore build --model vicuna-7b --corpus hf:stingning/ultrachat
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from goose.errors import GooseError
from goose.models.loading import model_config, model_folder, tokenizer_fingerprint
from goose.paths import cache_root

SEP = -1  # between documents: no continuation crosses it
# How a build went (its seconds): kept apart from meta.json in a hidden file, which a folder's fingerprint skips, so
# two builds of the same content are one datastore (a run's configuration key covers the datastore's content).
BUILD = ".build.json"


def suffix_array(tokens: np.ndarray) -> np.ndarray:
    """Prefix doubling with numpy sorts: O(n log^2 n), fine for tens of millions of tokens."""
    n = len(tokens)
    rank = np.unique(tokens, return_inverse=True)[1].astype(np.int64)
    sa = np.arange(n, dtype=np.int64)
    k = 1
    while k < n:
        second = np.full(n, -1, dtype=np.int64)
        second[: n - k] = rank[k:]
        sa = np.lexsort((second, rank))
        key_r, key_s = rank[sa], second[sa]
        change = np.empty(n, dtype=np.int64)
        change[0] = 0
        change[1:] = (key_r[1:] != key_r[:-1]) | (key_s[1:] != key_s[:-1])
        new = np.empty(n, dtype=np.int64)
        new[sa] = np.cumsum(change)
        rank = new
        if rank.max() == n - 1:
            return sa
        k *= 2
    return sa


class Datastore:
    def __init__(self, folder: str | Path):
        folder = Path(os.path.expanduser(str(folder)))
        meta = folder / "meta.json"
        if not meta.is_file():
            raise GooseError(
                f"no REST datastore at {folder}. Build one with the target model's tokenizer: "
                f"python -m goose.baselines.rest_datastore build --model MODEL --out {folder}"
            )
        self.folder = folder
        settle(folder)
        for name in ("tokens.npy", "sa.npy"):
            if not (folder / name).is_file():
                raise GooseError(f"REST datastore {folder} is incomplete: {folder / name} is missing. Rebuild it: "
                                 f"python -m goose.baselines.rest_datastore build --model MODEL --out {folder}")
        try:
            self.meta = json.loads(meta.read_text())
            self.tokens = np.load(folder / "tokens.npy", mmap_mode="r")
            self.sa = np.load(folder / "sa.npy", mmap_mode="r")
        except (ValueError, OSError) as e:
            raise GooseError(f"REST datastore {folder} is damaged ({e}); rebuild it with "
                             f"python -m goose.baselines.rest_datastore build --model MODEL --out {folder}") from None

    def _bound(self, query: list[int], upper: bool) -> int:
        """First suffix-array index whose suffix is > query (upper) or >= query (lower), on len(query) tokens."""
        q = np.asarray(query, dtype=self.tokens.dtype)
        m = len(q)
        lo, hi = 0, len(self.sa)
        toks = self.tokens
        while lo < hi:
            mid = (lo + hi) // 2
            s = int(self.sa[mid])
            seg = toks[s : s + m]
            diff = np.nonzero(seg != q[: len(seg)])[0]
            if diff.size:
                less = seg[diff[0]] < q[diff[0]]
            else:
                less = len(seg) < m or upper  # equal on m tokens: before the query only when looking for >
            if less:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def continuations(self, query: list[int], length: int, max_matches: int) -> list[tuple[int, ...]]:
        lo = self._bound(query, upper=False)
        hi = self._bound(query, upper=True)
        out = []
        for i in range(lo, min(hi, lo + max_matches)):
            start = int(self.sa[i]) + len(query)
            seg = self.tokens[start : start + length].tolist()
            if SEP in seg:
                seg = seg[: seg.index(SEP)]
            if seg:
                out.append(tuple(seg))
        return out


# --- building a datastore ------------------------------------------------------------------
def corpus_texts(corpus: str, max_files: int | None):
    """Yield documents: 'stdlib' (this Python's own library sources), a local folder, or hf:DATASET_ID."""
    if corpus == "stdlib":
        import sysconfig

        root = Path(sysconfig.get_paths()["stdlib"])
        files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts and "test" not in p.parts)
    elif corpus.startswith("hf:"):
        from datasets import load_dataset

        ds = load_dataset(corpus[3:], split="train", streaming=True)
        for n, row in enumerate(ds):
            if max_files and n >= max_files:
                return
            text = row.get("text") or row.get("content") or "\n".join(
                m if isinstance(m, str) else m.get("content", "") for m in row.get("data", row.get("messages", [])))
            yield text
        return
    else:
        root = Path(os.path.expanduser(corpus))
        if not root.is_dir():
            raise GooseError(f"corpus '{corpus}' is not a folder, 'stdlib', or hf:DATASET_ID")
        exts = {".py", ".txt", ".md", ".c", ".h", ".js", ".ts", ".java", ".rs", ".go", ".json", ".rst"}
        files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in exts)
    for p in files[:max_files]:
        try:
            yield p.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue


def settle(folder: Path) -> None:
    """Move the build time out of meta.json (into BUILD) in a datastore built before it was kept apart: every build
    of the same content then has one fingerprint. Where the folder cannot be written, it is left as it is."""
    meta = folder / "meta.json"
    try:
        fields = json.loads(meta.read_text())
    except (ValueError, OSError):
        return  # Datastore says what is wrong with it
    if not isinstance(fields, dict) or "build_s" not in fields:
        return
    try:
        _replace(folder / BUILD, {"build_s": fields.pop("build_s")})
        _replace(meta, fields)
    except OSError:
        pass


def _replace(path: Path, fields: dict) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")  # hidden: a fingerprint taken meanwhile skips it
    tmp.write_text(json.dumps(fields, indent=2))
    os.replace(tmp, path)


def default_folder(model_name: str, corpus: str = "stdlib") -> Path:
    """Where `build` writes by default: <cache>/datastores/<model>-<corpus, path-safe>."""
    return cache_root() / "datastores" / f"{model_name}-{corpus.replace('/', '_').replace(':', '_').strip('_')}"


# REST's offline default datastore, built on first use (and by `make datastore-local`): this many
# tokens of this Python's standard library sources, tokenized with the model's tokenizer.
FIRST_USE_TOKENS = 3_000_000


def _same(a: Path, b: Path) -> bool:
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def first_use(folder: Path) -> bool:
    """An offline default datastore not built yet (an unfinished build leaves no meta.json)."""
    return _same(Path(folder).parent, default_folder("-").parent) and Path(folder).name.endswith("-stdlib") and \
        not (Path(folder) / "meta.json").is_file()


def build_default(folder: Path, tokenizer, model_name: str) -> Path:
    """Build the offline default datastore for this model once (see `build_aside`)."""
    if not _same(folder, default_folder(model_name)):
        raise GooseError(f"no REST datastore at {folder}: it is not this model's offline default "
                         f"({default_folder(model_name)}). Build it: python -m goose.baselines.rest_datastore build "
                         f"--model ... --out {folder}")

    def missing(out: Path) -> dict | None:
        if (folder / "meta.json").is_file():
            return None  # another process built it while this one waited
        print(f"[goose] building REST's offline datastore once ({FIRST_USE_TOKENS:,} tokens of Python's standard "
              f"library, {model_name}'s tokenizer); cached in {folder}", flush=True)
        return build(tokenizer, model_name, "stdlib", out, None, FIRST_USE_TOKENS, progress=True)

    meta = build_aside(folder, missing)
    if meta:
        print(f"[goose] REST datastore ready: {meta['tokens']:,} tokens from {meta['documents']} files "
              f"({meta['build_s']} s)", flush=True)
    return folder


def build_aside(folder: Path, make) -> dict | None:
    """Run `make(aside)` (which writes a datastore into `aside` and returns its meta, or None to skip)
    holding an OS lock on the folder (a second builder waits, then sees the first one's result), and
    move the result into place only when complete: an interrupted build never looks finished."""
    import fcntl
    import shutil

    folder = Path(folder).expanduser()
    folder.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder.parent / f".{folder.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"[goose] another process is building the REST datastore {folder}: waiting for it", flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        for stale in folder.parent.glob(f".{folder.name}.building-*"):  # left by a killed build
            shutil.rmtree(stale, ignore_errors=True)
        aside = folder.parent / f".{folder.name}.building-{os.getpid()}"
        try:
            meta = make(aside)
            if meta is not None:
                shutil.rmtree(folder, ignore_errors=True)
                os.replace(aside, folder)
        finally:
            shutil.rmtree(aside, ignore_errors=True)
    finally:
        os.close(fd)  # releases the lock
    return meta


def build(tokenizer, tokenizer_name: str, corpus: str, out: Path, max_files: int | None, max_tokens: int,
          progress: bool = False) -> dict:
    from tqdm import tqdm

    t0 = time.time()
    parts, total, docs = [], 0, 0
    bar = tqdm(total=max_tokens, unit="tok", unit_scale=True, desc="REST datastore", file=sys.stderr,
               disable=not progress)
    for text in corpus_texts(corpus, max_files):
        ids = tokenizer(text, add_special_tokens=False).input_ids
        parts.append(np.asarray(ids + [SEP], dtype=np.int32))
        total += len(ids) + 1
        docs += 1
        bar.update(min(len(ids) + 1, max_tokens - bar.n))
        if total >= max_tokens:
            break
    bar.close()
    if not parts:
        raise GooseError(f"corpus '{corpus}' yielded no documents")
    tokens = np.concatenate(parts)[:max_tokens]
    sa = suffix_array(tokens)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "tokens.npy", tokens)
    np.save(out / "sa.npy", sa)
    meta = {"corpus": corpus, "tokenizer": tokenizer_name, "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
            "tokens": int(len(tokens)), "documents": docs, "max_tokens": max_tokens}
    if corpus == "stdlib":  # its files differ between Python versions
        meta["python"] = sys.version.split()[0]
    took = {"build_s": round(time.time() - t0, 1)}
    (out / BUILD).write_text(json.dumps(took))
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    return {**meta, **took}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m goose.baselines.rest", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="tokenize a corpus with the model's tokenizer and index it")
    b.add_argument("--model", default="smollm2-135m", help="a conf/model name (its tokenizer is used)")
    b.add_argument("--model-path", default=None, help="for --model gguf/hf: the local path")
    b.add_argument("--corpus", default="stdlib")
    b.add_argument("--out", default=None, help="default: ~/.cache/goose/datastores/<model>-<corpus>")
    b.add_argument("--max-files", type=int, default=None)
    b.add_argument("--max-tokens", type=int, default=None, help=f"default: {FIRST_USE_TOKENS:,} for stdlib (what "
                   "method=rest builds on first use), 20,000,000 otherwise")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from transformers import AutoTokenizer

    try:
        cfg = model_config(args.model, args.model_path)
        tok = AutoTokenizer.from_pretrained(model_folder(cfg))
        out = Path(args.out) if args.out else default_folder(cfg.name, args.corpus)
        size = args.max_tokens or (FIRST_USE_TOKENS if args.corpus == "stdlib" else 20_000_000)
        meta = build_aside(out, lambda aside: build(tok, cfg.name, args.corpus, aside, args.max_files, size,
                                                    progress=True))
    except GooseError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"datastore {out}: {meta['tokens']:,} tokens from {meta['documents']} documents ({meta['build_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

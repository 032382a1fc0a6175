"""Numbers you can trust, second pass: inputs nobody here wrote (content identity of every byte, external data
in the hash, durable and checked writes, ids as text, equality of what was asked, bad bytes). Each case
once gave a wrong number or lost data with exit 0."""

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from runs import ROOT, run_folder, run_here, run_py
from test_references_and_resume import all_rows, jsonl, tiny_args

from goose.errors import GooseError
from goose.storage.result_files import OutputsFile, ResultsFile


def mounted(kind: str, where: Path, source: Path | None = None, size: str = "96k"):
    """A real small or read-only file system for the test (root only); skip with the reason otherwise."""
    where.mkdir(parents=True, exist_ok=True)
    if kind == "tmpfs":
        cmd = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)]
    else:
        cmd = ["mount", "--bind", str(source), str(where)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a {kind} here ({r.stderr.strip() or 'not root'}): the fault needs a real one")
    if kind == "ro":
        subprocess.run(["mount", "-o", "remount,bind,ro", str(where)], check=True)
    return where


def unmount(where: Path) -> None:
    subprocess.run(["umount", str(where)], capture_output=True)


# --- content identity ------------------------------------------------------------------------------
def test_a_byte_changed_anywhere_in_a_large_file_changes_its_fingerprint(tmp_path, monkeypatch):
    """The old fingerprint read the first and last MiB and 16 blocks of 64 KiB: a change between them kept it."""
    from goose.core import fingerprints

    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path / "cache"))
    big = tmp_path / "weights.bin"
    data = bytearray(os.urandom(40 << 20))
    big.write_bytes(data)
    before = fingerprints.file_fingerprint(big)
    data[(40 << 20) // 17 + (100 << 10)] ^= 1  # between two of the old samples
    big.write_bytes(data)
    assert fingerprints.file_fingerprint(big) != before


def bytes_read() -> int:
    """Bytes this process has read through read() calls so far (Linux: /proc/self/io)."""
    return int(next(line for line in Path("/proc/self/io").read_text().splitlines()
                    if line.startswith("rchar:")).split()[1])


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts reads through /proc/self/io (Linux)")
def test_the_hash_is_cached_per_file_version_and_an_edit_with_restored_mtime_is_seen(tmp_path, monkeypatch):
    """The first fingerprint reads every byte; the second reads none of the file (a stat and the small cache entry);
    an edit in place with the size and modification time put back is seen (the change time moved) and hashed."""
    from goose.core import fingerprints

    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path / "cache"))
    size = 4 << 20
    f = tmp_path / "model.safetensors"
    f.write_bytes(os.urandom(size))
    start = bytes_read()
    first = fingerprints.file_fingerprint(f)
    hashed = bytes_read()
    assert hashed - start >= size  # hashed: every byte read
    assert fingerprints.file_fingerprint(f) == first
    cached = bytes_read()
    assert cached - hashed < size // 8  # from the cache: the file is not read again
    st = f.stat()
    with open(f, "r+b") as h:  # edited in place: same size, and the modification time put back
        byte = h.read(1)
        h.seek(0)
        h.write(bytes([byte[0] ^ 1]))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns
    edited = bytes_read()
    assert fingerprints.file_fingerprint(f) != first  # ctime moved: hashed again
    assert bytes_read() - edited >= size


def test_the_gguf_conversion_is_keyed_by_content(tmp_path, monkeypatch):
    """A GGUF edited in place (size and mtime kept) was decoded with the old converted weights."""
    from goose.models.conversion import converted_gguf

    monkeypatch.setenv("GOOSE_CACHE", str(tmp_path / "cache"))
    made = []

    def fake_convert(path, out, dtype=None):
        made.append(out)
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")

    monkeypatch.setattr("goose.models.conversion.convert_gguf_into", fake_convert)
    g = tmp_path / "m.gguf"
    g.write_bytes(b"GGUF" + b"\0" * 100)
    first = converted_gguf(g)
    assert converted_gguf(g) == first and len(made) == 1
    st = g.stat()
    with open(g, "r+b") as h:
        h.seek(50)
        h.write(b"\1")
    os.utime(g, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert converted_gguf(g) != first and len(made) == 2
    copy = tmp_path / "elsewhere" / "m.gguf"
    copy.parent.mkdir()
    shutil.copy2(g, copy)
    assert converted_gguf(copy) == converted_gguf(g) and len(made) == 2  # a copy reuses the conversion


@pytest.mark.integration
def test_a_rebuilt_rest_datastore_is_another_configuration(tiny_folder, tmp_path, run_goose, store):
    """The datastore was not in the hash: rebuilding it at the same path resumed the old rows under one hash."""
    from tiny import byte_tokenizer

    from goose.baselines.rest_datastore import build

    ds = tmp_path / "ds"
    shutil.copytree(store, ds)
    f = jsonl(tmp_path / "p.jsonl", ["def add(a, b):\n    return a + b\n", "the cat sat on the mat"])
    args = tiny_args(tiny_folder, f, tmp_path / "res", "method=rest", f"rest_datastore={ds}")
    first, _ = run_goose(*args)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "c.txt").write_text("the dog ran to the park. the dog sat.\n" * 4)
    shutil.rmtree(ds)
    build(byte_tokenizer(), "tiny", str(corpus), ds, None, 10_000)
    second, out = run_goose(*args)
    assert "resuming" not in out and second["config_hash"] != first["config_hash"]
    assert second["prompts"] == 2 and second["lossless"] == 2
    got = all_rows(tmp_path / "res")
    assert len({r["data_fingerprint"] for r in got}) == 2 and all(r["data_fingerprint"] for r in got)


@pytest.mark.integration
def test_a_greedy_run_with_another_seed_is_the_same_configuration(tiny_folder, tmp_path, run_goose):
    f = jsonl(tmp_path / "p.jsonl", ["a b a b a b"])
    first, _ = run_goose(*tiny_args(tiny_folder, f, tmp_path / "res", "method=pld", "seed=0"))
    second, out = run_goose(*tiny_args(tiny_folder, f, tmp_path / "res", "method=pld", "seed=5"))
    assert second["config_hash"] == first["config_hash"] and "resuming: 1 row(s)" in out


# --- settings --------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, says", [
    (["+bugdet=60"], "unknown setting 'bugdet' (did you mean budget?)"),
    (["bugdet=60"], "unknown setting 'bugdet' (did you mean budget?)"),
    (["+benchmark.category=nosuch"], "unknown setting 'benchmark.category'"),
    (["method=goose", "+method.drafter.rhoo=0.3"], "unknown setting 'method.drafter.rhoo' (did you mean rho?)"),
    (["+engine.turbo=1"], "unknown setting 'engine.turbo'"),
    (["method=pld", "max_ngram=3"], "'max_ngram' (a method's own setting: method.drafter.max_ngram=...)"),
    (["method=pld", "method.drafter.max_ngram=abc"], "method 'pld': method.drafter.max_ngram='abc': Value 'abc'"),
    (["method=gose"], "method=gose: no such method (did you mean goose?)"),
    (["-m", "method=pld,nosuch"], "method=nosuch: no such method"),
    (["model=smollm3"], "model=smollm3: no such model (did you mean smollm2-135m?)"),
])
@pytest.mark.integration
def test_unknown_settings_are_refused_never_ignored(args, says, tmp_path):
    r = run_here(*args, f"results_dir={tmp_path}", "n_prompts=1")
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr[-1500:]
    assert not any(tmp_path.iterdir())


def test_a_choice_from_a_users_config_folder_is_known(tmp_path):
    from goose.preflight import unknown_choice

    (tmp_path / "method").mkdir()
    (tmp_path / "method" / "mine.yaml").write_text("name: mine\n")
    assert unknown_choice(["method=mine"]) is not None
    assert unknown_choice(["method=mine,goose", f"hydra.searchpath=[file://{tmp_path}]"]) is None
    assert unknown_choice(["benchmark=gsm8k", "model=smollm2-135m"]) is None


def test_every_misspelt_name_is_said_at_once():
    """Only the first was said: fixing model=vicuna7b then met method=gose on the next try."""
    from goose.preflight import unknown_choice

    said = unknown_choice(["model=vicuna7b", "method=gose", "benchmark=gsm8kk"])
    assert "model=vicuna7b: no such model (did you mean vicuna-7b?)" in said
    assert "method=gose: no such method (did you mean goose?)" in said
    assert "benchmark=gsm8kk: no such benchmark (did you mean gsm8k?)" in said and "\n" not in said


def test_a_data_dir_that_is_not_a_folder_is_refused_not_passed_over(tmp_path):
    """data_dir=/typo ran on whatever $GOOSE_DATA_DIR held, and config.yaml recorded the typo."""
    from goose.benchmarks.prompts import DataDirs

    with pytest.raises(GooseError, match=r"data_dir=.*nowhere: no such folder"):
        DataDirs.of(str(tmp_path / "nowhere"))
    assert DataDirs.of(str(tmp_path)).roots[0] == tmp_path


def test_sweeping_through_hydra_sweeper_params_on_the_command_line_is_one_line():
    """It raised an AssertionError from inside the sweep check (exit 1, a traceback)."""
    from goose.preflight import refused

    said = refused(["-m", "method=goose", "hydra.sweeper.params.budget=10,20"])
    assert said.startswith("hydra.sweeper.params.budget=10,20: ") and "python run.py -m budget=a,b" in said


def test_a_gated_repository_says_so_where_its_weights_are_missing(monkeypatch):
    from goose.models import loading

    monkeypatch.setattr(loading, "_hub_reachable", lambda: False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(GooseError, match="gated repository: accept its licence") as e:
        loading.hub_snapshot("meta-llama/Meta-Llama-3-8B-Instruct-goose-test", "llama3-8b")
    assert "hf download meta-llama/" in str(e.value)
    with pytest.raises(GooseError) as e:
        loading.hub_snapshot("lmsys/vicuna-7b-v1.3-goose-test", "vicuna-7b")
    assert "gated" not in str(e.value)


@pytest.mark.integration
def test_no_gpu_and_no_weights_are_said_together(tmp_path):
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, str(ROOT / "run.py"), "model=vicuna-7b", "method=goose",
                        f"results_dir={tmp_path}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "no CUDA device" in r.stderr and "not in the local Hugging Face cache" in r.stderr


# --- durable writes ----------------------------------------------------------------------------------
def test_a_short_write_is_undone_and_said_and_the_next_row_is_whole(tmp_path, monkeypatch):
    """A short write on a full disk was not checked: the next row was appended onto the cut one."""
    f = ResultsFile(tmp_path / "results.csv")
    f.append({"prompt_id": "p0", "tau": 1.5})
    before = f.path.read_bytes()
    real = os.write
    calls = {"n": 0}

    def half_then_full(fd, data):
        calls["n"] += 1
        if calls["n"] == 1:
            return real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(GooseError, match="the disk is full; nothing partial was kept"):
        f.append({"prompt_id": "p1", "tau": 2.5})
    assert f.path.read_bytes() == before
    monkeypatch.setattr(os, "write", real)
    f.append({"prompt_id": "p2", "tau": 3.5})
    assert [(r["prompt_id"], r["tau"]) for r in f.rows()] == [("p0", "1.5"), ("p2", "3.5")] and not f.damaged


def test_a_file_replaced_whole_is_the_old_one_or_the_new_one_never_half(tmp_path, monkeypatch):
    """config.yaml, summaries, a kept budget=auto cost, a reference entry and a rewritten results.csv are replaced
    whole by one helper (goose.storage.durable.replace_text): a full disk mid-write leaves the old file, no draft,
    and one line; the draft is hidden while it is written (a leading dot), which folder fingerprints skip."""
    from goose.storage.durable import replace_text

    path = tmp_path / "summary.json"
    replace_text(path, "old")
    seen = []
    real = os.replace

    def full_after_listing(src, dst):
        seen.append(sorted(p.name for p in tmp_path.glob("*")))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full_after_listing)
    with pytest.raises(GooseError, match=r"cannot write .*summary.json: the disk is full; nothing partial was kept"):
        replace_text(path, "new")
    assert seen == [[f".summary.json.tmp{os.getpid()}", "summary.json"]]
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["summary.json"]
    monkeypatch.setattr(os, "replace", real)
    replace_text(path, "new \u2028 ü\n", sync=True)
    assert path.read_text(encoding="utf-8") == "new \u2028 ü\n" and os.listdir(tmp_path) == ["summary.json"]


def test_a_full_disk_when_the_run_lock_is_written_is_one_line_and_leaves_no_lock_held(tmp_path, monkeypatch):
    """A fresh clone's trial (2026-12-07): with no byte free, a new configuration's run lock (its PID) could not be
    written and the run ended in a traceback."""
    from goose.storage.result_files import RunLock

    real = os.pwrite

    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    with pytest.raises(GooseError, match=r"cannot write the run lock .*\.lock: the disk is full"):
        RunLock(tmp_path / "run").__enter__()
    monkeypatch.setattr(os, "pwrite", real)
    with RunLock(tmp_path / "run"):  # nothing holds it: a rerun once there is room takes it
        assert RunLock.holder(tmp_path / "run") == f"{os.getpid()} on {__import__('socket').gethostname()}"


@pytest.mark.integration
def test_a_full_disk_stops_the_run_with_one_line_and_it_resumes_once_there_is_room(tiny_folder, tmp_path):
    small = mounted("tmpfs", tmp_path / "small", size="160k")
    try:
        f = jsonl(tmp_path / "p.jsonl", [f"x{i} = {i}\n" * 3 for i in range(80)])
        args = tiny_args(tiny_folder, f, small, "method=pld", "n_prompts=null", "max_new_tokens=8",
                         "speedup_reference=none")
        r = run_py(*args)
        assert r.returncode == 2 and "the disk is full" in r.stderr and "Traceback" not in r.stderr, r.stderr[-2000:]
        results = next(small.rglob("results.csv"))
        kept = ResultsFile(results).rows()
        assert not ResultsFile(results).damaged and len(kept) < 80
        moved = tmp_path / "moved"
        shutil.copytree(small, moved, ignore=shutil.ignore_patterns(".lock"))
    finally:
        unmount(small)
    r = run_py(*tiny_args(tiny_folder, f, moved, "method=pld", "n_prompts=null", "max_new_tokens=8",
                          "speedup_reference=none"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"resuming: {len(kept)} row(s)" in r.stdout
    got = ResultsFile(next(moved.rglob("results.csv"))).rows()
    assert sorted(x["prompt_id"] for x in got) == sorted(f"p{i}" for i in range(80))


@pytest.mark.integration
def test_a_read_only_results_folder_is_one_line(tiny_folder, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    ro = mounted("ro", tmp_path / "ro", source=src)
    try:
        f = jsonl(tmp_path / "p.jsonl", ["a b a b"])
        for sweep in ([], ["-m"]):
            r = run_py(*sweep, *tiny_args(tiny_folder, f, ro / "res", "method=pld"))
            assert r.returncode == 2 and "read-only" in r.stderr and "Traceback" not in r.stderr, r.stderr[-1500:]
    finally:
        unmount(ro)


@pytest.mark.integration
def test_damaged_lines_are_never_rows_and_their_prompts_are_decoded_again(tiny_folder, tmp_path, run_goose):
    """A corrupted middle line was reported as rows of another configuration (config hash None), and a
    corrupted outputs line went unnoticed until the equality report crashed."""
    f = jsonl(tmp_path / "p.jsonl", [f"y{i} = {i}\n" * 2 for i in range(4)])
    args = tiny_args(tiny_folder, f, tmp_path / "res", "method=pld", "n_prompts=null")
    first, _ = run_goose(*args)
    folder = Path(first["run_dir"])
    lines = (folder / "results.csv").read_text().split("\n")
    lines[2] = lines[2].replace(",p1,", ",p1x,", 1)[:-30]  # p1's row cut short and edited
    (folder / "results.csv").write_text("\n".join(lines))
    out_lines = (folder / "outputs.jsonl").read_text().split("\n")
    out_lines[3] = out_lines[3][:40]  # p3's outputs record torn
    (folder / "outputs.jsonl").write_text("\n".join(out_lines))
    from goose.analysis.load import load_rows

    assert sorted(load_rows(tmp_path / "res").prompt_id) == ["p0", "p2", "p3"]  # p1 left out, said
    second, out = run_goose(*args)
    assert "damaged row moved to results.csv.damaged" in out and "damaged outputs line" in out
    assert second["prompts"] == 4 and second["lossless"] == 4
    assert (folder / "results.csv.damaged").read_text().startswith("# ")
    assert sorted(r["prompt_id"] for r in ResultsFile(folder / "results.csv").rows()) == ["p0", "p1", "p2", "p3",
                                                                                          "p3"]
    assert set(OutputsFile(folder / "outputs.jsonl").read()) == {"p0", "p1", "p2", "p3"}


@pytest.mark.integration
def test_a_repeated_row_and_rows_not_asked_for_are_not_counted(tiny_folder, tmp_path, run_goose):
    f = jsonl(tmp_path / "p.jsonl", [f"z{i} = {i}\n" * 2 for i in range(3)])
    first, _ = run_goose(*tiny_args(tiny_folder, f, tmp_path / "res", "method=pld", "n_prompts=3"))
    path = Path(first["run_dir"]) / "results.csv"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines, lines[1]]))  # p0's row twice (a whole, valid line)
    again, _ = run_goose(*tiny_args(tiny_folder, f, tmp_path / "res", "method=pld", "n_prompts=3"))
    assert again["prompts"] == 3
    fewer, _ = run_goose(*tiny_args(tiny_folder, f, tmp_path / "res", "method=pld", "n_prompts=2"))
    assert fewer["prompts"] == 2 and fewer["new_tokens"] == sum(
        int(r["new_tokens"]) for r in ResultsFile(path).rows()[:2])


# --- ids and files -----------------------------------------------------------------------------------
@pytest.mark.integration
def test_ids_pandas_would_read_as_missing_stay_ids(tiny_folder, tmp_path, run_goose):
    """NA, null, None, nan, 007: three prompts once became one in the analysis, with exit 0."""
    from goose.analysis.artifacts import make
    from goose.analysis.load import load_rows

    ids = ["NA", "null", "None", "nan", "007", "N/A"]
    f = jsonl(tmp_path / "p.jsonl", [f"w{i} = {i}\n" * 2 for i in range(len(ids))], ids=ids)
    run_goose(*tiny_args(tiny_folder, f, tmp_path / "res", "method=pld", "n_prompts=null"))
    df = load_rows(tmp_path / "res")
    assert sorted(df.prompt_id) == sorted(ids)
    md = make("all_methods", df, tmp_path / "art")[0].read_text()
    assert f"{len(ids)}/{len(ids)}" in md


@pytest.mark.parametrize("content, says", [
    (b'{"id": "a", "prompt": "caf\xe9"}\n', "is not UTF-8 text: byte 0xe9"),
    (b'{"id": 1, "prompt": "x"}\n{"prompt": "y"}\n', ":2 has no 'id' but line 1 has one"),
    (b'{"id": null, "prompt": "x"}\n', "'id' must be a non-empty string or an integer (got null)"),
    (b'{"id": true, "prompt": "x"}\n', "'id' must be a non-empty string or an integer (got true)"),
])
@pytest.mark.integration
def test_bad_prompt_files_are_one_clear_line(content, says, tmp_path):
    p = tmp_path / "p.jsonl"
    p.write_bytes(content)
    r = run_py("benchmark=jsonl", f"benchmark.path={p}", f"results_dir={tmp_path / 'res'}")
    assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr[-1500:]


@pytest.mark.integration
def test_gzip_u2028_and_folders_as_prompt_files(tiny_folder, tmp_path, run_goose):
    import gzip

    from goose.benchmarks.builtin import prompts_file as jsonl_file

    text = "line one\u2028still one\u2029and one"
    p = tmp_path / "p.jsonl"
    p.write_text(json.dumps({"id": "a", "prompt": text}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert [x.text for x in jsonl_file(str(p))] == [text]  # U+2028 is inside a string, not a line break
    gz = tmp_path / "p.jsonl.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    assert [x.text for x in jsonl_file(str(gz))] == [text]
    with pytest.raises(GooseError, match="is a folder, not a file"):
        jsonl_file(str(tmp_path))
    bad = tmp_path / "prompt.txt"
    bad.write_bytes(b"\xff\xfe not text")
    r = run_py(f"prompt_file={bad}", f"results_dir={tmp_path / 'res'}")
    assert r.returncode == 2 and "is not UTF-8 text" in r.stderr and "Traceback" not in r.stderr


# --- equality ----------------------------------------------------------------------------------------
@pytest.mark.integration
def test_equality_compares_what_was_asked_and_never_writes(tiny_folder, tmp_path, run_goose):
    """Two runs on different prompts with the same ids were reported EQUAL (exit 0); reading a folder
    truncated its partial last line (a crash on a read-only folder)."""
    a_file = jsonl(tmp_path / "a.jsonl", ["def f(x):\n    return x\n", "a b a b"])
    b_file = jsonl(tmp_path / "b.jsonl", ["completely other text", "a b a b"])
    a = Path(run_goose(*tiny_args(tiny_folder, a_file, tmp_path / "ra", "method=pld"))[0]["run_dir"])
    b = Path(run_goose(*tiny_args(tiny_folder, b_file, tmp_path / "rb", "method=pld"))[0]["run_dir"])
    cmd = [sys.executable, "-m", "goose.analysis.reproduce", "equality"]
    r = subprocess.run([*cmd, "--a", str(a), "--b", str(b)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "different questions" in r.stderr and "p0" in r.stderr, r.stdout + r.stderr
    with open(a / "outputs.jsonl", "a") as h:
        h.write('{"prompt_id": "p9", "tok')  # a writer killed mid-line
    before = (a / "outputs.jsonl").read_bytes()
    c = Path(run_goose(*tiny_args(tiny_folder, a_file, tmp_path / "rc", "method=goose"))[0]["run_dir"])
    r = subprocess.run([*cmd, "--a", str(a), "--b", str(c)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (a / "outputs.jsonl").read_bytes() == before  # read, never repaired
    r = subprocess.run([*cmd, "--a", str(tmp_path / "nowhere"), "--b", str(c)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "could not compare" in r.stderr


# --- analysis on any results folder ------------------------------------------------------------------
@pytest.mark.integration
def test_every_artifact_works_on_a_mixed_folder_or_says_what_it_needs(tiny_folder, tmp_path, run_goose, capsys):
    """The demo's rows beside a sweep's ended table1/table2 in KeyError, figure1 in AttributeError, ...: the
    methods' labels split by a setting, then matched nothing."""
    from goose.analysis.artifacts import ARTIFACTS, make
    from goose.analysis.load import load_rows

    f = jsonl(tmp_path / "p.jsonl", ["a b a b a b", "c = 1\nc = 1\n"])
    res = tmp_path / "res"
    run_goose(*tiny_args(tiny_folder, f, res, "method=goose", "budget=auto", "speedup_reference=cached"))
    for method in ("goose", "iso3", "iso5", "goose-no-bigram"):
        run_goose(*tiny_args(tiny_folder, f, res, f"method={method}", "budget=60"))
    df = load_rows(res)
    for name in ARTIFACTS:
        try:
            paths = make(name, df, tmp_path / "art")
        except SystemExit as e:  # a clear line: which rows it needs
            assert isinstance(e.code, str) and name in e.code and "\n" not in e.code, (name, e.code)
            continue
        assert paths, name
    for name in ("table1", "table2", "figure1", "figure4", "spine_continuation", "all_methods"):
        assert make(name, df, tmp_path / "art"), name
    run_goose(*tiny_args(tiny_folder, f, res, "method=goose", "budget=60", "repeats=2"))
    capsys.readouterr()
    make("table1", load_rows(res), tmp_path / "art")  # one of the two is read, and said; never both pooled
    said = capsys.readouterr().out
    assert "table1: goose B=60 ran several configurations in " in said and "repeats=" in said
    t = make("all_methods", load_rows(res), tmp_path / "art")[0].read_text()
    assert "repeats=2" in t and "repeats=1" in t


def test_run_folder_helper_is_found(tmp_path):
    (tmp_path / "m" / "b" / "x" / "B1-abc").mkdir(parents=True)
    assert run_folder(tmp_path, "m", "b", "x", "B1").name == "B1-abc"

"""goose-serve's command line (goose.serving.command): its settings are run.py's, a bad one is one line and exit 2
before any model loads (sampling is per request, run settings are not a server's, a flag written as a setting is
named as the flag, every refusal points at goose-serve --help and never at run.py, a port in use is said at once),
settings and flags in any order, and end to end in another process on the tiny model's folder: it serves,
and SIGTERM lets the stream in flight finish, then exits 0."""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from live import sse_events

from goose.errors import GooseError
from goose.serving.command import DEFAULT_CONCURRENCY, check_settings, listen, main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("setting,says", [("temperature=0.7", "per request"), ("seed=3", "per request"),
                                          ("benchmark=gsm8k", "not of a server"), ("n_prompts=3", "not of a server"),
                                          ("bugdet=60", "unknown setting 'bugdet'"), ("method=gose", "no such method"),
                                          ("goose", "KEY=VALUE"), ("hydra.searchpath=[x]", "--search-path")])
def test_a_setting_the_server_does_not_take_is_one_line(setting, says, capsys):
    with pytest.raises(GooseError, match=says):
        check_settings([setting])
    with pytest.raises(SystemExit) as e:
        main([setting, "--port", "0"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1 and says in err


@pytest.mark.parametrize("argv,says", [
    (["method=goose", "budget=auto", "port=8000"], "port is a flag of goose-serve, not a setting: write --port 8000"),
    (["method=goose", "queue-size=3"], "write --queue-size 3"),
    (["method=goose", "ports=1"], "unknown setting 'ports' (did you mean --port?)"),
    (["method=goose", "bugdet=auto"], "unknown setting 'bugdet' (did you mean budget?)"),
    (["method=goose", "budget=-3"], "budget"),
    (["method=goose", "method.drafter.no_such=1"], "no_such"),
    (["method=gose"], "no such method"),
    (["method=gose"], "in a folder given by --search-path DIR"),  # goose-serve's way, not run.py's hydra.searchpath
    (["--concurrency", "4", "method=pld"], "--concurrency is a setting of goose-serve, not a flag: write concurrency="),
    (["--port", "http"], "--port"),
])
def test_every_refusal_names_goose_serve_and_its_help(argv, says, capsys, tmp_path):
    """One line, exit 2, the user's own command named (goose-serve --help), never run.py's."""
    with pytest.raises(SystemExit) as e:
        main([*argv, "--port", "0"] if "--port" not in argv else argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and says in err, err
    assert err.rstrip().endswith("(goose-serve --help)") and "run.py" not in err, err


def test_settings_and_flags_in_any_order():
    from goose.serving.command import parse

    for argv in (["method=pld", "--port", "8001", "concurrency=2"], ["--port", "8001", "method=pld", "concurrency=2"],
                 ["method=pld", "concurrency=2", "--port", "8001"]):
        args, settings = parse(argv)
        assert args.port == 8001 and settings == ["method=pld", "concurrency=2"], argv


def test_settings_become_runs_overrides():
    assert check_settings(["method=goose", "budget=auto"]) == [f"concurrency={DEFAULT_CONCURRENCY}", "method=goose",
                                                               "budget=auto"]
    assert check_settings(["concurrency=2", "method.drafter.rho=0.5"]) == ["concurrency=2",
                                                                        "++method.drafter.rho=0.5"]


def test_help_and_bad_flags(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0 and "goose-serve model=smollm2-135m" in capsys.readouterr().out
    for argv in (["--port", "http"], ["--no-such-flag"], ["--queue-size", "-1"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1, err


def test_a_port_in_use_is_said_before_the_model_loads(capsys):
    taken = listen("127.0.0.1", 0)
    with pytest.raises(SystemExit) as e:
        main(["method=ar", "--port", str(taken.getsockname()[1])])
    taken.close()
    assert e.value.code == 2 and "cannot listen on 127.0.0.1:" in capsys.readouterr().err


@pytest.mark.integration
def test_goose_serve_serves_and_drains_at_sigterm(tiny_folder):
    env = dict(os.environ, WANDB_MODE="disabled", HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    proc = subprocess.Popen([sys.executable, "-m", "goose.serving.command", "model=hf", f"model.path={tiny_folder}",
                             "method=goose", "budget=60", "concurrency=2", "max_new_tokens=8", "--port", "0"],
                            cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        port = None
        for line in proc.stderr:
            if line.startswith("[goose] serving"):
                port = int(line.rsplit(":", 1)[1].split("/")[0])
                break
        assert port, "no serving line"
        assert "with goose@60" in line and "2 rows" in line
        c = http_post(port, {"model": "hf", "prompt": "def f(x):", "stream": False})
        answer = json.loads(c.getresponse().read())
        assert answer["usage"]["completion_tokens"] <= 8 and answer["model"] == "hf"  # max_new_tokens: the default
        c = http_post(port, {"prompt": "def f(x):", "max_tokens": 200, "ignore_eos": True, "stream": True})
        r = c.getresponse()
        events = sse_events(r)
        next(events)
        proc.send_signal(signal.SIGTERM)
        rest = list(events)
        assert rest[-1] == "[DONE]" and rest[-2]["choices"][0]["finish_reason"] == "length"
        assert proc.wait(60) == 0
        time.sleep(0.1)
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2)
        assert "drained and stopped" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def http_post(port: int, body: dict):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    return c

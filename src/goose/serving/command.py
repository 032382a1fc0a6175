"""goose-serve: an OpenAI-compatible server over the batch engine, for any model and method the harness runs.

    goose-serve model=smollm2-135m method=goose budget=auto concurrency=4 --port 8000

Settings are run.py's (model=, method=, budget=, memory=, concurrency=, device=, dtype=, engine.backend=,
max_new_tokens= as the default max_tokens, rest_datastore=, method.drafter.KEY=, model.KEY=), composed and checked
by the same code (goose.running.spec), so a name means here what it means there. Sampling is per request
(temperature, top_p, top_k, seed in the request body). The server binds 127.0.0.1 unless --host says otherwise;
SIGTERM (or Ctrl-C) stops accepting, finishes every request in flight and waiting, and exits 0. docs/serving.md.
"""

from __future__ import annotations

import argparse
import difflib
import os
import signal
import socket
import sys
from typing import NoReturn

import uvicorn

from goose.cli import drafter_overrides
from goose.errors import GooseError
from goose.models.loading import identify_model, stop_ids
from goose.preflight import unknown_choice
from goose.running.decoding import batch_engine, load_engine
from goose.running.registry import compose_config, make_drafter, spec_label
from goose.running.runner import checked_spec
from goose.running.spec import setting_as_flag, unknown_override
from goose.serving.app import Options, Served, make_app

DEFAULT_CONCURRENCY = 4  # a server's batch; run.py's default (1) would serve one request at a time
SERVER_SETTINGS = ("model", "method", "budget", "memory", "concurrency", "device", "dtype", "engine",
                   "max_new_tokens", "rest_datastore")
PER_REQUEST = ("temperature", "top_k", "top_p", "seed")
HELP = "goose-serve --help"  # every refusal of this command points here, never at run.py's


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):
        if message.startswith("unrecognized arguments: "):  # a setting written as a flag
            given = message.removeprefix("unrecognized arguments: ").split()
            message = setting_as_flag(given, None, SERVER_SETTINGS, "a setting of goose-serve") or message
        print(f"error: {message} ({HELP})", file=sys.stderr)
        sys.exit(2)


def parser() -> argparse.ArgumentParser:
    ap = OneLineParser(prog="goose-serve", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("settings", nargs="*", metavar="SETTING=VALUE", help="run.py's settings (see above)")
    ap.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    ap.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free port, printed)")
    ap.add_argument("--queue-size", type=int, default=64,
                    help="requests that may wait for a row beyond the batch's (default 64); one more gets a 429")
    ap.add_argument("--api-key", default=os.environ.get("GOOSE_API_KEY"),
                    help="Bearer key the /v1 endpoints ask for (default: $GOOSE_API_KEY, else none)")
    ap.add_argument("--served-model-name", default=None, help="the model name clients ask for (default: model=)")
    ap.add_argument("--search-path", action="append", default=[], metavar="DIR",
                    help="a folder of method/NAME.yaml (and its drafter's .py), as run.py's hydra.searchpath")
    ap.add_argument("--drain-timeout", type=float, default=300.0,
                    help="seconds SIGTERM waits for requests in flight before cancelling them (default 300)")
    ap.add_argument("--access-log", action="store_true", help="log every HTTP request (uvicorn's access log)")
    return ap


def flags() -> dict[str, str]:
    """The server's flags by the name a setting would give them (port, queue_size, ...): `port=8000` is `--port`."""
    return {a.dest: a.option_strings[-1] for a in parser()._actions if a.option_strings and a.dest != "help"}


def _near(word: str) -> str:
    """' (did you mean X?)' with X the closest setting or flag (written as a flag: --port), else ''."""
    names = {**{s: s for s in SERVER_SETTINGS}, **flags()}
    near = difflib.get_close_matches(word, list(names), n=1)
    return f" (did you mean {names[near[0]]}?)" if near else ""


def check_settings(settings: list[str]) -> list[str]:
    """The settings as Hydra overrides, or one GooseError naming the first that is no server setting."""
    for s in settings:
        key, eq, value = s.partition("=")
        top = key.lstrip("+~").split(".")[0]
        if not eq or not key:
            raise GooseError(f"'{s}' is not a setting: write KEY=VALUE, e.g. method=goose")
        if top in PER_REQUEST:
            raise GooseError(f"{key} is per request: send it in the request body ({', '.join(PER_REQUEST)}), the "
                             "server samples each request exactly as the harness does")
        if top == "hydra":
            raise GooseError(f"{key}: give a config folder with --search-path DIR")
        if (flag := flags().get(top.replace("-", "_"))) is not None:
            raise GooseError(f"{key} is a flag of goose-serve, not a setting: write {flag} {value}".rstrip())
        if top not in SERVER_SETTINGS:
            why = (f"'{key}' is a setting of runs (prompts, rows, timing), not of a server"
                   if unknown_override([s]) is None  # one of run.py's settings
                   else f"unknown setting '{key}'{_near(top)}")
            raise GooseError(f"{why}; goose-serve takes {', '.join(SERVER_SETTINGS)} and its flags")
    if (why := unknown_choice(settings)) is not None:  # goose-serve's way to add a config folder is its flag
        raise GooseError(why.replace("a folder given by hydra.searchpath", "a folder given by --search-path DIR"))
    if not any(s.partition("=")[0] == "concurrency" for s in settings):
        settings = [f"concurrency={DEFAULT_CONCURRENCY}", *settings]
    return drafter_overrides(settings)


def load(settings: list[str], search_path: list[str], name: str | None) -> Served:
    """The model and method the settings name, loaded as run.py loads them, behind a batch engine of `concurrency`
    rows; budget=auto: the cost surface up to that many requests (measured once per machine, then cached) and the
    drafter armed to let the batch pick every request's width, as goose.running.decoding.BatchedDecoding does."""
    sys.path.extend(search_path)  # a method's drafter may sit beside its YAML
    spec = checked_spec(compose_config(settings, search_path))
    template = make_drafter(spec.method, spec.budget)
    identity = identify_model(spec.model)
    single, model, tok = load_engine(spec, identity)
    # profile: draft / verify seconds for /metrics
    engine, surface = batch_engine(spec, single.model, identity, template, tok, profile=True)
    return Served(name or spec.model.name, engine, tok, template, stop_ids(tok, model),
                  spec_label(spec.method.name, template, spec.budget), surface, spec.max_new_tokens)


def listen(host: str, port: int) -> socket.socket:
    """A listening socket, bound before the model loads: a port in use is said at once, in one line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise GooseError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def uvicorn_server(app, drain, drain_timeout: float, access_log: bool = False):
    """uvicorn's server over `app`; at SIGTERM or Ctrl-C `drain()` first (new requests get a 503), then uvicorn
    stops accepting, waits for the responses in flight, and runs the app's shutdown."""
    class DrainingServer(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            drain()
            super().handle_exit(sig, frame)

    config = uvicorn.Config(app, log_level="info", access_log=access_log, timeout_graceful_shutdown=drain_timeout,
                            lifespan="on")
    return DrainingServer(config)


def refuse(e: GooseError) -> NoReturn:
    print(f"error: {str(e).rstrip('.')} ({HELP})", file=sys.stderr)
    sys.exit(2)


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The command line checked before anything loads: (its flags, run.py's overrides); refused in one line, exit 2."""
    args = parser().parse_intermixed_args(argv)  # settings and flags in any order
    try:
        if args.queue_size < 0 or not 0 <= args.port < 65536 or args.drain_timeout <= 0:
            raise GooseError("--queue-size must be >= 0, --port in 0..65535 and --drain-timeout > 0")
        return args, check_settings(args.settings)
    except GooseError as e:
        refuse(e)


def main(argv: list[str] | None = None) -> None:
    args, settings = parse(sys.argv[1:] if argv is None else argv)
    try:
        sock = listen(args.host, args.port)
        served = load(settings, args.search_path, args.served_model_name)
    except GooseError as e:
        refuse(e)
    app = make_app(served, Options(args.queue_size, args.api_key or None, drain_timeout_s=args.drain_timeout))
    server = uvicorn_server(app, app.state.goose.begin_drain, args.drain_timeout, args.access_log)
    host, port = sock.getsockname()[:2]
    where = f"[{host}]" if ":" in host else host
    print(f"[goose] serving {served.name} with {served.method}, {served.engine.rows} rows, queue {args.queue_size}"
          f"{', API key required' if args.api_key else ''}: http://{where}:{port}/v1", file=sys.stderr, flush=True)
    # uvicorn re-raises the signal that stopped it once it has drained: handled here, the exit is a clean 0
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    server.run(sockets=[sock])
    print("[goose] drained and stopped", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()

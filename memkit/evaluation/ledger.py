"""The ledger as data: every cell of the table ``memkit eval --all`` prints (config × data
set × metric), written to a TOML file with the command, date and CPU that made it, and a
later run checked against it cell by cell (``memkit eval --all --check``; docs/EVAL.md).

Rows whose encoder is float reproduce to the last printed digit on every CPU measured;
rows whose encoder is int8 (ONNX Runtime's integer kernels differ by instruction set) are
checked within a tolerance the file states, with where it was measured.
"""

from __future__ import annotations

import json
import platform
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from memkit.evaluation.tracking import git_commit
from memkit.models.encoders import INT8

PRECISION = 4  # the digits the printed ledger shows: what "exact" means for a float row
INT8_TOLERANCE = 0.015
TOLERANCE_NOTE = (
    "int8 rows: the largest difference in one cell between CPUs, rounded up. Measured against "
    "an Intel Xeon (AVX-512, VNNI, AMX): on an AMD EPYC with AVX2 only at most 0.0129 "
    "(locomo-dev R@10 multi-hop of default and reader, 0.5292 vs 0.5163; R@5 adv. of default "
    "0.8038 vs 0.7911), on an AMD EPYC with AVX-512 and VNNI at most 0.0112. Float rows were "
    "identical on all three, so they are checked to the printed digits"
)
CPU_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")
RUN_FILE = "ledger.json"  # the run's own cells, beside the reports in --out


@dataclass(frozen=True)
class Column:
    header: str  # as the printed table heads it: "locomo-dev R@5 1-4"
    dataset: str
    metric: str  # the header without the data set: "R@5 1-4"
    suffix: str  # the result's name after the config's ("+rewrite"), "" for the plain run
    group: str  # the summary's key: "headline", "category:adversarial", "all"
    key: str  # the summary's metric: "recall@5"


def columns(by_dataset: dict) -> list[Column]:
    """The printed ledger's columns, data set by data set as they were scored: LoCoMo-shaped
    sets (a headline) their recall at four depths for categories 1-4 and adversarial and
    recall@10 per other category; sets with rewrites MRR@10 raw and rewritten; others
    nDCG@10."""
    cols = []

    def col(ds, metric, suffix, group, key):
        cols.append(Column(f"{ds} {metric}", ds, metric, suffix, group, key))

    for ds, results in by_dataset.items():
        s = results[0].summary
        if "headline" in s:
            for k in (5, 10, 25, 50):
                col(ds, f"R@{k} 1-4", "", "headline", f"recall@{k}")
            for k in (5, 10, 25, 50):
                col(ds, f"R@{k} adv.", "", "category:adversarial", f"recall@{k}")
            for c in sorted(s):
                if c.startswith("category:") and c != "category:adversarial":
                    col(ds, f"R@10 {c.split(':')[1]}", "", c, "recall@10")
        elif any(r.name.endswith("+rewrite") for r in results):
            col(ds, "MRR@10 raw", "", "all", "mrr@10")
            col(ds, "MRR@10 rewrite", "+rewrite", "all", "mrr@10")
        else:
            col(ds, "nDCG@10", "", "all", "ndcg@10")
    return cols


def encoder_kind(config: dict) -> str:
    """``"int8"`` when any encoder the config names has int8 weights (its [encoder] or a
    part's ``encoder``/``model``), else ``"float"``: the int8 kernels are what differ by
    CPU."""

    def names(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("model", "encoder") and isinstance(v, str):
                    yield v
                else:
                    yield from names(v)
        elif isinstance(x, list):
            for v in x:
                yield from names(v)

    return "int8" if any(n.endswith(INT8) for n in names(config)) else "float"


@dataclass
class Row:
    encoder: str  # "float" or "int8"
    tolerance: float
    cells: dict = field(default_factory=dict)  # {dataset: {metric: value}}
    in_sample: list = field(default_factory=list)  # data sets marked * (trained on)
    stages: str = ""  # the printed "stages" column: what it does beyond its retriever


def tolerance_for(kind: str) -> float:
    return INT8_TOLERANCE if kind == "int8" else 0.0


def run_rows(configs: list[dict], by_dataset: dict) -> dict[str, Row]:
    """Every cell the printed ledger shows, per config (in the printed order); a cell the
    table prints as "—" (no such result or category) is left out."""
    cols = columns(by_dataset)
    rows = {}
    for config in configs:
        kind = encoder_kind(config)
        row = Row(kind, tolerance_for(kind))
        for c in cols:
            res = {r.name: r for r in by_dataset[c.dataset]}.get(config["name"] + c.suffix)
            if res is None:
                continue
            value = res.summary.get(c.group, {}).get(c.key)
            if value is not None:
                row.cells.setdefault(c.dataset, {})[c.metric] = float(value)
            if res.in_sample and c.dataset not in row.in_sample:
                row.in_sample.append(c.dataset)
            if not c.suffix and not row.stages:  # as the printed table takes it
                row.stages = res.stages_label()
        rows[config["name"]] = row
    return rows


# -- the machine ----------------------------------------------------------------------------
def cpu() -> dict:
    """The CPU's model name and the flags that decide ONNX Runtime's int8 kernels."""
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name in ("", platform.machine()):
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:  # not Linux: the model name platform gives, no flags
        pass
    have = [f for f in CPU_FLAGS if f in flags]
    return {"cpu": name, "cpu_flags": have, "cpu_class": cpu_class(have)}


def cpu_class(flags) -> str:
    """What the int8 path depends on, in a few words: the widest integer dot product."""
    flags = set(flags)
    if "avx512_vnni" in flags:
        return "avx512-vnni"
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags:
        return "avx2-vnni" if "avx_vnni" in flags else "avx2"
    return "other"


# -- the run's cells beside its reports -----------------------------------------------------
def write_run(path: Path, rows: dict[str, Row], meta: dict) -> Path:
    """The run's cells unrounded (``--out``/ledger.json), so a ledger can be written or
    checked from them later without scoring again (``--from-out``)."""
    data = {"run": meta, "rows": {n: vars(r) for n, r in rows.items()}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


def read_run(path: Path) -> tuple[dict[str, Row], dict]:
    data = json.loads(Path(path).read_text())
    return {n: Row(**r) for n, r in data["rows"].items()}, data.get("run", {})


# -- the TOML file --------------------------------------------------------------------------
HEADER = """\
# The ledger of `memkit eval --all`: every cell of the table it prints, per config
# ([rows.<config>]), data set ([rows.<config>.cells.<data set>]) and metric, to {precision}
# decimals. Written by a command, never by hand; regenerate with the command in [run].
# `memkit eval --all --check` scores again and compares every cell (docs/EVAL.md):
# float rows exactly, int8 rows within their `tolerance` (why: [tolerance]).
"""


def _key(text: str) -> str:
    """A TOML key: bare when it can be, else quoted."""
    bare = text and all(ch.isascii() and (ch.isalnum() or ch in "-_") for ch in text)
    return text if bare else json.dumps(text)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)  # JSON's escapes are TOML's


def to_toml(rows: dict[str, Row], meta: dict) -> str:
    lines = [HEADER.format(precision=PRECISION), "[run]"]
    lines += [f"{_key(k)} = {_value(v)}" for k, v in meta.items()]
    lines += [
        "",
        "[tolerance]",
        "float = 0.0",
        f"int8 = {_value(INT8_TOLERANCE)}",
        f"why = {_value(TOLERANCE_NOTE)}",
    ]
    for name, row in rows.items():
        lines += ["", f"[rows.{_key(name)}]", f"encoder = {_value(row.encoder)}"]
        lines += [f"tolerance = {_value(row.tolerance)}", f"in_sample = {_value(row.in_sample)}"]
        lines += [f"stages = {_value(row.stages)}"]
        for ds, cells in row.cells.items():
            lines += ["", f"[rows.{_key(name)}.cells.{_key(ds)}]"]
            # as the table prints them: the digits a check compares
            lines += [f"{_key(m)} = {v:.{PRECISION}f}" for m, v in cells.items()]
    return "\n".join(lines) + "\n"


def write_ledger(path: Path, rows: dict[str, Row], meta: dict) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_toml(rows, meta))
    return path


def read_ledger(path: Path) -> tuple[dict[str, Row], dict]:
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    rows = {
        name: Row(
            encoder=r.get("encoder", "float"),
            tolerance=float(r.get("tolerance", tolerance_for(r.get("encoder", "float")))),
            cells={ds: dict(cells) for ds, cells in r.get("cells", {}).items()},
            in_sample=list(r.get("in_sample", [])),
            stages=r.get("stages", ""),
        )
        for name, r in data.get("rows", {}).items()
    }
    return rows, data.get("run", {})


# -- the check -----------------------------------------------------------------------------
def rounded(v: float) -> float:
    return round(float(v), PRECISION)


def compare(expected: dict[str, Row], got: dict[str, Row]) -> list[str]:
    """Every difference between a ledger and a run, one line each: a cell outside its
    row's tolerance (config, data set, metric, expected, got, tolerance), a cell or row on
    one side only, a row whose encoder kind or in-sample marks changed. Values are compared
    as printed (rounded to PRECISION); the ledger's tolerance is the one that applies."""
    problems = []
    for name in expected.keys() - got.keys():
        problems.append(f"{name}: row in the ledger, not in the run")
    for name in got.keys() - expected.keys():
        problems.append(f"{name}: row in the run, not in the ledger")
    for name in [n for n in expected if n in got]:
        want, have = expected[name], got[name]
        if want.encoder != have.encoder:
            problems.append(f"{name}: encoder {want.encoder} in the ledger, {have.encoder} now")
        if sorted(want.in_sample) != sorted(have.in_sample):
            problems.append(
                f"{name}: in-sample on {sorted(want.in_sample)} in the ledger, "
                f"{sorted(have.in_sample)} now"
            )
        if want.stages != have.stages:
            problems.append(f"{name}: stages {want.stages!r} in the ledger, {have.stages!r} now")
        cells_want = {(d, m): v for d, c in want.cells.items() for m, v in c.items()}
        cells_have = {(d, m): v for d, c in have.cells.items() for m, v in c.items()}
        for d, m in sorted(cells_want.keys() - cells_have.keys()):
            value = cells_want[d, m]
            problems.append(f"{name} / {d} / {m}: in the ledger ({value:.4f}), not in the run")
        for d, m in sorted(cells_have.keys() - cells_want.keys()):
            value = cells_have[d, m]
            problems.append(f"{name} / {d} / {m}: in the run ({value:.4f}), not in the ledger")
        for d, m in sorted(cells_want.keys() & cells_have.keys()):
            e, g = rounded(cells_want[d, m]), rounded(cells_have[d, m])
            # the rounding's own error (1e-9) is no drift; anything past it is
            if abs(e - g) > want.tolerance + 1e-9:
                problems.append(
                    f"{name} / {d} / {m}: expected {e:.4f}, got {g:.4f} "
                    f"(|diff| {abs(e - g):.4f} > tolerance {want.tolerance:g}, {want.encoder})"
                )
    return problems


def count_cells(rows: dict[str, Row]) -> int:
    return sum(len(c) for r in rows.values() for c in r.cells.values())


def stamp(command: str, seconds: float | None, folder: Path) -> dict:
    """What a ledger records of the run that made it."""
    meta = {
        "command": command,
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": git_commit(folder),
        **cpu(),
        "precision": PRECISION,
    }
    if seconds is not None:
        meta["seconds"] = round(seconds, 1)
    return meta


# -- the ledger in eval/RESULTS.md -----------------------------------------------------------
IN_SAMPLE_NOTE = (
    "Marked *: in-sample: its models were trained on this data set (the config's `trained_on`)."
)
BEGIN, END = "<!-- ledger:begin -->", "<!-- ledger:end -->"


def markdown(rows: dict[str, Row]) -> str:
    """The ledger's table as ``memkit eval --all`` prints it (a cell of a data set the row's
    models were trained on marked ``*``), from a ledger file's rows."""
    cols: list[tuple[str, str]] = []  # (data set, metric), in the order the file has them
    for row in rows.values():
        for ds, cells in row.cells.items():
            cols += [(ds, m) for m in cells if (ds, m) not in cols]
    lines = [
        "| config | " + " | ".join(f"{ds} {m}" for ds, m in cols) + " | stages |",
        "|---|" + "---:|" * len(cols) + "---|",
    ]
    marked = False
    for name, row in rows.items():
        cells = []
        for ds, m in cols:
            value = row.cells.get(ds, {}).get(m)
            star = "*" if ds in row.in_sample else ""
            marked = marked or (bool(star) and value is not None)
            cells.append("—" if value is None else f"{value:.{PRECISION}f}{star}")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {row.stages or '—'} |")
    return "\n".join(lines) + "\n" + (f"\n{IN_SAMPLE_NOTE}\n" if marked else "")


def with_table(text: str, rows: dict[str, Row]) -> str:
    """``text`` (eval/RESULTS.md) with what lies between its ledger markers replaced by the
    rows' table."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"no {BEGIN} ... {END} block to write the ledger into")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{markdown(rows)}{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    """``python -m memkit.evaluation.ledger [--ledger FILE] [--results FILE] [--check]``:
    write the ledger file's table into RESULTS between its markers (``make ledger`` does
    after scoring), or, with ``--check``, exit 1 when RESULTS shows another table."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m memkit.evaluation.ledger")
    parser.add_argument("--ledger", default="eval/ledger.toml")
    parser.add_argument("--results", default="eval/RESULTS.md")
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    rows, _ = read_ledger(Path(args.ledger))
    results = Path(args.results)
    text = results.read_text()
    new = with_table(text, rows)
    if args.check:
        if new != text:
            print(f"{results}: its ledger table is not {args.ledger}'s (run make ledger)")
            return 1
        print(f"{results}: its ledger table is {args.ledger}'s")
        return 0
    results.write_text(new)
    print(f"{results}: ledger table written from {args.ledger} ({len(rows)} configs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

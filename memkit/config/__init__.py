"""Experiment configurations: one TOML file names a configuration; eval and the service
both load it, so what eval measured is what the service serves.

The configs the service and the library need at run time ship inside the package
(``memkit/config``, package data: ``default``, ``postgres``, ``reader`` and the JSON
schema), found through ``importlib.resources``, so a wheel or ``pip install .`` carries its
own default. The experiments (the baselines, the ablations) live in the repository's
``eval/configs``. A config named without a path (``bm25``) is looked up in memkit's own
configs, then in each folder of ``$MEMKIT_CONFIG_PATH``, then in ``eval/configs`` of the
current folder or the nearest folder above it that has one (``config_dirs``).

Trained coefficients (the rankers', the answer writer's, the reader's fusion) are not
written in the TOML: a table names the JSON file that holds them (``model_file =
"ranker/chat.json"``: a path relative to the config's folder, else a file under
``memkit/models``, package data beside each model's card), and its keys are read in where
``model_file`` stands, as if written there; ``memkit train ... --write`` rewrites that file.

A whole config may start from another (``from = "default"`` at the top: a config's
name or a path relative to the file), deep-merged: a table written here is merged key by
key into the other's, any other value (a list included) replaces the other's. A single
table may still come from another file (``from`` inside the table). ``overrides``
(``memkit eval --set retriever.candidates=30``) change single settings after the merge."""

from __future__ import annotations

import copy
import json
import os
import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from memkit.config.model import Config, validate_config
from memkit.core.errors import ValidationError

# A real folder: memkit is installed as files (never zipped), so the resource is a path
# that glob, parent and ``from = "..."`` between configs can use.
CONFIG_DIR = Path(str(resources.files("memkit") / "config"))
# The trained models' files (coefficients as JSON, the reader's ONNX graph), each folder
# with its model card (README.md).
MODELS_DIR = Path(str(resources.files("memkit") / "models"))
MODEL_FILE = "model_file"  # the key of a table that names its coefficients' file


# Named by the environment: more folders to find configs in by name, os.pathsep-separated.
CONFIG_PATH_ENV = "MEMKIT_CONFIG_PATH"
# A project's own configs, relative to its folder (a checkout's experiments).
PROJECT_CONFIGS = Path("eval") / "configs"


def shipped_configs() -> list[str]:
    """The names of the configs that ship with memkit (``default``, ``postgres``, ...)."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.toml"))


def project_configs(start: Path | None = None) -> Path | None:
    """``eval/configs`` of ``start`` (default: the current folder) or of the nearest folder
    above it that has one, as git finds its repository; None when there is none."""
    here = Path.cwd() if start is None else Path(start)
    for folder in (here, *here.parents):
        if (folder / PROJECT_CONFIGS).is_dir():
            return folder / PROJECT_CONFIGS
    return None


def config_dirs() -> list[Path]:
    """The folders a config's name is looked up in, in order: memkit's own configs, each
    folder of ``$MEMKIT_CONFIG_PATH``, then the project's ``eval/configs``
    (``project_configs``). A folder of ``$MEMKIT_CONFIG_PATH`` that does not exist is a
    ValidationError naming it."""
    dirs = [CONFIG_DIR]
    for entry in os.environ.get(CONFIG_PATH_ENV, "").split(os.pathsep):
        if not entry:
            continue
        folder = Path(entry).expanduser()
        if not folder.is_dir():
            raise ValidationError(CONFIG_PATH_ENV, f"no such folder: {entry}")
        dirs.append(folder)
    project = project_configs()
    if project is not None:
        dirs.append(project)
    unique = []
    for d in dirs:
        if all(d.resolve() != u.resolve() for u in unique):
            unique.append(d)
    return unique


def config_files() -> list[Path]:
    """Every config found by name (``config_dirs``), one file per name: the first folder's
    where two folders have one of the same name; in file-name order (what ``memkit eval
    --all`` scores)."""
    found: dict[str, Path] = {}
    for folder in config_dirs():
        for path in folder.glob("*.toml"):
            found.setdefault(path.name, path)
    return [found[name] for name in sorted(found)]


def resolve_config(name: str | Path, base: Path | None = None) -> Path:
    """The file a config reference names: a path (relative to ``base``, a config's folder,
    when given; else to the current folder), else a config by its name, with or without
    ``.toml`` (``"bm25"``), in the folders of ``config_dirs``. A ValidationError names the
    folders searched and the names found there otherwise."""
    path = Path(name)
    candidate = base / path if base is not None else path
    if candidate.is_file():
        return candidate
    shown = base / path if base is not None else path
    if not (path.parent == Path(".") and path.name):
        raise ValidationError("config", f"no such file: {shown}")
    dirs = config_dirs()
    file_name = path.name if path.suffix == ".toml" else f"{path.name}.toml"
    for folder in dirs:
        if (folder / file_name).is_file():
            return folder / file_name
    names = sorted({p.stem for d in dirs for p in d.glob("*.toml")})
    raise ValidationError(
        "config",
        f"no such file: {shown}, nor a config of that name in "
        f"{', '.join(str(d) for d in dirs)} (found there: {', '.join(names)}; more folders: "
        f"{CONFIG_PATH_ENV}, or run from a project with an {PROJECT_CONFIGS} folder)",
    )


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> dict:
    """The config at ``path`` (a file, or a config's name: ``"bm25"``; ``resolve_config``) as
    a plain dict, its values as written, with ``from = "..."`` (the whole config's, and each
    table's) merged in, ``overrides`` applied (dotted keys: ``{"retriever.k1": 0.9}``) and
    ``name`` defaulting to the file's stem; checked against
    ``memkit.config.model.Config`` (a ValidationError names the TOML path of a problem)."""
    return load_checked(path, overrides)[0]


def load_checked(path: str | Path, overrides: dict[str, Any] | None = None) -> tuple[dict, Config]:
    """``load_config``'s dict and the typed ``Config`` it was checked into."""
    path = resolve_config(path)
    config = _merged(path, ())
    for key, value in (overrides or {}).items():
        set_key(config, key, value)
    try:
        checked = validate_config(config)  # every table, once: errors name the TOML path
    except ValidationError as exc:
        if overrides and any(exc.field == k or exc.field.startswith(k + ".") for k in overrides):
            raise ValidationError(exc.field, f"{exc.message} (set by --set {exc.field})") from None
        raise ValidationError(exc.field, f"{exc.message} (in {path})") from None
    return config, checked


def _read(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ValidationError("config", f"no such file: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError("config", f"{path}: {exc}") from None


def _merged(path: Path, seen: tuple[Path, ...]) -> dict:
    """The file's config with the config its top-level ``from`` names merged under it and
    each table's ``from`` filled in; ``seen``: the files inheriting it (a loop is refused)."""
    if path.resolve() in seen:
        chain = " -> ".join(str(p) for p in (*seen, path.resolve()))
        raise ValidationError("from", f"a config cannot inherit itself: {chain}")
    seen = (*seen, path.resolve())
    config = _with_model_files(_read(path), path)
    parent = config.pop("from", None)
    if parent is not None:
        if not isinstance(parent, str) or not parent:
            raise ValidationError(
                "from", f"expected a config's name or path (a string), got {parent!r} (in {path})"
            )
        base = _merged(resolve_config(parent, path.parent), seen)
        base.pop("name", None)  # a config is named by its own file unless it says otherwise
        config = deep_merge(base, config)
    for section, table in list(config.items()):
        if (
            isinstance(table, dict) and "from" in table
        ):  # the same table of another config, e.g. its trained models
            source = resolve_config(table["from"], path.parent)
            if source.resolve() == path.resolve():
                raise ValidationError(
                    f"{section}.from", f"{path}: a table cannot come from its own file"
                )
            other = load_config(source).get(section)
            if not isinstance(other, dict):
                raise ValidationError(f"{section}.from", f"{source} has no [{section}] table")
            config[section] = {**other, **{k: v for k, v in table.items() if k != "from"}}
    config.setdefault("name", path.stem)
    return config


def model_file_path(name: str, config: Path) -> Path:
    """The file a ``model_file`` names: relative to the config's folder if it is there,
    else under memkit/models (``"ranker/chat.json"``)."""
    beside = config.parent / name
    return beside if beside.is_file() else MODELS_DIR / name


def _with_model_files(node: Any, path: Path, where: str = "") -> Any:
    """``node`` (a file's config as read) with each table's ``model_file`` replaced by the
    keys of the JSON object it names, in its place; a key the table also writes is refused
    (one place for each number)."""
    if isinstance(node, list):
        return [_with_model_files(v, path, f"{where}.{i}") for i, v in enumerate(node)]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        here = f"{where}.{key}" if where else key
        if key != MODEL_FILE or not where:
            out[key] = _with_model_files(value, path, here)
            continue
        if not isinstance(value, str) or not value.endswith(".json"):
            raise ValidationError(
                here, f'expected the name of a JSON file ("ranker/chat.json"), got {value!r}'
            )
        file = model_file_path(value, path)
        try:
            model = json.loads(file.read_text())
        except FileNotFoundError:
            raise ValidationError(
                here, f"no such file: {value} (beside {path}, nor in {MODELS_DIR})"
            ) from None
        except json.JSONDecodeError as exc:
            raise ValidationError(here, f"{file}: {exc}") from None
        if not isinstance(model, dict):
            raise ValidationError(here, f"{file}: expected a JSON object (a table)")
        twice = sorted(set(model) & set(node))
        if twice:
            raise ValidationError(where, f"{', '.join(twice)} both in the table and in {file}")
        out.update(model)
    return out


def model_files(path: str | Path) -> dict[str, Path]:
    """The coefficient files a config's own file names: ``{"retriever.model":
    .../ranker/chat.json, ...}`` (tables it takes from another config not included)."""
    path = resolve_config(path)
    found = {}

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if isinstance(node.get(MODEL_FILE), str) and where:
                found[where] = model_file_path(node[MODEL_FILE], path)
            for key, value in node.items():
                walk(value, f"{where}.{key}" if where else key)

    walk(_read(path), "")
    return found


def write_model_file(path: Path, model: dict) -> Path:
    """A trained table's keys as the JSON file a config's ``model_file`` names: one key a
    line, numbers to 6 significant digits (as many as a TOML table of them kept)."""

    def number(v: Any) -> Any:  # a whole number stays an integer, as TOML read "0" and "1"
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return v
        text = f"{float(v):.6g}"
        return int(text) if text.lstrip("-").isdigit() else float(text)

    lines = []
    for key, value in model.items():
        value = [number(v) for v in value] if isinstance(value, list) else number(value)
        lines.append(f"  {json.dumps(key)}: {json.dumps(value)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")
    return path


def deep_merge(base: dict, over: dict) -> dict:
    """``over`` merged into a copy of ``base``: tables key by key (recursively), anything
    else (a value, a list, a list of tables) replaced by ``over``'s. A table written with
    its own ``from`` is taken whole from there, so it replaces ``base``'s."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and "from" not in value:
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


_KEY = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")


def parse_override(text: str) -> tuple[str, Any]:
    """``"retriever.candidates=30"`` as ``("retriever.candidates", 30)``: the value is a
    TOML literal (a number, true/false, a quoted string, a list, an inline table)."""
    key, sep, raw = text.partition("=")
    key, raw = key.strip(), raw.strip()
    if not sep or not _KEY.match(key):
        raise ValidationError(
            "--set", f"expected KEY=VALUE with a dotted key (retriever.candidates=30), got {text!r}"
        )
    try:
        value = tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        raise ValidationError(
            "--set",
            f'{key}: expected a TOML value (30, 0.5, true, "text" in quotes, [1, 2]), got {raw!r}',
        ) from None
    return key, value


def set_key(config: dict, key: str, value: Any) -> None:
    """Set a dotted key in a config dict (``retriever.retrievers.1.k1``: a list's item by
    its index), making tables that are missing. A key the config model does not know is
    refused when the config is checked, naming the key."""
    parts = key.split(".")
    node: Any = config
    for i, part in enumerate(parts[:-1]):
        where = ".".join(parts[: i + 1])
        if isinstance(node, list):
            node = _item(node, part, where)
        elif isinstance(node, dict):
            node = node.setdefault(part, {})
        else:
            raise ValidationError(where, f"--set {key}: {where} is a value, not a table")
        if not isinstance(node, (dict, list)):
            raise ValidationError(where, f"--set {key}: {where} is a value, not a table")
    last = parts[-1]
    if isinstance(node, list):
        index = _index(node, last, key)
        node[index] = value
    else:
        node[last] = value


def _index(items: list, part: str, where: str) -> int:
    if not part.isdigit() or int(part) >= len(items):
        raise ValidationError(
            where, f"--set: expected an index below {len(items)} into the list, got {part!r}"
        )
    return int(part)


def _item(items: list, part: str, where: str) -> Any:
    return items[_index(items, part, where)]


def flatten(d: dict, prefix: str = "") -> dict:
    """Nested config to flat ``a.b.c`` keys (lists of tables get their index)."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for i, x in enumerate(v):
                out.update(flatten(x, f"{key}.{i}."))
        else:
            out[key] = v
    return out

"""The library and the service are linked one way: ``server`` imports ``memkit``, never the
reverse, so the library can be installed, read and tested without the service."""

import subprocess
import sys
from pathlib import Path

import memkit

IMPORT_ALL = """
import importlib, pkgutil, sys
import memkit
names = [m.name for m in pkgutil.walk_packages(memkit.__path__, "memkit.")]
for name in names:
    importlib.import_module(name)
print(len(names))
print(sorted(m for m in sys.modules if m == "server" or m.startswith("server.")))
"""


def fresh_interpreter(code: str) -> list[str]:
    """The lines ``code`` prints in a fresh interpreter: this test process may already hold
    server modules from other tests."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(memkit.__file__).parents[1],
    ).stdout.splitlines()


def test_no_memkit_module_imports_the_service():
    out = fresh_interpreter(IMPORT_ALL)
    assert int(out[0]) > 20  # every module was walked (cli, config, retrievers, evaluation, ...)
    assert out[1] == "[]"


def test_the_service_commands_come_from_the_entry_point(capsys):
    from memkit.cli import main

    try:
        main(["--help"])
    except SystemExit:
        pass
    usage = capsys.readouterr().out
    assert all(command in usage for command in ("eval", "serve", "app", "adapt"))


def test_the_memkit_command_loads_the_service_commands_without_the_app():
    """``memkit eval`` (and every other command) reads the service's subcommands from
    server/cli.py; importing the package used to import the whole app (Flask, the accounts'
    hashing and validators, SQLAlchemy: 0.6 s of every command)."""
    probe = (
        "import sys; from memkit.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "app = ('flask', 'sqlalchemy', 'argon2', 'server.app')\n"
        "print(sorted(m for m in app if m in sys.modules))"
    )
    assert fresh_interpreter(probe)[-1] == "[]"


def memkit_imports(path: Path) -> list[tuple[str, bool]]:
    """The memkit modules a file imports, each with whether the import is inside a function."""
    import ast

    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memkit"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("memkit")]
    inner = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memkit"):
                    inner.add(node.module)
    return [(m, m in inner) for m in found]


# The layers, lowest first, and what each may import besides itself (memkit.X for the
# first part of a module's name; docs/ARCHITECTURE.md draws them). A layer not named here
# (the pipeline, the CLI, training, evaluation) sits on top and may import any of them.
MAY_IMPORT = {
    "core": set(),
    "language": {"core"},
    "config": {"core", "language"},
    "models": {"core", "config"},
    "datasets": {"core"},
    "question": {"core", "language", "config"},
    "retrieval": {"core", "language", "config", "models"},
    "ranking": {"core", "language", "config", "models", "question", "retrieval"},
    "answer": {"core", "language", "config", "models", "question"},
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def memkit_files() -> list[Path]:
    return sorted(Path(memkit.__file__).parent.rglob("*.py"))


def test_each_layer_imports_only_the_layers_below_it():
    root = Path(memkit.__file__).parent
    broken = []
    for path in memkit_files():
        module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        layer = layer_of(module)
        if layer not in MAY_IMPORT:
            continue
        for imported, _ in memkit_imports(path):
            other = layer_of(imported)
            if other != layer and other not in MAY_IMPORT[layer]:
                broken.append(f"{module} ({layer}) imports {imported} ({other or 'memkit'})")
    assert broken == []


def test_no_module_but_the_cli_imports_memkit_inside_a_function():
    """An import inside a function hides a two-way link between modules; the CLI alone
    imports its commands' modules when the command runs, so that ``memkit --help`` is fast."""
    inner = [
        f"{path.relative_to(Path(memkit.__file__).parent)} imports {module}"
        for path in memkit_files()
        if path.name != "cli.py"
        for module, in_function in memkit_imports(path)
        if in_function
    ]
    assert inner == []


def test_the_rules_catch_a_layer_that_reaches_up(tmp_path):
    """The check reads imports, so a retriever that imported the ranking steps would fail."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from memkit.ranking import Ranked\n\ndef f():\n    from memkit.answer import Answer\n"
    )
    found = memkit_imports(probe)
    assert ("memkit.ranking", False) in found and ("memkit.answer", True) in found
    assert "ranking" not in MAY_IMPORT["retrieval"]

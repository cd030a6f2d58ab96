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


# What a language pack may read besides itself: the word and time tables it is built on
# (memkit.text's tokenizer and stemmer, memkit.timeref's calendar words) and the errors.
LANGUAGE_MAY_IMPORT = ("memkit.language", "memkit.text", "memkit.timeref", "memkit.errors")


def test_a_language_pack_imports_nothing_above_it():
    files = sorted((Path(memkit.__file__).parent / "language").rglob("*.py"))
    assert files
    for path in files:
        for module, in_function in memkit_imports(path):
            assert module.startswith(LANGUAGE_MAY_IMPORT), f"{path.name} imports {module}"
            assert not in_function, f"{path.name} imports {module} inside a function"

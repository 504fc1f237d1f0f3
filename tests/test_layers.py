"""The package's layers point down, its modules take no one else's private names, and its
imports form no cycle.

Layers, top to bottom: scripts > cli > evaluation > schedule | shipping > predict > inspector |
collect > graph > zoo > core (schedule simulates schedulers that use predictions; shipping makes
the inspectors that predict loads; evaluation checks them), where core is everything directly
under ``driple/`` (errors, settings, metrics, sharing, strategies, ...) and the hardware package
(what a machine is: every layer names one). The scripts of ``scripts/`` stand above the package:
they may import any of it, never a private name, never another script, and they stay thin.
inspector and collect are siblings, and so are schedule and shipping: neither imports the
other. The imports are read from the source with ``ast`` (every import, also those inside
functions), never executed.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # holds the driple/ package
RANK = {"scripts": 8, "cli": 7, "evaluation": 6, "schedule": 5, "shipping": 5, "predict": 4, "inspector": 3,
        "collect": 3, "graph": 2, "zoo": 1, "core": 0}
ENTRY_POINTS = {"driple.__main__"}  # `python -m driple` runs the CLI: it stands above it
INFRASTRUCTURE = {"driple._lazy"}  # a private module every package's __init__ may use


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "scripts":
        return "scripts"
    return parts[1] if len(parts) > 1 and parts[1] in RANK else "core"


def is_module(name: str, root: Path) -> bool:
    base = root.joinpath(*name.split("."))
    return (base.with_suffix(".py").exists() or (base / "__init__.py").exists()
            or any(base.parent.glob(base.name + ".*.so")))


def imports(path: Path, root: Path):
    """``(line, module, name or None)`` of every driple import of a file (name: an object taken
    from the module; None: the module itself)."""
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "driple":
                    yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against this module's package
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            if base.split(".")[0] != "driple":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                yield (node.lineno, sub, None) if is_module(sub, root) else (node.lineno, base, alias.name)


def sources(root: Path) -> list[Path]:
    """The package's modules and the scripts (``scripts.<name>``)."""
    return sorted((root / "driple").rglob("*.py")) + sorted((root / "scripts").glob("*.py"))


def upward_imports(root: Path) -> list[str]:
    wrong = []
    for path in sources(root):
        me = module_name(path, root)
        if me in ENTRY_POINTS:
            continue
        for line, module, _ in imports(path, root):
            mine, theirs = layer(me), layer(module)
            if RANK[theirs] > RANK[mine] or (theirs != mine and RANK[theirs] == RANK[mine]):
                wrong.append(f"{me}:{line} ({mine}) imports {module} ({theirs})")
    return wrong


def private_names_taken(root: Path) -> list[str]:
    wrong = []
    for path in sources(root):
        me = module_name(path, root)
        package = me if path.name == "__init__.py" else me.rpartition(".")[0]
        for line, module, name in imports(path, root):
            if name is not None and name.startswith("_") and not name.endswith("__") and module != me:
                wrong.append(f"{me}:{line} takes {module}.{name}")
            private_module = module.rpartition(".")[2].startswith("_") and module not in INFRASTRUCTURE
            if name is None and private_module and module.rpartition(".")[0] != package:
                wrong.append(f"{me}:{line} imports the private module {module}")  # only its package's wrapper may
    return wrong


def import_cycle(root: Path) -> list[str]:
    """One cycle of module imports (``[a, b, ..., a]``), or [] when there is none."""
    graph = {module_name(p, root): {m for _, m, _ in imports(p, root)} for p in sources(root)}
    graph = {m: sorted(d for d in deps if d in graph and d != m) for m, deps in graph.items()}
    state: dict[str, str] = {}
    for start in sorted(graph):
        if start in state:
            continue
        stack, path = [(start, iter(graph[start]))], [start]
        state[start] = "open"
        while stack:
            node, deps = stack[-1]
            dep = next(deps, None)
            if dep is None:
                stack.pop()
                path.pop()
                state[node] = "done"
            elif state.get(dep) == "open":
                return path[path.index(dep):] + [dep]
            elif dep not in state:
                state[dep] = "open"
                path.append(dep)
                stack.append((dep, iter(graph[dep])))
    return []


def test_the_package_is_read():
    names = {module_name(p, ROOT) for p in sources(ROOT)}
    assert {"driple.cli.predict", "driple.predict.predictor", "driple.graph.build", "driple.metrics",
            "driple.strategies.registry", "driple.zoo.workload", "driple.collect.sampling.native",
            "driple.evaluation.reproduce.accuracy", "driple.shipping.settings", "driple.evaluation.bench_sampler",
            "scripts.reproduce", "scripts.ship_inspectors"} <= names
    assert layer("scripts.reproduce") == "scripts" and layer("driple.evaluation.reproduce.run") == "evaluation"


def test_imports_point_down():
    assert upward_imports(ROOT) == []


def test_no_private_names_across_modules():
    assert private_names_taken(ROOT) == []


def test_module_imports_form_no_cycle():
    assert import_cycle(ROOT) == []


def test_the_checks_catch_what_they_forbid(tmp_path):
    """A hand-made package with one of each fault: each check names exactly it."""
    files = {
        "driple/__init__.py": "",
        "driple/errors.py": "",
        "driple/zoo/__init__.py": "",
        "driple/zoo/models.py": "from driple.graph import build\n",  # zoo -> graph: upward
        "driple/graph/__init__.py": "",
        "driple/graph/build.py": "from driple.zoo.models import _secret\nimport driple.errors\n",
        "driple/collect/__init__.py": "",
        "driple/collect/run.py": "def f():\n    from driple.inspector import train\n",  # siblings
        "driple/inspector/__init__.py": "",
        "driple/inspector/train.py": "from . import _native\n",  # its own package's private module
        "driple/inspector/_native.py": "",
        "driple/predict/__init__.py": "from driple.inspector import _native\n",
        "scripts/run.py": "from driple.graph.build import _hidden\nfrom driple.zoo import models\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert upward_imports(tmp_path) == [
        "driple.collect.run:2 (collect) imports driple.inspector.train (inspector)",
        "driple.zoo.models:1 (zoo) imports driple.graph.build (graph)",
    ]
    assert private_names_taken(tmp_path) == [
        "driple.graph.build:1 takes driple.zoo.models._secret",
        "driple.predict:1 imports the private module driple.inspector._native",
        "scripts.run:1 takes driple.graph.build._hidden",
    ]
    assert import_cycle(tmp_path) == ["driple.graph.build", "driple.zoo.models", "driple.graph.build"]


def scripts_importing_scripts(root: Path) -> list[str]:
    """``script:line imports other`` for every script of ``scripts/`` that imports another one:
    scripts stand above the package (they may import any of it), and what two of them share
    lives in the package, not in a script."""
    scripts = {p.stem for p in (root / "scripts").glob("*.py")}
    wrong = []
    for path in sorted((root / "scripts").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module.split(".")[0]]
            wrong += [f"{path.stem}:{node.lineno} imports {n}" for n in names if n in scripts - {path.stem}]
    return wrong


def test_no_script_imports_another_script(tmp_path):
    assert scripts_importing_scripts(ROOT) == []
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "a.py").write_text("import b\nfrom driple import errors\n")
    (tmp_path / "scripts" / "b.py").write_text("x = 1\n")
    assert scripts_importing_scripts(tmp_path) == ["a:1 imports b"]


#: The most lines a script has: it parses, calls the package, prints.
SCRIPT_LINES = 150


def fat_scripts(root: Path) -> list[str]:
    """``script: N lines`` for every script over :data:`SCRIPT_LINES`, and ``script edits
    sys.path`` for one that does (scripts import the installed package)."""
    wrong = []
    for path in sorted((root / "scripts").glob("*.py")):
        text = path.read_text()
        if len(text.splitlines()) > SCRIPT_LINES:
            wrong.append(f"{path.stem}: {len(text.splitlines())} lines")
        if "sys.path" in text:
            wrong.append(f"{path.stem} edits sys.path")
    return wrong


def test_scripts_are_thin(tmp_path):
    assert fat_scripts(ROOT) == []
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "long.py").write_text("x = 1\n" * (SCRIPT_LINES + 1))
    (tmp_path / "scripts" / "path.py").write_text("import sys\nsys.path.insert(0, '..')\n")
    (tmp_path / "scripts" / "thin.py").write_text("x = 1\n" * SCRIPT_LINES)
    assert fat_scripts(tmp_path) == [f"long: {SCRIPT_LINES + 1} lines", "path edits sys.path"]

"""The package's shape: imports run one way between stages, and nothing imports in a circle.

Each stage is a subpackage of `pipeline/`; the table below says which stages each one may import.
The cross-cutting top-level modules (config, errors, faults, display, durable) import no stage;
`secrets` (what a secret is, the last gate, redaction) sits just above them, and every stage may import it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "pipeline"

TOP = "top"  # config, errors, faults, display, durable
ALLOWED: dict[str, set[str]] = {
    TOP: {TOP},
    "secrets": {TOP},
    # HTML templates: every page and block, values masked and escaped by the engine.
    "templates": {"secrets", TOP},
    "anchoring": {TOP},
    "warehouse": {"secrets", TOP},
    "calls": {"warehouse", TOP},
    "consolidator": {"warehouse", "anchoring", "secrets", "templates", TOP},
    "cache": {"calls", "anchoring", "warehouse", TOP},
    "corpus": {"consolidator", "warehouse", "secrets", TOP},
    "nightly": {"corpus", "consolidator", "warehouse", "cache", "calls", "anchoring", "secrets", "templates", TOP},
    # Measuring an engine batches sessions as a night would (the planner) and prices calls as its report does.
    "eval": {"nightly", "consolidator", "warehouse", "secrets", "templates", TOP},
    # The analyst's facade (`from pipeline.explore import query`) and the CLI sit on top.
    "lake": {"warehouse", TOP},
    # Reading back: a session as a conversation, and usage and cost reports in ccusage's names.
    "show": {"warehouse", "templates", TOP},
    "usage": {"calls", "warehouse", TOP},
    "explore": {"warehouse", "show", "usage", TOP},
    # What reaches agents: the MCP server and the AGENTS.md / CLAUDE.md export, read-only.
    "delivery": {"corpus", "consolidator", "warehouse", "show", "usage", "secrets", TOP},
    "cli": {"eval", "nightly", "corpus", "consolidator", "warehouse", "cache", "calls", "anchoring", "lake", "secrets",
            "show", "usage", "templates", "delivery", TOP},
    "main": {"cli"},
}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def stage_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return TOP
    if parts[1] == "__main__":
        return "main"
    if (PACKAGE / parts[1]).is_dir() or parts[1] == "explore":
        return parts[1]
    return TOP


def pipeline_imports(path: Path) -> set[str]:
    """Every `pipeline…` module a file imports, at any depth (lazy imports inside functions count)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "pipeline")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "pipeline":
            for a in node.names:
                # `from pipeline.x import y` imports the module pipeline.x.y when y is one
                candidate = f"{node.module}.{a.name}"
                is_module = (ROOT / Path(*candidate.split("."))).with_suffix(".py").exists() or (
                    ROOT / Path(*candidate.split("."))
                ).is_dir()
                found.add(candidate if is_module else node.module)
    return found


def graph() -> dict[str, set[str]]:
    return {module_name(p): pipeline_imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_subpackage_says_what_it_owns_and_may_import() -> None:
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{init} has no docstring"
        if init.parent.name != "cli":
            assert "May import" in doc, f"{init} does not say what it may import"


def test_no_stage_imports_a_stage_above_it() -> None:
    wrong = []
    for module, imports in graph().items():
        stage = stage_of(module)
        for target in imports:
            other = stage_of(target)
            if other != stage and other not in ALLOWED[stage]:
                wrong.append(f"{module} ({stage}) imports {target} ({other})")
    assert not wrong, "\n".join(wrong)


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of the graph, as a path that ends where it starts, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(g.get(node, ())):
            if nxt not in g:
                continue
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(g):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle() -> None:
    g = {"pipeline.a": {"pipeline.b"}, "pipeline.b": {"pipeline.c"}, "pipeline.c": {"pipeline.a"}}
    assert find_cycle(g) == ["pipeline.a", "pipeline.b", "pipeline.c", "pipeline.a"]
    assert find_cycle({"pipeline.a": {"pipeline.b"}, "pipeline.b": set()}) is None


def test_tests_mirror_the_package() -> None:
    """A stage's tests live in tests/<stage>/, so a reader finds a module's tests by its path."""
    stages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    # tests/docs tests the documentation itself (the site build, its examples), not a stage
    folders = {p.name for p in (ROOT / "tests").iterdir()
               if p.is_dir() and p.name not in ("data", "fakes", "docs", "__pycache__")}
    assert folders <= stages, f"test folders with no stage: {sorted(folders - stages)}"
    assert stages <= folders, f"stages with no test folder: {sorted(stages - folders)}"


def test_anchoring_re_exports_its_public_names() -> None:
    """A harness imports the reference from the package itself (`from pipeline.anchoring import …`)."""
    import importlib

    import pipeline.anchoring as anchoring
    from pipeline.anchoring import apply_date_change_notices
    from pipeline.anchoring.rules import apply_date_change_notices as original

    assert apply_date_change_notices is original
    missing = []
    for name in ("rules", "request_builder", "fingerprint", "tokens"):
        module = importlib.import_module(f"pipeline.anchoring.{name}")
        for public in module.__all__:
            # `fingerprint.fingerprint` would shadow its own module on the package
            if public != name and getattr(anchoring, public, None) is not getattr(module, public):
                missing.append(f"{name}.{public}")
    assert not missing, f"not re-exported by pipeline.anchoring: {missing}"
    assert set(anchoring.__all__) <= set(dir(anchoring))

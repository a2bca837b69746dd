"""The packages form layers (docs/architecture.md): each imports only packages on a lower layer, and no module
imports itself back through others. Every import counts, those inside functions too."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The layering, written once: a package may import the packages of lower layers only.
LAYERS = {
    "modeling_vanilla": 0,  # the model: torch and transformers only (its files travel to the Hub)
    "vanilla_tools": 1,  # the floor: cli, provenance, metrics, corpora, run files, decoding, exports
    "inference": 2,  # engines, vanilla-translate, vanilla-attention, vanilla-export-ct2
    "hub_card": 2,  # the model card, vanilla-push
    "training": 3,  # vanilla-train (writes the card; imports nothing of inference)
    "benchmarks": 4,  # the repository's benchmarks: measure everything below (not installed)
    "experiments": 4,  # the repository's experiment runners: Table 3, the results page (not installed)
}
REPOSITORY_TOOLS = ("benchmarks", "experiments")  # they write into this checkout (results/, docs/)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """The project modules ``path`` imports (absolute, relative, at the top or inside a function)."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from . import checkpoints`
    return {name for name in found if name.split(".")[0] in LAYERS}


def graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for top in LAYERS for p in (ROOT / top).rglob("*.py")}
    return {name: {m for m in imports(path) if m in modules and m != name} for name, path in modules.items()}


def test_every_package_imports_only_lower_layers():
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in graph().items()
        for target in targets
        if LAYERS[target.split(".")[0]] >= LAYERS[module.split(".")[0]] and target.split(".")[0] != module.split(".")[0]
    )
    assert not upward, upward


def test_training_does_not_import_the_serving_layer():
    """vanilla-train serves nothing: the CTranslate2 export it may leave beside the model and the FLOP/s probe of its
    record are on the floor (vanilla_tools.exports, vanilla_tools.hardware), so training and inference, the two users
    of the model, stay apart."""
    ties = sorted(
        f"{module} imports {target}"
        for module, targets in graph().items()
        for target in targets
        if module.split(".")[0] == "training" and target.split(".")[0] == "inference"
    )
    assert not ties, ties


# training's parts and their layers, written once (docs/architecture.md): a module of training imports its own part
# and the parts of lower layers only. A subpackage is one part; a module at training's top is a part of its own.
TRAINING_PARTS = {
    "training": 0,  # the package: registers the model with the Auto classes
    "training.data": 0,  # the data path: corpus, moses, tokenizer, batching, bpe_dropout, streaming
    "training.arguments": 1,  # the flags and presets
    "training.resolved": 2,  # the run resolved: every derived value, decided once (ResolvedRun)
    "training.schedules": 2,  # --lr_schedule
    "training.run": 3,  # a run's life: checkpoints, relaunch, stopping, lock, settings, launches, record, curve, Hub
    "training.step": 4,  # the step: trainer, compiled, micro_batch, evaluation, average, ties, allocator, loader_wait
    "training.build": 5,  # what a launch builds before it trains
    "training.finish": 5,  # what a trained run leaves
    "training.train": 6,  # the conductor, vanilla-train
    "training.api": 7,  # the front the repository's tools import
}


def training_part(module: str) -> str:
    """The part of training that ``module`` belongs to (a key of TRAINING_PARTS)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else parts[0]


def test_trainings_parts_import_only_their_own_and_lower_layers():
    """Inside training the same rule as between packages: no part imports a part of its own layer or above, and every
    module of training is in the table."""
    edges = {module: targets for module, targets in graph().items() if module.split(".")[0] == "training"}
    assert not sorted({training_part(module) for module in edges} - set(TRAINING_PARTS))
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in edges.items()
        for target in targets
        if target.split(".")[0] == "training"
        and training_part(target) != training_part(module)
        and TRAINING_PARTS[training_part(target)] >= TRAINING_PARTS[training_part(module)]
    )
    assert not upward, upward


TRAINING_FRONT = "training.api"  # all that the repository's tools may import of training


def test_the_repository_tools_import_training_through_its_front_only():
    """experiments/ and benchmarks/ use vanilla-train through ``training.api`` (and the package itself), never a module
    behind it, so that training's inside may be rearranged without them."""
    behind = sorted(
        f"{module} imports {target}"
        for module, targets in graph().items()
        for target in targets
        if module.split(".")[0] in REPOSITORY_TOOLS
        and target.split(".")[0] == "training"
        and target not in ("training", TRAINING_FRONT)
    )
    assert not behind, behind


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk of ``edges`` closes, as the modules along it."""
    state, found = {}, []

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(edges[module]):
            if state.get(target) == "open":
                found.append(path[path.index(target) :] + [target])
            elif target not in state:
                visit(target, [*path, target])
        state[module] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    return found


def test_no_module_imports_itself_back():
    assert not cycles(graph()), cycles(graph())


def test_the_checks_find_an_upward_import_and_a_cycle_inside_functions():
    probes = {
        ROOT / "inference" / "probe_a.py": "def f():\n    from training.train import run\n    from . import probe_b\n",
        ROOT / "inference" / "probe_b.py": "def g():\n    from .probe_a import f\n",
    }
    for path, text in probes.items():
        path.write_text(text)
    try:
        edges = graph()
        assert {"training.train", "inference.probe_b"} <= edges["inference.probe_a"]
        assert ["inference.probe_a", "inference.probe_b", "inference.probe_a"] in cycles(edges)
    finally:
        for path in probes:
            path.unlink()


def test_the_installed_library_leaves_out_the_repository_tools():
    """pyproject's packages.find installs every package but the tools that write into the checkout, and no console
    script runs one of them."""
    setuptools = pytest.importorskip("setuptools")
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    find = project["tool"]["setuptools"]["packages"]["find"]
    installed = {name.split(".")[0] for name in setuptools.find_packages(ROOT, **find)}
    assert installed == set(LAYERS) - set(REPOSITORY_TOOLS)
    scripts = project["project"]["scripts"].values()
    assert not [script for script in scripts if script.split(".")[0] in REPOSITORY_TOOLS], scripts

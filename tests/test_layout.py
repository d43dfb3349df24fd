"""The house's rooms and the one direction imports flow between them (docs/development.md,
"Layout"). Each project module belongs to one room; a module imports, at file level, only from its
own room and the rooms below it, so a room can be read knowing only what is under it:

    nas.cli                 the ``nas`` command: registers each command
    nas.commands            one module per command
    nas.sweep               the sweep: plan, record opening, stages on Tune or here, summary
    nas.trial               one trial on its host: run, checkpoints, hooks, data-parallel
    nas.resources           memory and time plans of a sweep's cells before launch
    nas.campaign            what a sweep runs: grid, tuned grid, search, seeds, plan checks
    nas.store               the tracking store: the MLflow writer, outbox, errors, server
    nas (spec)              a trial's identity, the exit statuses, the package's version
    reports                 the report (tests/record/test_layers.py: nas reaches it only to
                            build one)
    search_spaces           spaces over configurations
    trainers.training       the training loop: drives the model, the data and the measurements
    trainers.measure        diagnostics, coord check, memory and cost models of a model
    trainers.model          the Transformer with its wirings (residual/, attention/)
    trainers.data           corpora and the sources that read them
    trainers (spec)         what a run is, torch-free: config, catalogue, identity, FLOP and
                            budget rules
    stats, record           statistics and the record's schema, importing no other room

Beside the product, reaching down into it and never imported by it, the benchmarks:

    benchmarks.gpu          the GPU check: its headline table, the fused kernels' benchmark
    benchmarks.model        one model's costs on any device; benchmarks.harness: the training
                            loop, sweeps at scale, the gallery (it runs the driver)
    benchmarks              shared timing and machine helpers, make bench's runner
"""

from __future__ import annotations

from tests.imports import PACKAGES, import_graph

# Room of a module: the longest prefix listed here. ``trainers.config_io`` and
# ``trainers.settings`` read YAML and command-line settings into a configuration, finding the
# vocabulary in the data: above the corpora, so they are a room of their own.
ROOMS = {
    "record": "record",
    "stats": "stats",
    "trainers": "spec",
    "trainers.config_io": "settings",
    "trainers.settings": "settings",
    "trainers.reference": "reference",
    "trainers.data": "data",
    "trainers.corpus": "data",
    "trainers.model": "model",
    "trainers.residual": "model",
    "trainers.attention": "model",
    "trainers.measure": "measure",
    "trainers.training": "training",
    "search_spaces": "search_spaces",
    "reports": "reports",
    "nas": "nas.spec",
    "nas.store": "nas.store",
    "nas.campaign": "nas.campaign",
    "nas.resources": "nas.resources",
    "nas.trial": "nas.trial",
    "nas.sweep": "nas.sweep",
    "nas.commands": "nas.commands",
    "nas.cli": "nas.cli",
    "benchmarks": "benchmarks",
    "benchmarks.model": "benchmarks.model",
    "benchmarks.gpu": "benchmarks.gpu",
    "benchmarks.harness": "benchmarks.harness",
}
LAYOUT = (*PACKAGES, "benchmarks")
# The rooms below the driver's: everything the driver's rooms may read.
DRIVER = {r for r in ROOMS.values() if r.startswith("nas.")}
BENCHMARKS = {r for r in ROOMS.values() if r.startswith("benchmarks")}
UNDER_NAS = set(ROOMS.values()) - DRIVER - BENCHMARKS

# The rooms each room may import from, besides itself.
BELOW: dict[str, set[str]] = {
    "record": set(),
    "stats": set(),
    "spec": {"record", "stats"},
    "data": {"spec", "record", "stats"},
    "settings": {"data", "spec", "record", "stats"},
    "reference": {"spec"},  # nanoGPT's one-file read: plain torch and the configuration
    "model": {"spec", "record", "stats"},  # record: the names its AdamW groups are logged under
    "measure": {"model", "data", "spec", "record", "stats"},
    "training": {"measure", "model", "data", "settings", "spec", "record", "stats"},
    "search_spaces": {"settings", "spec", "data", "record", "stats"},
    "reports": {"search_spaces", "measure", "spec", "record", "stats"},
    "nas.spec": UNDER_NAS,
    "nas.store": UNDER_NAS | {"nas.spec"},
    "nas.campaign": UNDER_NAS | {"nas.store", "nas.spec"},
    "nas.resources": UNDER_NAS | {"nas.campaign", "nas.store", "nas.spec"},
    # a trial asks its campaign what its configuration means (``Campaign.spec_for``)
    "nas.trial": UNDER_NAS | {"nas.campaign", "nas.store", "nas.spec"},
    "nas.sweep": UNDER_NAS
    | {"nas.trial", "nas.resources", "nas.campaign", "nas.store", "nas.spec"},
    "nas.commands": UNDER_NAS | DRIVER - {"nas.commands", "nas.cli"},
    "nas.cli": UNDER_NAS | DRIVER - {"nas.cli"},
    "benchmarks": UNDER_NAS,
    "benchmarks.model": UNDER_NAS | {"benchmarks"},
    "benchmarks.gpu": UNDER_NAS | {"benchmarks.model", "benchmarks"},
    "benchmarks.harness": UNDER_NAS | DRIVER | {"benchmarks"},
}


def room(module: str) -> str:
    prefixes = [p for p in ROOMS if module == p or module.startswith(p + ".")]
    return ROOMS[max(prefixes, key=len)]


def crossings(graph: dict[str, set[str]]) -> list[str]:
    """Every file-level import that goes up, or sideways into another room."""
    return sorted(
        f"{src} ({room(src)}) imports {dst} ({room(dst)})"
        for src, targets in graph.items()
        for dst in targets
        if room(dst) != room(src) and room(dst) not in BELOW[room(src)]
    )


def test_every_module_has_a_room() -> None:
    graph = import_graph(LAYOUT)
    assert {room(m) for m in graph} == set(BELOW)  # every room read, each holding modules


def test_imports_flow_down_between_rooms() -> None:
    assert crossings(import_graph(LAYOUT)) == []


def test_the_driver_rooms_hold_for_deferred_imports_too() -> None:
    """The driver defers most imports into functions, so that ``nas --help`` stays fast; its
    rooms are only rooms if those flow down as well."""
    graph = import_graph(LAYOUT, deferred=True)
    assert [c for c in crossings(graph) if c.startswith(("nas", "benchmarks"))] == []


def test_the_rooms_form_no_circle() -> None:
    """The allowed directions themselves are one-way: no room may import a room that may import
    it, directly or through others."""
    seen: dict[str, set[str]] = {}

    def reach(r: str) -> set[str]:
        if r not in seen:
            seen[r] = set()
            seen[r] = set(BELOW[r]).union(*(reach(b) for b in BELOW[r]))
        return seen[r]

    assert [r for r in BELOW if r in reach(r)] == []


def test_the_check_sees_an_upward_import() -> None:
    """An import from the model into the training loop is what the check exists to refuse."""
    graph = {
        "trainers.model.transformer": {"trainers.training.run"},
        "trainers.training.run": set(),
    }
    assert crossings(graph) == [
        "trainers.model.transformer (model) imports trainers.training.run (training)"
    ]

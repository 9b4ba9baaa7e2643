"""The house's floor plan, from the code's own imports: no import runs up a floor, and no files import in a circle.

Data flows one way: the reference and the probes at the bottom, the ranks
and the suites on them, the benchmarks above, and the report on top, itself
in floors: a run is recorded (``store``) and the suites' runs collected
(``conformance``), then compared (``comparison``), then what its pages say
is computed (``views``), then rendered (``render``), then published as a
site (``website``), and the commands
(``reports.nightly``, ``reports.compare``, ...) stand over all of it. The
mutation tool, a developer's instrument, stands over the report, whose score
it writes, and so do the project's checks of itself (``selfcheck``): the
gate's sensitivity, the bisection's planted history, the trend's detectors,
the site's size. Of what users run, only the main job's strength phase
imports ``fixtures/`` (``FIXTURES_USED_BY``). Every import counts, those inside a function too: tucking one
into a function does not lift it a floor.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FLOORS: tuple[tuple[str, ...], ...] = (
    ("cli", "compat", "datamodel"),
    ("reference",),
    ("hardware", "ranks"),
    ("suites",),
    ("fixtures",),
    ("benchmarks",),
    ("reports.store", "reports.conformance"),
    ("reports.comparison", "reports.bisect"),
    ("reports.views",),
    ("reports.render",),
    ("reports.website",),
    ("reports",),
    ("mutation", "selfcheck"),
)
"""Bottom first. A module stands on the floor of the longest prefix that names it."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    tops = {name for floor in FLOORS for name in floor if "." not in name}
    return {module_name(p): p for top in tops for p in sorted((ROOT / top).rglob("*.py"))}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``name`` imports, anywhere in the file; ``from P import M`` names module P.M when it
    is one."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def floor_of(name: str) -> int:
    best = max(((len(prefix), level) for level, floor in enumerate(FLOORS) for prefix in floor
                if name == prefix or name.startswith(prefix + ".")), default=None)
    assert best is not None, f"{name} stands on no floor: add its package to FLOORS"
    return best[1]


def graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, set(modules)) for name, path in modules.items()}


def back_arrows(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} (floor {floor_of(a)}) imports {b} (floor {floor_of(b)})"
                  for a, targets in edges.items() for b in targets if floor_of(b) > floor_of(a))


def circle(edges: dict[str, set[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(edges).prepare()
    except graphlib.CycleError as exc:
        return exc.args[1]
    return None


USERS_RUN = ("cli", "compat", "datamodel", "reference", "hardware", "ranks", "suites", "benchmarks", "reports")


def fixtures_imported(edges: dict[str, set[str]]) -> list[str]:
    """Each module users run that imports ``fixtures/``."""
    return sorted(f"{a} imports {b}" for a, targets in edges.items() for b in targets
                  if a.split(".")[0] in USERS_RUN and b.split(".")[0] == "fixtures")


def test_what_users_run_imports_no_fixture():
    found = fixtures_imported(graph())
    assert not found, "got modules users run importing fixtures/, which belong in selfcheck/:\n" + "\n".join(found)


def test_the_fixture_check_catches_a_report_that_plants_a_fixture():
    edges = {"reports.gate_check": {"fixtures.slowed_reference", "reports.store.runs"},
             "selfcheck.gate_check": {"fixtures.slowed_reference"}, "reports.conformance.strength": {"fixtures.broken"}}
    assert fixtures_imported(edges) == ["reports.conformance.strength imports fixtures.broken",
                                        "reports.gate_check imports fixtures.slowed_reference"]


def test_no_import_runs_up_a_floor():
    arrows = back_arrows(graph())
    assert not arrows, "got imports from a lower floor to a higher one:\n" + "\n".join(arrows)


def test_no_files_import_each_other_in_a_circle():
    found = circle(graph())
    assert found is None, f"got a circle of imports: {' -> '.join(found)}, but imports should run one way"


def test_the_checks_catch_a_back_arrow_and_a_circle():
    """On a made-up plan: a benchmark that reads the report, and two report modules that read each other."""
    edges = {"benchmarks.busbw": {"reports.render.table"}, "reports.render.table": {"reports.render.plots"},
             "reports.render.plots": {"reports.render.table"}}
    assert back_arrows(edges) == ["benchmarks.busbw (floor 5) imports reports.render.table (floor 9)"]
    assert set(circle(edges)) == {"reports.render.table", "reports.render.plots"}


def test_every_module_stands_on_a_floor_and_imports_are_seen_inside_functions_too():
    edges = graph()
    for name in edges:
        floor_of(name)
    assert "benchmarks.suite" in edges and "hardware.node" in edges["benchmarks.suite"], (
        "the scan should see benchmarks.suite's use of hardware.node")
    assert "suites.impls" in edges["benchmarks.measuring"], "an import inside a function should count"

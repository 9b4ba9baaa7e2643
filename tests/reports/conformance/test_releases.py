"""The release matrix's own logic: what it runs is registered, and a release passes only when every check passed or
failed as recorded. The matrix itself runs nightly (``tox -e releases``); here its installs and suites are stood in
for."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from reports.conformance import releases
from reports.conformance.records import SuiteRun
from suites.impls import REGISTRY


def suite_run(impl: str, *, failed: int = 0, exit_code: int = 0, version: str = "0.2.3", passed: int = 3,
              xfailed: int = 2) -> SuiteRun:
    return SuiteRun("suites/multigpu", impl, f"{impl} {version}", ("ddp",), passed=passed, failed=failed, skipped=1,
                    xfailed=xfailed,
                    errors=0, seconds=1.0, failures=(), failed_ids=(), crashed_ids=(), skip_reasons={}, families={},
                    exit_code=exit_code)


def test_every_line_runs_registered_variants_of_its_own_peer_on_releases_in_order():
    for line in releases.LINES:
        unknown = [c.impl for c in line.checks if c.impl not in REGISTRY]
        assert not unknown, f"{line.distribution}: got checks of {unknown}, but each should be a registered --impl"
        versions = [Version(v) for v in line.versions]
        assert versions == sorted(set(versions)), (f"{line.distribution}: got releases {line.versions}, but they "
                                                   "should be distinct and oldest first")


@pytest.fixture
def stood_in(monkeypatch, tmp_path):
    """Installs that succeed at once, and suites whose outcome each test sets."""
    outcome = {}
    monkeypatch.setattr(releases, "install", lambda dist, version, sites: tmp_path / f"{dist}-{version}")
    monkeypatch.setattr(releases, "run_suite", lambda suite, impl, args, first: outcome.get(impl, suite_run(impl)))
    return outcome


def rows(out) -> list[dict]:
    return json.loads((out / "releases.json").read_text())


def test_a_release_that_fails_only_what_is_recorded_passes(stood_in, tmp_path):
    code = releases.main(["--peer", "megatron-fsdp", "--version", "0.2.3", "--sites", str(tmp_path / "s"),
                          "--out", str(tmp_path / "out")])
    assert code == 0, f"got rc {code}, but a release failing only its recorded checks should pass"
    assert {r["impl"] for r in rows(tmp_path / "out")} == {c.impl for c in releases.NAMES["megatron-fsdp"].checks}


def test_an_unrecorded_failure_or_an_unexpected_pass_fails_the_matrix(stood_in, tmp_path):
    # xfail_strict turns an unexpected pass into a failure: the suite run reads as failed either way.
    stood_in["megatron-fsdp"] = suite_run("megatron-fsdp", failed=1, exit_code=1, version="0.6.1")
    stood_in["megatron-fsdp-no-shard"] = suite_run("megatron-fsdp-no-shard", version="0.6.1")
    code = releases.main(["--peer", "megatron-fsdp", "--version", "0.6.1", "--sites", str(tmp_path / "s"),
                          "--out", str(tmp_path / "out")])
    assert code == 1, f"got rc {code}, but a failing check should fail the matrix"
    assert [r["ok"] for r in rows(tmp_path / "out")] == [False, True]


def test_a_release_that_does_not_install_fails_every_check_and_names_why(monkeypatch, tmp_path, capsys):
    def refuse(dist, version, sites):
        raise RuntimeError(f"{dist}=={version} did not install: no such release")

    monkeypatch.setattr(releases, "install", refuse)
    code = releases.main(["--peer", "deepspeed", "--version", "0.0.1", "--sites", str(tmp_path / "s"),
                          "--out", str(tmp_path / "out")])
    assert code == 1
    assert all(not r["ok"] and r["status"] == "not installed" for r in rows(tmp_path / "out"))
    assert "deepspeed==0.0.1 did not install" in capsys.readouterr().err


@pytest.mark.parametrize("ran, why", [
    (dict(version="0.6.1"), "the suite ran the environment's own release"),
    (dict(passed=0, xfailed=0), "every check skipped (an adapter that cannot import the release skips them all)"),
])
def test_a_release_the_suite_did_not_check_fails_the_matrix(stood_in, tmp_path, ran, why):
    stood_in["megatron-fsdp"] = suite_run("megatron-fsdp", **ran)
    code = releases.main(["--peer", "megatron-fsdp", "--version", "0.2.3", "--sites", str(tmp_path / "s"),
                          "--out", str(tmp_path / "out")])
    assert code == 1, f"got rc {code}, but should fail where {why}"


def test_the_suite_runs_strict_with_the_release_imported_first(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(releases, "install", lambda dist, version, sites: tmp_path / "site")
    monkeypatch.setattr(releases, "run_suite",
                        lambda suite, impl, args, first: seen.append((impl, tuple(args), first))
                        or suite_run(impl, version="0.18.6"))
    releases.main(["--peer", "deepspeed", "--version", "0.18.6", "--sites", str(tmp_path / "s")])
    assert seen and all(first == tmp_path / "site" and args[-2:] == releases.STRICT for _, args, first in seen), seen

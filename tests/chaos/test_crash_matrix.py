"""The CI subset of the crash and race matrix (`scripts/chaos.py` runs the whole of it).

Per job: a crash at its commit point (the last create, or the middle delete for jobs that only
delete), a crash at its first write, a failed (not crashed) commit, and its first named crash step;
then one writer-vs-job race. Each case must end with no lost file, no lost or doubled commit, and
leftovers that remove-orphan-files clears (run for real on the commit-point crash).
"""

from __future__ import annotations

import pytest

from tests.chaos import harness

JOBS = harness.available_jobs()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("chaos"))


@pytest.fixture(scope="module")
def template(spark_session, workdir) -> harness.Template:
    return harness.prepare(workdir)


_references: dict[str, harness.Reference] = {}
_counts: dict[str, dict[str, int]] = {}
_templates: dict[str, harness.Template] = {}


def template_of(job: str, template: harness.Template, workdir: str) -> harness.Template:
    """The template as the job starts from (its variant's options and setup applied)."""
    if job not in _templates:
        _templates[job] = harness.for_job(template, job, workdir)
    return _templates[job]


def reference(job: str, template: harness.Template, workdir: str) -> harness.Reference:
    if job not in _references:
        _counts[job] = harness.count_operations(job, template, workdir)
        _references[job] = harness.reference_run(job, template, workdir)
    return _references[job]


def ci_faults(job: str, counts: dict[str, int]) -> list[tuple[str, bool]]:
    """(fault, run remove-orphan-files for real) for the CI subset."""
    picked: list[tuple[str, bool]] = []
    if counts.get("create"):
        picked.append((f"create:{counts['create']}:halt", True))
        picked.append((f"create:{counts['create']}", False))
    elif counts.get("delete"):
        picked.append((f"delete:{(counts['delete'] + 1) // 2}:halt", True))
        picked.append((f"delete:{counts['delete']}", False))
    if counts.get("write"):
        picked.append(("write:1:halt", False))
    steps = harness.crash_steps(job)
    if steps:
        picked.append((f"step:{steps[-1]}", False))
    return picked


@pytest.mark.parametrize("job", JOBS)
def test_crash_then_rerun_loses_nothing(spark_session, template, workdir, job):
    template = template_of(job, template, workdir)
    ref = reference(job, template, workdir)
    cases = ci_faults(job, _counts[job])
    assert cases, f"{job}: a clean run made no create, delete or write: nothing to crash"
    for fault, run_orphan_job in cases:
        result = harness.run_case(job, fault, template, ref, workdir, run_orphan_job=run_orphan_job)
        assert result.injected >= 1, f"{job} {fault}: the fault never hit"
        # a failed snapshot create is retried by the commit: the last create (the commit point of a
        # job that commits several snapshots, as compact's groups) may end well, as create:1 may
        retried = fault == f"create:{_counts[job].get('create')}"
        assert result.exit_code != 0 or retried or fault.endswith(("create:1", "delete:1")), result
        assert result.ok, result


@pytest.mark.parametrize("job", [job for job in JOBS if job != "write" and harness.JOBS[job].races])
def test_a_writer_racing_the_job_loses_no_commit(spark_session, template, workdir, job):
    template = template_of(job, template, workdir)
    result = harness.race(
        job, template, reference(job, template, workdir), workdir, rounds=1, max_writer_commits=6
    )
    assert result.rounds == 1 and result.writer_commits >= 2
    assert result.ok, result

"""Our side of the soak: `maintain` with every block and drop-partition of old days, in-process.

Each run goes through `jobs.__main__.main` exactly as `python -m jobs <op> --config F` would (the
YAML written to the work directory, the run record written to a file), on the process's one
SparkSession. Exit 3 (a rival commit, here a writer's, changed what the job replaces; it removed what
it wrote) is counted per operation, not a failure; exit 1 or 2 is a failure. On S3 the YAML carries
the proxy's endpoint in `storage_options` (credentials from the AWS environment, as in production),
and the requests the store throttled are summed from the run records.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import yaml

from jobs.__main__ import main as run_job
from scripts.soak.checks import latest_id, tag_names
from scripts.soak.ledger import Drop, Ledger, droppable_days

EXIT_CONFLICT = 3
BRANCH = "b1"


def run_cli(workdir: str, name: str, operation: str, config: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """`python -m jobs <operation> --config <workdir>/<name>.yaml --output <record>`, in this process;
    (exit code, run record). `name` keeps the files of runs in other threads apart."""
    config_path = os.path.join(workdir, f"{name}.yaml")
    record_path = os.path.join(workdir, f"{name}.record.json")
    with open(config_path, "w", encoding="utf-8") as handle:
        yaml.safe_dump(config, handle)
    if os.path.exists(record_path):
        os.remove(record_path)
    code = run_job([operation, "--config", config_path, "--output", record_path, "--quiet"])
    try:
        with open(record_path, encoding="utf-8") as handle:
            return code, json.load(handle)
    except FileNotFoundError:
        return code, {}


def throttled_in(record: dict[str, Any]) -> int:
    """The requests the store answered 503 during a run, as its run record counts them."""
    return int(record.get("details", {}).get("storage", {}).get("throttled_requests") or 0)


@dataclass
class OurStats:
    runs: Counter = field(default_factory=Counter)  # by operation (maintain's steps counted one by one)
    conflicts: Counter = field(default_factory=Counter)  # exit 3 by operation
    throttled: Counter = field(default_factory=Counter)  # 503 answers by operation (run records)
    failures: list[str] = field(default_factory=list)
    orphans_cleaned_ms: dict[str, int] = field(default_factory=dict)  # table -> start of the last
    # maintain run whose remove-orphan-files step finished (a bound below the step's own start)


@dataclass
class OurJobs:
    warehouse: str
    workdir: str
    ledgers: dict[str, list[Ledger]]  # every writer's ledger, by table
    paths: dict[str, str]
    orphan_older_than_s: int
    storage_options: dict[str, Any] | None = None
    stats: OurStats = field(default_factory=OurStats)
    rounds: int = 0
    branched: set[str] = field(default_factory=set)

    def _base(self) -> dict[str, Any]:
        base: dict[str, Any] = {"warehouse": self.warehouse}
        if self.storage_options:
            base["storage_options"] = self.storage_options
        return base

    def maintain_config(self) -> dict[str, Any]:
        """Every block: our tag (kept 2 minutes), tags older than 3 minutes expired (the writers' too),
        snapshots beyond the newest 5 and older than 30 s expired, minor compaction, manifests,
        orphans older than `orphan_older_than_s` (below the 1 h floor, hence force)."""
        return {
            **self._base(),
            "tables": ["soak.*"],
            "parallelism": 2,
            "defaults": {
                "create_tag": {"tag": f"ours-{self.rounds}", "time_retained": "2 min"},
                "expire_tags": {"older_than": "3 min"},
                "expire_snapshots": {"retain_min": 5, "retain_max": 30, "older_than": "30 s"},
                "compact": {"strategy": "minor", "skip_unsupported": True},
                "compact_manifests": {"mode": "auto"},
                "remove_orphan_files": {
                    "older_than": f"{self.orphan_older_than_s} s",
                    "force": True,
                    "max_orphan_ratio": 0.5,
                },
            },
        }

    def maintain(self) -> None:
        self.rounds += 1
        started_ms = int(time.time() * 1000)
        code, record = run_cli(self.workdir, "maintain", "maintain", self.maintain_config())
        self.stats.throttled["maintain"] += throttled_in(record)
        tables = record.get("details", {}).get("tables", {})
        if code not in (0, EXIT_CONFLICT) and not tables:
            self.stats.failures.append(f"maintain exit {code}: {record.get('error')}")
        for table, outcome in tables.items():
            for step in outcome.get("operations", []):
                operation, exit_code = step.get("operation"), step.get("exit_code")
                self.stats.runs[operation] += 1
                if exit_code == EXIT_CONFLICT:
                    self.stats.conflicts[operation] += 1
                elif exit_code not in (0, None) or step.get("status") == "failed":
                    self.stats.failures.append(f"{table} {operation} exit {exit_code}: {step.get('error')}")
                elif operation == "remove-orphan-files" and step.get("status") == "done":
                    self.stats.orphans_cleaned_ms[table.split(".", 1)[1]] = started_ms
            if outcome.get("status") == "skipped":
                self.stats.failures.append(f"{table} skipped by maintain: {outcome.get('reason')}")

    def drop_old_days(self) -> None:
        """drop-partition of the days every writer left, one run per table that has some."""
        for name, ledgers in self.ledgers.items():
            days = droppable_days(ledgers)
            if not days:
                continue
            before = latest_id(self.paths[name], None, self.storage_options) or 0
            config = {
                **self._base(),
                "table": f"soak.{name}",
                "partitions": [{"dt": day} for day in days],
                "strict": False,
            }
            code, record = run_cli(self.workdir, "drop-partition", "drop-partition", config)
            self.stats.runs["drop-partition"] += 1
            self.stats.throttled["drop-partition"] += throttled_in(record)
            if code == EXIT_CONFLICT:
                self.stats.conflicts["drop-partition"] += 1
                continue
            committed = record.get("snapshot_ids", {}).get("committed")
            for ledger in ledgers:
                for day in days:
                    if code != 0:
                        ledger.drops[day] = Drop(day, before, None)
                    elif committed is None:  # nothing left to drop (e.g. every key of the day deleted)
                        ledger.drops[day] = Drop(day, before, before)
                    else:
                        ledger.drops[day] = Drop(day, committed - 1, committed)
            if code != 0:
                self.stats.failures.append(f"{name} drop-partition exit {code}: {record.get('error')}")

    def branch_from_first_tag(self) -> None:
        """create-branch `b1` from the oldest of our tags, once per table: the branch then stands
        still while expire-tags deletes the tag, and its files must stay."""
        for name, path in self.paths.items():
            ours = [tag for tag in tag_names(path, self.storage_options) if tag.startswith("ours-")]
            if name in self.branched or not ours:
                continue
            tag = min(ours, key=lambda t: int(t.split("-", 1)[1]))
            config = {**self._base(), "table": f"soak.{name}", "branch": BRANCH, "tag": tag}
            code, record = run_cli(self.workdir, "create-branch", "create-branch", config)
            self.stats.runs["create-branch"] += 1
            self.stats.throttled["create-branch"] += throttled_in(record)
            if code == EXIT_CONFLICT:  # the tag expired meanwhile: the next round tries another
                self.stats.conflicts["create-branch"] += 1
                continue
            if code != 0:
                self.stats.failures.append(f"{name} create-branch exit {code}: {record.get('error')}")
            self.branched.add(name)

"""Our side of the soak: `maintain` with every block and drop-partition of old days, in-process.

Each run goes through `jobs.__main__.main` exactly as `python -m jobs <op> --config F` would (the
YAML written to the work directory, the run record written to a file), on the process's one
SparkSession. Exit 3 (a rival commit, here Java's, changed what the job replaces; it removed what it
wrote) is counted per operation, not a failure; exit 1 or 2 is a failure.
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
from scripts.soak.checks import latest_id
from scripts.soak.ledger import Drop, Ledger

EXIT_CONFLICT = 3


@dataclass
class OurStats:
    runs: Counter = field(default_factory=Counter)  # by operation (maintain's steps counted one by one)
    conflicts: Counter = field(default_factory=Counter)  # exit 3 by operation
    failures: list[str] = field(default_factory=list)
    orphans_cleaned_ms: dict[str, int] = field(default_factory=dict)  # table -> start of the last
    # maintain run whose remove-orphan-files step finished (a bound below the step's own start)


@dataclass
class OurJobs:
    warehouse: str
    workdir: str
    ledgers: dict[str, Ledger]
    paths: dict[str, str]
    orphan_older_than_s: int
    stats: OurStats = field(default_factory=OurStats)
    rounds: int = 0

    def maintain_config(self) -> dict[str, Any]:
        """Every block: our tag (kept 2 minutes), tags older than 3 minutes expired (Java's too),
        snapshots beyond the newest 5 and older than 30 s expired, minor compaction, manifests,
        orphans older than `orphan_older_than_s` (below the 1 h floor, hence force)."""
        return {
            "warehouse": self.warehouse,
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

    def _run(self, operation: str, config: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        config_path = os.path.join(self.workdir, f"{operation}.yaml")
        record_path = os.path.join(self.workdir, f"{operation}.record.json")
        with open(config_path, "w", encoding="utf-8") as handle:
            yaml.safe_dump(config, handle)
        if os.path.exists(record_path):
            os.remove(record_path)
        code = run_job([operation, "--config", config_path, "--output", record_path])
        try:
            with open(record_path, encoding="utf-8") as handle:
                return code, json.load(handle)
        except FileNotFoundError:
            return code, {}

    def maintain(self) -> None:
        self.rounds += 1
        started_ms = int(time.time() * 1000)
        code, record = self._run("maintain", self.maintain_config())
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
        """drop-partition of the days the writer left, one run per table that has some."""
        for name, ledger in self.ledgers.items():
            days = ledger.droppable_days()
            if not days:
                continue
            before = latest_id(self.paths[name]) or 0
            config = {
                "warehouse": self.warehouse,
                "table": f"soak.{name}",
                "partitions": [{"dt": day} for day in days],
                "strict": False,
            }
            code, record = self._run("drop-partition", config)
            self.stats.runs["drop-partition"] += 1
            if code == EXIT_CONFLICT:
                self.stats.conflicts["drop-partition"] += 1
                continue
            if code != 0:
                self.stats.failures.append(f"{name} drop-partition exit {code}: {record.get('error')}")
                for day in days:
                    ledger.drops[day] = Drop(day, before, None)
                continue
            committed = record.get("snapshot_ids", {}).get("committed")
            for day in days:
                if committed is None:  # nothing left to drop (e.g. every key of the day deleted)
                    ledger.drops[day] = Drop(day, before, before)
                else:
                    ledger.drops[day] = Drop(day, committed - 1, committed)

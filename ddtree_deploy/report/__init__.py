"""Output: JSON Lines, human lines and tables on stderr, JUnit XML."""

from ddtree_deploy.report.junit import junit_xml, write_junit
from ddtree_deploy.report.live import LiveDisplay, progress_sink
from ddtree_deploy.report.sinks import ConsoleSink, FanoutSink, JsonLinesSink
from ddtree_deploy.report.summary import (
    append_summary,
    count_outcomes,
    fleet_table,
    summary_markdown,
    version_label,
)
from ddtree_deploy.report.tables import (
    backups_table,
    facts_table,
    gate_table,
    plan_table,
    smoke_table,
    status_table,
)

__all__ = [
    "LiveDisplay",
    "append_summary",
    "count_outcomes",
    "fleet_table",
    "progress_sink",
    "summary_markdown",
    "version_label",
    "backups_table",
    "plan_table",
    "status_table",
    "ConsoleSink",
    "FanoutSink",
    "JsonLinesSink",
    "facts_table",
    "gate_table",
    "junit_xml",
    "smoke_table",
    "write_junit",
]

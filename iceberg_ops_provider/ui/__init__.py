"""The Iceberg pages of Airflow's UI: a plugin serving read-only pages and JSON under the api-server.

A front like the operators and the command line: every fact it shows comes from an engine verb
(``MigrationRunner.status()``, ``runner.report.audit_trail``, ``maintenance.health.table_health_report``,
``maintenance.activity.maintenance_history``, ``maintenance.overview.namespace_tables``,
``data_migration.progress_report.moves_into``). The plugin (:mod:`.plugin`) is imported by every
Airflow process that loads plugins, task processes included, so it imports nothing heavy: the
FastAPI application (:mod:`.app`) is built the first time the api-server asks for it.
See docs/ui.md.
"""

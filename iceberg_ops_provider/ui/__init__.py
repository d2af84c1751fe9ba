"""The Iceberg pages of Airflow's UI: a plugin serving read-only pages and JSON under the api-server.

A front like the operators and the command line: every fact it shows comes from an engine verb (docs/ui.md).
"""

"""The Iceberg pages of Airflow's UI: a plugin serving read-only pages and JSON under the api-server.

A front like the operators and the command line: every fact it shows comes from an engine verb. The
plugin (:mod:`.plugin`) imports nothing heavy; the FastAPI application (:mod:`.app`) is built the first
time the api-server asks for it. See docs/ui.md.
"""

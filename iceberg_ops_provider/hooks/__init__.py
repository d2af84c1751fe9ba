"""Airflow hooks of the iceberg-ops provider."""

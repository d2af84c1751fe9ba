"""Airflow operators of the iceberg-ops provider."""

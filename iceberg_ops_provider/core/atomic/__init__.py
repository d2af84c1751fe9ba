"""All-or-nothing commits of changes to several tables at once.

One REST ``transactions/commit`` request, or one database transaction over PyIceberg's SQL catalog:
:func:`~iceberg_ops_provider.core.atomic.commit.commit_atomically` dispatches to the backend
(:mod:`.rest`, :mod:`.sql`) the catalog supports.
"""

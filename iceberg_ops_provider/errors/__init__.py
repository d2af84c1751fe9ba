"""The one exception hierarchy of iceberg-ops: every error it raises on purpose derives from :class:`IcebergOpsError`.

The classes live in :mod:`.base`, :mod:`.migrations` and :mod:`.operations`; import them from here (docs/errors.md).
"""

from iceberg_ops_provider.errors.base import *  # noqa: F403
from iceberg_ops_provider.errors.migrations import *  # noqa: F403
from iceberg_ops_provider.errors.operations import *  # noqa: F403

# Every error class of the three modules; the typing helpers the star imports bring along are dropped.
__all__ = [
    name for name, value in list(globals().items()) if getattr(value, "__module__", "").startswith(f"{__name__}.")
]

# Tracebacks, reprs and pickles name each class where users import it from, as before the split.
for _name in [name for name in globals() if name[0] != "_" and name not in ("base", "migrations", "operations")]:
    if _name in __all__:
        globals()[_name].__module__ = __name__
    else:
        del globals()[_name]
del _name

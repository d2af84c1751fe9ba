"""The one exception hierarchy of iceberg-ops.

Every error the package raises on purpose derives from :class:`IcebergOpsError`, so callers can
catch everything iceberg-ops reports with one ``except`` clause. Where Python has a natural
built-in category (a bad value, a missing package, a bad type) the class derives from that
built-in as well, so ``except ValueError`` keeps working for code that expects it.

Every message says what was wrong and what to do about it. Where the "what to do" names an argument
of the call (``mode='incremental'``) or a step whose wording depends on the front, the message is a
:class:`~iceberg_ops_provider.messages.Message` whose facts each front words in its own language
(``str(error)`` is the Python wording).

The classes live in :mod:`.base` (the root, configuration, catalogs, types, schemas, models),
:mod:`.migrations` and :mod:`.operations` (maintenance, the data mover, Polaris); import them from here.
"""

from __future__ import annotations

from iceberg_ops_provider.errors import base, migrations, operations
from iceberg_ops_provider.errors.base import *  # noqa: F403
from iceberg_ops_provider.errors.migrations import *  # noqa: F403
from iceberg_ops_provider.errors.operations import *  # noqa: F403

__all__ = [*base.__all__, *migrations.__all__, *operations.__all__]

# Tracebacks, reprs and pickles name each class where users import it from, as before the split.
for _name in __all__:
    globals()[_name].__module__ = __name__
del _name

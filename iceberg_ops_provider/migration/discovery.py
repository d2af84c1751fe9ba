"""Find and load migration files: ``NNNN_slug.py`` in a folder, one ``Migration`` class each.

Pure file work, never touching a catalog. Each file is registered in ``sys.modules`` under a name
unique to its path, so its classes pickle and ``@dataclass`` works in it.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib.util
import inspect
import os
import re
import sys
import threading
import traceback
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

from iceberg_ops_provider.errors import MigrationDiscoveryError
from iceberg_ops_provider.migration.base import BaseMigration

__all__ = [
    "CHECKSUM_PREFIX",
    "MIGRATION_FILE",
    "BrokenFile",
    "MigrationScript",
    "checksum_matches",
    "discover",
    "file_checksum",
    "importable",
    "migrations_folder",
]

MIGRATION_FILE = re.compile(r"^(?P<version>[0-9]{4,})_(?P<slug>[A-Za-z0-9_]+)\.py$")
"""File names of migrations: four or more ASCII digits, an underscore, a slug of letters, digits and ``_``."""

# A version written with digits of any script (Arabic-Indic, full-width...), to explain the refusal.
_ANY_DIGITS_VERSION = re.compile(r"^(\d+)_")

CHECKSUM_PREFIX = "ast1:"
"""Start of the checksums :func:`file_checksum` computes; a recorded checksum without it is a legacy one."""

# What histories recorded before checksums looked at the code: the SHA-256 of the file's bytes.
_LEGACY_CHECKSUM = re.compile(r"[0-9a-f]{64}")

# Nodes whose first statement, when a string, is a docstring (left out of the checksum).
_DOCSTRING_OWNERS = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)

# Syntax tree fields that do not change what the code does: a string's ``u`` prefix, type comments.
_IGNORED_FIELDS = frozenset({"kind", "type_comment"})

# Prefix of the sys.modules names of loaded migration files; these stay registered.
_MODULE_PREFIX = "iceberg_ops_migration_"

# sys.path and sys.modules are process-wide: one importable() block at a time, so runs of several
# namespaces in threads of one process neither import each other's helpers nor see sys.modules
# change under their bookkeeping. Re-entrant, so a block may open another in the same thread.
_IMPORT_LOCK = threading.RLock()


@dataclass(frozen=True)
class MigrationScript:
    """One migration file, loaded.

    Attributes:
        version: The number prefix as written (``"0003"``); ordered numerically.
        description: The class's ``description``, its docstring's first line, or the slug.
        checksum: The file's code checksum (:func:`file_checksum`).
        source_sha256: The SHA-256 of the file's bytes (line endings normalised), recorded beside the
            checksum so that a later run knows an unchanged file without parsing it.
    """

    version: str
    slug: str
    description: str
    path: Path
    checksum: str
    migration: BaseMigration
    source_sha256: str = ""

    @property
    def number(self) -> int:
        """The version as a number, for ordering."""
        return int(self.version)

    def __getattr__(self, name: str) -> Any:
        # Reached only by a script discovered without importing it (an applied file whose checksum still
        # matches its history row): its module is imported when its migration or description is first used.
        source = self.__dict__.get("_source")
        if name not in ("migration", "description") or source is None:
            raise AttributeError(name)
        with importable(self.path.parent):
            if "migration" not in self.__dict__:
                migration = _load(self.path, self.version, source)
                object.__setattr__(self, "description", _description(migration, self.slug))
                object.__setattr__(self, "migration", migration)
        return self.__dict__[name]


def file_checksum(path: Path) -> str:
    """Checksum of a migration file's code: ``"ast1:"`` and the SHA-256 of a canonical dump of its syntax tree.

    Comments, layout, how literals are spelled and docstrings do not count, so reformatting or
    commenting an applied migration is not a change; the dump is the same on every Python version.
    """
    return _source_checksum(path.read_bytes(), str(path))


# A pure function of the file's text, kept for the texts seen last: a process that discovers the
# same files again (a scheduler's worker, a run after a run) reads them but does not parse them again.
@functools.lru_cache(maxsize=4096)
def _source_checksum(source: bytes, filename: str) -> str:
    tree = ast.parse(source, filename=filename)
    _normalise(tree)
    return CHECKSUM_PREFIX + hashlib.sha256(_canonical_dump(tree).encode()).hexdigest()


@functools.lru_cache(maxsize=4096)
def _compiled(source: bytes, filename: str) -> CodeType:
    return compile(source, filename, "exec", dont_inherit=True)


def checksum_matches(recorded: str | None, current: MigrationScript | str | os.PathLike[str]) -> bool:
    """Whether a checksum recorded in the history (``None``/``""`` always match) still matches a migration file.

    An ``"ast1:"`` checksum matches while the code is the same; a bare hexadecimal SHA-256 (the legacy
    checksum of the bytes, line endings normalised) while the bytes are. ``False`` also when the file
    cannot be read or no longer parses.
    """
    if not recorded:
        return True
    if isinstance(current, MigrationScript):
        if recorded == current.checksum:
            return True
        path, checksum = current.path, current.checksum
    else:
        path, checksum = Path(current), None
    try:
        if _LEGACY_CHECKSUM.fullmatch(recorded):
            return recorded == _byte_checksum(path.read_bytes())
        return recorded.startswith(CHECKSUM_PREFIX) and recorded == (checksum or file_checksum(path))
    except (OSError, SyntaxError, ValueError):
        return False


def _read_source(path: Path) -> bytes:
    """A migration file's bytes: every run reads every file, and bare ``os`` reads cost half of ``read_bytes``."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _byte_checksum(source: bytes) -> str:
    """The legacy checksum: SHA-256 of the file's bytes, Windows line endings normalised."""
    return hashlib.sha256(source.replace(b"\r\n", b"\n")).hexdigest()


def _normalise(tree: ast.AST) -> None:
    """Drop docstrings; in f-strings drop empty text parts (some 3.12 releases add them) and join adjacent ones."""
    for node in ast.walk(tree):
        if isinstance(node, _DOCSTRING_OWNERS) and ast.get_docstring(node, clean=False) is not None:
            node.body = node.body[1:]
        elif isinstance(node, ast.JoinedStr):
            values: list[ast.expr] = []
            for value in node.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    if not value.value:
                        continue
                    if values and isinstance(values[-1], ast.Constant) and isinstance(values[-1].value, str):
                        values[-1] = ast.Constant(values[-1].value + value.value)
                        continue
                values.append(value)
            node.values = values


class _Text(str):
    """A piece of the dump itself, as opposed to a constant of the code (which is dumped typed)."""

    __slots__ = ()


def _canonical_dump(tree: ast.AST) -> str:
    """Like ``ast.dump(tree)`` without positions, empty fields and ``_IGNORED_FIELDS``, constants as ``type:repr``.

    Iterative, so deep trees do not hit the recursion limit.
    """
    parts: list[str] = []
    pending: list[object] = [tree]
    while pending:
        item = pending.pop()
        if isinstance(item, _Text):
            parts.append(item)
        elif isinstance(item, ast.AST):
            children: list[object] = [_Text(f"{type(item).__name__}(")]
            for name, value in ast.iter_fields(item):
                if name in _IGNORED_FIELDS or value is None or (isinstance(value, list) and not value):
                    continue
                children += [_Text(f"{name}="), value, _Text(",")]
            children.append(_Text(")"))
            pending.extend(reversed(children))
        elif isinstance(item, list):
            children = [_Text("[")]
            for value in item:
                children += [value, _Text(",")]
            children.append(_Text("]"))
            pending.extend(reversed(children))
        else:
            parts.append(f"{type(item).__name__}:{item!r}")
    return "".join(parts)


def migrations_folder(migrations_dir: str | Path, namespace: str) -> Path:
    """``migrations_dir/<namespace>`` when that folder exists, else ``migrations_dir``."""
    root = Path(migrations_dir)
    per_namespace = root / namespace
    return per_namespace if per_namespace.is_dir() else root


@contextlib.contextmanager
def importable(folder: str | Path) -> Iterator[None]:
    """Make a migrations folder's helpers importable (``from _common import X``) while a ``with`` block runs.

    The folder goes first on ``sys.path``; modules of the same names imported from elsewhere are set
    aside. Afterwards the modules imported from the folder leave ``sys.modules`` (another folder's
    ``_common`` is not this one's) and those set aside come back. Blocks in several threads take turns.
    """
    root = Path(folder).resolve()
    entry = os.path.abspath(folder)
    with _IMPORT_LOCK:
        modules_before = sys.modules.copy()  # at once: other threads may import meanwhile
        set_aside = _set_aside_shadowed(root, modules_before)
        sys.path.insert(0, entry)
        try:
            yield
        finally:
            with contextlib.suppress(ValueError):
                sys.path.remove(entry)
            if entry not in sys.path:
                sys.path_importer_cache.pop(entry, None)
            for name, module in sys.modules.copy().items():
                if (
                    modules_before.get(name) is not module
                    and not name.startswith(_MODULE_PREFIX)
                    and _comes_from(module, root)
                ):
                    sys.modules.pop(name, None)
            sys.modules.update(set_aside)


def _helper_names(root: Path) -> set[str]:
    """Top-level names the folder's helpers are imported by: ``_x.py`` files and ``_x/`` folders."""
    if not root.is_dir():
        return set()
    with os.scandir(root) as entries:  # a folder of 1,000 migrations is listed at every step: no Path per entry
        return {
            entry.name.removesuffix(".py")
            for entry in entries
            if entry.name.startswith("_")
            and entry.name not in {"__init__.py", "__pycache__"}
            and (entry.name.endswith(".py") or entry.is_dir())
        }


def _set_aside_shadowed(root: Path, modules: dict[str, ModuleType]) -> dict[str, ModuleType]:
    """Remove from ``sys.modules`` the modules named like the folder's helpers but loaded elsewhere."""
    helpers = _helper_names(root)
    if not helpers:  # most folders have none: no need to look through every loaded module
        return {}
    shadowed = {
        name: module
        for name, module in modules.items()
        if name.split(".")[0] in helpers and not _comes_from(module, root)
    }
    for name in shadowed:
        sys.modules.pop(name, None)
    return shadowed


def _comes_from(module: ModuleType | None, root: Path) -> bool:
    """Whether ``module`` was loaded from a file (or is a package folder) under ``root``."""
    if module is None:
        return False
    locations = [getattr(module, "__file__", None), *(getattr(module, "__path__", None) or ())]
    return any(isinstance(location, str) and Path(location).resolve().is_relative_to(root) for location in locations)


@functools.lru_cache(maxsize=4096)
def _module_name(path: str) -> str:
    """The ``sys.modules`` name of a migration file: unique to its path, a plain identifier."""
    digest = hashlib.sha1(str(Path(path).resolve()).encode()).hexdigest()[:12]
    return f"{_MODULE_PREFIX}{digest}_{Path(path).stem}"


def _in_file(exc: BaseException, path: Path) -> list[traceback.FrameSummary]:
    """The frames of ``exc``'s traceback that ran in the migration file ``path``."""
    return [
        frame for frame in traceback.extract_tb(exc.__traceback__) if Path(frame.filename).resolve() == path.resolve()
    ]


def _where(exc: BaseException, path: Path) -> str:
    """``line N of file.py``: the innermost frame in the migration file, else the innermost frame."""
    frame = (_in_file(exc, path) or traceback.extract_tb(exc.__traceback__))[-1]
    return f"line {frame.lineno} of {Path(frame.filename).name}"


def _exit_problem(exc: SystemExit, what: str, where: str) -> str:
    return (
        f"{what} called sys.exit({exc.code!r}) ({where}); a migration file must not call sys.exit()/exit(), "
        "which would end the whole run: raise an exception to report a problem instead."
    )


def _execute(module: ModuleType, path: Path, source: bytes) -> None:
    """Run the file's code in ``module``, turning what it raises into a discovery error.

    Compiled from the file's current text, never a cached ``.pyc`` (which could be older than the checksum).
    """
    try:
        exec(_compiled(source, str(path)), module.__dict__)
    except SyntaxError as exc:
        raise MigrationDiscoveryError(path, f"syntax error on line {exc.lineno}: {exc.msg}.", line=exc.lineno) from exc
    except SystemExit as exc:
        raise MigrationDiscoveryError(
            path, _exit_problem(exc, "importing it", _where(exc, path)), line=_line_in(exc, path)
        ) from exc
    except Exception as exc:
        last = traceback.extract_tb(exc.__traceback__)[-1]
        raise MigrationDiscoveryError(
            path,
            f"importing it raised {type(exc).__name__}: {exc} (line {last.lineno} of {Path(last.filename).name}).",
            line=_line_in(exc, path),
        ) from exc


def _line_in(exc: BaseException, path: Path) -> int | None:
    """The line of the innermost frame of ``exc`` in the migration file ``path``, if it went through it."""
    frames = _in_file(exc, path)
    return frames[-1].lineno if frames else None


def _import_file(path: Path, source: bytes) -> ModuleType:
    """Import a migration file as a module kept in ``sys.modules`` (removed again if it fails)."""
    module_name = _module_name(str(path.absolute()))
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise MigrationDiscoveryError(path, "cannot be loaded as a Python module.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        _execute(module, path, source)
    except BaseException:
        if sys.modules.get(module_name) is module:
            del sys.modules[module_name]
        raise
    return module


def _check_synchronous(path: Path, migration_class: type[BaseMigration]) -> None:
    """Refuse ``async def`` upgrade/downgrade: nothing would await them, so they would do nothing."""
    for name in ("upgrade", "downgrade"):
        method = getattr(migration_class, name)
        if inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method):
            raise MigrationDiscoveryError(
                path, f"{name}() is declared `async def`; migrations run synchronously: make it a plain `def`."
            )
        if inspect.isgeneratorfunction(method):
            raise MigrationDiscoveryError(
                path, f"{name}() contains `yield`, so calling it would run nothing: remove the `yield`."
            )


def _load(path: Path, version: str, source: bytes) -> BaseMigration:
    module = _import_file(path, source)
    migration_class = getattr(module, "Migration", None)
    if migration_class is None:
        raise MigrationDiscoveryError(path, "defines no class named Migration; add `class Migration(BaseMigration):`.")
    if not isinstance(migration_class, type) or not issubclass(migration_class, BaseMigration):
        raise MigrationDiscoveryError(
            path, "its Migration is not a subclass of iceberg_ops_provider.migration.BaseMigration."
        )
    if migration_class.upgrade is BaseMigration.upgrade:
        raise MigrationDiscoveryError(path, "its Migration class defines no upgrade(self, ctx) method.")
    _check_synchronous(path, migration_class)
    try:
        migration = migration_class()
    except SystemExit as exc:
        raise MigrationDiscoveryError(path, _exit_problem(exc, "Migration()", _where(exc, path))) from exc
    except Exception as exc:
        raise MigrationDiscoveryError(path, f"Migration() raised {type(exc).__name__}: {exc}.") from exc
    migration.version = version
    return migration


def _bad_name_problem(name: str) -> str:
    """Why ``name`` is not a migration file name, and how to name it."""
    digits = _ANY_DIGITS_VERSION.match(name)
    if digits and not digits.group(1).isascii():
        ascii_name = "".join(str(unicodedata.decimal(char)) for char in digits.group(1)) + name[digits.end(1) :]
        return (
            f"its version number {digits.group(1)!r} is not written with ASCII digits; "
            f"use ASCII digits 0-9 for the version: rename it to {ascii_name}."
        )
    return (
        "is not a migration file name; name migrations NNNN_slug.py (four or more digits, then letters, "
        "digits and underscores), or start helper modules with '_'."
    )


def _description(migration: BaseMigration, slug: str) -> str:
    if migration.description:
        return str(migration.description)
    doc = (type(migration).__doc__ or "").strip()
    return doc.splitlines()[0].strip() if doc else slug.replace("_", " ")


@dataclass(frozen=True)
class BrokenFile:
    """A migration file that could not be loaded, as a read-only report lists it (``status``, ``check``).

    ``version`` is ``None`` when the name is not a migration file name, ``line`` when not known;
    ``error`` is what is wrong, without the path.
    """

    path: Path
    version: str | None
    line: int | None
    error: str

    @classmethod
    def of(cls, error: MigrationDiscoveryError) -> BrokenFile:
        """The report of a file :func:`discover` refused with ``error``."""
        path = Path(error.path)
        match = MIGRATION_FILE.match(path.name)
        return cls(path, match.group("version") if match else None, error.line, error.problem)

    @property
    def slug(self) -> str:
        """The rest of the file name after the version (its description, since the file cannot say)."""
        match = MIGRATION_FILE.match(self.path.name)
        return match.group("slug").replace("_", " ") if match else self.path.stem

    def describe(self) -> str:
        """One line: the file and what is wrong with it (the message :func:`discover` raises)."""
        return f"{self.path}: {self.error}"

    def to_json(self) -> dict[str, object]:
        """JSON-able form."""
        return {"path": str(self.path), "version": self.version, "line": self.line, "error": self.error}


def discover(
    migrations_dir: str | Path,
    namespace: str | None = None,
    *,
    broken: list[BrokenFile] | None = None,
    applied: Mapping[int, str | None] | None = None,
    applied_sources: Mapping[int, str | None] | None = None,
) -> list[MigrationScript]:
    """Load every migration in the folder for ``namespace``, ordered by version; files starting with ``_`` are helpers.

    Args:
        migrations_dir: The migrations folder.
        namespace: Use ``migrations_dir/<namespace>/`` when that folder exists.
        broken: For read-only reports: a file that cannot be used is appended here as a
            :class:`BrokenFile` and left out, instead of raising (a missing folder still raises).
        applied: The checksums the history records for applied versions, by number. A file whose code
            still matches is not imported until its ``migration`` or ``description`` is first used.
        applied_sources: The ``source_sha256`` the history records beside those checksums: a file whose
            bytes still match is not even parsed.

    Raises:
        MigrationDiscoveryError: The folder is missing, or a file has a bad or duplicate name, does not
            load, or has no proper ``Migration`` class; the message names the file (and line).
    """
    folder = migrations_folder(migrations_dir, namespace) if namespace else Path(migrations_dir)
    if not folder.is_dir():
        raise MigrationDiscoveryError(
            folder, "migrations folder not found; create it (iceberg-ops init) or pass the right migrations_dir."
        )
    found: dict[int, MigrationScript] = {}
    with importable(folder):
        for path in sorted(folder.glob("*.py"), key=lambda path: path.name):  # one folder: by name, fast
            if path.name.startswith("_"):
                continue
            try:
                script = _script(path, found, applied or {}, applied_sources or {})
            except MigrationDiscoveryError as exc:
                if broken is None:
                    raise
                broken.append(BrokenFile.of(exc))
                continue
            found[script.number] = script
    return [found[number] for number in sorted(found)]


def _script(
    path: Path,
    found: dict[int, MigrationScript],
    applied: Mapping[int, str | None],
    sources: Mapping[int, str | None],
) -> MigrationScript:
    """Check one file's name against the others found so far, then load it (or not: see :func:`discover`)."""
    match = MIGRATION_FILE.match(path.name)
    if not match:
        raise MigrationDiscoveryError(path, _bad_name_problem(path.name))
    version, slug = match.group("version"), match.group("slug")
    number = int(version)
    if number in found:
        raise MigrationDiscoveryError(
            path, f"has the same version number as {found[number].path.name}; renumber one of them."
        )
    source = _read_source(path)
    digest = _byte_checksum(source)
    if recorded := applied.get(number):
        checksum: str | None = None
        if sources.get(number) == digest and recorded.startswith(CHECKSUM_PREFIX):
            checksum = recorded  # the very bytes it was recorded from
        else:
            with contextlib.suppress(SyntaxError, ValueError):  # a file that no longer parses is loaded, to say why
                parsed = _source_checksum(source, str(path))
                checksum = parsed if recorded == (digest if _LEGACY_CHECKSUM.fullmatch(recorded) else parsed) else None
        if checksum is not None:
            script = object.__new__(MigrationScript)
            script.__dict__.update(
                version=version, slug=slug, path=path, checksum=checksum, source_sha256=digest, _source=source
            )
            return script
    migration = _load(path, version, source)
    checksum = _source_checksum(source, str(path))
    return MigrationScript(version, slug, _description(migration, slug), path, checksum, migration, digest)

"""Loading migration files: modules, helpers next to them, version numbers, async methods, sys.exit()."""

from __future__ import annotations

import inspect
import pickle
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from iceberg_ops_provider.errors import MigrationDiscoveryError
from iceberg_ops_provider.migration.discovery import discover, importable
from tests.support.migrations import write_migration

HEADER = "from iceberg_ops_provider.migration import BaseMigration\n\n\n"


def write(path: Path, text: str) -> Path:
    """Write ``path`` (and its folder) with dedented ``text``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def helper_modules() -> set[str]:
    """Names of the helper modules of these tests that are currently imported."""
    return {name for name in sys.modules if name.split(".")[0] in {"_common", "_lib"}}


def test_a_dataclass_with_postponed_annotations_loads_and_its_class_stays_registered(migrations_dir):
    path = write(
        migrations_dir / "0001_columns.py",
        """
        from __future__ import annotations

        from dataclasses import dataclass

        from iceberg_ops_provider.migration import BaseMigration


        @dataclass(frozen=True)
        class Column:
            name: str
            type: str = "string"


        class Migration(BaseMigration):
            columns = (Column("email"), Column("age", "int"))

            def upgrade(self, ctx):
                for column in self.columns:
                    ctx.add_column("orders", column.name, column.type)
        """,
    )
    (script,) = discover(migrations_dir)
    migration_class = type(script.migration)
    assert [column.name for column in migration_class.columns] == ["email", "age"]
    module = sys.modules[migration_class.__module__]
    assert Path(module.__file__) == path
    assert "class Migration(BaseMigration):" in inspect.getsource(migration_class)
    copy = pickle.loads(pickle.dumps(script.migration))
    assert type(copy) is migration_class and copy.version == "0001"


def test_rediscovering_a_file_replaces_its_module(migrations_dir):
    write_migration(migrations_dir, "0001_first.py", description="before")
    (before,) = discover(migrations_dir)
    write_migration(migrations_dir, "0001_first.py", description="after")
    (after,) = discover(migrations_dir)
    assert (before.description, after.description) == ("before", "after")
    assert type(after.migration).__module__ == type(before.migration).__module__
    assert sys.modules[type(after.migration).__module__].Migration is type(after.migration)


def test_a_helper_module_imported_at_the_top_of_a_migration(migrations_dir):
    write(migrations_dir / "_common.py", 'TABLE = "orders"\n')
    write(migrations_dir / "_lib" / "__init__.py", "")
    write(migrations_dir / "_lib" / "names.py", 'OWNER = "sales"\n')
    write(
        migrations_dir / "0001_uses_helpers.py",
        HEADER
        + textwrap.dedent(
            """
            from _common import TABLE
            from _lib.names import OWNER


            class Migration(BaseMigration):
                table = TABLE
                owner = OWNER

                def upgrade(self, ctx):
                    ctx.set_properties(self.table, owner=self.owner)
            """
        ),
    )
    path_before = list(sys.path)
    (script,) = discover(migrations_dir)
    assert (script.migration.table, script.migration.owner) == ("orders", "sales")
    assert sys.path == path_before
    assert helper_modules() == set()


def test_each_namespace_sees_its_own_helpers(migrations_dir):
    for namespace in ("sales", "finance"):
        write(migrations_dir / namespace / "_common.py", f"OWNER = {namespace!r}\n")
        write(
            migrations_dir / namespace / "0001_owner.py",
            HEADER
            + "from _common import OWNER\n\n\nclass Migration(BaseMigration):\n    owner = OWNER\n\n"
            + "    def upgrade(self, ctx):\n        pass\n",
        )
    for namespace in ("sales", "finance", "sales"):
        (script,) = discover(migrations_dir, namespace)
        assert script.migration.owner == namespace


def test_a_helper_imported_inside_upgrade_needs_importable(migrations_dir):
    write(migrations_dir / "_common.py", 'OWNER = "sales"\n')
    write(
        migrations_dir / "0001_lazy.py",
        HEADER
        + textwrap.dedent(
            """
            class Migration(BaseMigration):
                def upgrade(self, ctx):
                    from _common import OWNER

                    ctx.append(OWNER)
            """
        ),
    )
    (script,) = discover(migrations_dir)
    seen: list[str] = []
    with pytest.raises(ModuleNotFoundError, match="_common"):
        script.migration.upgrade(seen)
    path_before = list(sys.path)
    with importable(migrations_dir):
        script.migration.upgrade(seen)
        assert str(migrations_dir) in sys.path
    assert seen == ["sales"]
    assert sys.path == path_before
    assert helper_modules() == set()


def test_importable_hides_a_same_named_module_from_elsewhere_and_restores_it(migrations_dir, tmp_path):
    write(tmp_path / "elsewhere" / "_common.py", 'OWNER = "elsewhere"\n')
    write(migrations_dir / "_common.py", 'OWNER = "migrations"\n')
    sys.path.insert(0, str(tmp_path / "elsewhere"))
    try:
        import _common  # type: ignore[import-not-found]

        with importable(migrations_dir):
            from _common import OWNER  # type: ignore[import-not-found]

            assert OWNER == "migrations"
        assert sys.modules["_common"] is _common and _common.OWNER == "elsewhere"
    finally:
        sys.path.remove(str(tmp_path / "elsewhere"))
        sys.modules.pop("_common", None)


def test_importable_cleans_up_when_the_body_raises(migrations_dir):
    write(migrations_dir / "_common.py", "X = 1\n")
    path_before = list(sys.path)
    with pytest.raises(RuntimeError, match="boom"), importable(migrations_dir):
        import _common  # type: ignore[import-not-found]  # noqa: F401

        raise RuntimeError("boom")
    assert sys.path == path_before
    assert helper_modules() == set()


def test_importable_blocks_of_two_threads_take_turns_and_each_sees_its_own_helpers(tmp_path):
    """Runs of two namespaces in threads of one process: sys.path and sys.modules are shared."""
    folders = {owner: write(tmp_path / owner / "_common.py", f"OWNER = {owner!r}\n").parent for owner in ("a", "b")}
    seen: dict[str, list[str]] = {"a": [], "b": []}
    inside: list[str] = []
    overlaps: list[tuple[str, ...]] = []
    errors: list[BaseException] = []

    def run(owner: str) -> None:
        try:
            for _ in range(20):
                with importable(folders[owner]):
                    inside.append(owner)
                    if len(inside) > 1:
                        overlaps.append(tuple(inside))
                    time.sleep(0.001)  # the other thread gets the interpreter here
                    from _common import OWNER  # type: ignore[import-not-found]

                    seen[owner].append(OWNER)
                    inside.remove(owner)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(owner,)) for owner in folders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert not overlaps
    assert seen == {"a": ["a"] * 20, "b": ["b"] * 20}
    assert helper_modules() == set()


def test_a_file_that_fails_to_import_leaves_nothing_behind(migrations_dir):
    write(migrations_dir / "_common.py", "X = 1\n")
    path = write(migrations_dir / "0001_broken.py", "from _common import X\nraise ValueError('no')\n")
    modules_before = set(sys.modules)
    with pytest.raises(MigrationDiscoveryError, match="ValueError: no"):
        discover(migrations_dir)
    assert not [name for name in set(sys.modules) - modules_before if path.stem in name]
    assert helper_modules() == set()


@pytest.mark.parametrize(
    ("name", "ascii_name"),
    [
        ("\u0660\u0660\u0660\u0663_arabic_indic.py", "0003_arabic_indic.py"),  # Arabic-Indic digits
        ("\uff10\uff10\uff10\uff14_fullwidth.py", "0004_fullwidth.py"),  # full-width digits
        ("0\u066005_mixed.py", "0005_mixed.py"),
    ],
)
def test_versions_are_ascii_digits(migrations_dir, name, ascii_name):
    write_migration(migrations_dir, name)
    with pytest.raises(MigrationDiscoveryError, match="ASCII digits 0-9") as info:
        discover(migrations_dir)
    assert name in str(info.value)
    assert f"rename it to {ascii_name}." in str(info.value)


@pytest.mark.parametrize(
    ("method", "body", "message"),
    [
        ("upgrade", "async def upgrade(self, ctx):\n        pass", r"upgrade\(\) is declared `async def`"),
        ("downgrade", "async def downgrade(self, ctx):\n        pass", r"downgrade\(\) is declared `async def`"),
        ("upgrade", "async def upgrade(self, ctx):\n        yield", r"upgrade\(\) is declared `async def`"),
    ],
)
def test_async_methods_are_refused(migrations_dir, method, body, message):
    upgrade = "" if method == "upgrade" else "def upgrade(self, ctx):\n        pass\n\n    "
    write(
        migrations_dir / "0001_async.py",
        HEADER + f"class Migration(BaseMigration):\n    {upgrade}{body}\n",
    )
    with pytest.raises(MigrationDiscoveryError, match=message) as info:
        discover(migrations_dir)
    assert "0001_async.py" in str(info.value)
    assert "make it a plain `def`" in str(info.value)


def test_a_generator_upgrade_is_refused(migrations_dir):
    write(
        migrations_dir / "0001_gen.py",
        HEADER + "class Migration(BaseMigration):\n    def upgrade(self, ctx):\n        yield\n",
    )
    with pytest.raises(MigrationDiscoveryError, match=r"upgrade\(\) contains `yield`"):
        discover(migrations_dir)


def test_an_edit_that_keeps_size_and_second_runs_the_new_code(migrations_dir, monkeypatch):
    import os

    monkeypatch.setattr("sys.dont_write_bytecode", False)
    path = migrations_dir / "0001_edit.py"
    write(
        path,
        HEADER
        + "class Migration(BaseMigration):\n    description = 'AAA'\n\n    def upgrade(self, ctx):\n        pass\n",
    )
    stat = path.stat()
    assert discover(migrations_dir)[0].description == "AAA"
    path.write_text(path.read_text().replace("AAA", "BBB"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same modification time
    assert discover(migrations_dir)[0].description == "BBB"


@pytest.mark.parametrize(
    "code",
    ["import sys\nsys.exit(0)\n", "import sys\nsys.exit('done')\n", "exit()\n", "raise SystemExit(3)\n"],
)
def test_sys_exit_while_importing_is_a_discovery_error(migrations_dir, code):
    write_migration(migrations_dir, "0001_ok.py")
    write(migrations_dir / "0002_exits.py", code)
    with pytest.raises(MigrationDiscoveryError, match=r"must not call sys\.exit\(\)") as info:
        discover(migrations_dir)
    assert str(info.value).startswith(str(migrations_dir / "0002_exits.py"))
    assert "of 0002_exits.py)" in str(info.value)


def test_sys_exit_in_the_migration_constructor_is_a_discovery_error(migrations_dir):
    write(
        migrations_dir / "0001_exits.py",
        HEADER + "class Migration(BaseMigration):\n    def __init__(self):\n        raise SystemExit(0)\n\n"
        "    def upgrade(self, ctx):\n        pass\n",
    )
    with pytest.raises(MigrationDiscoveryError, match=r"must not call sys\.exit\(\)"):
        discover(migrations_dir)


def test_keyboard_interrupt_while_importing_is_not_swallowed(migrations_dir):
    path = write(migrations_dir / "0001_interrupted.py", "raise KeyboardInterrupt\n")
    path_before = list(sys.path)
    modules_before = set(sys.modules)
    with pytest.raises(KeyboardInterrupt):
        discover(migrations_dir)
    assert sys.path == path_before
    assert not [name for name in set(sys.modules) - modules_before if path.stem in name]

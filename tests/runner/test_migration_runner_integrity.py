"""Changed, missing and out-of-order migrations, and discovery errors that touch nothing."""

from __future__ import annotations

import pytest

from iceberg_ops_provider.errors import MigrationDiscoveryError, MigrationIntegrityError
from iceberg_ops_provider.runner import MigrationRunner
from tests.support.migrations import write_migration


def test_changed_file_shows_in_status_and_blocks_upgrade(runner, three_migrations):
    runner.upgrade("0002")
    path = three_migrations / "0001_create_orders.py"
    path.write_text(path.read_text() + "\nEDITED = True  # a code change after it was applied\n")
    status = runner.status()
    assert status.changed == ["0001"] and not status.is_clean
    with pytest.raises(MigrationIntegrityError, match="0001 was applied but its file has changed") as info:
        runner.upgrade()
    assert "allow_changed=True" in str(info.value)
    assert runner.current() == "0002"
    assert [r.version for r in runner.upgrade(allow_changed=True)] == ["0003"]


def test_line_ending_changes_are_not_changes(runner, three_migrations):
    runner.upgrade()
    path = three_migrations / "0002_add_email.py"
    path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    assert runner.status().changed == []


def test_missing_file_shows_in_status_and_blocks_upgrade(runner, three_migrations):
    runner.upgrade()
    (three_migrations / "0002_add_email.py").unlink()
    write_migration(three_migrations, "0004_more.py", 'ctx.set_properties("orders", more="1")')
    assert runner.status().missing == ["0002"]
    with pytest.raises(MigrationIntegrityError, match="0002 was applied but its file is missing"):
        runner.upgrade()
    assert [r.version for r in runner.upgrade(allow_missing=True)] == ["0004"]
    # A downgrade cannot run a file that is gone.
    with pytest.raises(MigrationIntegrityError, match="0002 was applied but its file is missing"):
        runner.downgrade("base")


def test_out_of_order_file_shows_in_status_and_blocks_upgrade(catalog, runner, three_migrations):
    (three_migrations / "0002_add_email.py").rename(three_migrations / "0002_add_email.py.hold")
    runner.upgrade()
    (three_migrations / "0002_add_email.py.hold").rename(three_migrations / "0002_add_email.py")
    status = runner.status()
    assert status.out_of_order == ["0002"] and [s.version for s in status.pending] == ["0002"]
    with pytest.raises(MigrationIntegrityError, match="0002 is pending but numbered below the current version 0003"):
        runner.upgrade()
    assert [r.version for r in runner.upgrade(allow_out_of_order=True)] == ["0002"]
    assert "email" in catalog.load_table("sales.orders").schema().column_names


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "0001_dup.py",
            "from iceberg_ops_provider.migration import BaseMigration\n",
            "same version number as 0001_create_orders.py",
        ),
        ("1_short.py", "", "is not a migration file name"),
        ("0004-dash.py", "", "is not a migration file name"),
        ("0004_syntax.py", "def broken(:\n", "syntax error on line 1"),
        ("0004_no_class.py", "x = 1\n", "defines no class named Migration"),
        ("0004_wrong_base.py", "class Migration:\n    pass\n", "not a subclass of"),
        (
            "0004_no_upgrade.py",
            "from iceberg_ops_provider.migration import BaseMigration\nclass Migration(BaseMigration):\n    pass\n",
            "defines no upgrade",
        ),
        ("0004_import_error.py", "import no_such_module_here\n", "ModuleNotFoundError"),
    ],
)
def test_discovery_errors_name_the_file_and_touch_nothing(catalog, runner, three_migrations, name, content, message):
    (three_migrations / name).write_text(content)
    for action in (runner.upgrade, runner.plan, lambda: runner.stamp("head")):
        with pytest.raises(MigrationDiscoveryError, match=message) as info:
            action()
        assert name in str(info.value)
    assert [file.path.name for file in runner.status().broken] == [name]  # status reports it and goes on
    assert catalog.list_namespaces() == []


def test_helpers_and_other_files_are_ignored(catalog, runner, three_migrations):
    (three_migrations / "__init__.py").write_text("")
    (three_migrations / "_helpers.py").write_text("raise RuntimeError('not a migration')\n")
    (three_migrations / "README.md").write_text("notes")
    assert [s.version for s in runner.scripts()] == ["0001", "0002", "0003"]


def test_missing_folder(catalog, tmp_path):
    runner = MigrationRunner(catalog, "sales", tmp_path / "nope")
    with pytest.raises(MigrationDiscoveryError, match="migrations folder not found"):
        runner.upgrade()


def test_description_from_docstring_then_slug(runner, migrations_dir):
    (migrations_dir / "0001_from_doc.py").write_text(
        "from iceberg_ops_provider.migration import BaseMigration\nclass Migration(BaseMigration):\n"
        '    """Create the things.\n\n    More text."""\n    def upgrade(self, ctx):\n        pass\n'
    )
    write_migration(migrations_dir, "0002_from_slug_name.py")
    assert [s.description for s in runner.scripts()] == ["Create the things.", "from slug name"]


def test_a_run_imports_applied_files_only_when_their_code_changed(runner, three_migrations, tmp_path):
    imports = tmp_path / "imports.txt"
    path = write_migration(three_migrations, "0004_counted.py", 'ctx.set_properties("orders", counted="1")')
    path.write_text(f"from pathlib import Path\nPath({str(imports)!r}).open('a').write('x')\n" + path.read_text())
    runner.upgrade()
    write_migration(three_migrations, "0005_more.py", 'ctx.set_properties("orders", more="1")')
    assert [r.version for r in runner.upgrade()] == ["0005"]
    assert imports.read_text() == "x"  # hashed, not imported again
    path.write_text(path.read_text() + "EDITED = True\n")
    with pytest.raises(MigrationIntegrityError, match="0004 was applied but its file has changed"):
        runner.upgrade()
    assert imports.read_text() == "xx"  # a changed file is imported, so a broken one is reported


def test_an_applied_file_whose_bytes_are_unchanged_is_not_even_parsed(runner, three_migrations, monkeypatch):
    from iceberg_ops_provider.migration import discovery

    runner.upgrade()
    recorded = {row.version: row.source_sha256 for row in runner.history()}
    assert all(recorded.values()) and len(set(recorded.values())) == 3
    parsed: list[str] = []
    real = discovery._source_checksum.__wrapped__

    def counted(source: bytes, filename: str) -> str:
        parsed.append(filename.rsplit("/", 1)[-1])
        return real(source, filename)

    monkeypatch.setattr(discovery, "_source_checksum", counted)
    write_migration(three_migrations, "0004_more.py", 'ctx.set_properties("orders", more="1")')
    assert [r.version for r in runner.upgrade()] == ["0004"]
    assert parsed == ["0004_more.py"]  # only the new file; the applied ones matched their recorded bytes
    # Reformatting an applied file changes its bytes, not its code: it is parsed, found unchanged, and runs on.
    first = three_migrations / "0001_create_orders.py"
    first.write_text("# reviewed\n" + first.read_text())
    parsed.clear()
    write_migration(three_migrations, "0005_last.py", 'ctx.set_properties("orders", last="1")')
    assert [r.version for r in runner.upgrade()] == ["0005"]
    assert sorted(parsed) == ["0001_create_orders.py", "0005_last.py"]

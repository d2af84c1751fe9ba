"""Migration checksums: blind to comments, formatting and docstrings, not to code; legacy ones still match."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from iceberg_ops_provider.migration import discovery
from tests.support.migrations import write_migration

RUFF = Path(sys.executable).parent / "ruff"

ORIGINAL = '''\
"""Add the e-mail column and an audit table."""

import pyarrow as pa

from iceberg_ops_provider.migration import BaseMigration

RETENTION = {"retention.days": "30"}


class Migration(BaseMigration):
    """Add e-mail."""

    description = "add email"

    def upgrade(self, ctx):
        """Add the column, then the table."""
        ctx.add_column("orders", "email", "string", doc="Contact address")
        ctx.set_properties("orders", RETENTION)
        ctx.create_table("audit", schema=pa.schema([pa.field("id", pa.int64(), nullable=False)]))
        for name in ["a", "b"]:
            ctx.set_properties("audit", {name: f"{name}-{1 + 2}"})

    def downgrade(self, ctx):
        ctx.drop_table("audit")
        ctx.drop_column("orders", "email")
'''

COMMENTED = '''\
# -*- coding: utf-8 -*-
"""Add the e-mail column and an audit table."""

import pyarrow as pa  # the schema below

from iceberg_ops_provider.migration import BaseMigration

# Keep a month of snapshots.
RETENTION = {"retention.days": "30"}  # see the retention policy


class Migration(BaseMigration):
    """Add e-mail."""

    description = "add email"  # shown by `plan`

    def upgrade(self, ctx):
        """Add the column, then the table."""
        # The address customers gave at checkout.
        ctx.add_column("orders", "email", "string", doc="Contact address")
        ctx.set_properties("orders", RETENTION)
        ctx.create_table("audit", schema=pa.schema([pa.field("id", pa.int64(), nullable=False)]))
        for name in ["a", "b"]:
            ctx.set_properties("audit", {name: f"{name}-{1 + 2}"})

    def downgrade(self, ctx):
        ctx.drop_table("audit")  # its rows go too
        ctx.drop_column("orders", "email")
        # nothing else to undo
'''

RESTYLED = """\
'''Add the e-mail column and an audit table.'''
import pyarrow as pa
from iceberg_ops_provider.migration import BaseMigration
RETENTION = {'retention.days': '3' '0',}
class Migration( BaseMigration ):
    '''Add e-mail.'''
    description = ('add email')
    def upgrade(self,ctx):
        '''Add the column, then the table.'''
        ctx.add_column('orders', 'email',
                       'string', doc = 'Contact address',)
        ctx.set_properties('orders', (RETENTION))
        ctx.create_table('audit', schema = pa.schema([
            pa.field('id', pa.int64(), nullable = False),
        ]))
        for name in ['a', 'b']: ctx.set_properties('audit', {name: f'{name}-{1+2}'})
    def downgrade(self, ctx):
        ctx.drop_table(\\
            'audit')
        ctx.drop_column("orders", "email");  # trailing semicolon
"""

NEW_DOCSTRINGS = '''\
"""Add e-mail to orders (ticket 123)."""

import pyarrow as pa

from iceberg_ops_provider.migration import BaseMigration

RETENTION = {"retention.days": "30"}


class Migration(BaseMigration):
    """Add the e-mail column.

    Customers asked for receipts by mail.
    """

    description = "add email"

    def upgrade(self, ctx):
        ctx.add_column("orders", "email", "string", doc="Contact address")
        ctx.set_properties("orders", RETENTION)
        ctx.create_table("audit", schema=pa.schema([pa.field("id", pa.int64(), nullable=False)]))
        for name in ["a", "b"]:
            ctx.set_properties("audit", {name: f"{name}-{1 + 2}"})

    def downgrade(self, ctx):
        """Undo it: drop the table and the column."""
        ctx.drop_table("audit")
        ctx.drop_column("orders", "email")
'''

# Each replacement is a change in behaviour: the checksum must see it.
CODE_CHANGES = [
    ('"orders", "email", "string"', '"orders", "e_mail", "string"'),  # another column name
    ('"retention.days": "30"', '"retention.days": "31"'),  # another value
    ("pa.int64()", "pa.int32()"),  # another type
    ("nullable=False", "nullable=True"),
    ("{1 + 2}", "{1 + 3}"),  # another number, inside an f-string
    ('doc="Contact address"', 'doc="Contact address."'),  # a string that is not a docstring
    ('description = "add email"', 'description = "add e-mail"'),
    ('        ctx.drop_table("audit")\n', ""),  # a statement less
    ('for name in ["a", "b"]', 'for name in ["b", "a"]'),  # another order
]


def _write(folder: Path, text: str, name: str = "0001_add_email.py") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(text.encode())
    return path


def _byte_checksum(path: Path) -> str:
    """The checksum histories recorded before checksums looked at the code: SHA-256 of the bytes."""
    return hashlib.sha256(path.read_bytes().replace(b"\r\n", b"\n")).hexdigest()


def test_the_checksum_is_prefixed_so_it_is_told_apart_from_legacy_byte_checksums(tmp_path):
    checksum = discovery.file_checksum(_write(tmp_path, ORIGINAL))
    assert checksum.startswith(discovery.CHECKSUM_PREFIX) and checksum.startswith("ast1:")
    assert len(checksum) == len("ast1:") + 64


@pytest.mark.parametrize("variant", [COMMENTED, RESTYLED, NEW_DOCSTRINGS], ids=["comments", "restyled", "docstrings"])
def test_comments_formatting_and_docstrings_do_not_change_the_checksum(tmp_path, variant):
    original = discovery.file_checksum(_write(tmp_path / "a", ORIGINAL))
    assert discovery.file_checksum(_write(tmp_path / "b", variant)) == original


def test_windows_line_endings_do_not_change_the_checksum(tmp_path):
    original = discovery.file_checksum(_write(tmp_path / "a", ORIGINAL))
    assert discovery.file_checksum(_write(tmp_path / "b", ORIGINAL.replace("\n", "\r\n"))) == original


@pytest.mark.skipif(not RUFF.exists(), reason="ruff is not installed next to the interpreter")
@pytest.mark.parametrize("text", [ORIGINAL, COMMENTED, RESTYLED], ids=["original", "commented", "restyled"])
def test_running_a_formatter_over_the_file_keeps_its_checksum(tmp_path, text):
    path = _write(tmp_path, text)
    before, original_bytes = discovery.file_checksum(path), path.read_bytes()
    for line_length in ("40", "120"):
        subprocess.run([str(RUFF), "format", "--isolated", "--line-length", line_length, str(path)], check=True)
        assert discovery.file_checksum(path) == before
    assert path.read_bytes() != original_bytes  # the formatter did rewrite it


@pytest.mark.parametrize(("old", "new"), CODE_CHANGES)
def test_a_change_in_the_code_changes_the_checksum(tmp_path, old, new):
    assert old in ORIGINAL
    original = discovery.file_checksum(_write(tmp_path / "a", ORIGINAL))
    assert discovery.file_checksum(_write(tmp_path / "b", ORIGINAL.replace(old, new, 1))) != original


def test_the_checksum_of_a_given_text_is_stable(tmp_path):
    # Histories keep checksums for years: the canonical form must not drift between releases or
    # Python versions (the same value on Python 3.11, 3.12 and 3.13).
    path = _write(tmp_path, ORIGINAL)
    assert discovery.file_checksum(path) == "ast1:f4d0cee87a5dab70e221b7be97bb194599bd15e97746f86331b3db3a71ddd7ab"


def test_a_current_checksum_matches_despite_comments_but_not_code_changes(tmp_path):
    path = _write(tmp_path, ORIGINAL)
    recorded = discovery.file_checksum(path)
    assert discovery.checksum_matches(recorded, path)
    path.write_text(COMMENTED)
    assert discovery.checksum_matches(recorded, path)
    assert discovery.checksum_matches(recorded, str(path))
    path.write_text(ORIGINAL.replace('"email"', '"e_mail"'))
    assert not discovery.checksum_matches(recorded, path)


def test_a_legacy_byte_checksum_matches_the_unchanged_file(tmp_path):
    path = _write(tmp_path, ORIGINAL)
    legacy = _byte_checksum(path)
    assert discovery.checksum_matches(legacy, path)
    path.write_bytes(ORIGINAL.replace("\n", "\r\n").encode())  # a checkout on Windows
    assert discovery.checksum_matches(legacy, path)
    # A legacy checksum covers the bytes: any edit, even a comment, is a change for it.
    path.write_text(COMMENTED)
    assert not discovery.checksum_matches(legacy, path)


def test_matching_a_discovered_script(tmp_path):
    path = _write(tmp_path, ORIGINAL)
    legacy = _byte_checksum(path)
    (script,) = discovery.discover(tmp_path)
    assert script.checksum == discovery.file_checksum(path)
    assert discovery.checksum_matches(script.checksum, script)
    assert discovery.checksum_matches(legacy, script)
    path.write_text(COMMENTED)
    (edited,) = discovery.discover(tmp_path)
    assert discovery.checksum_matches(script.checksum, edited)
    assert not discovery.checksum_matches(legacy, edited)


def test_missing_foreign_and_unreadable_checksums(tmp_path):
    path = _write(tmp_path, ORIGINAL)
    assert discovery.checksum_matches(None, path)  # nothing recorded: nothing to contradict
    assert discovery.checksum_matches("", path)
    assert not discovery.checksum_matches("ast9:" + "0" * 64, path)  # a format this version does not know
    assert not discovery.checksum_matches("not a checksum", path)
    assert not discovery.checksum_matches(_byte_checksum(path), tmp_path / "gone.py")
    assert not discovery.checksum_matches(discovery.file_checksum(path), tmp_path / "gone.py")
    broken = _write(tmp_path, ORIGINAL + "def broken(:\n", "0002_broken.py")
    assert not discovery.checksum_matches(discovery.file_checksum(path), broken)
    assert discovery.checksum_matches(_byte_checksum(broken), broken)


def test_an_applied_migration_edited_only_in_comments_and_layout_is_not_changed(runner, migrations_dir):
    create = 'ctx.create_table("t", schema=pa.schema([pa.field("a", pa.int64())]))'
    write_migration(migrations_dir, "0001_create.py", create, description="create t")
    path = write_migration(migrations_dir, "0002_add.py", 'ctx.add_column("t", "b", "string")', description="add b")
    runner.upgrade()
    path.write_text(
        "# Reviewed in the incident of March.\n"
        + path.read_text().replace('"b", "string"', "'b',\n            'string',  # text\n        ")
    )
    assert runner.status().changed == []
    if RUFF.exists():
        subprocess.run([str(RUFF), "format", "--isolated", "--quiet", str(migrations_dir)], check=True)
        assert runner.status().changed == []
    path.write_text(path.read_text().replace("'b'", "'c'").replace('"b"', '"c"'))
    assert runner.status().changed == ["0002"]

"""Lint migration files before they run: rules with stable ids, allowances with reasons (``docs/lint.md``)."""

from iceberg_ops_provider.lint.linter import LintReport, lint_paths, migration_files, rule_list, rules_json
from iceberg_ops_provider.lint.rules import RULES, Rule
from iceberg_ops_provider.lint.source import Finding

__all__ = ["RULES", "Finding", "LintReport", "Rule", "lint_paths", "migration_files", "rule_list", "rules_json"]

"""Apache Polaris policies (experimental): a client for Polaris 1.x's policy API, and a dispatcher running them.

Polaris stores maintenance policies and resolves which apply to a table; it runs none of them.
"""

from __future__ import annotations

from iceberg_ops_provider.polaris.client import NamespaceLike, PolarisPolicyClient, TargetType
from iceberg_ops_provider.polaris.dispatcher import (
    NamespacePolicyOutcome,
    PolicyDispatcher,
    PolicyOutcome,
    PolicySource,
    TablePolicyOutcome,
)
from iceberg_ops_provider.polaris.policies import (
    CONTENT_VERSION,
    ApplicablePolicy,
    ConfigValue,
    Policy,
    PolicyContent,
    PolicyType,
)
from iceberg_ops_provider.polaris.transport import HTTPResponse, HTTPSession

__all__ = [
    "PolarisPolicyClient",
    "HTTPSession",
    "HTTPResponse",
    "NamespaceLike",
    "TargetType",
    "CONTENT_VERSION",
    "ApplicablePolicy",
    "ConfigValue",
    "Policy",
    "PolicyContent",
    "PolicyType",
    "PolicyDispatcher",
    "PolicySource",
    "PolicyOutcome",
    "TablePolicyOutcome",
    "NamespacePolicyOutcome",
]

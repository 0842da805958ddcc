"""The benchmark of what TLS and ACL users cost the arbitrator (`bench.security_cost`), at a tiny size: both
sides admit every job, the secured one through a TLS-only Redis as the arbitrator's ACL user and NATS over
TLS, so `make bench` measures what deploy/ runs."""

from __future__ import annotations

import pytest

from bench.security_cost import COMPARED, compare
from podherd.harness.tls_redis import find_tls_redis_binary

pytestmark = pytest.mark.integration


@pytest.mark.skipif(find_tls_redis_binary() is None, reason="no redis-server built with TLS")
async def test_the_secured_side_admits_every_job_as_the_plain_side_does() -> None:
    row = await compare(pending=50, burst=40, rate=400.0, offered=20)
    assert row["pending"] == 50
    assert (row["burst_admitted_plain"], row["burst_admitted_tls_acl"]) == (40, 40)
    assert (row["offered_admitted_plain"], row["offered_admitted_tls_acl"]) == (20, 20)
    for key in COMPARED:
        assert row[f"{key}_plain"] is not None and row[f"{key}_tls_acl"] is not None, key
    assert row["decisions_ratio_tls_acl_to_plain"] > 0

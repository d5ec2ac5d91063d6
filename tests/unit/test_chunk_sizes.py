"""How many tasks a runner's claims take: sized by how long claims take."""

from __future__ import annotations

from swh_like_scheduler.runner.dispatch import CLAIM_CHUNK, CLAIM_TARGET, MIN_CHUNK, ChunkSizes


def test_slow_claims_shrink_in_proportion_and_quick_full_ones_grow_back() -> None:
    sizes = ChunkSizes()
    assert sizes.get("t") == CLAIM_CHUNK
    sizes.observe("t", CLAIM_CHUNK, 4 * CLAIM_TARGET)  # four times too long
    assert sizes.get("t") == CLAIM_CHUNK // 4
    sizes.observe("t", CLAIM_CHUNK // 4, CLAIM_TARGET / 10)  # full and quick: doubled
    assert sizes.get("t") == CLAIM_CHUNK // 2
    sizes.observe("t", 10, CLAIM_TARGET / 10)  # not full: the size stays
    assert sizes.get("t") == CLAIM_CHUNK // 2
    sizes.observe("t", CLAIM_CHUNK // 2, CLAIM_TARGET * 0.9)  # full, in time: doubled
    assert sizes.get("t") == CLAIM_CHUNK
    sizes.observe("t", CLAIM_CHUNK, CLAIM_TARGET / 10)  # never past CLAIM_CHUNK
    assert sizes.get("t") == CLAIM_CHUNK
    sizes.observe("t", CLAIM_CHUNK, 1000.0)  # never under MIN_CHUNK
    assert sizes.get("t") == MIN_CHUNK
    sizes.observe("t", MIN_CHUNK // 2, 1000.0)  # a small slow claim says nothing
    assert sizes.get("t") == MIN_CHUNK
    assert sizes.get("other") == CLAIM_CHUNK  # per type
    assert sizes.shrink("other") == CLAIM_CHUNK // 2

"""The reference's wire format (:mod:`swh_like_scheduler.api.swh_codec`):
each extended type both ways, a body the reference's client wrote, and the
bodies it would never write refused naming the body."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from uuid import UUID

import msgpack
import pytest

from swh_like_scheduler.api import swh_codec
from swh_like_scheduler.api.swh_codec import Enumerated, Model, Paged, RemoteError
from swh_like_scheduler.domain.exceptions import InvalidInput

#: what swh-core 5.0.1's msgpack_dumps wrote (swh-scheduler 3.6.0's encoders)
#: for {"lister": Lister(name="gitlab", instance_name="inria", id=UUID(...),
#: updated=2026-01-31T14:00:00.123456Z, current_state={"page": 2**70}),
#: "stats": OriginVisitStats(url="https://x.org/a", visit_type="git",
#: last_visit_status=failed, last_snapshot=b"\x01" * 20),
#: "cooldown": timedelta(days=7, seconds=3, microseconds=5), "neg": -2**65}
REFERENCE_BODY = bytes.fromhex(
    "84a66c697374657282c40773776874797065af7363686564756c65725f6d6f64656cc401648aa46e616d"
    "65a66769746c6162ad696e7374616e63655f6e616d65a5696e726961a2696482c40773776874797065a4"
    "75756964c40164d92436663338323436382d623538662d343738372d383733302d633733373764343236"
    "373063ad63757272656e745f737461746581a470616765c70901400000000000000000a7637265617465"
    "64c0a775706461746564d7ff1d6f2800697e0ae0b86c6173745f6c697374696e675f66696e6973686564"
    "5f6174c0b966697273745f7669736974735f71756575655f707265666978c0b966697273745f76697369"
    "74735f7363686564756c65645f6174c0a85f5f747970655f5fa64c6973746572a5737461747382c40773"
    "776874797065af7363686564756c65725f6d6f64656cc401648ba375726caf68747470733a2f2f782e6f"
    "72672f61aa76697369745f74797065a3676974af6c6173745f7375636365737366756cc0aa6c6173745f"
    "7669736974c0b16c6173745f76697369745f73746174757382c40773776874797065b16c6173745f7669"
    "7369745f737461747573c40164a66661696c6564ae6c6173745f7363686564756c6564c0ad6c6173745f"
    "736e617073686f74c4140101010101010101010101010101010101010101b96e6578745f76697369745f"
    "71756575655f706f736974696f6ec0b46e6578745f706f736974696f6e5f6f666673657404b173756363"
    "6573736976655f76697369747301a85f5f747970655f5fb04f726967696e56697369745374617473a863"
    "6f6f6c646f776e82c40773776874797065a974696d6564656c7461c4016483a46461797307a77365636f"
    "6e647303ac6d6963726f7365636f6e647305a36e6567c70902020000000000000000"
)


def test_a_body_the_reference_client_wrote_is_read() -> None:
    body = swh_codec.loads(REFERENCE_BODY)
    lister, stats = body["lister"], body["stats"]
    assert isinstance(lister, Model) and lister.type == "Lister"
    assert lister.fields["id"] == UUID("6f382468-b58f-4787-8730-c7377d42670c")
    assert lister.fields["updated"] == datetime(2026, 1, 31, 14, 0, 0, 123456, tzinfo=UTC)
    assert lister.fields["current_state"] == {"page": 2**70}
    assert lister.fields["instance_name"] == "inria" and lister.fields["created"] is None
    assert stats.type == "OriginVisitStats"
    assert stats.fields["last_visit_status"] == Enumerated("last_visit_status", "failed")
    assert stats.fields["last_snapshot"] == b"\x01" * 20
    assert body["cooldown"] == timedelta(days=7, seconds=3, microseconds=5)
    assert body["neg"] == -(2**65)


@pytest.mark.parametrize(
    "value",
    [
        datetime(2026, 1, 31, 14, 0, 0, 123456, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
        timedelta(days=-3, seconds=5, microseconds=7),
        timedelta(0),
        UUID("6f382468-b58f-4787-8730-c7377d42670c"),
        b"\x00\xff" * 10,
        2**64,
        2**200,
        -(2**63) - 1,
        -(2**300),
        2**63 - 1,
        Enumerated("last_visit_status", "not_found"),
        Model("TaskArguments", {"args": [1, "a"], "kwargs": {"k": [None, True]}}),
        Model("Task", {"arguments": Model("TaskArguments", {"args": [], "kwargs": {}})}),
        Paged([Model("ListedOrigin", {"url": "https://x.org/a"})], ["https://x.org/a", "t"], 3),
    ],
    ids=repr,
)
def test_each_extended_value_comes_back_as_itself(value: object) -> None:
    assert swh_codec.loads(swh_codec.dumps({"v": value})) == {"v": value}


def test_a_date_in_another_zone_comes_back_as_the_same_instant_in_utc() -> None:
    paris = datetime(2026, 6, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    back = swh_codec.loads(swh_codec.dumps(paris))
    assert back == paris and back.utcoffset() == timedelta(0)


def test_the_forms_match_the_reference_s() -> None:
    """The tags and their data as swh-core writes them (bin keys, text tags)."""
    raw = msgpack.unpackb(
        swh_codec.dumps(
            {"u": UUID(int=1), "d": timedelta(days=1), "m": Model("Lister", {"name": "a"})}
        ),
        raw=False,
    )
    assert raw["u"] == {b"swhtype": "uuid", b"d": "00000000-0000-0000-0000-000000000001"}
    assert raw["d"] == {
        b"swhtype": "timedelta",
        b"d": {"days": 1, "seconds": 0, "microseconds": 0},
    }
    assert raw["m"] == {b"swhtype": "scheduler_model", b"d": {"name": "a", "__type__": "Lister"}}
    error = msgpack.unpackb(swh_codec.dumps(RemoteError("StaleData", "read it again")))
    assert error == {
        "type": "StaleData",
        "module": "swh.scheduler.exc",
        "args": ["read it again"],
        "message": "read it again",
    }


def test_the_older_iso_date_form_is_read() -> None:
    older = msgpack.packb({b"swhtype": "datetime", b"d": "2026-01-31T14:00:00+00:00"})
    assert swh_codec.loads(older) == datetime(2026, 1, 31, 14, tzinfo=UTC)


def _refused(data: bytes) -> str:
    with pytest.raises(InvalidInput) as refused:
        swh_codec.loads(data)
    assert refused.value.field == "body"
    return refused.value.message


def test_what_the_reference_never_writes_is_refused_naming_the_body() -> None:
    assert "not the reference's msgpack" in _refused(b"\xc1")
    assert "not the reference's msgpack" in _refused(b"{}")  # JSON is not msgpack
    assert "extension 9" in _refused(msgpack.packb(msgpack.ExtType(9, b"x")))
    assert "than 64" in _refused(msgpack.packb(msgpack.ExtType(1, b"\x01" * 65)))
    assert "swhtype 'pickle'" in _refused(msgpack.packb({b"swhtype": "pickle", b"d": "x"}))
    assert "__type__" in _refused(msgpack.packb({b"swhtype": "scheduler_model", b"d": {}}))
    assert "timedelta" in _refused(msgpack.packb({b"swhtype": "timedelta", b"d": 3}))
    assert "no hours" in _refused(msgpack.packb({b"swhtype": "timedelta", b"d": {"hours": 3}}))
    assert "ISO 8601" in _refused(msgpack.packb({b"swhtype": "datetime", b"d": 3}))


def test_a_date_past_any_calendar_is_refused_not_raised() -> None:
    far = msgpack.packb(msgpack.Timestamp(2**62, 0))
    assert "not the reference's msgpack" in _refused(far)


def test_hostile_nesting_is_refused() -> None:
    assert "more than 128 levels" in _refused(b"\x91" * 200 + b"\xc0")
    assert "not the reference's msgpack" in _refused(b"\x91" * 5000 + b"\xc0")


def test_a_naive_date_cannot_be_written() -> None:
    with pytest.raises((ValueError, TypeError)):
        swh_codec.dumps(datetime(2026, 1, 1))

"""Setting ids: what parses, what it means, and the words of every refusal (pinned by hand)."""
import pytest

from driple.errors import DripleError
from driple.settings import Setting, parse_setting

CANNOT_READ = "cannot read setting"


@pytest.mark.parametrize("text, fields, link", [
    ("cpu-ddp-w2-lo", dict(device="cpu", strategy="ddp", workers=2, servers=0, network="lo",
                           synchronous=True), None),
    ("cpu-ps-p1w2-1g", dict(device="cpu", strategy="ps", workers=2, servers=1, network="1g",
                            synchronous=True), 1e9),
    ("cpu-ps-p1w2-1g-async", dict(device="cpu", strategy="ps", workers=2, servers=1, network="1g",
                                  synchronous=False), 1e9),
    ("gpu-ddp-w4-10g", dict(device="gpu", strategy="ddp", workers=4, servers=0, network="10g",
                            synchronous=True), 1e10),
    (" cpu-ps-p2w3-100m", dict(device="cpu", strategy="ps", workers=3, servers=2, network="100m",
                               synchronous=True), 1e8),
])
def test_ids_parse_into_their_fields_and_back(text, fields, link):
    s = parse_setting(text)
    assert s.to_dict() == {**fields, "id": text.strip()}
    assert s.link_bps == link and s.emulated == (link is not None)
    assert parse_setting(s.id) == s and parse_setting(s) is s and str(s) == s.id


def test_ids_are_read_case_insensitively():
    assert parse_setting("CPU-DDP-W2-LO ").id == "cpu-ddp-w2-lo"


@pytest.mark.parametrize("text, message", [
    ("cpu-ddp-p1w2-lo", "a DDP setting has no parameter servers; drop the 'p<N>' part"),
    ("cpu-ps-w2-lo", "a parameter-server setting needs at least one server (p1, p2, ...)"),
    ("cpu-ps-p0w2-lo", "a parameter-server setting needs at least one server"),
    ("cpu-ddp-w2-lo-async", "DDP is always synchronous; '-async' applies to 'ps' settings only"),
    ("tpu-ddp-w2-lo", "unknown device 'tpu'; use one of cpu, gpu"),
    ("cpu-ddp-w0-lo", "a setting needs at least one worker"),
    ("cpu-zero-w2-lo", CANNOT_READ),
    ("cpu-ddp-w2-5x", CANNOT_READ),
    ("cpu-ddp-w2x-lo", CANNOT_READ),
    ("cpu-ddp-w2", CANNOT_READ),
])
def test_bad_ids_say_what_is_wrong(text, message):
    with pytest.raises(DripleError) as err:
        parse_setting(text)
    assert message in str(err.value)
    if message == CANNOT_READ:
        assert "'cpu-ddp-w2-lo' (device-strategy-workers-network)" in str(err.value)


@pytest.mark.parametrize("fields, message", [
    (dict(strategy="x"), "unknown strategy 'x'; use 'ddp' (all-reduce), 'fsdp' (sharded data parallel) or 'ps' (parameter server)"),
    (dict(network="fast"), "unknown network 'fast'; use 'lo' or a link rate such as 100m, 1g, 10g"),
    (dict(workers=0), "a setting needs at least one worker"),
])
def test_bad_descriptors_say_what_is_wrong(fields, message):
    with pytest.raises(DripleError) as err:
        Setting(**fields)
    assert str(err.value) == message

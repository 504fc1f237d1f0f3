"""The DDP strategy's registration: its id, graph key, worker and rules."""
import pytest

from driple.errors import DripleError
from driple.settings import Setting, parse_setting
from driple.strategies import get_strategy


def test_registration():
    ddp = get_strategy("ddp")
    s = parse_setting("gpu-ddp-w4-10g")
    assert ddp.id_part(s) == "w4" and ddp.graph_setting(s) == "ddp-w4"
    assert ddp.worker == "driple.collect.workers.ddp" and not ddp.servers and not ddp.asynchronous
    with pytest.raises(DripleError, match="no parameter servers"):
        Setting(strategy="ddp", servers=1)

"""Per-op features: the op-frequency vocabulary, its unseen bucket and its digest."""
import json

import pytest

from driple.errors import DripleError
from driple.graph.features import OpVocabulary


def test_vocabulary_unseen_bucket_and_digest(tmp_path):
    vocab = OpVocabulary({"add_": 3, "mm": 1})
    assert vocab.code("add_") == 0.75 and vocab.code("never_seen") == 0.5 / 4
    path = tmp_path / "v.json"
    path.write_text(json.dumps(vocab.to_json()))
    assert OpVocabulary.load(path).digest == vocab.digest
    path.write_text("{not json")
    with pytest.raises(DripleError, match="corrupt"):
        OpVocabulary.load(path)

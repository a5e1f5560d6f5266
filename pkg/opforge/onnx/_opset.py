"""Old opsets: a model whose nodes use schema versions the map lacks is
converted with onnx.version_converter to the first newer opset where every
node is mapped (Upsample becomes Resize, Dropout's is_test goes, ...), before anything else is checked.

Converters are written against the schemas models use today; the versions
from opset 7 up that differ only in types or in attributes later dropped are
reached through the converter instead of being mapped one by one. A model
the converter cannot lift keeps its own opset, and the unmapped versions are
reported as before.
"""

from opforge.onnx import _node

TARGETS = (11, 13, 17, 18, 21)


def _unmapped_versions(model, opset):
    """The (op_type, schema version) pairs of default-domain nodes the map lacks (Upsample, whose
    newer form is Resize) or has but not at that version."""
    bad = set()
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        conv = _node.CONVERTERS.get(node.op_type)
        version = _node.schema_version(node.op_type, opset)
        if conv is None or version not in conv.versions:
            bad.add((node.op_type, version))
    return bad


def upgrade(model, opset):
    """(model, opset), converted to a newer opset when that maps nodes the original opset does not."""
    if not _unmapped_versions(model, opset):
        return model, opset
    from onnx import version_converter
    for target in TARGETS:
        if target <= opset:
            continue
        try:
            converted = version_converter.convert_version(model, target)
        except Exception:  # noqa: BLE001 -- the converter lacks an adapter: try the next, else keep the model
            continue
        if not _unmapped_versions(converted, target):
            return converted, target
    return model, opset

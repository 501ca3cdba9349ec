"""Per-variant calling-convention instructions (paper Table 11), for every variant.

The instruction mitigation appends one sentence per operator step to the system prompt.
Layers carry their own wording (the paper's Table 11 sentences for fully merged, class
dispatch, fully split, interval split, nested args and namespaced names; the operators'
own for the protocols, opaque names and the rest). Steps whose operator has none (strip
descriptions, reorder arguments, a whole-catalog merge that keeps native names, or a
user-defined operator) get a generated sentence, so composed and user-defined variants
are covered too. The native schema needs no instruction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..operators.base import Layer
    from .codec import Codec

GENERATED: dict[str, str] = {
    "strip": ("Tools and their arguments come without descriptions. Choose each tool and argument by its name "
              "and by the types and values its schema allows."),
    "reorder": ("Arguments are listed in no particular order. Pass each argument under its name, as the tool's "
                "schema defines it; their order does not matter."),
    "merge": ("Tools of other domains may be listed too. Call only tools of the domain you act on, by their exact "
              "names and arguments."),
}


def layer_instruction(layer: Layer) -> str:
    """The layer's own instruction, else the generated one for its operator."""
    if layer.instruction:
        return layer.instruction
    return GENERATED.get(layer.op) or (
        f"The tools follow a rewritten interface ({layer.op}). Call each tool exactly by the name and argument "
        "structure its schema defines.")


def variant_instructions(codec: Codec) -> list[str]:
    """One sentence per operator step (repeated sentences once), in step order."""
    return list(dict.fromkeys(layer_instruction(layer) for layer in codec.layers))


__all__ = ["GENERATED", "layer_instruction", "variant_instructions"]

"""tether.tokens: exact token bytes, the flat token trie, bitmasks and the trie walk.

Code map, in reading order: ``vocabulary.py`` (token id → bytes; from GGUF, llama.cpp,
Hugging Face, tiktoken), ``_gguf.py`` (GGUF metadata reader), ``trie.py`` (flat preorder
TokenTrie, SortedTokens), ``trie_cache.py`` (tries on disk, keyed by fingerprint),
``bitmask.py`` (uint32 masks, apply to numpy/torch logits), ``walk.py``
(``fill_mask``: walk the trie under a DFA table) over ``_kernels.py`` (the numba kernels:
the walk, and the trie build's passes). Importing this package does not import numba;
the first trie built or ``fill_mask`` does.
"""

from tether.tokens.bitmask import (
    allocate_mask,
    apply_mask,
    check_mask,
    count_bits,
    ids_to_mask,
    mask_to_ids,
    set_bit,
    test_bit,
)
from tether.tokens.trie import TokenTrie
from tether.tokens.vocabulary import TokenId, Vocabulary
from tether.tokens.walk import DEAD, UNKNOWN, fill_mask

__all__ = [
    "DEAD",
    "UNKNOWN",
    "TokenId",
    "TokenTrie",
    "Vocabulary",
    "allocate_mask",
    "apply_mask",
    "check_mask",
    "count_bits",
    "fill_mask",
    "ids_to_mask",
    "mask_to_ids",
    "set_bit",
    "test_bit",
]

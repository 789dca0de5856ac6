"""The `tiny` model: a small Llama and a word-level tokenizer over one environment's own vocabulary.

Built in this process with no hub access, so it is the CPU path and the CI path. The tokenizer is the crux:
a word (letters, `_`, `.` and `-`) is one token, so a service name in a reply is the same token as the service
name in the prompt (copying it is a matter of attention); every digit, every other character and every run of
whitespace is a token of its own, and decoding concatenates. Decoding is therefore exact: `08:00` comes back as
`08:00`, `'open'` as `'open'`, and `JE-50576` as `JE-` and five digits. Ids, amounts and times are drawn afresh
for every seed, so as whole words the ones of a held-out seed would be outside the vocabulary (`<unk>`) and no
model could write them; in digits every one is writable, by copying them from the observation.
"""

from __future__ import annotations

import json
import string
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<|end|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS = (PAD, UNK, BOS, EOS, *ROLE_TOKENS)
WHITESPACE = r"\s+"
# Any character outside words and whitespace is a token of its own ("orders-db:" -> "orders-db", ":"; "08" -> "0",
# "8").
SINGLE = r"[^A-Za-z_.\-\s]"
# Tokens any action may need whatever the environment: digits, ASCII punctuation, a space.
ALWAYS = (*string.digits, *string.punctuation, " ")
# What the model reads (system and user turns) has its spaces marked, and the pre-tokenizer drops the marks: an
# observation is its words, numbers and line breaks, half as many tokens as with its spaces, and an action (the
# assistant's turn, and every completion tokenized on its own) keeps every space, so it decodes exactly.
UNSPACED = "\x1f"
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>"
    "{% if m['role'] == 'assistant' %}{{ m['content'] }}{% else %}{{ m['content'] | replace(' ', '" + UNSPACED + "') }}"
    "{% endif %}<|end|>{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


class TinySize(BaseModel):
    """Shape of the tiny Llama (defaults: ~70k parameters plus the embedding; 2 layers of 64 were as good as 3 of
    96 in our CPU runs and three times faster per step)."""

    hidden_size: int = 64
    intermediate_size: int = 172
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 4096


def word_pre_tokenizer():
    from tokenizers import Regex, pre_tokenizers

    return pre_tokenizers.Sequence([pre_tokenizers.Split(UNSPACED, "removed"),
                                    pre_tokenizers.Split(Regex(WHITESPACE), "isolated"),
                                    pre_tokenizers.Split(Regex(SINGLE), "isolated")])


def words(text: str) -> list[str]:
    """The tokens the tiny tokenizer cuts `text` into (before the vocabulary lookup)."""
    return [piece for piece, _ in word_pre_tokenizer().pre_tokenize_str(text)]


def schema_words(schema: dict[str, Any]) -> list[str]:
    """Every word an action can need: property names, enum values, JSON literals (digits and punctuation are
    always in the vocabulary)."""
    found: list[str] = ["true", "false", "null"]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    found.extend(w for name in value for w in words(name))
                if key in ("enum", "const"):
                    for v in value if isinstance(value, list) else [value]:
                        found.extend(words(json.dumps(v)))
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    return found


def build_vocabulary(required: Iterable[str], counted: Iterable[str], min_count: int = 2,
                     max_size: int = 8192) -> list[str]:
    """Special tokens and the tokens every action may need, then every word of `required` texts (system prompt,
    actions), then the words of `counted` texts (observations) seen at least `min_count` times, most frequent
    first; everything else is <unk>."""
    vocab: dict[str, None] = dict.fromkeys((*SPECIAL_TOKENS, *ALWAYS))
    for text in required:
        vocab.update(dict.fromkeys(words(text)))
    counts = Counter(w for text in counted for w in words(text.replace(" ", UNSPACED)))  # as the model reads them
    for word, n in counts.most_common():
        if len(vocab) >= max_size or n < min_count:
            break
        vocab.setdefault(word)
    return list(vocab)


def build_tokenizer(vocab: list[str], slots: bool = False):
    """A `PreTrainedTokenizerFast` (word level, exact decoding, left padding, a chat template) over `vocab`; with
    `slots`, each value slot token (`training.slots`) one token too, kept when decoding."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    index = {word: i for i, word in enumerate(vocab)}
    core = Tokenizer(models.WordLevel(index, unk_token=UNK))
    core.pre_tokenizer = word_pre_tokenizer()
    core.decoder = decoders.Fuse()  # whitespace is a token: the text is the tokens side by side
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, unk_token=UNK, bos_token=BOS, eos_token=EOS,
        additional_special_tokens=list(ROLE_TOKENS), clean_up_tokenization_spaces=False, padding_side="left",
        model_max_length=TinySize().max_position_embeddings,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    if slots:
        from openadapt.training.slots import SLOT_TOKENS

        tokenizer.add_tokens(list(SLOT_TOKENS))
    return tokenizer


def build_model(tokenizer, size: TinySize | None = None, seed: int = 0):
    """A randomly initialised Llama sized for a 2-core CPU; tied embeddings, so a prompt word and the same word
    in a reply share one vector."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    size = size or TinySize()
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=size.hidden_size, intermediate_size=size.intermediate_size,
        num_hidden_layers=size.num_hidden_layers, num_attention_heads=size.num_attention_heads,
        num_key_value_heads=size.num_key_value_heads, max_position_embeddings=size.max_position_embeddings,
        tie_word_embeddings=True, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, use_cache=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model

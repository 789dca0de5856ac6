"""The `tiny` model: a small Llama and a word-level tokenizer over one environment's own vocabulary.

Built in this process with no hub access, so it is the CPU path and the CI path. The tokenizer is the crux:
every word and every punctuation character of the environment's prompts and of its action JSON is a token,
and decoding joins tokens with spaces but drops the spaces next to a double quote, so a generated token
sequence decodes to valid JSON (`{"tool":"inspect_logs","service":"orders-db"}`) and a service name in a
reply is the same token as the service name in the prompt (copying it is a matter of attention).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<bos>", "<|end|>"
ROLE_TOKENS = ("<|system|>", "<|user|>", "<|assistant|>")
SPECIAL_TOKENS = (PAD, UNK, BOS, EOS, *ROLE_TOKENS)
# Any character outside words is a token of its own ("orders-db:" -> "orders-db", ":").
PUNCTUATION = r"[^A-Za-z0-9_.\-]"
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|> {% endif %}"
)
NUMBER_GRID = tuple(f"{i / 10:.1f}" for i in range(11))  # how the tiny model writes a float: one decimal


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

    return pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                    pre_tokenizers.Split(Regex(PUNCTUATION), "isolated")])


def words(text: str) -> list[str]:
    """The tokens the tiny tokenizer cuts `text` into (before the vocabulary lookup)."""
    return [piece for piece, _ in word_pre_tokenizer().pre_tokenize_str(text)]


def schema_words(schema: dict[str, Any]) -> list[str]:
    """Every token an action can need: property names, enum values, JSON punctuation and literals, numbers."""
    found: list[str] = ['{', '}', '[', ']', ':', ',', '"', "true", "false", "null", *NUMBER_GRID]
    found += [str(i) for i in range(11)]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    found.extend(w for name in value for w in words(name))
                if key in ("enum", "const"):
                    for v in value if isinstance(value, list) else [value]:
                        found.extend(words(json.dumps(v)))
                if key in ("minimum", "maximum") and isinstance(value, int) and abs(value) <= 100:
                    found.append(str(value))
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    return found


def build_vocabulary(required: Iterable[str], counted: Iterable[str], min_count: int = 2,
                     max_size: int = 8192) -> list[str]:
    """Special tokens, then every word of `required` texts (system prompt, actions), then the words of `counted`
    texts (observations) seen at least `min_count` times, most frequent first; everything else is <unk>."""
    vocab: dict[str, None] = dict.fromkeys(SPECIAL_TOKENS)
    for text in required:
        vocab.update(dict.fromkeys(words(text)))
    counts = Counter(w for text in counted for w in words(text))
    for word, n in counts.most_common():
        if len(vocab) >= max_size or n < min_count:
            break
        vocab.setdefault(word)
    return list(vocab)


def build_tokenizer(vocab: list[str]):
    """A `PreTrainedTokenizerFast` (word level, left padding, a chat template) over `vocab`."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    index = {word: i for i, word in enumerate(vocab)}
    core = Tokenizer(models.WordLevel(index, unk_token=UNK))
    core.pre_tokenizer = word_pre_tokenizer()
    # Join with spaces (WordPiece with a prefix that never occurs), fuse, then drop spaces beside quotes: JSON
    # strings come out tight, whitespace between JSON tokens stays (it is legal).
    core.decoder = decoders.Sequence([decoders.WordPiece(prefix="\x00\x00", cleanup=False), decoders.Fuse(),
                                      decoders.Replace(' "', '"'), decoders.Replace('" ', '"')])
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token=PAD, unk_token=UNK, bos_token=BOS, eos_token=EOS,
        additional_special_tokens=list(ROLE_TOKENS), clean_up_tokenization_spaces=False, padding_side="left",
        model_max_length=TinySize().max_position_embeddings,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
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

"""The tiny tokenizer: actions decode exactly, and ids never seen while the vocabulary was built are writable."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("tokenizers")

from openadapt.training import tiny  # noqa: E402
from openadapt.training.envinfo import action_text, written_form  # noqa: E402

ACTIONS = [
    {"tool": "book_case", "task": "case_11", "site": "or_1", "start": "08:00"},
    {"tool": "submit_answer", "sql": "SELECT COUNT(*) FROM patients WHERE district = 'Südpark'"},
    {"tool": "match", "ledger": "JE-50576", "statement": "BS-20742", "amount": -1884.25},
    {"command": "query", "sql": "SELECT c.name, t.report_date FROM report_tasks t WHERE t.task_id = 'T-1355'"},
]


@pytest.fixture(scope="module")
def tokenizer():
    # The vocabulary saw none of the ids, amounts or times above: only the words around them.
    seen = "book_case case_ or_ submit_answer SELECT COUNT FROM patients WHERE district Südpark match ledger " \
           "statement command query c.name t.report_date report_tasks t t.task_id tool task site start sql amount " \
           "JE- BS- T-"
    return tiny.build_tokenizer(tiny.build_vocabulary([seen], []))


@pytest.mark.parametrize("action", ACTIONS)
def test_an_action_decodes_to_exactly_its_text(tokenizer, action):
    text = action_text(action)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids) == text  # not '08 : 00', not "' T-1355 '"
    assert json.loads(tokenizer.decode(ids)) == action


def test_digits_are_tokens_of_their_own_so_a_new_id_is_copied_not_memorised(tokenizer):
    pieces = tokenizer.convert_ids_to_tokens(tokenizer("JE-50576", add_special_tokens=False)["input_ids"])
    assert pieces == ["JE-", "5", "0", "5", "7", "6"]


def test_the_model_reads_without_spaces_and_writes_with_them(tokenizer):
    ids = tokenizer.apply_chat_template([{"role": "user", "content": "SELECT COUNT FROM patients"},
                                         {"role": "assistant", "content": "SELECT COUNT"}],
                                        tokenize=True, return_dict=True)["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens == ["<bos>", "<|user|>", "SELECT", "COUNT", "FROM", "patients", "<|end|>",  # its words only
                      "<|assistant|>", "SELECT", " ", "COUNT", "<|end|>"]  # every character


def test_written_form_is_compact_json_with_characters_as_themselves():
    assert written_form('{"sql": "district = \'S\\u00fcdpark\'", "tool": "submit_answer"}') == \
        '{"sql":"district = \'Südpark\'","tool":"submit_answer"}'
    assert written_form("not json") == "not json"

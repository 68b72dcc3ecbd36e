"""The long-text splitter: sentence ends in every script the model speaks, no false ends, long sentences cut at
clauses then spaces, nothing lost; and `qwen3tts split`."""

from __future__ import annotations

import random
import re

import pytest

from engine.errors import TextError
from engine.text.splitter import LANGUAGE_CODES, segmentation_rules, sentences, split_text
from qwen3tts_cli.main import main


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


# (language, text, expected sentences): every script and language the model speaks, with the traps of each.
SENTENCE_CASES = [
    ("english",
     "Dr. Smith arrived at 3.50 p.m. on Monday. He said hi! Was it v2.4.1? The U.S. economy grew, e.g. in 2020. "
     "Wait... what happened? \"Stop!\" he shouted at the dog. He paused… Then he spoke; she listened.",
     ["Dr. Smith arrived at 3.50 p.m. on Monday.", "He said hi!", "Was it v2.4.1?",
      "The U.S. economy grew, e.g. in 2020.", "Wait... what happened?", "\"Stop!\" he shouted at the dog.",
      "He paused…", "Then he spoke;", "she listened."]),
    ("chinese",
     "价格是3.50元。他说：“你好！”然后走了。版本v2.4.1发布了……真的吗？今天天气很好；我们去公园吧！",
     ["价格是3.50元。", "他说：“你好！”然后走了。", "版本v2.4.1发布了……真的吗？", "今天天气很好；", "我们去公园吧！"]),
    ("japanese",
     "「本当？」と聞いた。今日は良い天気です！公園に行きましょうか？",
     ["「本当？」と聞いた。", "今日は良い天気です！", "公園に行きましょうか？"]),
    ("korean",
     "가격은 3.50달러입니다. 그는 \"안녕!\"이라고 말했다. 어떻게 생각하세요? 좋아요!",
     ["가격은 3.50달러입니다.", "그는 \"안녕!\"이라고 말했다.", "어떻게 생각하세요?", "좋아요!"]),
    ("german",
     "Dr. Müller kam am 3. Oktober um 10 Uhr. Das ist z.B. gut. Er sagte: „Hallo!“ und ging. Version 2.4.1 ist da.",
     ["Dr. Müller kam am 3. Oktober um 10 Uhr.", "Das ist z.B. gut.", "Er sagte: „Hallo!“ und ging.",
      "Version 2.4.1 ist da."]),
    ("french",
     "M. Dupont est arrivé à 10 h 30. Il a dit « Bonjour ! » puis il est parti. Ça coûte 3,50 euros, etc. et voilà.",
     ["M. Dupont est arrivé à 10 h 30.", "Il a dit « Bonjour ! » puis il est parti.",
      "Ça coûte 3,50 euros, etc. et voilà."]),
    ("russian",
     "Т. е. это хорошо. Он пришёл в 10 ч. утра. Цена 3.50 рубля! Как дела?",
     ["Т. е. это хорошо.", "Он пришёл в 10 ч. утра.", "Цена 3.50 рубля!", "Как дела?"]),
    ("portuguese",
     "O Sr. Silva chegou às 3.50. Ele disse olá! Tudo bem? Sim.",
     ["O Sr. Silva chegou às 3.50.", "Ele disse olá!", "Tudo bem?", "Sim."]),
    ("spanish",
     "El Sr. García llegó. ¡Hola! ¿Qué tal? Bien, gracias.",
     ["El Sr. García llegó.", "¡Hola!", "¿Qué tal?", "Bien, gracias."]),
    ("italian",
     "Il Sig. Rossi è arrivato alle 3.50. Ciao! Come stai? 1. Primo punto. 2. Secondo punto.",
     ["Il Sig. Rossi è arrivato alle 3.50.", "Ciao!", "Come stai?", "1. Primo punto.", "2. Secondo punto."]),
]


@pytest.mark.parametrize("language,text,expected", SENTENCE_CASES, ids=[c[0] for c in SENTENCE_CASES])
def test_sentences_in_every_language(language, text, expected):
    assert sentences(text, segmentation_rules(language)) == expected


def test_every_model_language_has_a_case():
    assert {c[0] for c in SENTENCE_CASES} == set(LANGUAGE_CODES)


@pytest.mark.parametrize("language,text,expected", SENTENCE_CASES, ids=[c[0] for c in SENTENCE_CASES])
def test_auto_language_gives_the_same_sentences(language, text, expected):
    # "auto" picks the rules by script; Latin text gets only the ends every Latin language agrees on
    assert sentences(text, segmentation_rules("auto", text)) == expected


def test_chunks_pack_whole_sentences_up_to_the_limit():
    text = " ".join(["One two three four five."] * 10)  # 25 characters each
    chunks = split_text(text, max_chars=60)
    assert [c.text for c in chunks] == ["One two three four five. One two three four five."] * 5


def test_blank_lines_always_end_a_chunk_and_single_breaks_are_spaces():
    text = "First line of a\nwrapped paragraph. Short.\n\n  \nSecond paragraph.\r\n\r\nThird."
    chunks = split_text(text, max_chars=500)
    assert [c.text for c in chunks] == ["First line of a wrapped paragraph. Short.", "Second paragraph.", "Third."]
    assert [c.paragraph for c in chunks] == [0, 1, 2]
    assert all(c.ends_paragraph for c in chunks)


def test_paragraph_flags_inside_a_paragraph():
    chunks = split_text("Aaaa aaaa aaaa. Bbbb bbbb bbbb. Cccc.\n\nDddd.", max_chars=20)
    assert [(c.text, c.paragraph, c.ends_paragraph) for c in chunks] == [
        ("Aaaa aaaa aaaa.", 0, False), ("Bbbb bbbb bbbb.", 0, False), ("Cccc.", 0, True), ("Dddd.", 1, True)]


def test_sentences_are_joined_with_a_space_except_next_to_cjk():
    text = "“Is it?” she asked. “Yes,” he said. 今日は良い天気です。“你好。”他说。 Fine."
    assert [c.text for c in split_text(text, max_chars=200)] == [
        "“Is it?” she asked. “Yes,” he said.今日は良い天気です。“你好。”他说。Fine."]


def test_long_sentence_is_cut_at_clause_punctuation_first():
    text = "When the rain stopped at last, the children ran outside, and the dogs followed them into the field."
    chunks = [c.text for c in split_text(text, max_chars=60)]
    assert chunks == ["When the rain stopped at last, the children ran outside,",
                      "and the dogs followed them into the field."]


def test_long_sentence_without_clauses_is_cut_at_spaces_never_inside_a_word():
    words = [f"word{i}" for i in range(40)]
    chunks = [c.text for c in split_text(" ".join(words) + ".", max_chars=30)]
    assert all(len(c) <= 30 for c in chunks)
    assert " ".join(chunks).split() == words[:-1] + [words[-1] + "."]


def test_long_chinese_sentence_is_cut_at_its_commas():
    text = "我们今天早上很早就出发了，" * 6 + "最后到了山顶。"
    chunks = [c.text for c in split_text(text, max_chars=30)]
    assert all(c.endswith("，") or c.endswith("。") for c in chunks)
    assert all(len(c) <= 30 for c in chunks)
    assert "".join(chunks) == text


def test_an_over_long_token_stays_whole():
    url = "https://example.com/" + "a" * 80 + "/index.html"
    chunks = [c.text for c in split_text(f"See {url} for the details.", max_chars=20)]
    assert url in chunks
    assert squash("".join(chunks)) == squash(f"See {url} for the details.")


# Fragments with every trap above, glued at random: the chunks must give the text back, in order.
FRAGMENTS = [c[1] for c in SENTENCE_CASES] + [
    "https://example.com/a.b?c=d", "\n\n", "\n", "  ", "Mr. and Mrs. Jones;", "v2.4.1", "…", "...", "「はい。」",
    "“引用。”", "a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q, r, s, t, u, v, w, x, y, z", "1.", "x" * 70,
    "这是一个没有标点的很长的中文句子我们一直写下去直到超过限制为止看看会怎么样",
]


@pytest.mark.parametrize("seed", range(40))
def test_nothing_lost_duplicated_or_reordered(seed):
    rng = random.Random(seed)
    text = "".join(rng.choice(FRAGMENTS) + rng.choice(["", " ", "\n", "\n\n"]) for _ in range(rng.randint(1, 30)))
    max_chars = rng.choice([10, 25, 60, 200])
    chunks = split_text(text, max_chars=max_chars)
    assert squash("".join(c.text for c in chunks)) == squash(text)
    for c in chunks:
        assert c.text and c.text == " ".join(c.text.split())
        # only a single token (no space to cut at, no ideographs) may exceed the limit
        assert len(c.text) <= max_chars or " " not in c.text


def test_blank_text_gives_no_chunks():
    assert split_text(" \n\n \t") == []


@pytest.mark.parametrize("bad", [0, 9, -5, 3.5, "200", True])
def test_bad_limit_is_refused(bad):
    with pytest.raises(TextError, match="at least 10"):
        split_text("Hello.", max_chars=bad)


def test_unknown_language_is_refused():
    with pytest.raises(TextError, match="does not know the language 'klingon'"):
        split_text("Hello.", language="klingon")


# ---------------------------------------------------------------------------------------------- qwen3tts split


def test_split_command_prints_only_the_chunks(tmp_path, capsys):
    path = tmp_path / "chapter.txt"
    path.write_bytes("\ufeffDr. Smith came at 3.50 p.m. He left!\n\n第二段。你好吗？\n".encode())
    assert main(["split", "--text-file", str(path), "--max-chars", "30"]) == 0
    out = capsys.readouterr().out
    assert out == "Dr. Smith came at 3.50 p.m.\nHe left!\n第二段。你好吗？\n"


def test_split_command_with_text_and_language(capsys):
    assert main(["split", "--text", "Hola. ¿Qué tal?", "--language", "spanish"]) == 0
    assert capsys.readouterr().out == "Hola. ¿Qué tal?\n"


@pytest.mark.parametrize("args,message", [
    (["--text", "a", "--text-file", "x.txt"], "either --text or --text-file"),
    ([], "either --text or --text-file"),
    (["--text", "  "], "empty"),
    (["--text-file", "/nonexistent/chapter.txt"], "does not exist"),
    (["--text", "Hi.", "--max-chars", "3"], "at least 10"),
    (["--text", "Hi.", "--language", "klingon"], "klingon"),
])
def test_split_command_refuses_bad_input_in_one_line(args, message, capsys):
    assert main(["split", *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert message in captured.err and captured.err.count("\n") == 1


def test_split_command_writes_utf8_whatever_the_locale():
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHONIOENCODING="ascii", LC_ALL="C")
    out = subprocess.run([sys.executable, "-m", "qwen3tts_cli", "split", "--text", "你好。Ça va? Привет!", "--max-chars", "10"],
                         capture_output=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr.decode(errors="replace")
    assert out.stdout.decode("utf-8").splitlines() == ["你好。Ça va?", "Привет!"]


def test_split_command_refuses_a_file_that_is_not_utf8(tmp_path, capsys):
    path = tmp_path / "latin1.txt"
    path.write_bytes("Caf\xe9 cr\xe8me.".encode("latin-1"))
    assert main(["split", "--text-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "save it as UTF-8" in err, err

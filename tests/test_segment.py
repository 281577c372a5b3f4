"""Long-text segmentation in English, Chinese, Japanese and Korean (abbreviations, decimals, quotes)."""

from __future__ import annotations

import pytest

from koe.text.segment import segment_text, split_sentences, stream_segments


@pytest.mark.parametrize(
    "text, sentences",
    [
        (
            "Dr. Smith paid $3.50 for tea. It was 2.5 times the usual price! Was it worth it?",
            ["Dr. Smith paid $3.50 for tea.", "It was 2.5 times the usual price!", "Was it worth it?"],
        ),
        (
            'He said "Stop." Then he left. J. K. Rowling wrote it, e.g. the first book.',
            ['He said "Stop."', "Then he left.", "J. K. Rowling wrote it, e.g. the first book."],
        ),
        ("Wait... what? The U.S. team won 1,000.5 points.", ["Wait...", "what?", "The U.S. team won 1,000.5 points."]),
        ("今天天气很好。我们去公园吧！你觉得怎么样？", ["今天天气很好。", "我们去公园吧！", "你觉得怎么样？"]),
        ("他说：“你好。”然后走了。圆周率是3.14。", ["他说：“你好。”", "然后走了。", "圆周率是3.14。"]),
        ("今日は晴れです。散歩に行きましょう！「いいね。」と彼は言った。", ["今日は晴れです。", "散歩に行きましょう！", "「いいね。」", "と彼は言った。"]),
        ("안녕하세요. 오늘 날씨가 좋네요! 산책 갈까요?", ["안녕하세요.", "오늘 날씨가 좋네요!", "산책 갈까요?"]),
        ("First paragraph without a stop\n\nSecond paragraph.", ["First paragraph without a stop", "Second paragraph."]),
    ],
    ids=["en-abbrev-decimal", "en-quotes-initials", "en-ellipsis", "zh", "zh-quotes-decimal", "ja", "ko", "paragraphs"],
)
def test_split_sentences(text, sentences):
    assert split_sentences(text) == sentences


def test_short_text_is_one_unchanged_segment():
    text = "  Keep   my spacing.  "
    assert segment_text(text, 100) == [text]


def test_segments_pack_sentences_up_to_the_limit():
    text = "One two three. Four five six. Seven eight nine. Ten."
    assert segment_text(text, 30) == ["One two three. Four five six.", "Seven eight nine. Ten."]
    assert all(len(s) <= 30 for s in segment_text(text * 5, 30))


def test_cjk_segments_join_without_spaces():
    text = "今天天气很好。我们去公园吧！你觉得怎么样？" * 3
    segments = segment_text(text, 25)
    assert all(len(s) <= 25 for s in segments)
    assert "".join(segments) == text


def test_overlong_sentence_is_cut_at_clauses_then_spaces():
    text = "This clause is long, and so is this one, and this one too, " * 4 + "end."
    segments = segment_text(text, 60)
    assert all(len(s) <= 60 for s in segments)
    assert " ".join(segments).replace("  ", " ").split() == text.split()


def test_a_word_longer_than_the_limit_is_cut_hard():
    assert segment_text("x" * 50 + " tail.", 20) == ["x" * 20, "x" * 20, "x" * 10 + " tail."]


def test_tiny_limits_are_refused():
    with pytest.raises(ValueError, match="at least 8"):
        segment_text("Hello.", 3)


STREAMED = (
    "Hello there. I met Dr. Smith yesterday, and he said hi! How are you? 你好。我们走吧！ "
    "This is a very long sentence that goes on and on, with clauses, and more clauses, until it is far too long for one segment."
)


@pytest.mark.parametrize("step", [1, 2, 5, 13, 10_000])
def test_streamed_text_gives_the_same_segments_however_it_is_cut(step):
    """`stream_segments`: the sentences of text that arrives in pieces, whatever the pieces' sizes,
    each sentence its own segment, a long one cut at its clauses."""
    pieces = [STREAMED[i : i + step] for i in range(0, len(STREAMED), step)]
    assert list(stream_segments(iter(pieces), 60)) == [
        "Hello there.",
        "I met Dr. Smith yesterday, and he said hi!",
        "How are you?",
        "你好。",
        "我们走吧！",
        "This is a very long sentence that goes on and on,",
        "with clauses, and more clauses,",
        "until it is far too long for one segment.",
    ]


def test_a_streamed_sentence_comes_out_once_the_next_word_is_whole():
    """A sentence is given out as soon as more text cannot change where it ends: once the next
    sentence's first word is complete (`Dr. ` might go on `Smith`), and not before."""
    read: list[str] = []

    def pieces():
        for piece in ["Hello there", ".", " I", " met Dr", ". ", "Smith. ", "Bye"]:
            read.append(piece)
            yield piece

    seen = []
    for segment in stream_segments(pieces(), 300):
        seen.append((segment, "".join(read)))
    assert seen == [
        ("Hello there.", "Hello there. I met Dr"),
        ("I met Dr. Smith.", "Hello there. I met Dr. Smith. Bye"),
        ("Bye", "Hello there. I met Dr. Smith. Bye"),
    ]
    with pytest.raises(TypeError, match="text pieces must be strings"):
        list(stream_segments(["Hi. ", b"there"]))

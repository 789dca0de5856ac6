"""The expert's brief is cleaned of what a small model adds around its facts."""

from openadapt.designer.brief import MAX_CHARS, clean_brief


def test_markdown_emphasis_and_blank_lines_go_and_each_point_stays_one_line():
    text = ("1. **Blocked intake**: debris or   sediment in the strainer;\n\n"
            "2. **Low well level**: the pump draws air and loses its prime.")
    assert clean_brief(text) == ("1. Blocked intake: debris or sediment in the strainer;\n"
                                 "2. Low well level: the pump draws air and loses its prime.")


def test_a_line_that_loops_on_one_phrase_ends_the_brief_there():
    text = ("1. Operating room 1: surgeon, scrub nurse, anaesthetist; elective cases of two hours each.\n"
            "2. Duration: " + "1 hour, 30 minutes, " * 12 + "\n3. Never reached.")
    assert clean_brief(text) == ("1. Operating room 1: surgeon, scrub nurse, anaesthetist; elective cases of two "
                                 "hours each.")


def test_a_refusal_or_a_question_back_is_no_brief():
    assert clean_brief("Sure, I can help you with that. Please provide me with the necessary information.") is None
    assert clean_brief("ok") is None


def test_a_repeated_line_ends_the_brief_and_a_long_one_is_cut_on_a_line_end():
    point = "1. Clogged strainer: check the suction side; flow drops while the motor runs hot."
    assert clean_brief(f"{point}\n{point}\n2. more") == point
    long = "\n".join(f"{i}. cause number {i} with its own check and what is seen there, in words" for i in range(60))
    cut = clean_brief(long)
    assert len(cut) <= MAX_CHARS and long.startswith(cut) and cut.endswith("in words")

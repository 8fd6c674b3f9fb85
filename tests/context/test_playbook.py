import pytest

from ratchet.context.playbook import Item, Playbook, PlaybookError


def _book() -> Playbook:
    book = Playbook()
    book.put(Item(book.new_id(), "strategies", "Guess the middle of the range.", 2, 1, ("task-7",), ("ADD@1",)))
    book.put(Item(book.new_id(), "mistakes", "Never repeat a guess.", 0, 0))
    return book


def test_render_parse_round_trip_keeps_every_field(tmp_path):
    book = _book()
    book.version = 3
    path = tmp_path / "playbook.md"
    book.save(path)
    text = path.read_text()
    assert "- [ctx-00001] (+2/-1) Guess the middle of the range. <!-- src=task-7 ops=ADD@1 -->" in text
    assert "## mistakes" in text
    again = Playbook.load(path)
    assert again.items == book.items
    assert (again.next_id, again.version) == (3, 3)
    assert again.render() == text


def test_missing_file_is_an_empty_playbook(tmp_path):
    assert len(Playbook.load(tmp_path / "none.md")) == 0


def test_next_id_never_goes_below_the_highest_item():
    # A hand-written file without the meta line must not hand out an id already in use.
    book = Playbook.parse("# Playbook\n## a\n- [ctx-00009] (+0/-0) x\n")
    assert book.new_id() == "ctx-00010"


@pytest.mark.parametrize("line, why", [
    ("- [ctx-1] (+0/-0) short id", "does not parse"),
    ("- [ctx-00001] +0/-0 no parentheses", "does not parse"),
    ("### deep heading", "headings"),
    ("free text", "unexpected line"),
])
def test_a_malformed_line_is_an_error_naming_it(line, why):
    with pytest.raises(PlaybookError, match=why) as info:
        Playbook.parse(f"# Playbook\n## a\n{line}\n", "pb.md")
    assert "pb.md:3" in str(info.value)


def test_duplicate_ids_are_refused():
    with pytest.raises(PlaybookError, match="twice"):
        Playbook.parse("## a\n- [ctx-00001] (+0/-0) x\n- [ctx-00001] (+0/-0) y\n")


def test_render_without_provenance_is_what_a_model_reads():
    text = _book().render(provenance=False)
    assert "<!--" not in text and "[ctx-00002]" in text

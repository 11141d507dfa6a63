"""A guest command's output is kept bounded: head and tail, the cut said."""


def test_guest_output_is_bounded_head_and_tail_kept():
    from harness.vm.guest import BoundedOutput

    out = BoundedOutput(head=10, tail=5)
    for _ in range(100):
        out += b"0123456789"
    text = out.text()
    assert text.startswith("0123456789\n[harness: ")
    assert "985 bytes of output dropped here" in text
    assert text.endswith("56789")
    small = BoundedOutput(head=10, tail=5)
    small += b"abc"
    assert small.text() == "abc"

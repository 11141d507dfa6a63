"""harness/detect/markers.py: the one place that writes and reads the test
markers (the dmesg window of a test, the test running at a console line)."""
from harness.detect import markers

DMESG = """\
[    5.0] harness: begin test_a.py::test_one[node1]
[    5.1] inside one
[    5.2] harness: end test_a.py::test_one[node1]
[    5.3] harness: begin test_a.py::test_one[node10]
[    5.4] inside one of node10
[    5.5] harness: end test_a.py::test_one[node10]
[    6.0] harness: begin test_a.py::test_two
[    6.1] still running
"""


def test_window_is_what_the_kernel_logged_between_the_test_markers():
    assert markers.window(DMESG, "test_a.py::test_one[node1]") == "[    5.1] inside one\n"


def test_a_test_id_that_is_a_prefix_of_another_is_not_confused_with_it():
    assert markers.window(DMESG, "test_a.py::test_one[node10]") == \
        "[    5.4] inside one of node10\n"
    assert markers.window(DMESG, "test_a.py::test_one[node") == ""


def test_a_running_test_window_reaches_the_end_of_the_log():
    assert markers.window(DMESG, "test_a.py::test_two") == "[    6.1] still running\n"


def test_the_last_run_of_a_test_counts():
    again = DMESG + "[    7.0] harness: begin test_a.py::test_one[node1]\n[    7.1] again\n"
    assert markers.window(again, "test_a.py::test_one[node1]") == "[    7.1] again\n"


def test_crlf_console_lines():
    text = DMESG.replace("\n", "\r\n")
    assert markers.window(text, "test_a.py::test_one[node1]") == "[    5.1] inside one\r\n"


def test_spans_name_the_running_test_per_line():
    spans = markers.TestSpans(DMESG)
    assert [spans.test_at(n) for n in range(1, 9)] == [
        "test_a.py::test_one[node1]", "test_a.py::test_one[node1]", "",
        "test_a.py::test_one[node10]", "test_a.py::test_one[node10]", "",
        "test_a.py::test_two", "test_a.py::test_two"]
    assert spans.test_at(0) == "" and spans.test_at(10_000) == "test_a.py::test_two"


def test_written_lines_are_quoted_for_the_shell():
    assert markers.kmsg_script(markers.begin("t.py::x[a b]")) == \
        "echo 'harness: begin t.py::x[a b]' > /dev/kmsg"

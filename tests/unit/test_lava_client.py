"""The LAVA client's readings of the lab's answers (harness/lava/client.py):
a MultiNode submission's "N.k" ids, the lab's own message out of an error,
a URL refused before anything is sent."""
from __future__ import annotations

import pytest

from harness.errors import PlanError
from harness.lava.client import Job, Lab, _job_ids, _message
from harness.web import WebError


@pytest.mark.parametrize("ids, expected", [
    ([7], [7]),
    (["5.0", "5.1"], [5, 6]),          # one job per role, consecutive in the lab
    (["12"], [12]),
])
def test_job_ids_one_per_role(ids, expected):
    assert _job_ids(ids) == expected


def test_no_job_id_is_an_error():
    with pytest.raises(ValueError):
        _job_ids([])


def test_the_lab_s_message_is_taken_from_its_answer():
    error = WebError('lava: POST http://lab/api/v0.2/jobs/ answered HTTP 400 (201 expected): '
                     '{"message": "Problem with submitted job data: required key not provided"}')
    assert _message(error) == "Problem with submitted job data: required key not provided"
    assert _message(WebError("lava: no JSON here")) == "lava: no JSON here"


def test_a_finished_job_is_complete_only_when_its_health_says_so():
    assert Job(1, "Finished", "Complete").complete
    assert not Job(1, "Finished", "Incomplete").complete
    assert Job(1, "Finished", "Canceled").finished
    assert not Job(1, "Running", "Unknown").finished


@pytest.mark.parametrize("url", ["ftp://lab/", "https://user:pw@lab/", "lab", "http://lab/"])
def test_a_bad_or_plain_url_is_refused_naming_the_key(url):
    with pytest.raises(PlanError) as info:
        Lab(url, "t0ken")
    assert "lava.url" in str(info.value) and "t0ken" not in str(info.value)


def test_the_lab_s_message_is_read_whole_from_the_answer_not_its_clipped_quote():
    long = "Problem with submitted job data: " + "x" * 500
    error = WebError("lava: POST ... answered HTTP 400 (201 expected): {\"message\": \"Prob [...]")
    error.body = ('{"message": "%s"}' % long).encode()
    assert _message(error) == long

"""A suite asked for without the fragments or guest packages its suite.yaml
needs stops the plan before anything is built (exit 2), naming what to add
(harness/suites/needs.py)."""
import pytest

from harness.errors import PlanError
from harness.suites import registry
from harness.suites.needs import check, missing

QUICKSTART = ("virt-guest", "rdma", "hmm-p2p", "ionic", "mlx5")
TRIXIE_RDMA = ("openssh-server", "rdma-core", "ibverbs-utils", "ibverbs-providers",
               "rdmacm-utils", "perftest", "python3-pyverbs", "kmod")


def test_every_suite_names_real_fragments():
    from harness import kconfig
    for spec in registry.suites().values():
        for name in spec.needs.fragments:
            kconfig.fragment_path(name)      # raises if there is no such fragment


def test_the_quickstart_plan_has_what_its_suites_need():
    for suite in ("modules", "verbs-smoke", "rxe-counters"):
        assert missing(suite, QUICKSTART, TRIXIE_RDMA) == ([], [])


def test_a_missing_fragment_is_named_with_the_fix():
    with pytest.raises(PlanError) as err:
        check(("verbs-smoke",), ("virt-guest",), TRIXIE_RDMA, "plan.yaml", "img.yaml")
    assert err.value.exit_code == 2
    assert "suite verbs-smoke needs the kconfig fragment(s) rdma" in str(err.value)
    assert "--set kconfig.fragments=[virt-guest,rdma]" in str(err.value)


def test_a_fragment_counts_when_other_fragments_request_all_its_symbols(tmp_path):
    from harness import kconfig
    same = tmp_path / "my-rdma.config"
    same.write_text("".join(f"CONFIG_{r.symbol}={r.want}\n"
                            for r in kconfig.parse_fragment(kconfig.fragment_path("rdma"))))
    assert missing("verbs-smoke", ("virt-guest", str(same)), TRIXIE_RDMA) == ([], [])
    fewer = tmp_path / "less.config"
    fewer.write_text("CONFIG_INFINIBAND=m\n")
    assert missing("verbs-smoke", ("virt-guest", str(fewer)), TRIXIE_RDMA)[0] == ["rdma"]


def test_a_missing_guest_package_is_named():
    with pytest.raises(PlanError, match="needs the guest package.s. ibverbs-utils, rdmacm-utils"):
        check(("verbs-smoke",), QUICKSTART, ("rdma-core", "ibverbs-providers"), "p.yaml",
              "img.yaml")


def test_the_needs_are_read_from_the_suites_suite_yaml(tmp_path, monkeypatch):
    folder = tmp_path / "my_suite"
    folder.mkdir()
    (folder / "test_my_suite.py").write_text("")
    (folder / "suite.yaml").write_text(
        "name: my-suite\ndescription: x\ntests: [test_my_suite.py]\n"
        "needs: {fragments: [rdma], packages: [rdma-core, perftest]}\n")
    monkeypatch.setattr(registry, "suites", lambda: registry.discover(tmp_path))
    assert missing("my-suite", ("virt-guest",), ("rdma-core",)) == (["rdma"], ["perftest"])
    assert missing("my-suite", ("virt-guest", "rdma"), ("rdma-core", "perftest")) == ([], [])
    with pytest.raises(PlanError, match="suite my-suite needs the guest package.s. perftest"):
        check(("my-suite",), ("rdma",), ("rdma-core",), "plan.yaml", "img.yaml")
    # a suite needing nothing: nothing is missing
    (folder / "suite.yaml").write_text("name: my-suite\ndescription: x\n"
                                       "tests: [test_my_suite.py]\n")
    assert missing("my-suite", (), ()) == ([], [])

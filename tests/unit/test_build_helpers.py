"""build.collect_warnings and build.first_errors on make output as it looks."""
import os

from harness.build.build import collect_warnings, first_errors

# a -j build: the same header warning arrives once per compilation unit that
# includes it; kernel-doc warnings have no column
WARNING_LOG = """\
make[1]: Entering directory '/cache/objdirs/0a1b2c3d4e5f6789'
  GEN     Makefile
  CC [M]  drivers/infiniband/hw/ionic/ionic_ibdev.o
In file included from drivers/infiniband/hw/ionic/ionic_ibdev.c:9:
drivers/infiniband/hw/ionic/ionic_fw.h:120:19: warning: 'ionic_v1_stat_names' defined but not used [-Wunused-const-variable=]
  120 | static const char *ionic_v1_stat_names[] = {
      |                   ^~~~~~~~~~~~~~~~~~~
  CC [M]  drivers/infiniband/hw/ionic/ionic_admin.o
In file included from drivers/infiniband/hw/ionic/ionic_admin.c:7:
drivers/infiniband/hw/ionic/ionic_fw.h:120:19: warning: 'ionic_v1_stat_names' defined but not used [-Wunused-const-variable=]
  120 | static const char *ionic_v1_stat_names[] = {
      |                   ^~~~~~~~~~~~~~~~~~~
  CC      mm/memremap.o
mm/memremap.c:158:6: warning: unused variable 'is_ram' [-Wunused-variable]
  158 |  int is_ram;
      |      ^~~~~~
drivers/infiniband/core/verbs.c:2101: warning: Function parameter or struct member 'udata' not described in 'ib_dealloc_xrcd_user'
  CC [M]  drivers/infiniband/hw/ionic/ionic_ibdev.o
In file included from drivers/infiniband/hw/ionic/ionic_ibdev.c:9:
drivers/infiniband/hw/ionic/ionic_fw.h:120:19: warning: 'ionic_v1_stat_names' defined but not used [-Wunused-const-variable=]
  LD [M]  drivers/infiniband/hw/ionic/ionic_rdma.o
ld: warning: arch/x86/boot/compressed/vmlinux has a LOAD segment with RWX permissions
  MODPOST Module.symvers
  Kernel: arch/x86/boot/bzImage is ready  (#1)
"""  # noqa: E501 (make output, verbatim)

ERROR_LOG = """\
  SYNC    include/config/auto.conf
  CC      init/main.o
  CC      kernel/fork.o
  CC      mm/memremap.o
  CC [M]  drivers/infiniband/core/device.o
  CC [M]  drivers/infiniband/hw/ionic/ionic_ibdev.o
mm/memremap.c:158:6: warning: unused variable 'is_ram' [-Wunused-variable]
  158 |  int is_ram;
      |      ^~~~~~
drivers/infiniband/hw/ionic/ionic_ibdev.c: In function 'ionic_create_ibdev':
drivers/infiniband/hw/ionic/ionic_ibdev.c:412:9: error: implicit declaration of function 'ib_set_device_ops_v2'; did you mean 'ib_set_device_ops'? [-Wimplicit-function-declaration]
  412 |         ib_set_device_ops_v2(&dev->ibdev, &ionic_dev_ops);
      |         ^~~~~~~~~~~~~~~~~~~~
      |         ib_set_device_ops
make[6]: *** [scripts/Makefile.build:229: drivers/infiniband/hw/ionic/ionic_ibdev.o] Error 1
make[5]: *** [scripts/Makefile.build:478: drivers/infiniband/hw/ionic] Error 2
make[4]: *** [scripts/Makefile.build:478: drivers/infiniband/hw] Error 2
  CC [M]  drivers/infiniband/core/verbs.o
make[3]: *** [scripts/Makefile.build:478: drivers/infiniband] Error 2
make[2]: *** [scripts/Makefile.build:478: drivers] Error 2
make[1]: *** [/src/linux/Makefile:2006: .] Error 2
make: *** [Makefile:248: __sub-make] Error 2
"""  # noqa: E501 (make output, verbatim)


def test_warnings_are_file_line_text_in_build_order():
    assert collect_warnings(WARNING_LOG) == (
        "drivers/infiniband/hw/ionic/ionic_fw.h:120:19: 'ionic_v1_stat_names' defined "
        "but not used [-Wunused-const-variable=]",
        "mm/memremap.c:158:6: unused variable 'is_ram' [-Wunused-variable]",
        "drivers/infiniband/core/verbs.c:2101: Function parameter or struct member "
        "'udata' not described in 'ib_dealloc_xrcd_user'",
    )


def test_a_header_warning_seen_three_times_is_listed_once():
    warnings = collect_warnings(WARNING_LOG)
    assert WARNING_LOG.count("ionic_fw.h:120:19: warning:") == 3
    assert sum("ionic_fw.h:120" in w for w in warnings) == 1


def test_the_same_place_with_a_different_message_is_kept():
    log = ("a.c:1:2: warning: unused variable 'x' [-Wunused-variable]\n"
           "a.c:1:2: warning: unused variable 'y' [-Wunused-variable]\n")
    assert len(collect_warnings(log)) == 2


def test_linker_notes_source_snippets_and_errors_are_not_warnings():
    log = ("ld: warning: arch/x86/boot/compressed/vmlinux has a LOAD segment with RWX\n"
           "  120 | static const char *x; /* warning: not a diagnostic */\n"
           "a.c:3:1: error: expected ';' before '}' token\n"
           "WARNING: modpost: missing MODULE_DESCRIPTION() in drivers/x.o\n")
    assert collect_warnings(log) == ()


def test_no_warnings_in_a_clean_log():
    assert collect_warnings("  CC      init/main.o\n  LD      vmlinux\n") == ()


def test_first_errors_starts_just_before_the_first_error():
    excerpt = first_errors(ERROR_LOG).splitlines()
    # two lines of context, then the compiler's error
    assert excerpt[0] == "      |      ^~~~~~"
    assert excerpt[1] == ("drivers/infiniband/hw/ionic/ionic_ibdev.c: "
                          "In function 'ionic_create_ibdev':")
    assert excerpt[2].startswith("drivers/infiniband/hw/ionic/ionic_ibdev.c:412:9: error: "
                                 "implicit declaration of function 'ib_set_device_ops_v2'")
    assert "make[6]: *** [scripts/Makefile.build:229: drivers/infiniband/hw/ionic/"\
           "ionic_ibdev.o] Error 1" in excerpt
    assert "  CC      init/main.o" not in excerpt


def test_first_errors_is_bounded_by_limit():
    excerpt = first_errors(ERROR_LOG, limit=4).splitlines()
    assert len(excerpt) == 2 + 4
    assert excerpt[-1].strip() == "|         ib_set_device_ops"


def test_first_errors_finds_make_and_linker_failures_without_a_compiler_error():
    log = "\n".join(f"  CC      file{i}.o" for i in range(30)) + "\n" + (
        "  LD      vmlinux.o\n"
        "ld: vmlinux.o: in function `ionic_p2p_setup':\n"
        "ionic_p2p.c:(.text+0x2e): undefined reference to `devm_memremap_pages'\n"
        "make[2]: *** [scripts/Makefile.vmlinux_o:62: vmlinux.o] Error 1\n")
    excerpt = first_errors(log)
    assert excerpt.splitlines()[0] == "  LD      vmlinux.o"
    assert "undefined reference to `devm_memremap_pages'" in excerpt
    assert "file29.o" not in excerpt


def test_first_errors_finds_modpost_errors():
    log = ("  MODPOST Module.symvers\n"
           "ERROR: modpost: \"ib_set_device_ops_v2\" [drivers/infiniband/hw/ionic/"
           "ionic_rdma.ko] undefined!\n"
           "make[2]: *** [scripts/Makefile.modpost:145: Module.symvers] Error 1\n")
    assert first_errors(log).splitlines()[0] == "  MODPOST Module.symvers"


def test_without_an_error_line_the_tail_is_shown():
    log = "\n".join(f"line {i}" for i in range(100))
    assert first_errors(log, limit=5).splitlines() == [f"line {i}" for i in range(95, 100)]


def test_first_errors_says_when_the_sandbox_stopped_the_build(monkeypatch):
    """Every caller (the build, a per-patch check, selftests, the devloop's
    module build) gets the sandbox's line from here, once."""
    monkeypatch.delenv("HARNESS_SANDBOX", raising=False)
    log = ("  CC [M]  drivers/infiniband/sw/rxe/rxe.o\n"
           "/bin/sh: 1: cannot create /home/dev/planted: Read-only file system\n"
           "make[4]: *** [scripts/Makefile.build:229: rxe.o] Error 2\n")
    excerpt = first_errors(log).splitlines()
    assert excerpt[-1].startswith("the sandbox stopped it: it wrote into a read-only path")
    assert sum("the sandbox stopped it" in line for line in excerpt) == 1
    assert "sandbox" not in first_errors(ERROR_LOG)
    monkeypatch.setenv("HARNESS_SANDBOX", "none")
    assert "sandbox" not in first_errors(log)


def test_with_debug_info_the_object_directory_is_mapped_out_of_the_ccache_hash(
        tmp_path, monkeypatch):
    """gcc -g makes ccache hash the compile directory: the prefix map takes
    it out, so another tree's object directory hits; without -g nothing is
    added (the compile commands, and ccache's keys, stay as they were)."""
    import shutil
    from pathlib import Path

    from harness.build.build import make_argv
    from harness.plan.plan import BuildSpec
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    objdir = Path(tmp_path) / "tree" / "harness-obj"
    objdir.mkdir(parents=True)
    (objdir / ".config").write_text("CONFIG_DEBUG_INFO_NONE=y\n# CONFIG_DEBUG_INFO is not set\n")
    assert not any(a.startswith("KCFLAGS=") for a in make_argv(objdir, BuildSpec()))
    (objdir / ".config").write_text("CONFIG_DEBUG_INFO=y\nCONFIG_DEBUG_INFO_DWARF5=y\n")
    assert f"KCFLAGS=-fdebug-prefix-map={objdir}=." in make_argv(objdir, BuildSpec())
    assert not any(a.startswith("KCFLAGS=")
                   for a in make_argv(objdir, BuildSpec(ccache=False)))


def test_each_trust_domain_compiles_through_its_own_ccache(tmp_path):
    """The tree as named shares the cache and writes the shared store; a
    fetched tree (nightly's mirrors) has a directory of its own; a series' code
    a layer in its object directory; the store read-only to both; and every
    build reads ccache's settings from the harness's file."""
    from harness.build import build, ccache
    from harness.cache import Cache
    from harness.source import SourceTree
    cache, objdir = Cache(tmp_path / "cache"), tmp_path / "objdir"
    own = SourceTree(tmp_path / "tree", "a" * 40, "7.0.0", "tree")
    fetched = SourceTree(tmp_path / "mirror-tree", "a" * 40, "7.0.0", "tree", shared_cache=False)
    series = SourceTree(tmp_path / "tree", "b" * 40, "7.0.0", "tree + 1", base="a" * 40)
    layers = [ccache.layer(t, objdir, cache) for t in (own, fetched, series)]
    store = ccache.store(cache)
    assert layers[0] == ccache.Layer(ccache.shared_dir(cache), store, True)
    assert layers[1].directory not in (layers[0].directory, store)
    assert layers[1].store == store and not layers[1].store_writable
    assert layers[2] == ccache.Layer(objdir / ccache.OWN, store, False)
    box = build.make_box(tmp_path / "tree", objdir, cache, layer=layers[2])
    assert ccache.shared_dir(cache) not in box.write and store not in box.write
    assert ccache.config(cache) in box.read and store in box.read
    trusted_box = build.make_box(tmp_path / "tree", objdir, cache, layer=layers[0])
    assert store in trusted_box.write and ccache.shared_dir(cache) in trusted_box.write
    env = build.make_env(cache, layers[2])
    assert env["CCACHE_DIR"] == str(objdir / ccache.OWN)
    assert env["CCACHE_CONFIGPATH"] == str(ccache.config(cache))
    assert env["CCACHE_SECONDARY_STORAGE"] == f"file:{store}|read-only"
    assert build.make_env(cache)["CCACHE_REMOTE_STORAGE"] == f"file:{store}"


def test_a_ccache_older_than_the_trust_domains_is_started_again_once(tmp_path, monkeypatch):
    """A series' build could write the shared ccache before the trust
    domains: its entries are not kept; later ones are."""
    from harness.build import ccache
    from harness.cache import Cache
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    cache = Cache(tmp_path / "cache")
    old = cache.root / "ccache" / "a" / "b"
    old.mkdir(parents=True)
    (old / "planted-result").write_text("x")
    path = ccache.shared_dir(cache)
    assert path == cache.root / "ccache" and not any(path.rglob("*"))
    (path / "kept").write_text("y")
    assert (ccache.shared_dir(cache) / "kept").exists()


def test_the_shared_store_is_trimmed_oldest_first(tmp_path):
    from harness.build import ccache
    for i in range(10):
        path = tmp_path / f"{i:02d}" / "result"
        path.parent.mkdir()
        path.write_bytes(b"x" * 1000)
        os.utime(path, (1000 + i, 1000 + i))
    assert ccache.trim(tmp_path, limit=20_000) == 0
    assert ccache.trim(tmp_path, limit=8_000) == 4000      # down to three quarters
    left = sorted(p.parent.name for p in tmp_path.rglob("result"))
    assert left == ["04", "05", "06", "07", "08", "09"]

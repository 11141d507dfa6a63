# The manual: Sphinx with MyST (the pages are Markdown), built by `tox -e docs`
# with warnings as errors, as HTML (docs/_build/html) and as the man page
# harness.1 (docs/_build/man). docs/harness.md is the man page's source.
project = "harness"
author = "the harness developers"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "ci"]
# `[text](page.md#a-heading)` links: anchors for headings down to ###
myst_heading_anchors = 3
myst_enable_extensions = ["deflist"]
html_theme = "alabaster"
man_pages = [("harness", "harness",
              "build, boot and test kernels and patch series for RDMA, HMM/P2P-DMA, ionic and mlx5",
              [author], 1)]

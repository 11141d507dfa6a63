"""Image stage: `vm-images/<name>.yaml` -> `GuestImage` (a read-only base disk with a
pinned SSH host key) and a small modules disk per build, made without root and without
mounting anything: mmdebstrap.py the root file system as a tarball, ext4.py the disk."""

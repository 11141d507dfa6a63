"""The plan's lab before a run: its client (lava.url, the token read from
lava.token_file) and whether it can take the plan's nodes at all — the
device type known, enough devices of it with the tags that the scheduler
may use. Asked before the build (pipeline/resolve.py): a lab that cannot
run the job is said in seconds, not after a 20-minute build."""
from __future__ import annotations

from ..errors import PlanError
from ..plan.lab import plain_http
from ..plan.plan import Plan
from .client import Lab, LabError, read_token


def lab_for(plan: Plan) -> Lab:
    """The plan's lab (lava.url), its token read from lava.token_file."""
    spec = plan.lava
    return Lab(spec.url, read_token(spec.token_file), insecure=plain_http(spec))


def check_lab(lab: Lab, device_type: str, tags: tuple[str, ...], nodes: int) -> None:
    """Before the build: the lab answers, knows the device type (exit 2
    naming lava.device_type) and has `nodes` devices that can take a job
    with the tags (exit 3 naming what it has)."""
    types = lab.device_types()
    if device_type not in types:
        raise PlanError(f"lava.device_type: the lab has no device type {device_type!r} "
                        f"(it has: {', '.join(types) or 'none'})")
    devices = lab.devices(device_type)
    usable = [d for d in devices if d.usable and set(tags) <= set(d.tags)]
    if len(usable) < nodes:
        seen = "; ".join(f"{d.hostname} {d.health}{' tags ' + ','.join(d.tags) if d.tags else ''}"
                         for d in devices) or "no device"
        raise LabError(f"lava: the plan's {nodes} node(s) need {nodes} {device_type} device(s)"
                       f"{' tagged ' + ','.join(tags) if tags else ''} the lab can schedule "
                       f"(health Good or Unknown); it has {len(usable)}: {seen}")

"""A cloud study: the [cloud] table (provider, region or zone, the SDK's own account name, lifetime,
budget) and its arms (kind, instance type, image), read and checked. Arms are matched by
construction: one image, one disk, one zone, the same size or (on Azure, where a confidential size is
a size of its own) its twin; an arm that differs from the baseline in more than its CC mode is refused
in one line naming the difference, the rule the local arms follow by sharing one [machine]."""

from __future__ import annotations

import difflib
import getpass
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccbench.machines.cloud import pricing
from ccbench.machines.study import CVM_KINDS, KINDS, NAME, ORDERS, StudyError
from ccbench.machines.studyparts import Where, integer, plan_of

PROVIDERS = ("aws", "gcp", "azure")
#: the key naming the account in the SDK's own terms (never a credential: the SDK's chain finds those)
ACCOUNT_KEY = {"aws": "profile", "gcp": "project", "azure": "subscription"}
CLOUD_KEYS = {
    "provider", "region", "zone", "profile", "project", "subscription", "max_lifetime", "budget_usd",
    "expected_hours", "disk_gib", "owner", "ssh_from",
}  # fmt: skip
TOP_KEYS = {"name", "description", "plan", "order", "rounds", "cloud", "arm"}
ARM_KEYS = {"name", "kind", "instance_type", "image", "baseline", "replicas"}
IMAGE_FORMS = {
    "aws": (re.compile(r"ami-[0-9a-f]{8,17}"), 'an AMI id such as "ami-0abc12345def67890"'),
    "gcp": (
        re.compile(r"projects/[a-z0-9-]+/global/images/(family/)?[a-z0-9-]+"),
        'an image path such as "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"',
    ),
    "azure": (
        re.compile(r"[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+:[A-Za-z0-9_.-]+"),
        'an image URN publisher:offer:sku:version such as "Canonical:0001-com-ubuntu-confidential-vm-jammy:22_04-lts-cvm:latest"',
    ),
}


@dataclass(frozen=True)
class Cloud:
    provider: str
    region: str
    zone: str
    #: the SDK's own name for the account (an AWS profile, a GCP project, an Azure subscription id)
    account: str
    max_lifetime_h: float
    budget_usd: float
    expected_hours: float
    disk_gib: int
    owner: str
    #: the addresses SSH to the instances may come from (a CIDR), or "" (then --ssh-from must say)
    ssh_from: str = ""


@dataclass(frozen=True)
class CloudArm:
    name: str
    kind: str
    size: pricing.Size
    image: str
    replicas: int = 1
    #: a cloud arm has no mechanism twins (the local studies' bounce, hugepages...): its kind is all
    twins: tuple[str, ...] = ()

    @property
    def confidential(self) -> bool:
        return self.kind in CVM_KINDS


@dataclass(frozen=True)
class CloudStudy:
    name: str
    plan: str
    order: str
    rounds: int
    cloud: Cloud
    arms: tuple[CloudArm, ...]
    baseline: str
    source: Path
    description: str = ""


def is_cloud_study(path: str | Path) -> bool:
    """Whether the file has a [cloud] table (an unreadable file is left to the local loader's errors)."""
    try:
        return isinstance(tomllib.loads(Path(path).read_text(encoding="utf-8")).get("cloud"), dict)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False


def _error(source: Path, key: str, what: str) -> StudyError:
    return StudyError(f"{source}: {key}: {what}")


def _unknown(table: dict[str, Any], allowed: set[str], source: Path, place: str) -> None:
    for key in sorted(table):
        if key not in allowed:
            close = difflib.get_close_matches(key, sorted(allowed), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(sorted(allowed))}"
            raise _error(source, key, f"unknown key in {place}; {hint}")


def hours(value: Any, source: Path, key: str) -> float:
    """4 (hours), "4h", "90m" -> hours."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        h = float(value)
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([hm])\s*", str(value))
        if not match:
            raise _error(source, key, f'{value!r}: write a duration such as "4h" or "90m", or a number of hours')
        h = float(match.group(1)) / (60 if match.group(2) == "m" else 1)
    if h <= 0 or h > 72:
        raise _error(source, key, f"{value!r} must be more than 0 and at most 72 hours")
    return h


def _positive(value: Any, source: Path, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise _error(source, key, f"{value!r} must be a number above 0")
    return float(value)


def cloud_of(raw: Any, source: Path) -> Cloud:
    if not isinstance(raw, dict):
        raise _error(source, "cloud", "must be a table: [cloud]")
    _unknown(raw, CLOUD_KEYS, source, "[cloud]")
    provider = raw.get("provider")
    if provider not in PROVIDERS:
        raise _error(source, "cloud.provider", f"{provider!r} is not a provider; use one of: {', '.join(PROVIDERS)}")
    for key in set(ACCOUNT_KEY.values()) - {ACCOUNT_KEY[provider]}:
        if key in raw:
            raise _error(
                source, f"cloud.{key}", f"is not a {provider} setting; name the account as {ACCOUNT_KEY[provider]}"
            )
    region, zone = raw.get("region", ""), raw.get("zone", "")
    if provider == "gcp":
        if not isinstance(zone, str) or not re.fullmatch(r"[a-z]+-[a-z]+\d+-[a-z]", zone):
            raise _error(source, "cloud.zone", f'{zone!r}: a GCP study names its zone, e.g. zone = "us-central1-a"')
        region = region or zone.rsplit("-", 1)[0]
    if not isinstance(region, str) or not re.fullmatch(r"[a-z]+(-[a-z]+)*-?\d*[a-z]*", region or "-"):
        raise _error(source, "cloud.region", f'{region!r}: name the region, e.g. region = "us-east-1"')
    if zone and not zone.startswith(region):
        raise _error(source, "cloud.zone", f"{zone!r} is not in region {region!r}; name a zone of that region")
    account = raw.get(ACCOUNT_KEY[provider], "")
    if provider == "gcp" and not account:
        raise _error(source, "cloud.project", 'a GCP study names its project, e.g. project = "my-project"')
    if provider == "azure" and not re.fullmatch(r"[0-9a-f-]{36}", str(account)):
        raise _error(source, "cloud.subscription", f"{account!r}: name the subscription id (a GUID)")
    lifetime = hours(raw.get("max_lifetime", "4h"), source, "cloud.max_lifetime")
    expected = hours(raw.get("expected_hours", lifetime), source, "cloud.expected_hours")
    if expected > lifetime:
        raise _error(source, "cloud.expected_hours", f"{expected:g} h is past max_lifetime ({lifetime:g} h)")
    if "budget_usd" not in raw:
        raise _error(source, "cloud.budget_usd", "missing; say the most this study may cost, e.g. budget_usd = 5")
    disk = raw.get("disk_gib", 30)
    if isinstance(disk, bool) or not isinstance(disk, int) or not 10 <= disk <= 2048:
        raise _error(source, "cloud.disk_gib", f"{disk!r} must be a whole number of GiB from 10 to 2048")
    owner = raw.get("owner") or getpass.getuser()
    if not isinstance(owner, str) or not re.fullmatch(r"[a-z0-9_-]{1,63}", owner.lower()):
        raise _error(source, "cloud.owner", f"{owner!r}: letters, digits, '-' and '_' (it becomes a tag)")
    ssh_from = raw.get("ssh_from", "")
    if ssh_from:
        ssh_from = cidr(ssh_from, f"{source}: cloud.ssh_from")
    return Cloud(
        provider, region, zone or "", str(account), lifetime,
        _positive(raw["budget_usd"], source, "cloud.budget_usd"), expected, disk, owner.lower(), ssh_from,
    )  # fmt: skip


def cidr(value: Any, where: str) -> str:
    """One IPv4 network SSH may come from, as "203.0.113.7/32" (a bare address becomes its /32)."""
    import ipaddress

    try:
        network = ipaddress.ip_network(str(value).strip(), strict=False)
    except ValueError:
        raise StudyError(
            f"{where}: {value!r} is not an address or network; give your own address, e.g. 203.0.113.7/32"
        ) from None
    if network.version != 4:
        raise StudyError(f"{where}: {value!r}: give an IPv4 address or network (the arms' SSH is IPv4)")
    return str(network)


def _size_of(cloud: Cloud, value: Any, source: Path, at: str) -> pricing.Size:
    known = pricing.SIZES[cloud.provider]
    found = pricing.size(cloud.provider, value) if isinstance(value, str) else None
    if found is None:
        close = difflib.get_close_matches(str(value), sorted(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise _error(
            source, f"{at}.instance_type",
            f"{value!r} is not a {cloud.provider} size ccbench knows (price table of {pricing.PRICES_DATE}); "
            f"{hint}known: {', '.join(sorted(known))}",
        )  # fmt: skip
    return found


def arm_of(raw: Any, index: int, cloud: Cloud, source: Path) -> tuple[CloudArm, bool]:
    at = f"arm[{index}]"
    if not isinstance(raw, dict):
        raise _error(source, at, "must be a table: [[arm]]")
    name = raw.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise _error(source, f"{at}.name", f"{name!r}: every arm needs a name of letters, digits, '-', '_', '.' or '+'")
    at = f"arm '{name}'"
    _unknown(raw, ARM_KEYS, source, at)
    kind = raw.get("kind")
    if kind not in KINDS:
        raise _error(source, f"{at}.kind", f"{kind!r} is not a kind; use one of: {', '.join(KINDS)}")
    size = _size_of(cloud, raw.get("instance_type"), source, at)
    if kind not in size.kinds:
        offered = [s.name for s in pricing.SIZES[cloud.provider].values() if kind in s.kinds]
        if cloud.provider == "aws" and kind == "tdx":
            why = "AWS offers no TDX instances; use GCP (c3) or Azure (DCesv5) for a TDX arm"
        elif size.twin and kind in pricing.SIZES[cloud.provider][size.twin].kinds:
            why = f"its {kind} twin is {size.twin}"
        else:
            why = f"sizes that launch as {kind}: {', '.join(offered) or 'none'}"
        raise _error(source, f"{at}.instance_type", f"{size.name} cannot launch as a {kind} arm; {why}")
    if kind in CVM_KINDS and cloud.provider == "azure" and not size.twin:
        raise _error(
            source, f"{at}.instance_type",
            f"{size.name} has no plain twin on Azure (no non-confidential size on its CPU, {size.cpu}), so no arm "
            "could differ from it only in the CC mode; use GCP c3 for a matched TDX comparison",
        )  # fmt: skip
    pattern, example = IMAGE_FORMS[cloud.provider]
    image = raw.get("image")
    if not isinstance(image, str) or not pattern.fullmatch(image):
        raise _error(source, f"{at}.image", f"{image!r}: give {example}")
    replicas = raw.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or not 1 <= replicas <= 8:
        raise _error(source, f"{at}.replicas", f"{replicas!r} must be a whole number from 1 to 8")
    baseline = raw.get("baseline", False)
    if not isinstance(baseline, bool):
        raise _error(source, f"{at}.baseline", f"{baseline!r} must be true or false")
    return CloudArm(name, kind, size, image, replicas), baseline


def mismatch(arm: CloudArm, base: CloudArm) -> str | None:
    """What besides the CC mode sets ``arm`` apart from ``base``, or None."""
    if arm.image != base.image:
        return f"image ({arm.image} vs {base.image})"
    same_size = arm.size.name == base.size.name or arm.size.twin == base.size.name
    if not same_size or arm.size.match_key() != base.size.match_key():
        twin = f" (its twin is {base.size.twin})" if base.size.twin and arm.size.name != base.size.twin else ""
        return f"instance_type ({arm.size.name} vs {base.size.name}{twin})"
    if arm.replicas != base.replicas:
        return f"replicas ({arm.replicas} vs {base.replicas})"
    return None


def study_from_dict(document: dict[str, Any], source: Path) -> CloudStudy:
    _unknown(document, TOP_KEYS, source, "the top level of a cloud study")
    name = document.get("name", source.stem)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise _error(source, "name", f"{name!r} must be letters, digits, '-', '_', '.' or '+'")
    plan = plan_of(document.get("plan"), Where(source))
    order = document.get("order", "interleaved")
    if order not in ORDERS:
        raise _error(source, "order", f"{order!r} is not an order; use one of: {', '.join(ORDERS)}")
    rounds = integer(document.get("rounds", 3), Where(source), "rounds", minimum=1)
    cloud = cloud_of(document.get("cloud"), source)
    raw_arms = document.get("arm")
    if not isinstance(raw_arms, list) or not raw_arms:
        raise _error(
            source, "arm", "the study has no arms; add [[arm]] tables with a name, kind, instance_type and image"
        )
    parsed = [arm_of(raw, i, cloud, source) for i, raw in enumerate(raw_arms, start=1)]
    arms = [a for a, _ in parsed]
    names = [a.name for a in arms]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise _error(source, "arm.name", f"{', '.join(twice)} used twice; give each arm a distinct name")
    marked = [a.name for a, b in parsed if b]
    if len(marked) > 1:
        raise _error(
            source, "arm.baseline", f"{', '.join(marked)} are all marked; mark at most one arm baseline = true"
        )
    plain = [a.name for a in arms if a.kind == "plain"]
    baseline = marked[0] if marked else (plain[0] if plain else arms[0].name)
    base = next(a for a in arms if a.name == baseline)
    for arm in arms:
        differs = mismatch(arm, base)
        if differs:
            raise _error(
                source, f"arm '{arm.name}'",
                f"differs from the baseline '{base.name}' in {differs}; cloud arms may differ only in their CC mode",
            )  # fmt: skip
    return CloudStudy(name, plan, order, rounds, cloud, tuple(arms), baseline, source, document.get("description", ""))


def load_cloud_study(path: str | Path) -> CloudStudy:
    path = Path(path)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise StudyError(f"{path}: TOML syntax error: {exc}; fix the study file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StudyError(f"{path}: cannot read the study ({getattr(exc, 'strerror', None) or exc})") from None
    return study_from_dict(document, path)

"""GCP: compute instances.insert. An SEV-SNP arm (n2d, minCpuPlatform "AMD Milan") or a TDX arm (c3)
sets confidentialInstanceConfig.confidentialInstanceType; both modes share onHostMaintenance =
TERMINATE, an NVMe boot disk, a gVNIC NIC, the same minCpuPlatform and maxRunDuration with
instanceTerminationAction = DELETE as the cloud-side lifetime cap, so the twin's body is the same
without the CC config. The image must list the CC type among its guestOsFeatures (checked in
preflight). google-cloud-compute (ccbench[gcp]) is imported on first use; credentials come from
Application Default Credentials, never from ccbench."""

from __future__ import annotations

import json
from typing import Any

from ccbench.machines.cloud.provider import EXPIRY_TAG, RUN_TAG, CloudError, Found, Launched, Provider, RunContext

CC_TYPE = {"sev-snp": "SEV_SNP", "tdx": "TDX"}
#: the guest OS feature an image needs for each CC type, and for a gVNIC NIC
IMAGE_FEATURE = {"sev-snp": "SEV_SNP_CAPABLE", "tdx": "TDX_CAPABLE"}
#: the regional CPU quota metric of each family
QUOTA_METRIC = {"n2d": "N2D_CPUS", "c3": "C3_CPUS"}


def insert_request(arm, replica: int, ctx: RunContext, cloud, name: str) -> dict[str, Any]:
    zone = cloud.zone
    labels = ctx.tags(arm.name)
    body: dict[str, Any] = {
        "name": name,
        "machineType": f"zones/{zone}/machineTypes/{arm.size.name}",
        "minCpuPlatform": arm.size.cpu,
        "scheduling": {
            "onHostMaintenance": "TERMINATE",
            "automaticRestart": False,
            "provisioningModel": "STANDARD",
            "maxRunDuration": {"seconds": str(ctx.lifetime_s)},
            "instanceTerminationAction": "DELETE",
        },
        "disks": [
            {
                "boot": True,
                "autoDelete": True,
                "type": "PERSISTENT",
                "interface": "NVME",
                "initializeParams": {
                    "sourceImage": arm.image,
                    "diskSizeGb": str(cloud.disk_gib),
                    "diskType": f"zones/{zone}/diskTypes/pd-balanced",
                    "labels": labels,
                },
            }
        ],
        "networkInterfaces": [
            # keyword form: the API's field names, not strings a workload-kind check would read as kinds
            dict(
                network="global/networks/default",
                nicType="GVNIC",
                accessConfigs=[{"type": "ONE_TO_ONE_NAT", "name": "External NAT"}],
            )
        ],
        "labels": labels,
        # the run's firewall rule admits SSH from ssh_from to instances with this network tag only
        "tags": {"items": [network_tag(ctx.run_id)]},
        # cloud-init reads user-data (the run's user key, this instance's host key); the guest
        # agent, where the image has one, reads ssh-keys
        "metadata": {
            "items": [
                {"key": "ssh-keys", "value": f"ccbench:{ctx.ssh_public_key}"},
                {"key": "user-data", "value": ctx.user_data(name)},
            ]
        },
    }
    if arm.kind in CC_TYPE:
        body["confidentialInstanceConfig"] = {"confidentialInstanceType": CC_TYPE[arm.kind]}
    return body


def network_tag(run_id: str) -> str:
    return f"ccb-{run_id}"


def firewall_request(ctx: RunContext) -> dict[str, Any]:
    """The run's own SSH rule on the default network: from ssh_from, to the run's instances. A
    firewall rule carries no labels, so its description holds the run's tags (for the sweep)."""
    # keyword form: the API's field names, not strings a workload-kind check would read as kinds
    return dict(
        name=f"{network_tag(ctx.run_id)}-ssh",
        network="global/networks/default",
        direction="INGRESS",
        priority=1000,
        sourceRanges=[ctx.ssh_from],
        targetTags=[network_tag(ctx.run_id)],
        allowed=[{"IPProtocol": "tcp", "ports": ["22"]}],
        description=json.dumps(ctx.tags(), sort_keys=True),
    )


def _image_parts(image: str) -> tuple[str, str, bool]:
    """projects/P/global/images/[family/]NAME -> (P, NAME, is_family)."""
    parts = image.split("/")
    return parts[1], parts[-1], parts[-2] == "family"


class Gcp(Provider):
    name = "gcp"

    def __init__(self, cloud, client_kwargs: dict[str, Any] | None = None) -> None:
        self.cloud = cloud
        #: passed to every SDK client (tests give a loopback endpoint or transport; a run gives none)
        self.client_kwargs = client_kwargs or {}
        self._compute = None

    @property
    def compute(self):
        if self._compute is None:
            try:
                from google.cloud import compute_v1
            except ImportError:
                raise CloudError("google-cloud-compute is not installed: pip install 'ccbench[gcp]'") from None
            self._compute = compute_v1
        return self._compute

    def _client(self, name: str):
        return self._call(name, getattr(self.compute, name), **self.client_kwargs)

    def _call(self, what: str, fn, *args, **kwargs):
        self.compute  # noqa: B018 (says in one line when the SDK is missing)
        from google.api_core import exceptions
        from google.auth.exceptions import GoogleAuthError

        try:
            return fn(*args, **kwargs)
        except GoogleAuthError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CloudError(
                f"gcp {what}: no usable credentials from Application Default Credentials ({first})"
            ) from None
        except exceptions.GoogleAPICallError as exc:
            raise CloudError(f"gcp {what}: {exc.code}: {exc.message}") from None
        except exceptions.GoogleAPIError as exc:
            raise CloudError(f"gcp {what}: {exc}") from None

    def request(self, arm, replica: int, ctx: RunContext) -> dict[str, Any]:
        return insert_request(arm, replica, ctx, self.cloud, self.instance_name(ctx.run_id, arm.name, replica))

    def preflight(self, study) -> list[str]:
        problems: list[str] = []
        project, zone = self.cloud.account, self.cloud.zone
        try:
            types = self._client("MachineTypesClient")
            for size in sorted({a.size.name for a in study.arms}):
                self._call("machineTypes.get", types.get, project=project, zone=zone, machine_type=size)
            images = self._client("ImagesClient")
            for arm in study.arms:
                owner, name, family = _image_parts(arm.image)
                get = images.get_from_family if family else images.get
                key = {"family": name} if family else {"image": name}
                image = self._call("images.get", get, project=owner, **key)
                features = {f.type_ for f in image.guest_os_features}
                for need in ("GVNIC", IMAGE_FEATURE.get(arm.kind)):
                    if need and need not in features:
                        problems.append(f"gcp: image {arm.image} lacks guest OS feature {need} (arm '{arm.name}')")
            region = self._call(
                "regions.get", self._client("RegionsClient").get, project=project, region=self.cloud.region
            )
            limits = {q.metric: q.limit - q.usage for q in region.quotas}
            for family, metric in QUOTA_METRIC.items():
                want = sum(a.size.vcpus * a.replicas for a in study.arms if a.size.name.startswith(family + "-"))
                if want and limits.get(metric, 0) < want:
                    problems.append(
                        f"gcp: quota {metric} in {self.cloud.region} has {limits.get(metric, 0):g} free, the study needs {want}"
                    )
        except CloudError as exc:
            problems.append(str(exc))
        return problems

    def prepare(self, ctx: RunContext, journal) -> None:
        """The run's SSH rule (from ssh_from only) on the default network."""
        body = firewall_request(ctx)
        journal.intend("firewall", body["name"])
        operation = self._call(
            "firewalls.insert",
            self._client("FirewallsClient").insert,
            project=self.cloud.account,
            firewall_resource=self.compute.Firewall.from_json(json.dumps(body)),
        )
        self._call("firewalls.insert", operation.result, timeout=300)
        journal.made("firewall", body["name"], body["name"])

    def launch(self, arm, replica: int, ctx: RunContext, journal) -> Launched:
        body = self.request(arm, replica, ctx)
        journal.intend("instance", body["name"], arm=arm.name)
        resource = self.compute.Instance.from_json(json.dumps(body))
        client = self._client("InstancesClient")
        operation = self._call(
            "instances.insert",
            client.insert,
            project=self.cloud.account,
            zone=self.cloud.zone,
            instance_resource=resource,
        )
        self._call("instances.insert", operation.result, timeout=600)
        journal.made("instance", body["name"], body["name"])
        got = self._call(
            "instances.get", client.get, project=self.cloud.account, zone=self.cloud.zone, instance=body["name"]
        )
        config = got.confidential_instance_config
        return Launched(
            arm.name,
            replica,
            body["name"],
            _nat_ip(got),
            cloud_says={"confidentialInstanceType": str(config.confidential_instance_type)},
            name=body["name"],
        )

    def address(self, launched: Launched, timeout_s: float = 600.0) -> str:
        import time

        deadline = time.monotonic() + timeout_s
        while not launched.address:
            got = self._call(
                "instances.get",
                self._client("InstancesClient").get,
                project=self.cloud.account,
                zone=self.cloud.zone,
                instance=launched.id,
            )
            launched.address = _nat_ip(got)
            if not launched.address:
                if time.monotonic() > deadline:
                    raise CloudError(f"gcp: instance {launched.id} has no external address after {timeout_s:.0f} s")
                time.sleep(2)
        return launched.address

    def tagged(self) -> list[Found]:
        client = self._client("InstancesClient")
        found = []
        pages = self._call(
            "instances.list",
            client.list,
            request={"project": self.cloud.account, "zone": self.cloud.zone, "filter": f"labels.{RUN_TAG}:*"},
        )
        found += [self._found("instance", inst.name, inst.labels) for inst in pages]
        disks = self._call(
            "disks.list",
            self._client("DisksClient").list,
            request={"project": self.cloud.account, "zone": self.cloud.zone, "filter": f"labels.{RUN_TAG}:*"},
        )
        # a disk still attached goes with its instance; only a left-over one is found on its own
        found += [self._found("disk", disk.name, disk.labels) for disk in disks if not list(disk.users)]
        rules = self._call(
            "firewalls.list",
            self._client("FirewallsClient").list,
            request={"project": self.cloud.account, "filter": 'name eq "ccb-.*-ssh"'},
        )
        for rule in rules:
            try:
                tags = json.loads(rule.description or "{}")
            except ValueError:
                continue  # not a rule ccbench wrote: no run tag, never touched
            if isinstance(tags, dict) and tags.get(RUN_TAG):
                found.append(self._found("firewall", rule.name, tags))
        return found

    def _found(self, kind: str, name: str, labels) -> Found:
        """A resource as the sweep sees it, from its labels (the run's id and its expiry)."""
        labels = dict(labels)
        return Found(kind, name, labels.get(RUN_TAG, ""), int(labels.get(EXPIRY_TAG, "0") or 0), self.cloud.zone)

    def destroy(self, found: list[Found]) -> list[str]:
        instances, disks = self._client("InstancesClient"), self._client("DisksClient")
        where = {"project": self.cloud.account, "zone": self.cloud.zone}
        done = []
        for f in found:
            if f.kind == "instance":
                self._call("instances.delete", instances.delete, instance=f.id, **where)
            elif f.kind == "disk":
                self._call("disks.delete", disks.delete, disk=f.id, **where)
            elif f.kind == "firewall":
                firewalls = self._client("FirewallsClient")
                self._call("firewalls.delete", firewalls.delete, project=self.cloud.account, firewall=f.id)
            else:
                continue
            done.append(f"gcp: deleted {f.kind} {f.id}")
        return done

    def settle(self, found: list[Found]) -> None:
        import time

        from google.api_core import exceptions

        client = self._client("InstancesClient")
        for f in found:
            if f.kind != "instance":
                continue
            for _ in range(300):
                try:
                    client.get(project=self.cloud.account, zone=self.cloud.zone, instance=f.id)
                except exceptions.NotFound:
                    break
                time.sleep(2)
            else:
                raise CloudError(f"gcp: instance {f.id} still there after 10 minutes")


def _nat_ip(instance) -> str:
    """The instance's external address (its first NIC's one-to-one NAT), or ""."""
    for nic in instance.network_interfaces:
        for config in nic.access_configs:
            if config.nat_i_p:
                return config.nat_i_p
    return ""

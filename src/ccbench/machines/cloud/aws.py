"""AWS: EC2 RunInstances with CpuOptions.AmdSevSnp = "enabled" for an SEV-SNP arm (M6a, C6a, R6a,
where the region offers the type: DescribeInstanceTypeOfferings and the type's own
ProcessorInfo.SupportedFeatures, not a list in code); its twin is the same call without it. boto3
(ccbench[aws]) is imported on first use and finds credentials through its own chain (the profile named
in [cloud] or its defaults, AWS_ENDPOINT_URL included); ccbench never reads them."""

from __future__ import annotations

from typing import Any

from ccbench.machines.cloud.provider import (
    RUN_TAG,
    CloudError,
    Found,
    Launched,
    Provider,
    RunContext,
    instance_name,
)

#: Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances, in vCPUs (Service Quotas)
STANDARD_VCPU_QUOTA = "L-1216C47A"
SNP_FEATURE = "amd-sev-snp"


def _tags(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def run_instances_request(arm, replica: int, ctx: RunContext, cloud) -> dict[str, Any]:
    tags = ctx.tags(arm.name)
    request: dict[str, Any] = {
        "ImageId": arm.image,
        "InstanceType": arm.size.name,
        "MinCount": 1,
        "MaxCount": 1,
        "KeyName": f"ccbench-{ctx.run_id}",
        "SecurityGroupIds": [ctx.made.get("security_group", "<the run's security group>")],
        "BlockDeviceMappings": [
            {
                "DeviceName": ctx.made.get("root_device", "/dev/sda1"),
                "Ebs": {"VolumeSize": cloud.disk_gib, "VolumeType": "gp3", "DeleteOnTermination": True},
            }
        ],
        # EC2 has no lifetime cap of its own: the guest powers itself off at the cap, and a guest
        # shutdown terminates the instance. The user-data (boto3 base64-encodes it) carries the
        # run's user key and this instance's own host key (ccbench.machines.cloud.access)
        "InstanceInitiatedShutdownBehavior": "terminate",
        "UserData": ctx.user_data(instance_name(ctx.run_id, arm.name, replica), max(ctx.lifetime_s // 60, 1)),
        "MetadataOptions": {"HttpTokens": "required"},
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": _tags({**tags, "Name": f"ccb-{ctx.run_id}-{arm.name}-{replica}"})},
            {"ResourceType": "volume", "Tags": _tags(tags)},
        ],
    }
    if cloud.zone:
        request["Placement"] = {"AvailabilityZone": cloud.zone}
    if arm.kind == "sev-snp":
        request["CpuOptions"] = {"AmdSevSnp": "enabled"}
    return request


class Aws(Provider):
    name = "aws"

    def __init__(self, cloud) -> None:
        self.cloud = cloud
        self._ec2 = None

    def client(self, service: str):
        try:
            import boto3
        except ImportError:
            raise CloudError("boto3 is not installed: pip install 'ccbench[aws]'") from None
        session = boto3.Session(profile_name=self.cloud.account or None, region_name=self.cloud.region)
        return session.client(service)

    @property
    def ec2(self):
        if self._ec2 is None:
            self._ec2 = self.client("ec2")
        return self._ec2

    def _call(self, method: str, client=None, **kwargs) -> dict[str, Any]:
        client = client or self.ec2  # says in one line when boto3 is missing
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return getattr(client, method)(**kwargs)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            raise CloudError(f"aws {method}: {error.get('Code', '?')}: {error.get('Message', exc)}") from None
        except BotoCoreError as exc:
            raise CloudError(f"aws {method}: {exc}") from None

    def request(self, arm, replica: int, ctx: RunContext) -> dict[str, Any]:
        return run_instances_request(arm, replica, ctx, self.cloud)

    def preflight(self, study) -> list[str]:
        problems = []
        types = sorted({a.size.name for a in study.arms})
        where = ("availability-zone", self.cloud.zone) if self.cloud.zone else ("region", self.cloud.region)
        try:
            offered = self._call(
                "describe_instance_type_offerings",
                LocationType=where[0],
                Filters=[{"Name": "instance-type", "Values": types}, {"Name": "location", "Values": [where[1]]}],
            )
            have = {o["InstanceType"] for o in offered.get("InstanceTypeOfferings", [])}
            problems += [f"aws: {t} is not offered in {where[1]}" for t in types if t not in have]
            snp = sorted({a.size.name for a in study.arms if a.kind == "sev-snp"} & have)
            if snp:
                described = self._call("describe_instance_types", InstanceTypes=snp)
                for info in described.get("InstanceTypes", []):
                    features = info.get("ProcessorInfo", {}).get("SupportedFeatures", [])
                    if SNP_FEATURE not in features:
                        problems.append(f"aws: {info['InstanceType']} does not list {SNP_FEATURE} in {where[1]}")
            images = {a.image for a in study.arms}
            found = self._call("describe_images", ImageIds=sorted(images)).get("Images", [])
            problems += [
                f"aws: image {i} not found in {self.cloud.region}" for i in images - {x["ImageId"] for x in found}
            ]
            quota = self._call(
                "get_service_quota", self.client("service-quotas"), ServiceCode="ec2", QuotaCode=STANDARD_VCPU_QUOTA
            )["Quota"]["Value"]
            want = sum(a.size.vcpus * a.replicas for a in study.arms)
            if quota < want:
                problems.append(
                    f"aws: the on-demand standard vCPU quota in {self.cloud.region} is {quota:g}, the study needs {want}"
                )
        except CloudError as exc:
            problems.append(str(exc))
        return problems

    def prepare(self, ctx: RunContext, journal) -> None:
        key = f"ccbench-{ctx.run_id}"
        journal.intend("key-pair", key)
        made = self._call(
            "import_key_pair",
            KeyName=key,
            PublicKeyMaterial=ctx.ssh_public_key.encode(),
            TagSpecifications=[{"ResourceType": "key-pair", "Tags": _tags(ctx.tags())}],
        )
        journal.made("key-pair", key, made.get("KeyPairId", key))
        journal.intend("security-group", key)
        group = self._call(
            "create_security_group",
            GroupName=key,
            Description="ccbench run: SSH to the arms",
            TagSpecifications=[{"ResourceType": "security-group", "Tags": _tags(ctx.tags())}],
        )["GroupId"]
        journal.made("security-group", key, group)
        ctx.made["security_group"] = group
        self._call(
            "authorize_security_group_ingress",
            GroupId=group,
            IpPermissions=[
                {
                    "IpProtocol": "tcp",
                    "FromPort": 22,
                    "ToPort": 22,
                    "IpRanges": [{"CidrIp": ctx.ssh_from, "Description": "ccbench: the caller's address only"}],
                }
            ],
        )

    def launch(self, arm, replica: int, ctx: RunContext, journal) -> Launched:
        name = self.instance_name(ctx.run_id, arm.name, replica)
        journal.intend("instance", name, arm=arm.name)
        reply = self._call("run_instances", **self.request(arm, replica, ctx))
        instance = reply["Instances"][0]
        journal.made("instance", name, instance["InstanceId"])
        return Launched(
            arm.name,
            replica,
            instance["InstanceId"],
            instance.get("PublicIpAddress", ""),
            cloud_says={"CpuOptions": instance.get("CpuOptions", {})},
            name=name,
        )

    def address(self, launched: Launched, timeout_s: float = 600.0) -> str:
        """The public address once the instance runs (EC2 gives it after the launch's answer); the
        CC flag re-read from the running instance, as DescribeInstances returns it."""
        from botocore.exceptions import WaiterError

        try:
            self.ec2.get_waiter("instance_running").wait(
                InstanceIds=[launched.id], WaiterConfig={"Delay": 2, "MaxAttempts": max(int(timeout_s // 2), 1)}
            )
        except WaiterError as exc:
            raise CloudError(f"aws: instance {launched.id} is not running: {exc}") from None
        reply = self._call("describe_instances", InstanceIds=[launched.id])
        instance = reply["Reservations"][0]["Instances"][0]
        launched.cloud_says = {"CpuOptions": instance.get("CpuOptions", {})}
        launched.address = instance.get("PublicIpAddress", "") or launched.address
        if not launched.address:
            raise CloudError(f"aws: instance {launched.id} has no public address (the subnet gives none)")
        return launched.address

    def tagged(self) -> list[Found]:
        tag_filter = [{"Name": "tag-key", "Values": [RUN_TAG]}]
        found = []
        live = [{"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}]
        for reservation in self._call("describe_instances", Filters=tag_filter + live).get("Reservations", []):
            for inst in reservation["Instances"]:
                found.append(_found("instance", inst["InstanceId"], inst.get("Tags", []), self.cloud.region))
        for group in self._call("describe_security_groups", Filters=tag_filter).get("SecurityGroups", []):
            found.append(_found("security-group", group["GroupId"], group.get("Tags", []), self.cloud.region))
        for key in self._call("describe_key_pairs", Filters=tag_filter).get("KeyPairs", []):
            found.append(_found("key-pair", key["KeyName"], key.get("Tags", []), self.cloud.region))
        for volume in self._call(
            "describe_volumes", Filters=tag_filter + [{"Name": "status", "Values": ["available"]}]
        ).get("Volumes", []):
            found.append(_found("volume", volume["VolumeId"], volume.get("Tags", []), self.cloud.region))
        return found

    def destroy(self, found: list[Found]) -> list[str]:
        done = []
        instances = [f.id for f in found if f.kind == "instance"]
        if instances:
            self._call("terminate_instances", InstanceIds=instances)
            done += [f"aws: terminated instance {i}" for i in instances]
        calls = {
            "security-group": ("delete_security_group", "GroupId"),
            "key-pair": ("delete_key_pair", "KeyName"),
            "volume": ("delete_volume", "VolumeId"),
        }
        for f in found:
            if f.kind in calls:
                method, key = calls[f.kind]
                self._call(method, **{key: f.id})
                done.append(f"aws: deleted {f.kind} {f.id}")
        return done

    def settle(self, found: list[Found]) -> None:
        instances = [f.id for f in found if f.kind == "instance"]
        if instances:
            from botocore.exceptions import WaiterError

            try:
                self.ec2.get_waiter("instance_terminated").wait(
                    InstanceIds=instances, WaiterConfig={"Delay": 2, "MaxAttempts": 300}
                )
            except WaiterError as exc:
                raise CloudError(f"aws: instances not terminated: {exc}") from None


def _found(kind: str, ident: str, tags: list[dict[str, str]], where: str) -> Found:
    values = {t["Key"]: t["Value"] for t in tags}
    try:
        expiry = int(values.get("ccbench-expiry", "0"))
    except ValueError:
        expiry = 0
    return Found(kind, ident, values.get(RUN_TAG, ""), expiry, where)

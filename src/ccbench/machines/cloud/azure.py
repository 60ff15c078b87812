"""Azure: virtualMachines.createOrUpdate. A confidential arm on a DCas/ECas size (SEV-SNP) sets
securityProfile.securityType = ConfidentialVM with Secure Boot and vTPM and the OS disk's
managedDisk.securityProfile.securityEncryptionType; its twin, the matching Das/Eas size, sets
TrustedLaunch with the same Secure Boot and vTPM and boots the same image. Each run gets one resource
group (deleting only a VM would leave its NIC, disk, address and network), deleted whole. The SDK
(ccbench[azure]: azure-mgmt-compute, azure-mgmt-network, azure-mgmt-resource, azure-identity) is
imported on first use; credentials come from DefaultAzureCredential's chain, never from ccbench."""

from __future__ import annotations

from typing import Any

from ccbench.machines.cloud.access import USER, b64
from ccbench.machines.cloud.provider import EXPIRY_TAG, RUN_TAG, CloudError, Found, Launched, Provider, RunContext

#: VMGuestStateOnly encrypts the VM guest state blob (vTPM) and leaves the OS disk to platform keys:
#: the disk the twin has too, so the arms' disks do the same work
ENCRYPTION = "VMGuestStateOnly"
ADMIN = USER


def resource_group(run_id: str) -> str:
    return f"ccbench-{run_id}"


def _image_reference(urn: str) -> dict[str, str]:
    publisher, offer, sku, version = urn.split(":")
    return {"publisher": publisher, "offer": offer, "sku": sku, "version": version}


def create_request(arm, replica: int, ctx: RunContext, cloud, name: str) -> dict[str, Any]:
    confidential = arm.kind != "plain"
    managed_disk: dict[str, Any] = {"storageAccountType": "Premium_LRS"}
    if confidential:
        managed_disk["securityProfile"] = {"securityEncryptionType": ENCRYPTION}
    nic = ctx.made.get(
        f"nic/{name}",
        f"/subscriptions/{cloud.account}/resourceGroups/{resource_group(ctx.run_id)}"
        f"/providers/Microsoft.Network/networkInterfaces/{name}-nic",
    )
    return {
        "location": cloud.region,
        "tags": ctx.tags(arm.name),
        "properties": {
            "hardwareProfile": {"vmSize": arm.size.name},
            "securityProfile": {
                "securityType": "ConfidentialVM" if confidential else "TrustedLaunch",
                "uefiSettings": {"secureBootEnabled": True, "vTpmEnabled": True},
            },
            "storageProfile": {
                "imageReference": _image_reference(arm.image),
                "osDisk": {
                    "createOption": "FromImage",
                    "deleteOption": "Delete",
                    "diskSizeGB": cloud.disk_gib,
                    "managedDisk": managed_disk,
                },
            },
            "osProfile": {
                "computerName": name,
                "adminUsername": ADMIN,
                # cloud-init reads it: the run's user key and this VM's own host key (base64, as the API wants)
                "customData": b64(ctx.user_data(name)),
                "linuxConfiguration": {
                    "disablePasswordAuthentication": True,
                    "ssh": {
                        "publicKeys": [{"path": f"/home/{ADMIN}/.ssh/authorized_keys", "keyData": ctx.ssh_public_key}]
                    },
                },
            },
            "networkProfile": {"networkInterfaces": [{"id": nic, "properties": {"deleteOption": "Delete"}}]},
        },
    }


class Azure(Provider):
    name = "azure"

    def __init__(self, cloud, client_kwargs: dict[str, Any] | None = None) -> None:
        self.cloud = cloud
        #: passed to every SDK client (tests give a loopback endpoint or transport; a run gives none)
        self.client_kwargs = client_kwargs or {}
        self._clients: dict[str, Any] = {}

    def client(self, which: str):
        if which not in self._clients:
            try:
                from azure.identity import DefaultAzureCredential
                from azure.mgmt.compute import ComputeManagementClient
                from azure.mgmt.network import NetworkManagementClient
                from azure.mgmt.resource.resources import ResourceManagementClient
            except ImportError as exc:
                raise CloudError(f"the Azure SDK is not installed ({exc.name}): pip install 'ccbench[azure]'") from None
            kinds = {
                "compute": ComputeManagementClient,
                "vnet": NetworkManagementClient,
                "resource": ResourceManagementClient,
            }
            options = dict(self.client_kwargs)
            credential = options.pop("credential", None) or DefaultAzureCredential()
            self._clients[which] = kinds[which](credential, self.cloud.account, **options)
        return self._clients[which]

    def _call(self, what: str, fn, *args, **kwargs):
        try:
            from azure.core.exceptions import AzureError, ClientAuthenticationError, HttpResponseError
        except ImportError:
            raise CloudError("the Azure SDK is not installed (azure-core): pip install 'ccbench[azure]'") from None

        try:
            result = fn(*args, **kwargs)
            return result
        except ClientAuthenticationError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CloudError(f"azure {what}: no usable credentials from DefaultAzureCredential ({first})") from None
        except HttpResponseError as exc:
            code = getattr(exc.error, "code", None) or exc.status_code
            message = getattr(exc.error, "message", None) or exc.reason
            raise CloudError(f"azure {what}: {code}: {message}") from None
        except AzureError as exc:
            raise CloudError(f"azure {what}: {str(exc).splitlines()[0]}") from None

    def request(self, arm, replica: int, ctx: RunContext) -> dict[str, Any]:
        return create_request(arm, replica, ctx, self.cloud, self.instance_name(ctx.run_id, arm.name, replica))

    def preflight(self, study) -> list[str]:
        problems = []
        try:
            compute = self.client("compute")
            skus = self._call(
                "resourceSkus.list",
                lambda: list(compute.resource_skus.list(filter=f"location eq '{self.cloud.region}'")),
            )
            offered = {s.name: s for s in skus if s.resource_type == "virtualMachines"}
            for size in sorted({a.size.name for a in study.arms}):
                sku = offered.get(size)
                if sku is None:
                    problems.append(f"azure: {size} is not offered in {self.cloud.region}")
                elif any(r.reason_code == "NotAvailableForSubscription" for r in sku.restrictions or []):
                    problems.append(f"azure: {size} is restricted for this subscription in {self.cloud.region}")
            usage = self._call("usage.list", lambda: list(compute.usage.list(self.cloud.region)))
            free = {u.name.value: u.limit - u.current_value for u in usage}
            want = sum(a.size.vcpus * a.replicas for a in study.arms)
            if free.get("cores", want) < want:
                problems.append(
                    f"azure: {free['cores']} regional vCPUs free in {self.cloud.region}, the study needs {want}"
                )
        except CloudError as exc:
            problems.append(str(exc))
        return problems

    def prepare(self, ctx: RunContext, journal) -> None:
        group = resource_group(ctx.run_id)
        journal.intend("resource-group", group)
        self._call(
            "resourceGroups.createOrUpdate",
            self.client("resource").resource_groups.create_or_update,
            group,
            {"location": self.cloud.region, "tags": ctx.tags()},
        )
        journal.made("resource-group", group, group)
        network, tags = self.client("vnet"), ctx.tags()
        ssh = {
            "protocol": "Tcp", "direction": "Inbound", "access": "Allow", "priority": 100, "sourceAddressPrefix": ctx.ssh_from,
            "sourcePortRange": "*", "destinationAddressPrefix": "*", "destinationPortRange": "22",
        }  # fmt: skip
        # the bodies are the REST API's JSON (the SDK sends a dict as it is)
        nsg = {
            "location": self.cloud.region,
            "tags": tags,
            "properties": {"securityRules": [{"name": "ssh", "properties": ssh}]},
        }
        self._call(
            "networkSecurityGroups.createOrUpdate",
            lambda: network.network_security_groups.begin_create_or_update(group, "ccbench-nsg", nsg).result(),
        )
        vnet = {
            "location": self.cloud.region,
            "tags": tags,
            "properties": {
                "addressSpace": {"addressPrefixes": ["10.58.0.0/16"]},
                "subnets": [{"name": "arms", "properties": {"addressPrefix": "10.58.0.0/24"}}],
            },
        }
        self._call(
            "virtualNetworks.createOrUpdate",
            lambda: network.virtual_networks.begin_create_or_update(group, "ccbench-vnet", vnet).result(),
        )

    def launch(self, arm, replica: int, ctx: RunContext, journal) -> Launched:
        group, name = resource_group(ctx.run_id), self.instance_name(ctx.run_id, arm.name, replica)
        network, tags = self.client("vnet"), ctx.tags(arm.name)
        subnet = self._call("subnets.get", network.subnets.get, group, "ccbench-vnet", "arms")
        nsg = self._call("networkSecurityGroups.get", network.network_security_groups.get, group, "ccbench-nsg")
        ip = {
            "location": self.cloud.region,
            "tags": tags,
            "sku": {"name": "Standard"},
            "properties": {"publicIPAllocationMethod": "Static"},
        }
        address = self._call(
            "publicIPAddresses.createOrUpdate",
            lambda: network.public_ip_addresses.begin_create_or_update(group, f"{name}-ip", ip).result(),
        )
        configuration = {
            "name": "ip",
            "properties": {"subnet": {"id": subnet.id}, "publicIPAddress": {"id": address.id}},
        }
        card = {
            "location": self.cloud.region,
            "tags": tags,
            "properties": {"networkSecurityGroup": {"id": nsg.id}, "ipConfigurations": [configuration]},
        }
        nic = self._call(
            "networkInterfaces.createOrUpdate",
            lambda: network.network_interfaces.begin_create_or_update(group, f"{name}-nic", card).result(),
        )
        ctx.made[f"nic/{name}"] = nic.id
        journal.intend("instance", name, arm=arm.name)
        vm = self._call(
            "virtualMachines.createOrUpdate",
            lambda: (
                self.client("compute")
                .virtual_machines.begin_create_or_update(group, name, self.request(arm, replica, ctx))
                .result()
            ),
        )
        journal.made("instance", name, vm.id)
        # the API's own word as returned (the SDK's enum holds the REST string as its value)
        value = getattr(vm.security_profile, "security_type", None)
        says = {"securityType": getattr(value, "value", value)}
        return Launched(arm.name, replica, vm.id, address.ip_address or "", says, name=name)

    def tagged(self) -> list[Found]:
        groups = self._call(
            "resourceGroups.list",
            lambda: list(self.client("resource").resource_groups.list(filter=f"tagName eq '{RUN_TAG}'")),
        )
        found = []
        for g in groups:
            tags = g.tags or {}
            expiry = tags.get(EXPIRY_TAG, "0")
            found.append(
                Found(
                    "resource-group", g.name, tags.get(RUN_TAG, ""), int(expiry) if expiry.isdigit() else 0, g.location
                )
            )
        return found

    def destroy(self, found: list[Found]) -> list[str]:
        resource, done = self.client("resource"), []
        for f in found:
            if f.kind == "resource-group":
                self._call("resourceGroups.delete", resource.resource_groups.begin_delete, f.id)
                done.append(f"azure: deleting resource group {f.id} (its VMs, disks, NICs, addresses and network)")
        return done

    def settle(self, found: list[Found]) -> None:
        """A resource group's deletion goes on in Azure once sent; nothing here waits on another."""

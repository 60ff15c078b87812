"""Each cloud's create request per arm kind: the golden files in tests/data/cloud/golden, checked
against the API's own field names as each SDK knows them (botocore's RunInstances input shape,
google-cloud-compute's Instance message, azure-mgmt-compute's VirtualMachine model), and each
confidential arm beside its twin differing only in the CC fields."""

from __future__ import annotations

import json

import pytest
from cloud_studies import CTX, DATA, PAIRS, study_text, write

from ccbench.machines.cloud.lifecycle import provider_for
from ccbench.machines.cloud.model import load_cloud_study
from ccbench.machines.cloud.view import differences

GOLDEN = DATA / "golden"
#: what may differ between a confidential arm's request and its twin's, per cloud (the CC fields)
CC_FIELDS = {
    "aws": {"CpuOptions.AmdSevSnp"},
    "gcp": {"confidentialInstanceConfig.confidentialInstanceType"},
    "azure": {
        "properties.hardwareProfile.vmSize",
        "properties.securityProfile.securityType",
        "properties.storageProfile.osDisk.managedDisk.securityProfile.securityEncryptionType",
    },
}


def _requests(tmp_path, cloud, kind):
    study = load_cloud_study(write(tmp_path, study_text(cloud, kind)))
    provider = provider_for(study.cloud)
    return study, provider, {a.kind: (a, provider.request(a, 1, CTX)) for a in study.arms}


@pytest.mark.parametrize(("cloud", "kind"), sorted(PAIRS))
def test_each_request_is_the_golden_one(tmp_path, cloud, kind):
    _, _, requests = _requests(tmp_path, cloud, kind)
    for arm, request in requests.values():
        golden = json.loads((GOLDEN / f"{cloud}-{arm.kind}-{arm.size.name}.json").read_text())
        assert request == golden, f"{cloud} {arm.kind}"


@pytest.mark.parametrize(("cloud", "kind"), sorted(PAIRS))
def test_the_confidential_arm_differs_from_its_twin_only_in_the_cc_fields(tmp_path, cloud, kind):
    study, provider, _ = _requests(tmp_path, cloud, kind)
    diffs = differences(provider, study, CTX)["cc"]
    assert {line.split(":")[0] for line in diffs} == CC_FIELDS[cloud]


def test_the_cc_values_are_the_apis_own():
    aws = json.loads((GOLDEN / "aws-sev-snp-m6a.large.json").read_text())
    assert aws["CpuOptions"] == {"AmdSevSnp": "enabled"}
    assert "CpuOptions" not in json.loads((GOLDEN / "aws-plain-m6a.large.json").read_text())
    for kind, size, value in (("sev-snp", "n2d-standard-2", "SEV_SNP"), ("tdx", "c3-standard-4", "TDX")):
        cc = json.loads((GOLDEN / f"gcp-{kind}-{size}.json").read_text())
        twin = json.loads((GOLDEN / f"gcp-plain-{size}.json").read_text())
        assert cc["confidentialInstanceConfig"] == {"confidentialInstanceType": value}
        for body in (cc, twin):
            assert body["scheduling"]["onHostMaintenance"] == "TERMINATE"
            assert body["scheduling"]["instanceTerminationAction"] == "DELETE"
            assert body["disks"][0]["interface"] == "NVME" and body["networkInterfaces"][0]["nicType"] == "GVNIC"
        assert cc["minCpuPlatform"] == twin["minCpuPlatform"]
    snp = json.loads((GOLDEN / "azure-sev-snp-Standard_DC2as_v5.json").read_text())["properties"]
    twin = json.loads((GOLDEN / "azure-plain-Standard_D2as_v5.json").read_text())["properties"]
    assert snp["securityProfile"]["securityType"] == "ConfidentialVM"
    assert twin["securityProfile"]["securityType"] == "TrustedLaunch"
    assert snp["securityProfile"]["uefiSettings"] == twin["securityProfile"]["uefiSettings"]
    assert snp["storageProfile"]["imageReference"] == twin["storageProfile"]["imageReference"]


def test_aws_requests_fit_botocores_runinstances_shape():
    import botocore.session
    from botocore.validate import validate_parameters

    model = botocore.session.get_session().get_service_model("ec2").operation_model("RunInstances")
    for path in GOLDEN.glob("aws-*.json"):
        validate_parameters(json.loads(path.read_text()), model.input_shape)  # raises on an unknown or mistyped field
    with pytest.raises(Exception, match="Unknown parameter"):
        validate_parameters(
            {"ImageId": "ami-1", "MinCount": 1, "MaxCount": 1, "CpuOptions": {"SevSnp": "enabled"}}, model.input_shape
        )


def test_gcp_requests_parse_as_compute_v1_instances():
    from google.cloud import compute_v1

    for path in GOLDEN.glob("gcp-*.json"):
        instance = compute_v1.Instance.from_json(path.read_text())  # unknown fields raise
        assert instance.scheduling.on_host_maintenance == "TERMINATE"
    instance = compute_v1.Instance.from_json((GOLDEN / "gcp-tdx-c3-standard-4.json").read_text())
    assert instance.confidential_instance_config.confidential_instance_type == "TDX"
    with pytest.raises(Exception, match="confidentialType"):
        compute_v1.Instance.from_json(json.dumps({"confidentialInstanceConfig": {"confidentialType": "TDX"}}))


def _unknown_keys(model, path=""):
    """REST keys in a typespec model's raw body that its class does not declare."""
    from azure.mgmt.compute._utils.model_base import Model

    known = {field._rest_name: attr for attr, field in type(model)._attr_to_rest_field.items()}
    for key in dict(model):
        if key not in known:
            yield f"{path}{key}"
            continue
        value = getattr(model, known[key])
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, Model):
                yield from _unknown_keys(item, f"{path}{key}.")


def test_azure_requests_fit_azure_mgmt_computes_virtual_machine_model():
    from azure.mgmt.compute.models import VirtualMachine

    for path in GOLDEN.glob("azure-*.json"):
        assert list(_unknown_keys(VirtualMachine(json.loads(path.read_text())))) == [], path.name
    vm = VirtualMachine(json.loads((GOLDEN / "azure-sev-snp-Standard_DC2as_v5.json").read_text()))
    assert vm.properties.security_profile.security_type == "ConfidentialVM"
    assert (
        vm.properties.storage_profile.os_disk.managed_disk.security_profile.security_encryption_type
        == "VMGuestStateOnly"
    )
    bad = VirtualMachine({"properties": {"securityProfile": {"securityTyp": "ConfidentialVM"}}})
    assert list(_unknown_keys(bad)) == ["properties.securityProfile.securityTyp"]


def _user_data(cloud: str, request: dict) -> str:
    if cloud == "aws":
        return request["UserData"]
    if cloud == "gcp":
        return next(i["value"] for i in request["metadata"]["items"] if i["key"] == "user-data")
    import base64

    return base64.b64decode(request["properties"]["osProfile"]["customData"]).decode()


@pytest.mark.parametrize(("cloud", "kind"), sorted(PAIRS))
def test_every_instance_boots_with_the_runs_user_key_and_its_own_host_key(tmp_path, cloud, kind):
    """The user-data is cloud-config YAML (read here by PyYAML, as cloud-init reads it) carrying the
    run's public key and the host key made for this very instance, within each cloud's size limit."""
    from dataclasses import replace

    import yaml

    from ccbench.machines.cloud.access import Access

    study, provider, _ = _requests(tmp_path, cloud, kind)
    access = Access(tmp_path / "access").make(CTX.run_id)
    ctx = replace(CTX, ssh_public_key=access.public_key, host_keys={})
    for arm in study.arms:
        name = provider.instance_name(ctx.run_id, arm.name, 1)
        ctx.host_keys[name] = access.host_key(name)
        text = _user_data(cloud, provider.request(arm, 1, ctx))
        assert text.startswith("#cloud-config\n") and len(text.encode()) < 16 * 1024
        config = yaml.safe_load(text)
        (user,) = [u for u in config["users"] if isinstance(u, dict)]
        assert user["name"] == "ccbench" and user["ssh_authorized_keys"] == [access.public_key]
        private, public = ctx.host_keys[name]
        assert config["ssh_keys"] == {"ed25519_private": private, "ed25519_public": public}
        assert private.startswith("-----BEGIN OPENSSH PRIVATE KEY-----") and config["ssh_deletekeys"] is True
    assert len({v[1] for v in ctx.host_keys.values()}) == len(study.arms)  # one host key per instance
    secrets = [access.key, *access.directory.glob("hosts/*_ed25519")]
    assert (
        all((p.stat().st_mode & 0o777) == 0o600 for p in secrets) and (access.directory.stat().st_mode & 0o777) == 0o700
    )
    assert sorted(access.forget()) == sorted(p.name for p in secrets)
    assert not any(p.exists() for p in secrets) and access.known_hosts.exists()

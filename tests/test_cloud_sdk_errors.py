"""GCP's and Azure's adapters through their real SDKs with canned answers (no cloud is reachable
here): google-cloud-compute's REST transport talks HTTP to a server on the loopback that answers as
the Compute API would; azure-mgmt-compute's pipeline sends through a requests session whose adapter
answers as ARM would. The adapters' preflight reads offers, image features and quota from the
answers, and every refusal comes back as one line with the provider's own code and message."""

from __future__ import annotations

import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cloud_studies import CTX, DATA, study_text, write

from ccbench.machines.cloud.journal import Journal, read
from ccbench.machines.cloud.model import load_cloud_study
from ccbench.machines.cloud.provider import CloudError


class _Canned(BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, dict]] = {}
    seen: list[tuple[str, str]] = []
    bodies: dict[str, dict] = {}

    def _answer(self):
        path = self.path.split("?")[0]
        self.seen.append((self.command, path))
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.bodies[path] = json.loads(self.rfile.read(length))
        status, body = self.routes.get(
            path, (404, {"error": {"code": 404, "message": f"The resource '{path}' was not found"}})
        )
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def compute_api():
    _Canned.routes, _Canned.seen = {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Canned)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _gcp(tmp_path, server):
    from google.auth.credentials import AnonymousCredentials

    from ccbench.machines.cloud.gcp import Gcp

    study = load_cloud_study(
        write(
            tmp_path,
            study_text("gcp", "tdx").replace(
                'instance_type = "c3-standard-4"\n', 'instance_type = "c3-standard-4"\nreplicas = 1\n'
            ),
        )
    )
    options = {"api_endpoint": f"http://127.0.0.1:{server.server_address[1]}"}
    return study, Gcp(
        study.cloud, {"credentials": AnonymousCredentials(), "client_options": options, "transport": "rest"}
    )


V1 = "/compute/v1/projects"


def test_gcp_preflight_reads_image_features_and_quota_from_the_api(tmp_path, compute_api):
    _Canned.routes = {
        f"{V1}/my-project/zones/us-central1-a/machineTypes/c3-standard-4": (200, {"name": "c3-standard-4"}),
        f"{V1}/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64": (
            200,
            {"name": "ubuntu-2404", "guestOsFeatures": [{"type": "GVNIC"}, {"type": "SEV_SNP_CAPABLE"}]},
        ),
        f"{V1}/my-project/regions/us-central1": (
            200,
            {"name": "us-central1", "quotas": [{"metric": "C3_CPUS", "limit": 4, "usage": 0}]},
        ),
    }
    study, gcp = _gcp(tmp_path, compute_api)
    problems = gcp.preflight(study)
    assert problems == [
        "gcp: image projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64 lacks guest OS feature TDX_CAPABLE (arm 'cc')",
        "gcp: quota C3_CPUS in us-central1 has 4 free, the study needs 8",
    ]


def test_gcp_refusals_come_back_in_one_line_with_the_apis_words(tmp_path, compute_api):
    denied = "Required 'compute.machineTypes.get' permission for 'projects/my-project'"
    _Canned.routes = {
        f"{V1}/my-project/zones/us-central1-a/machineTypes/c3-standard-4": (
            403,
            {"error": {"code": 403, "message": denied}},
        ),
        f"{V1}/my-project/zones/us-central1-a/instances": (
            403,
            {"error": {"code": 403, "message": "Quota 'C3_CPUS' exceeded. Limit: 0.0 in region us-central1."}},
        ),
    }
    study, gcp = _gcp(tmp_path, compute_api)
    (line,) = gcp.preflight(study)
    assert line.startswith("gcp machineTypes.get: 403: GET http://127.0.0.1:") and line.endswith(denied)
    log = Journal(tmp_path / "state", CTX.run_id, {"provider": "gcp"})
    with pytest.raises(CloudError) as caught:
        gcp.launch(study.arms[1], 1, CTX, log)
    assert str(caught.value).startswith("gcp instances.insert: 403: POST http://127.0.0.1:")
    assert str(caught.value).endswith(": Quota 'C3_CPUS' exceeded. Limit: 0.0 in region us-central1.")
    assert ("POST", f"{V1}/my-project/zones/us-central1-a/instances") in _Canned.seen
    intents = [r for r in read(log.path) if r["op"] == "create"]
    assert [r["name"] for r in intents] == ["ccb-202612021000-0a1b2c-cc-1"]  # journaled before the call


ARM_SEEN: list[tuple[str, str]] = []
ARM_BODIES: dict[str, dict] = {}


class _Token:
    """A stand-in credential (no real one exists here): DefaultAzureCredential is what a run uses."""

    def get_token(self, *scopes, **kwargs):
        from azure.core.credentials import AccessToken

        return AccessToken("canned", int(time.time()) + 3600)


def _azure(tmp_path, routes):
    import requests
    import urllib3
    from azure.core.pipeline.transport import RequestsTransport

    from ccbench.machines.cloud.azure import Azure

    class CannedArm(requests.adapters.BaseAdapter):
        def send(self, request, **kwargs):
            path = request.path_url.split("?")[0]
            ARM_SEEN.append((request.method, path))
            if request.body:
                ARM_BODIES[path] = json.loads(request.body)
            status, body = next(
                ((s, b) for suffix, (s, b) in routes.items() if path.endswith(suffix)),
                (404, {"error": {"code": "NotFound", "message": path}}),
            )
            data = json.dumps(body).encode()
            raw = urllib3.HTTPResponse(
                body=io.BytesIO(data),
                headers={"Content-Type": "application/json", "Content-Length": str(len(data))},
                status=status,
                preload_content=False,
            )
            return requests.adapters.HTTPAdapter().build_response(request, raw)

        def close(self):
            pass

    session = requests.Session()
    session.mount("https://", CannedArm())
    study = load_cloud_study(write(tmp_path, study_text("azure", "sev-snp")))
    kwargs = {"credential": _Token(), "transport": RequestsTransport(session=session, session_owner=False)}
    return study, Azure(study.cloud, kwargs)


def test_azure_preflight_reads_offers_restrictions_and_quota(tmp_path):
    routes = {
        "/providers/Microsoft.Compute/skus": (
            200,
            {
                "value": [
                    {"resourceType": "virtualMachines", "name": "Standard_D2as_v5", "restrictions": []},
                    {
                        "resourceType": "virtualMachines",
                        "name": "Standard_DC2as_v5",
                        "restrictions": [
                            {"type": "Location", "values": ["eastus"], "reasonCode": "NotAvailableForSubscription"}
                        ],
                    },
                ]
            },
        ),  # fmt: skip
        "/locations/eastus/usages": (
            200,
            {
                "value": [
                    {
                        "name": {"value": "cores", "localizedValue": "Total Regional vCPUs"},
                        "currentValue": 1,
                        "limit": 4,
                        "unit": "Count",
                    }
                ]
            },
        ),
    }
    study, azure = _azure(tmp_path, routes)
    assert azure.preflight(study) == [
        "azure: Standard_DC2as_v5 is restricted for this subscription in eastus",
        "azure: 3 regional vCPUs free in eastus, the study needs 4",
    ]


def test_azure_refusals_come_back_in_one_line_with_arms_code(tmp_path):
    message = "The client 'me' does not have authorization to perform action 'Microsoft.Compute/skus/read'"
    routes = {
        "/providers/Microsoft.Compute/skus": (403, {"error": {"code": "AuthorizationFailed", "message": message}})
    }
    study, azure = _azure(tmp_path, routes)
    assert azure.preflight(study) == [f"azure resourceSkus.list: AuthorizationFailed: {message}"]
    routes = {"/resourcegroups": (409, {"error": {"code": "Conflict", "message": "busy"}})}
    _, azure = _azure(tmp_path, routes)
    with pytest.raises(CloudError, match="^azure resourceGroups.list: Conflict: busy$"):
        azure.tagged()


def test_gcp_sweep_finds_labelled_instances_and_deletes_the_expired_run_through_the_sdk(tmp_path, compute_api):
    from ccbench.machines.cloud.lifecycle import sweep

    zone = f"{V1}/my-project/zones/us-central1-a"
    old = {"name": "ccb-old-cc-1", "labels": {"ccbench-run": "old", "ccbench-expiry": "1000"}}
    new = {"name": "ccb-new-cc-1", "labels": {"ccbench-run": "new", "ccbench-expiry": str(int(time.time()) + 3600)}}
    _Canned.routes = {
        f"{zone}/instances": (200, {"items": [old, new]}),
        f"{zone}/disks": (200, {"items": []}),
        f"{zone}/instances/ccb-old-cc-1": (200, {"name": "op-1", "status": "DONE", "zone": "us-central1-a"}),
        # the run's SSH rule (its tags in its description: a firewall rule has no labels) and a
        # hand-made rule whose name looks alike: only the first is the run's
        f"{V1}/my-project/global/firewalls": (
            200,
            {
                "items": [
                    {"name": "ccb-old-ssh", "description": json.dumps(old["labels"])},
                    {"name": "ccb-mine-ssh", "description": "a rule of my own"},
                ]
            },
        ),
        f"{V1}/my-project/global/firewalls/ccb-old-ssh": (200, {"name": "op-2", "status": "DONE"}),
    }
    _, gcp = _gcp(tmp_path, compute_api)
    real_settle = gcp.settle
    gcp.settle = lambda found: _Canned.routes.pop(f"{zone}/instances/ccb-old-cc-1") and real_settle(found)
    lines = sweep([gcp], tmp_path / "state", dry_run=False)
    assert "gcp: deleted instance ccb-old-cc-1" in lines
    assert any("run new is not from this host" in line for line in lines)
    assert ("DELETE", f"{zone}/instances/ccb-old-cc-1") in _Canned.seen
    assert ("DELETE", f"{zone}/instances/ccb-new-cc-1") not in _Canned.seen
    assert "gcp: deleted firewall ccb-old-ssh" in lines
    assert ("DELETE", f"{V1}/my-project/global/firewalls/ccb-mine-ssh") not in _Canned.seen


def test_gcp_prepare_opens_ssh_to_the_callers_address_and_the_runs_instances_only(tmp_path, compute_api):
    from dataclasses import replace

    path = f"{V1}/my-project/global/firewalls"
    _Canned.routes = {path: (200, {"name": "op-1", "status": "DONE"})}
    _Canned.bodies = {}
    _, gcp = _gcp(tmp_path, compute_api)
    ctx = replace(CTX, ssh_from="198.51.100.7/32")
    log = Journal(tmp_path / "state", CTX.run_id, {"provider": "gcp"})
    gcp.prepare(ctx, log)
    rule = _Canned.bodies[path]
    assert rule["sourceRanges"] == ["198.51.100.7/32"] and rule["targetTags"] == [f"ccb-{CTX.run_id}"]
    assert rule["allowed"] == [{"IPProtocol": "tcp", "ports": ["22"]}]
    assert json.loads(rule["description"])["ccbench-run"] == CTX.run_id
    golden = json.loads((DATA / "golden" / "gcp-tdx-c3-standard-4.json").read_text())
    assert golden["tags"] == {"items": rule["targetTags"]}  # the instances carry the rule's target tag
    assert [r["what"] for r in read(log.path) if r["op"] == "create"] == ["firewall"]  # journaled first


def test_azure_sweep_deletes_the_expired_runs_resource_group_through_the_sdk(tmp_path):
    from ccbench.machines.cloud.lifecycle import sweep

    groups = {"value": [
        {"id": "/subscriptions/x/resourceGroups/ccbench-old", "name": "ccbench-old", "location": "eastus",
         "tags": {"ccbench-run": "old", "ccbench-expiry": "1000"}},
        {"id": "/subscriptions/x/resourceGroups/ccbench-new", "name": "ccbench-new", "location": "eastus",
         "tags": {"ccbench-run": "new", "ccbench-expiry": str(int(time.time()) + 3600)}},
    ]}  # fmt: skip
    routes = {"/resourcegroups": (200, groups), "/resourcegroups/ccbench-old": (200, {})}
    _, azure = _azure(tmp_path, routes)
    lines = sweep([azure], tmp_path / "state", dry_run=False)
    assert any(line.startswith("azure: deleting resource group ccbench-old") for line in lines), lines
    assert ("DELETE", "/subscriptions/00000000-0000-0000-0000-000000000000/resourcegroups/ccbench-old") in ARM_SEEN
    assert not any(method == "DELETE" and path.endswith("ccbench-new") for method, path in ARM_SEEN)
    assert any("run new is not from this host" in line for line in lines)


def test_azure_launch_sends_the_rest_bodies_and_the_golden_vm_request(tmp_path):
    import copy

    from cloud_studies import DATA

    group = f"ccbench-{CTX.run_id}"
    base = f"/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/{group}"
    net = f"{base}/providers/Microsoft.Network"
    name = "ccb-202612021000-0a1b2c-cc-1"
    done = {"provisioningState": "Succeeded"}
    routes = {
        f"/resourcegroups/{group}": (200, {"id": base, "name": group, "location": "eastus"}),
        "/networkSecurityGroups/ccbench-nsg": (
            200,
            {"id": f"{net}/networkSecurityGroups/ccbench-nsg", "properties": done},
        ),
        "/virtualNetworks/ccbench-vnet": (200, {"id": f"{net}/virtualNetworks/ccbench-vnet", "properties": done}),
        "/subnets/arms": (200, {"id": f"{net}/virtualNetworks/ccbench-vnet/subnets/arms", "properties": done}),
        f"/publicIPAddresses/{name}-ip": (
            200,
            {"id": f"{net}/publicIPAddresses/{name}-ip", "properties": {**done, "ipAddress": "203.0.113.7"}},
        ),
        f"/networkInterfaces/{name}-nic": (200, {"id": f"{net}/networkInterfaces/{name}-nic", "properties": done}),
        f"/virtualMachines/{name}": (
            200,
            {
                "id": f"{base}/providers/Microsoft.Compute/virtualMachines/{name}",
                "location": "eastus",
                "properties": {**done, "securityProfile": {"securityType": "ConfidentialVM"}},
            },
        ),  # fmt: skip
    }
    ARM_SEEN.clear()
    ARM_BODIES.clear()
    study, azure = _azure(tmp_path, routes)
    ctx = copy.deepcopy(CTX)
    log = Journal(tmp_path / "state", ctx.run_id, {"provider": "azure"})
    azure.prepare(ctx, log)
    launched = azure.launch(study.arms[1], 1, ctx, log)
    assert launched.address == "203.0.113.7" and launched.cloud_says == {"securityType": "ConfidentialVM"}
    bodies = {path.rsplit("/", 1)[-1]: body for path, body in ARM_BODIES.items()}
    assert bodies["ccbench-nsg"]["properties"]["securityRules"][0]["properties"]["destinationPortRange"] == "22"
    assert bodies["ccbench-vnet"]["properties"]["subnets"][0]["properties"]["addressPrefix"] == "10.58.0.0/24"
    assert bodies[f"{name}-nic"]["properties"]["ipConfigurations"][0]["properties"]["publicIPAddress"]["id"].endswith(
        "-ip"
    )
    golden = json.loads((DATA / "golden" / "azure-sev-snp-Standard_DC2as_v5.json").read_text())
    assert bodies[name] == golden  # the NIC id the golden file names is the one the NIC call returned
    assert [r["what"] for r in read(log.path) if r["op"] == "create"] == ["resource-group", "instance"]


def test_gcp_launch_sends_the_golden_body_and_records_the_apis_cc_type(tmp_path, compute_api):
    from cloud_studies import DATA

    zone = f"{V1}/my-project/zones/us-central1-a"
    name = "ccb-202612021000-0a1b2c-cc-1"
    _Canned.routes = {
        f"{zone}/instances": (200, {"name": "op-1", "status": "DONE", "zone": "us-central1-a"}),
        f"{zone}/instances/{name}": (
            200,
            {"name": name, "confidentialInstanceConfig": {"confidentialInstanceType": "TDX"}},
        ),
    }
    _Canned.bodies = {}
    study, gcp = _gcp(tmp_path, compute_api)
    log = Journal(tmp_path / "state", CTX.run_id, {"provider": "gcp"})
    launched = gcp.launch(study.arms[1], 1, CTX, log)
    assert launched.cloud_says == {"confidentialInstanceType": "TDX"}
    golden = json.loads((DATA / "golden" / "gcp-tdx-c3-standard-4.json").read_text())
    assert _Canned.bodies[f"{zone}/instances"] == golden

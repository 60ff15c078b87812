"""federated: seed 001's federated learning with OpenFL (aggregator + N collaborators as processes).

Each execution builds an OpenFL workspace (plan, collaborator list, data shards, the task runner
in ``workspace_files/``), initialises the model with OpenFL's own ``fx plan initialize``, and
starts the aggregator and every collaborator as separate processes that talk gRPC over loopback
(``hosts = "local"``) or, with ``hosts = "emulated"``, each on its own emulated host (network
namespace, bridge, ``tc netem`` shaping from ``rate``/``delay``; needs root).

Transports (the ``transport`` variant axis): ``plain`` (OpenFL ``use_tls: false``), ``tls``
(OpenFL's mutual TLS with a PKI ccbench makes per execution), ``securechannel`` (OpenFL in
plaintext, each party's TCP connection carried through ``ccchannel-proxy``, the attested secure
channel of crates/, evidence checked at connect against a policy).

OpenFL runs from its own environment (``<venv>/federated``, made by
``scripts/setup.d/55-federated.sh``): it needs numpy < 2.4 while the project's environment has a
newer one; that environment reuses the project's PyTorch through a .pth file instead of a second
multi-GB copy.

Samples: ``wall_clock`` (parties launched -> aggregator done), ``startup_time`` (parties launched
-> first task handed out), ``workspace_time`` and ``certificate_time`` (ccbench's harness, never
inside round times); per round ``round_time``; per round and collaborator ``train_time``,
``validation_time``, ``communication_time`` (the sum of the collaborator's gRPC calls to the
aggregator, timed at the call), ``bytes_sent``/``bytes_received`` (serialized protobuf payloads);
``final_accuracy`` as a fact.

The rooms: ``params`` (the plan's parameters), ``workload`` (the class the registry names),
``federation`` (one federation's life cycle), ``workspace`` (the OpenFL workspace and its PKI),
``placement`` (loopback or emulated hosts), ``proxies`` (the secure channel), ``summary`` (events
to samples, pure), ``workspace_files/`` (scripts that run in OpenFL's environment).
"""

from ccbench.workloads.federated.params import FederatedParams
from ccbench.workloads.federated.proxies import proxy_binary
from ccbench.workloads.federated.summary import read_events, summarize
from ccbench.workloads.federated.workload import Federated
from ccbench.workloads.federated.workspace import openfl_python

__all__ = ["Federated", "FederatedParams", "openfl_python", "proxy_binary", "read_events", "summarize"]

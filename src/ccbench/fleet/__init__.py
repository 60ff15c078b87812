"""The fleet: one plan on many machines through Ansible, gathered into one comparison.

Modules: ``inventory`` (reading and checking an Ansible inventory), ``wheelhouse`` (ccbench and
its run-time dependencies packed and cached on the controller for hosts without internet),
``engine`` (the controller's life cycle: driving ``ansible-playbook`` with the shipped
``playbook.yml``; ``action_plugins/ccbench_fetch.py`` brings each packed bundle back), ``events``
(the ``callback_plugins/ccbench_events.py`` event stream turned into each host's state, a pure
function), ``records`` (``HostRun``, ``FleetRun`` and ``fleet.json``), ``gather`` (unpacking and
checking the fetched bundles, then compare and report), ``remote`` (the agent the playbook runs on each host: run, stop, pack,
set-up components through the shipped scripts) and ``k8s`` (Kubernetes manifests for confidential containers, rendered, not run).
"""

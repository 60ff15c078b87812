#!/usr/bin/env bash
# what the test suite needs on top of the other components
pip_install -e "$ROOT[test]"

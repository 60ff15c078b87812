#!/usr/bin/env bash
# Debian's Chromium, for the headless render test of the HTML report
apt_install chromium fonts-dejavu-core

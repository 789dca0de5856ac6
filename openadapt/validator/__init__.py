"""Sandbox validator: runs a candidate package in a sandbox (docker, bwrap, or an explicit unsafe process
mode) and checks it against the OpenEnv quality bar, reporting in a form the designer can act on."""

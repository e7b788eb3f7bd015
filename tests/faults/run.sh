#!/usr/bin/env bash
# Placeholder while the stage is being written.
echo "tests/faults/run.sh: not written yet"

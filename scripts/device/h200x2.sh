#!/bin/bash
# h200x2.sh: the name scripts/device/node.sh had when it ran one 2 x H200 machine (results/h200x2/ run logs cite
# it); the same runner, the same steps and environment variables.
exec bash "$(dirname "$0")/node.sh" "$@"

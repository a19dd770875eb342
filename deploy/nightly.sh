#!/usr/bin/env bash
# The nightly replication: re-run the pinned sweep on the cluster and compare it with the
# baseline run; exit 1 (and say which cells moved) on a regression.
# Needs: ATTNSWEEP_BASELINE (the baseline run id) and ATTNSWEEP_STORE (the shared store);
# ATTNSWEEP_ADDRESS (default auto: the cluster this machine belongs to); ATTNSWEEP_HOME (the checkout).
# Ray's token: attnsweep finds ~/.ray/auth_token itself; off the head, set RAY_AUTH_TOKEN_PATH to a copy of it.
set -euo pipefail
cd "${ATTNSWEEP_HOME:-$HOME/attnsweep}"
# The Python that cluster.yaml installed the project into (ATTNSWEEP_PYTHON to override).
exec "${ATTNSWEEP_PYTHON:-python3}" -m attnsweep.cli replicate sweeps/nightly.yaml \
  --baseline "${ATTNSWEEP_BASELINE:?set ATTNSWEEP_BASELINE to the baseline run id}" \
  --address "${ATTNSWEEP_ADDRESS:-auto}" \
  --report "reports/nightly/$(date -u +%Y%m%dT%H%M%SZ)-$$"  # a folder per run: a second run the same day keeps the first's

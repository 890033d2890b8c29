#!/usr/bin/env bash
# Runs node:test suite files on one Node.js: `run-suites.sh NODE FILE...`. One run takes minutes;
# a run that hangs (a suite whose process never exits) is killed past its bound and fails, so
# every run and its report fit the CI's time.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runtime="${1:?usage: run-suites.sh NODE FILE...}"
shift
run_bound="${NATIVE_SANDBOX_SUITE_BOUND:-30m}"
printf '\n== node --test on %s (%s files)\n' "$("${runtime}" --version)" "$#"
timeout --kill-after=30s "${run_bound}" "${runtime}" --test --test-concurrency=1 "$@"
rc=$?
if [ "${rc}" -eq 124 ] || [ "${rc}" -eq 137 ]; then
  echo "test: node --test on $("${runtime}" --version) did not finish within ${run_bound}: killed" >&2
fi
exit "${rc}"

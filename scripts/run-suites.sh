#!/usr/bin/env bash
# Runs node:test suite files on one Node.js: `run-suites.sh NODE FILE...`. One run takes minutes;
# a run that hangs (a suite whose process never exits) is killed past its bound and fails, so
# every run and its report fit the CI's time. A failing run names its failing tests again at its end.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runtime="${1:?usage: run-suites.sh NODE FILE...}"
shift
run_bound="${NATIVE_SANDBOX_SUITE_BOUND:-30m}"
printf '\n== node --test on %s (%s files)\n' "$("${runtime}" --version)" "$#"
report="$(mktemp)"
trap 'rm -f "${report}"' EXIT
timeout --kill-after=30s "${run_bound}" "${runtime}" --test --test-concurrency=1 "$@" | tee "${report}"
rc="${PIPESTATUS[0]}"
if [ "${rc}" -eq 124 ] || [ "${rc}" -eq 137 ]; then
  echo "test: node --test on $("${runtime}" --version) did not finish within ${run_bound}: killed" >&2
fi
if [ "${rc}" -ne 0 ]; then
  # What failed, again at the end of the run (and in FAILURE_SUMMARY when the caller collects it),
  # so the tail of a long log names it.
  summary="$(printf '\n== failing tests on %s\n' "$("${runtime}" --version)"; "${runtime}" scripts/tap-failures.mjs "${report}")"
  printf '%s\n' "${summary}"
  if [ -n "${FAILURE_SUMMARY:-}" ]; then printf '%s\n' "${summary}" >> "${FAILURE_SUMMARY}"; fi
fi
exit "${rc}"

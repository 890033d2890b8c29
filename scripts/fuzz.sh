#!/usr/bin/env bash
# Coverage-guided fuzzing (libFuzzer through cargo-fuzz) of the untrusted-input readers: the tar
# reader, the path grammar, the recovery-record parser and the JavaScript value readers. Not part
# of `npm test`.
#
#   bash scripts/fuzz.sh [seconds-per-target] [target ...]     (default: 60 s, every target)
#   FUZZ_RUNS=10000000 bash scripts/fuzz.sh                     (a number of executions instead)
#   FUZZ_SANITIZER=address bash scripts/fuzz.sh ...             (default none: the code is safe
#                                                                Rust, and runs 5-7x faster)
#
# Needs the nightly toolchain (rustup installs it) and cargo-fuzz (cargo installs it). The fuzz
# crate builds the core without its embedded guest helper (`default-features = false`), so no
# cross target is needed. Seed corpora live in fuzz/corpus/<target>; what a run discovers goes
# to fuzz/target/corpus/<target> (not committed), crashes to fuzz/artifacts/<target>. Every crash
# found becomes a unit test. Any build failure, run failure or finding fails the script; at the
# end it prints the executions each target ran.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../fuzz"

seconds="${1:-60}"
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(tar_reader paths recovery_record value_readers session_frames)

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

budget=(-max_total_time="${seconds}")
[ -z "${FUZZ_RUNS:-}" ] || budget=(-runs="${FUZZ_RUNS}")

summary=()
for target in "${targets[@]}"; do
  mkdir -p "target/corpus/${target}"
  log="target/${target}.log"
  echo "== fuzz ${target}: ${budget[*]}"
  # -malloc_limit_mb: one allocation past 256 MiB is a finding (every reader is bounded far
  # below it); -timeout: one input taking 10 s is a hang.
  status=0
  cargo +nightly fuzz run -O -s "${FUZZ_SANITIZER:-none}" "${target}" "target/corpus/${target}" "corpus/${target}" -- \
    "${budget[@]}" -malloc_limit_mb=256 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 >"${log}" 2>&1 || status=$?
  grep -E '^(#[0-9]+ +(DONE|pulse)|stat::number_of_executed_units|==|SUMMARY|Done)' "${log}" || true
  if [ "${status}" -ne 0 ] || grep -q 'SUMMARY\|ERROR: libFuzzer\|^error' "${log}"; then
    echo "fuzz: ${target} failed (exit ${status}): a build error, a run error or a finding; see fuzz/${log} and fuzz/artifacts/${target}" >&2
    tail -n 20 "${log}" >&2
    exit 1
  fi
  executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "${log}" | tail -n 1)"
  if [ -z "${executions}" ]; then
    echo "fuzz: ${target} reported no executions; see fuzz/${log}" >&2
    exit 1
  fi
  summary+=("${target}: ${executions} executions, 0 crashes")
done
echo "== fuzz summary"
printf '%s\n' "${summary[@]}"

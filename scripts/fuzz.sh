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
# Needs the nightly toolchain (rustup installs it) and cargo-fuzz (cargo installs it). Seed
# corpora live in fuzz/corpus/<target>; what a run discovers goes to fuzz/target/corpus/<target>
# (not committed), crashes to fuzz/artifacts/<target>. Every crash found becomes a unit test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../fuzz"

seconds="${1:-60}"
shift || true
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(tar_reader paths recovery_record value_readers)

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked

budget=(-max_total_time="${seconds}")
[ -z "${FUZZ_RUNS:-}" ] || budget=(-runs="${FUZZ_RUNS}")

for target in "${targets[@]}"; do
  mkdir -p "target/corpus/${target}"
  echo "== fuzz ${target}: ${budget[*]}"
  # -malloc_limit_mb: one allocation past 256 MiB is a finding (every reader is bounded far
  # below it); -timeout: one input taking 10 s is a hang.
  cargo +nightly fuzz run -O -s "${FUZZ_SANITIZER:-none}" "${target}" "target/corpus/${target}" "corpus/${target}" -- \
    "${budget[@]}" -malloc_limit_mb=256 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 2>&1 | tee "target/${target}.log" | grep -E '^(#[0-9]+ +(DONE|pulse)|stat::number_of_executed_units|==|SUMMARY|Done)' || true
  if grep -q 'SUMMARY\|ERROR: libFuzzer' "target/${target}.log"; then
    echo "fuzz: ${target} found a problem; see fuzz/target/${target}.log and fuzz/artifacts/${target}" >&2
    exit 1
  fi
done

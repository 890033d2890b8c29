#!/usr/bin/env bash
# apt_install <caller> <package>...: installs Debian packages, retrying: a mirror hiccup or
# another apt holding the lock must not fail a fresh machine's first run. Sourced by the
# ensure-*.sh scripts; exits the caller with a message naming it when all attempts fail.
apt_install() {
  local caller="$1"
  shift
  export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1
  local attempt
  for attempt in 1 2 3; do
    if apt-get -o DPkg::Lock::Timeout=120 update -qq >/dev/null \
       && apt-get -o DPkg::Lock::Timeout=120 install -y -qq "$@" >/dev/null; then
      return 0
    fi
    echo "${caller}: apt-get failed (attempt ${attempt} of 3)" >&2
    sleep $((attempt * 5))
  done
  echo "${caller}: could not install $* with apt-get" >&2
  exit 1
}

#!/bin/sh
# e2e.sh: the launcher's end-to-end checks as CI runs them (as root; scripts/testbed.sh install):
# unit tests of the launcher packages, then the testbed tests with the real binaries.
#
#   scripts/e2e.sh            everything
#   scripts/e2e.sh -run Cut   only the matching end-to-end tests (flags go to go test)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$(dirname "$here")"
go test -race -count=1 ./launch/... ./cmd/ccrun/
exec "$here/testbed.sh" run-e2e "$@"

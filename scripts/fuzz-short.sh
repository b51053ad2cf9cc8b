#!/usr/bin/env bash
# Runs every Fuzz target in the module briefly: FUZZTIME executions each
# (default 30000x, a few seconds). A count rather than a duration, because
# a duration ends in a deadline that a busy fuzz worker can miss, which go
# test then reports as a failure ("context deadline exceeded") though no
# input failed. go test -fuzz takes one target and one package at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-30000x}
n=0
while IFS= read -r file; do
	pkg=./$(dirname "$file")
	for target in $(grep -oE '^func (Fuzz[A-Za-z0-9_]+)\(' "$file" | sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(/\1/'); do
		echo "fuzz $pkg $target ($fuzztime)"
		go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"
		n=$((n + 1))
	done
done < <(git ls-files '*_test.go')
echo "fuzz: $n targets passed"

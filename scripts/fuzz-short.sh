#!/usr/bin/env bash
# Runs every Fuzz target in the module for a short time (FUZZTIME, default
# 5s each). go test -fuzz takes one target and one package at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
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
